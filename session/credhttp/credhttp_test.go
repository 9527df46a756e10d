package credhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/credhttp"
)

// recorder is a loopback server that records every request it gets.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Clone(req.Context()))
		r.mu.Unlock()
		h(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func redirectTo(target string, code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, code)
	}
}

// A 307 or 308 to another port of the same host (another origin) is
// refused before anything is sent there, whatever the status; the error
// names both ends.
func TestClient_RefusesCrossOriginRedirect(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		sink := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {})
		front := newRecorder(t, redirectTo(sink.URL, code))
		req, err := http.NewRequest(http.MethodPost, front.URL+"/v1/messages", strings.NewReader(`{"conversation":"secret"}`))
		require.NoError(t, err)
		req.Header.Set("x-api-key", "sk-ant-secret")
		resp, err := credhttp.NewClient(nil, 0).Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		require.Error(t, err, "status %d", code)
		assert.True(t, credhttp.IsRedirect(err), "%v", err)
		assert.Contains(t, err.Error(), "refused a redirect from "+front.URL+" to "+sink.URL+"/v1/messages")
		assert.Equal(t, 1, front.count())
		assert.Zero(t, sink.count(), "status %d: the other origin got a request", code)
	}
}

// Without the policy, net/http follows the same redirect and hands the key
// and the body to the other origin: what the policy is for.
func TestClient_DefaultClientWouldLeak(t *testing.T) {
	var got string
	sink := newRecorder(t, func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Get("x-api-key") })
	front := newRecorder(t, redirectTo(sink.URL, http.StatusTemporaryRedirect))
	req, err := http.NewRequest(http.MethodPost, front.URL, strings.NewReader("body"))
	require.NoError(t, err)
	req.Header.Set("x-api-key", "sk-ant-secret")
	resp, err := (&http.Client{}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "sk-ant-secret", got)
}

// A redirect within the origin is followed with the credential and the
// body, as a provider moving a path expects; a chain that goes elsewhere
// after a same-origin hop is refused at that hop.
func TestClient_FollowsSameOrigin(t *testing.T) {
	sink := newRecorder(t, func(http.ResponseWriter, *http.Request) {})
	var mux http.ServeMux
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/new", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-api-key") == "k" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/away2", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/away2", redirectTo(sink.URL, http.StatusTemporaryRedirect))
	front := newRecorder(t, mux.ServeHTTP)
	c := credhttp.NewClient(nil, 0)

	req, _ := http.NewRequest(http.MethodPost, front.URL+"/old", strings.NewReader("body"))
	req.Header.Set("x-api-key", "k")
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	req, _ = http.NewRequest(http.MethodPost, front.URL+"/away", strings.NewReader("body"))
	_, err = c.Do(req)
	require.True(t, credhttp.IsRedirect(err), "%v", err)
	assert.Zero(t, sink.count())
}

func TestOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"http://Example.com/a", "http://example.com:80/b", true},
		{"https://example.com", "https://EXAMPLE.com:443/x?y", true},
		{"http://[::1]:8080/", "http://[::1]:8080/z", true},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8081", false},
		{"http://example.com", "https://example.com", false},
		{"https://example.com", "https://api.example.com", false},
		{"https://example.com", "https://example.com.evil.org", false},
	} {
		a, err := url.Parse(tc.a)
		require.NoError(t, err)
		b, err := url.Parse(tc.b)
		require.NoError(t, err)
		assert.Equal(t, tc.same, credhttp.Origin(a) == credhttp.Origin(b), "%s vs %s", tc.a, tc.b)
	}
}

// LimitBodies ends a JSON or error body past its bound with the reason,
// lets one of exactly the bound through, and leaves event streams alone.
func TestLimitBodies(t *testing.T) {
	body := strings.Repeat("x", 1000)
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.URL.Query().Get("ct"))
		_, _ = w.Write([]byte(body))
	})
	c := credhttp.NewClient(credhttp.LimitBodies(nil, 999), 0)
	read := func(ct string) (string, error) {
		resp, err := c.Get(srv.URL + "?ct=" + url.QueryEscape(ct))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	got, err := read("application/json")
	var tl *credhttp.BodyTooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Len(t, got, 999)
	got, err = read("text/event-stream; charset=utf-8")
	require.NoError(t, err)
	assert.Equal(t, body, got)

	c = credhttp.NewClient(credhttp.LimitBodies(nil, 1000), 0)
	got, err = read("application/x-protobuf")
	require.NoError(t, err)
	assert.Equal(t, body, got)
}

// The policy holds in the transport alone too (a client that follows every
// redirect, as libraries build their own): the proxy function refuses the
// redirected request before anything is sent; same-origin hops pass.
func TestTransport_RefusesWithoutCheckRedirect(t *testing.T) {
	sink := newRecorder(t, func(http.ResponseWriter, *http.Request) {})
	var mux http.ServeMux
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/ok", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/away", redirectTo(sink.URL, http.StatusTemporaryRedirect))
	front := newRecorder(t, mux.ServeHTTP)
	c := &http.Client{Transport: credhttp.Transport()}
	req, _ := http.NewRequest(http.MethodPost, front.URL+"/away", strings.NewReader("body"))
	req.Header.Set("X-Secret", "s")
	_, err := c.Do(req)
	require.True(t, credhttp.IsRedirect(err), "%v", err)
	assert.Zero(t, sink.count())
	resp, err := c.Post(front.URL+"/same", "text/plain", strings.NewReader("body"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// A library's own transport with only the proxy function.
	tr := &http.Transport{Proxy: credhttp.Proxy(nil)}
	_, err = (&http.Client{Transport: tr}).Post(front.URL+"/away", "text/plain", strings.NewReader("body"))
	require.True(t, credhttp.IsRedirect(err), "%v", err)
	assert.Zero(t, sink.count())
}
