package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

// An HTTP server that restarts loses its MCP sessions and answers the old
// session id with 404: acpd reports that on the next call, starts a new
// session (once, as for a stdio server that died) and the call after works.
func TestHTTPServer_SessionLostIsRestartedOnce(t *testing.T) {
	t.Parallel()
	newHandler := func() http.Handler {
		s := sdk.NewServer(&sdk.Implementation{Name: "httpserver", Version: "1.0.0"}, nil)
		s.AddTool(&sdk.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}},
			func(_ context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil
			})
		return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	}
	var h atomic.Value
	h.Store(newHandler())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	set, errs := connect(t, acp.MCPServer{Type: "http", Name: "web", URL: ts.URL})
	require.Empty(t, errs)
	ping := findTool(t, set, "mcp__web__ping")
	res := run(t, t.Context(), ping, `{}`)
	require.NoError(t, res.Err)
	assert.Equal(t, "pong", res.LLMContent)

	h.Store(newHandler()) // the server restarts: its sessions are gone
	res = run(t, t.Context(), ping, `{}`)
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, `mcp server "web"`)
	assert.Contains(t, res.LLMContent, "it was restarted, call the tool again")
	res = run(t, t.Context(), ping, `{}`)
	require.NoError(t, res.Err, res.LLMContent)
	assert.Equal(t, "pong", res.LLMContent)

	h.Store(newHandler()) // and again: not restarted a second time
	res = run(t, t.Context(), ping, `{}`)
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, "not restarted again")
}
