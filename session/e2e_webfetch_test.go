package session_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

func fetchCall(url string) modeltest.ToolCall {
	return call("web_fetch", map[string]any{"url": url, "prompt": "what does it say"})
}

// lastToolResult is the tool message the model received last in request i.
func lastToolResult(t *testing.T, reqs []modeltest.Request, i int) string {
	t.Helper()
	require.Greater(t, len(reqs), i)
	msgs := reqs[i].Messages
	return msgs[len(msgs)-1].Text()
}

// TestE2E_WebFetch drives web_fetch through the built binary against a
// loopback site: HTML as Markdown, a cross-host redirect reported, a
// metadata address refused, an oversized body cut, a binary body refused.
func TestE2E_WebFetch(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/doc.html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`<html><body><h2>Usage</h2><p>Call <em>acpd doctor</em> first.</p></body></html>`))
		case "/moved":
			http.Redirect(w, r, "http://localhost:"+otherPort+"/elsewhere", http.StatusFound)
		case "/huge.txt":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(strings.Repeat("line of text\n", 2000)))
		case "/logo.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
		}
	}))
	defer site.Close()

	cfg := filepath.Join(t.TempDir(), "acpd.toml")
	// The site is on loopback: allowed by the switch here, since this test
	// is about what is fetched (TestE2E_WebFetchPrivate is about asking).
	require.NoError(t, os.WriteFile(cfg, []byte("[tools]\nmaxOutputBytes = 2000\nwebFetchAllowPrivate = true\n"), 0o644))
	d := startDaemon(t, nil, nil, "--config", cfg)
	metadata := "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
	d.model.Add(
		calls(fetchCall(site.URL+"/doc.html")),
		calls(fetchCall(site.URL+"/moved")),
		calls(fetchCall(metadata)),
		calls(fetchCall(site.URL+"/huge.txt")),
		calls(fetchCall(site.URL+"/logo.png")),
		modeltest.Response{Text: "done"},
	)
	sid := d.session(t)
	r, err := d.cc.Prompt(ctxFor(t), sid, "fetch things")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, r.StopReason)
	reqs := d.model.Requests()
	require.Len(t, reqs, 6)

	html := lastToolResult(t, reqs, 1)
	assert.Contains(t, html, "Content of "+site.URL+"/doc.html (text/html).\nRequested: what does it say")
	assert.Contains(t, html, "## Usage\n\nCall *acpd doctor* first.")

	moved := lastToolResult(t, reqs, 2)
	assert.Contains(t, moved, "redirected (HTTP 302) to a different host: http://localhost:"+otherPort+"/elsewhere")
	assert.Contains(t, moved, "not followed")
	assert.Zero(t, otherHits.Load(), "the other host was never contacted")

	meta := lastToolResult(t, reqs, 3)
	assert.Contains(t, meta, "refused: link-local and cloud-metadata addresses are never fetched")

	huge := lastToolResult(t, reqs, 4)
	assert.Contains(t, huge, "[output truncated:")
	assert.LessOrEqual(t, len(huge), 2100)

	bin := lastToolResult(t, reqs, 5)
	assert.Contains(t, bin, "binary content (image/png)")

	// The frames: kind fetch, titled with the URL, no locations.
	var kinds, statuses []string
	for _, u := range forSession(d.cc.Updates(), sid) {
		if u.Kind == acp.UpdateToolCall {
			kinds = append(kinds, string(u.ToolCall.Kind)+" "+u.ToolCall.Title)
			assert.Empty(t, u.ToolCall.Locations)
		}
		if u.Kind == acp.UpdateToolCallUpdate && (u.ToolCallUpdate.Status == acp.StatusCompleted || u.ToolCallUpdate.Status == acp.StatusFailed) {
			statuses = append(statuses, string(u.ToolCallUpdate.Status))
		}
	}
	assert.Equal(t, []string{
		"fetch Fetch " + site.URL + "/doc.html", "fetch Fetch " + site.URL + "/moved", "fetch web_fetch",
		"fetch Fetch " + site.URL + "/huge.txt", "fetch Fetch " + site.URL + "/logo.png",
	}, kinds)
	assert.Equal(t, []string{"completed", "completed", "failed", "completed", "failed"}, statuses)
}

