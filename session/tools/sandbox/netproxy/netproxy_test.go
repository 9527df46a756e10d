package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/netguard"
)

func TestParsePattern(t *testing.T) {
	for in, want := range map[string]Pattern{
		"github.com":        {Host: "github.com"},
		"GitHub.com.":       {Host: "github.com"},
		"*.npmjs.org":       {Host: "*.npmjs.org"},
		"localhost:8080":    {Host: "localhost", Port: 8080},
		"[::1]:5432":        {Host: "::1", Port: 5432},
		"10.0.0.7":          {Host: "10.0.0.7"},
		"*.corp.example:22": {Host: "*.corp.example", Port: 22},
	} {
		got, err := ParsePattern(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "https://github.com", "github.com/path", "a*.b", "*.", "host:0", "host:70000", "user@host", "*"} {
		_, err := ParsePattern(bad)
		assert.Error(t, err, bad)
	}
	p, _ := ParsePattern("*.npmjs.org")
	assert.True(t, p.Match("registry.npmjs.org", 443))
	assert.True(t, p.Match("a.b.npmjs.org.", 80))
	assert.False(t, p.Match("npmjs.org", 443), "a wildcard is for subdomains only")
	assert.False(t, p.Match("evilnpmjs.org", 443))
	p, _ = ParsePattern("localhost:8080")
	assert.True(t, p.Match("LOCALHOST", 8080))
	assert.False(t, p.Match("localhost", 8081))
}

// fakeNet maps names to addresses and every address to one test server,
// so the tests reach "hosts" without a network.
type fakeNet struct {
	names  map[string]string // name → address
	target string            // where every connection really goes
	mu     sync.Mutex
	dialed []string
}

func (f *fakeNet) hooks() netguard.Hooks {
	return netguard.Hooks{
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			if a, ok := f.names[host]; ok {
				return []netip.Addr{netip.MustParseAddr(a)}, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			f.mu.Lock()
			f.dialed = append(f.dialed, addr)
			f.mu.Unlock()
			return (&net.Dialer{}).DialContext(ctx, network, f.target)
		},
	}
}

type harness struct {
	proxy   *Proxy
	url     *url.URL
	fake    *fakeNet
	mu      sync.Mutex
	asked   []string
	refused []string
}

func newHarness(t *testing.T, o Options, answer func(Target) (bool, error)) *harness {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s %s host=%s proxyauth=%q", r.Method, r.URL.Path, r.Host, r.Header.Get("Proxy-Authorization"))
	}))
	t.Cleanup(up.Close)
	h := &harness{fake: &fakeNet{target: up.Listener.Addr().String(), names: map[string]string{
		"allowed.test": "203.0.113.10", "asked.test": "203.0.113.11", "rebound.test": "127.0.0.1",
		"intranet.test": "10.1.2.3", "metadata.test": "169.254.169.254",
	}}}
	o.Hooks = h.fake.hooks()
	if answer != nil {
		o.Ask = func(_ context.Context, tg Target) (bool, error) {
			h.mu.Lock()
			h.asked = append(h.asked, tg.String())
			h.mu.Unlock()
			return answer(tg)
		}
	}
	o.Refused = func(tg Target, why string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.refused = append(h.refused, tg.String()+": "+why)
	}
	h.proxy = New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h.proxy.Serve(ln)
	t.Cleanup(func() { _ = h.proxy.Close() })
	h.url = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	return h
}

