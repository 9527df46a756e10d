package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

// versionServer is the Go SDK's server with one tool, which answers with
// the protocol version the session negotiated.
func versionServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "versions", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "version", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			v := "?"
			if p := req.Session.InitializeParams(); p != nil {
				v = p.ProtocolVersion
			}
			if m := req.Params.Meta; m != nil {
				if pv, ok := m["io.modelcontextprotocol/protocolVersion"].(string); ok {
					v = pv
				}
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: v}}}, nil
		})
	return s
}

// The protocol revision is pinned: a server of the newest revision (the
// Go SDK's, which speaks 2026-07-28 too) is asked for 2025-11-25 with
// initialize; a server that refuses initialize, as one of the stateless
// 2026-07-28 revision only does, is connected through server/discover.
func TestProtocolVersion(t *testing.T) {
	t.Parallel()
	type rec struct {
		mu      sync.Mutex
		methods []string
	}
	for _, tt := range []struct {
		name         string
		refuseInit   bool
		wantVersion  string
		wantDiscover bool
	}{
		{name: "initialize", wantVersion: "2025-11-25"},
		{name: "stateless only", refuseInit: true, wantVersion: "2026-07-28", wantDiscover: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &rec{}
			// The Go SDK serves 2026-07-28 on stateless servers only.
			h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return versionServer() }, &sdk.StreamableHTTPOptions{Stateless: tt.refuseInit})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				body, _ := io.ReadAll(req.Body)
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				_ = json.Unmarshal(body, &m)
				r.mu.Lock()
				r.methods = append(r.methods, m.Method)
				r.mu.Unlock()
				if tt.refuseInit && m.Method == "initialize" {
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32601,"message":"Method not found"}}`)
					return
				}
				req.Body = io.NopCloser(bytes.NewReader(body))
				h.ServeHTTP(w, req)
			}))
			t.Cleanup(ts.Close)
			set, errs := connect(t, acp.MCPServer{Type: "http", Name: "v", URL: ts.URL})
			require.Empty(t, errs)
			res := run(t, t.Context(), findTool(t, set, "mcp__v__version"), `{}`)
			require.NoError(t, res.Err, res.LLMContent)
			assert.Equal(t, tt.wantVersion, res.LLMContent)
			r.mu.Lock()
			defer r.mu.Unlock()
			assert.Equal(t, tt.wantDiscover, strings.Contains(strings.Join(r.methods, " "), "server/discover"), "%v", r.methods)
		})
	}
}

// A server that answers initialize with an older revision it speaks is
// used at that revision.
func TestProtocolVersion_OlderServer(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, badServer("old"))
	require.Empty(t, errs)
	assert.Equal(t, "2025-06-18", set.server("old").conn.cs.InitializeResult().ProtocolVersion)
	res := run(t, t.Context(), findTool(t, set, "mcp__old__ok"), `{}`)
	require.NoError(t, res.Err)
}

// The legacy HTTP+SSE transport (deprecated by MCP, still served by many
// servers) works, with the configured headers.
func TestSSEServer(t *testing.T) {
	t.Parallel()
	s := versionServer()
	var mu sync.Mutex
	var keys []string
	h := sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	set, errs := connect(t, acp.MCPServer{Type: "sse", Name: "legacy", URL: ts.URL, Headers: []acp.HTTPHeader{{Name: "X-Api-Key", Value: "k"}}})
	require.Empty(t, errs)
	for range 2 {
		res := run(t, t.Context(), findTool(t, set, "mcp__legacy__version"), `{}`)
		require.NoError(t, res.Err, res.LLMContent)
		assert.Equal(t, "2025-11-25", res.LLMContent)
	}
	assert.Equal(t, []Status{{Name: "legacy", Type: "sse", Connected: true, Tools: 1}}, set.Status())
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		assert.Equal(t, "k", k)
	}
}

// The headers the editor configured for an HTTP server are credentials: a
// redirect to another origin is refused, and the other origin never sees
// a request.
func TestHTTP_CrossOriginRedirectRefused(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(other.Close)
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/mcp", code)
		}))
		t.Cleanup(redirector.Close)
		opts, _ := testOptions(t)
		set, errs := Connect(t.Context(), []acp.MCPServer{{Type: "http", Name: "r", URL: redirector.URL,
			Headers: []acp.HTTPHeader{{Name: "Authorization", Value: "Bearer secret"}}}}, opts)
		require.NotNil(t, set)
		require.Len(t, errs, 1, "HTTP %d", code)
		assert.Contains(t, errs[0].Error(), "refused a redirect", "HTTP %d", code)
		require.NoError(t, set.Close())
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, leaked, "nothing reached the other origin")
}