// TestE2E_WebFetchPermission: in default (and auto-edit) mode web_fetch
// asks (kind fetch); "always allow" is remembered for the host. The site is
// on loopback, made an ordinary host by tools.webFetchAllowPrivate.
func TestE2E_WebFetchPermission(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("page " + r.URL.Path))
	}))
	defer site.Close()
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	localhostURL := "http://localhost:" + port

	for _, mode := range []string{"default", "auto-edit"} {
		t.Run(mode, func(t *testing.T) {
			var mu sync.Mutex
			var asked []acp.RequestPermissionRequest
			fc := &acptest.FakeClient{RequestPermissionFunc: func(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
				mu.Lock()
				asked = append(asked, *r)
				mu.Unlock()
				for _, o := range r.Options {
					if o.Kind == acp.AllowAlways {
						return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: o.OptionID}}, nil
					}
				}
				return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}, nil
			}}
			cfg := filepath.Join(t.TempDir(), "acpd.toml")
			require.NoError(t, os.WriteFile(cfg, []byte("[tools]\nwebFetchAllowPrivate = true\n"), 0o644))
			d := startDaemon(t, fc, nil, "--approval-mode", mode, "--config", cfg)
			d.model.Add(
				calls(fetchCall(site.URL+"/a")),
				calls(fetchCall(site.URL+"/b")),     // same host: remembered
				calls(fetchCall(localhostURL+"/c")), // another host: asks again
				modeltest.Response{Text: "done"},
			)
			sid := d.session(t)
			_, err := d.cc.Prompt(ctxFor(t), sid, "fetch")
			require.NoError(t, err)
			reqs := d.model.Requests()
			assert.Contains(t, lastToolResult(t, reqs, 1), "page /a")
			assert.Contains(t, lastToolResult(t, reqs, 2), "page /b")
			assert.Contains(t, lastToolResult(t, reqs, 3), "page /c")
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, asked, 2, "asked for 127.0.0.1 once, then for localhost")
			assert.Equal(t, acp.KindFetch, asked[0].ToolCall.Kind)
			assert.Equal(t, "Always Allow fetching from 127.0.0.1", asked[0].Options[0].Name)
			assert.Equal(t, "Always Allow fetching from localhost", asked[1].Options[0].Name)
			assert.NotContains(t, asked[0].Meta, acp.MetaPermission, "the ordinary fetch question is not marked")
		})
	}
}

// TestE2E_WebFetchPrivate: without tools.webFetchAllowPrivate, a loopback
// site is fetched only when the user allows it — in yolo mode too, every
// time, with no "always" offered; a refusal reaches the model as such and
// the site is never contacted.
func TestE2E_WebFetchPrivate(t *testing.T) {
	var hits atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("internal dashboard"))
	}))
	defer site.Close()
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())

	var mu sync.Mutex
	var asked []acp.RequestPermissionRequest
	fc := &acptest.FakeClient{RequestPermissionFunc: func(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, *r)
		answer := acp.AllowOnce
		if len(asked) > 1 {
			answer = acp.RejectOnce
		}
		for _, o := range r.Options {
			if o.Kind == answer {
				return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: o.OptionID}}, nil
			}
		}
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}, nil
	}}
	d := startDaemon(t, fc, nil) // yolo
	d.model.Add(
		calls(fetchCall(site.URL+"/a")),
		calls(fetchCall("http://localhost:"+port+"/b")),
		modeltest.Response{Text: "done"},
	)
	sid := d.session(t)
	r, err := d.cc.Prompt(ctxFor(t), sid, "look at the dashboard")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, r.StopReason)
	reqs := d.model.Requests()
	assert.Contains(t, lastToolResult(t, reqs, 1), "internal dashboard")
	refused := lastToolResult(t, reqs, 2)
	assert.Contains(t, refused, "refused: loopback and private network addresses are fetched only when the user allows it")
	assert.Equal(t, int32(1), hits.Load(), "the refused fetch never reached the site")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, asked, 2, "asked each time, in yolo mode")
	for i, q := range asked {
		var kinds []acp.PermissionOptionKind
		for _, o := range q.Options {
			kinds = append(kinds, o.Kind)
		}
		assert.Equal(t, []acp.PermissionOptionKind{acp.AllowOnce, acp.RejectOnce}, kinds, "no always for a private address")
		assert.Equal(t, acp.KindFetch, q.ToolCall.Kind)
		require.NotEmpty(t, q.ToolCall.Content, i)
		assert.Contains(t, q.ToolCall.Content[0].Content.Text, "(loopback)")
		assert.Equal(t, acp.PermissionPrivateNetwork, q.Meta[acp.MetaPermission], "marked as the private network question")
	}
}