// get fetches target through the proxy as an HTTP client does.
func (h *harness) get(t *testing.T, target string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(h.url)}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(target)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// connect opens a CONNECT tunnel and speaks HTTP through it.
func (h *harness) connect(t *testing.T, hostport string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", h.url.Host)
	require.NoError(t, err)
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	fmt.Fprintf(c, "GET /through-tunnel HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport)
	inner, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(inner.Body)
	return http.StatusOK, string(b)
}

func TestProxy_Decisions(t *testing.T) {
	allowed, _ := ParsePattern("allowed.test")
	intranet, _ := ParsePattern("intranet.test")
	answers := map[string]bool{"asked.test:443": true, "asked.test:80": true}
	h := newHarness(t, Options{Allowed: []Pattern{allowed, intranet}}, func(tg Target) (bool, error) {
		return answers[tg.String()], nil
	})

	code, body := h.get(t, "http://allowed.test/a")
	assert.Equal(t, 200, code, body)
	assert.Contains(t, body, "upstream saw GET /a host=allowed.test")

	code, body = h.connect(t, "allowed.test:443")
	assert.Equal(t, 200, code, body)
	assert.Contains(t, body, "upstream saw GET /through-tunnel")

	code, body = h.connect(t, "asked.test:443")
	assert.Equal(t, 200, code, "asked and allowed: %s", body)
	code, body = h.connect(t, "asked.test:8443")
	assert.Equal(t, 403, code, "asked and rejected")
	assert.Contains(t, body, "the user did not allow asked.test:8443")
	assert.Contains(t, body, "sandboxAllowedDomains")

	code, body = h.get(t, "http://intranet.test/")
	assert.Equal(t, 200, code, "a private address of a configured host: %s", body)

	// Asked-for names that resolve to this machine or the intranet are
	// refused even when the user said yes: DNS must not point an allowed
	// name at the user's own services.
	answers["rebound.test:80"] = true
	code, body = h.get(t, "http://rebound.test/")
	assert.Equal(t, 403, code, body)
	assert.Contains(t, body, "resolves to a loopback or private address")

	code, body = h.connect(t, "169.254.169.254:80")
	assert.Equal(t, 403, code)
	assert.Contains(t, body, "link-local or cloud-metadata")
	code, _ = h.connect(t, "metadata.google.internal:80")
	assert.Equal(t, 403, code)

	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, []string{"asked.test:443", "asked.test:8443", "rebound.test:80"}, h.asked, "configured hosts are not asked about")
	assert.Len(t, h.refused, 4)
	for _, d := range h.fake.dialed {
		assert.NotEqual(t, "169.254.169.254:80", d)
	}
}

func TestProxy_NobodyToAsk(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	code, body := h.connect(t, "asked.test:443")
	assert.Equal(t, 403, code)
	assert.Contains(t, body, "not in tools.sandboxAllowedDomains and nobody can be asked")
	assert.Contains(t, body, Advice)

	h2 := newHarness(t, Options{}, func(Target) (bool, error) { return false, errors.New("no command is running") })
	code, body = h2.get(t, "http://asked.test/")
	assert.Equal(t, 403, code)
	assert.Contains(t, body, "could not be asked about: no command is running")
}

// TestProxy_OwnPortNeverReached: acpd's served port on this machine is not
// reached even through a pattern that allows localhost on every port.
func TestProxy_OwnPortNeverReached(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nacpd!")
			c.Close()
		}
	}()
	lh, _ := ParsePattern("localhost")
	ip, _ := ParsePattern("127.0.0.1")
	p := New(Options{Allowed: []Pattern{lh, ip}, DenyPorts: []uint16{uint16(port)}})
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.Serve(pl)
	defer p.Close()
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: pl.Addr().String()})}}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		resp, err := c.Get("http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/acp")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 403, resp.StatusCode, host)
		assert.Contains(t, string(b), "acpd's own API")
	}
}

// TestProxy_NotAProxyRequest: an origin-form request or a bad CONNECT is
// answered 400; garbage does not stop the proxy.
func TestProxy_NotAProxyRequest(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	resp, err := http.Get(h.url.String() + "/x")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 400, resp.StatusCode)
	c, err := net.Dial("tcp", h.url.Host)
	require.NoError(t, err)
	fmt.Fprint(c, "CONNECT nohostport HTTP/1.1\r\nHost: x\r\n\r\n")
	r, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	assert.Equal(t, 400, r.StatusCode)
	c.Close()
	c, err = net.Dial("tcp", h.url.Host)
	require.NoError(t, err)
	fmt.Fprint(c, strings.Repeat("\x00\xff garbage", 1000)+"\r\n\r\n")
	c.Close()
	code, _ := h.connect(t, "asked.test:1")
	assert.Equal(t, 403, code, "still serving")
}
