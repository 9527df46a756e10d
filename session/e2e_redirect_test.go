package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/credhttp/credhttptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// An HTTP MCP server whose endpoint answers 307 to another origin, given to
// the built binary in session/new with a configured header: the endpoint
// gets the header, the other origin gets no request at all (net/http copies
// custom headers to the next hop, and a transport adding the configured
// headers adds them again on every hop), and the session still opens.
func TestE2E_MCPRedirectKeepsHeaders(t *testing.T) {
	r := credhttptest.New(t, 0)
	d := startDaemon(t, nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	var ns acp.NewSessionResponse
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: d.cwd, MCPServers: []acp.MCPServer{
		{Type: "http", Name: "web", URL: r.URL, Headers: []acp.HTTPHeader{{Name: "Authorization", Value: "Bearer mcp-secret"}, {Name: "X-Api-Key", Value: "mcp-key"}}},
	}}, &ns))
	// The server's failure, the refused redirect, is told at the next
	// prompt: by then the connection attempt is over.
	d.model.Add(modeltest.Response{Text: "ok"})
	resp, err := d.cc.Prompt(ctx, ns.SessionID, "hi")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	var said strings.Builder
	for _, n := range d.cc.Updates() {
		if n.Update.Kind == acp.UpdateAgentMessageChunk && n.Update.Content != nil {
			said.WriteString(n.Update.Content.Text)
		}
	}
	assert.Contains(t, said.String(), "refused a redirect from "+r.URL+" to "+r.Sink)
	front := r.Front()
	require.NotEmpty(t, front)
	assert.Equal(t, "mcp-key", front[0].Header.Get("X-Api-Key"))
	assert.Equal(t, "Bearer mcp-secret", front[0].Header.Get("Authorization"))
	assert.Empty(t, r.Leaked(), "the other origin was sent a request")
}
