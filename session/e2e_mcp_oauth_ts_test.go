package session_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/mcp/oauth/oauthtest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestE2E_MCPOAuthTypeScript signs the built daemon in to an MCP server
// built from the official TypeScript SDK, behind that SDK's
// requireBearerAuth middleware (its 401 with WWW-Authenticate and
// resource_metadata, its expected-resource check), with acpd's loopback
// authorization server (oauthtest) as the issuer, which the TypeScript
// server asks about each token (introspection). The page goes to the
// editor as an ACP URL elicitation, the browser comes back to acpd's
// loopback listener, and the token then reaches the TypeScript server on
// every request: its whoami tool names the client acpd registered.
func TestE2E_MCPOAuthTypeScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	as := oauthtest.NewAS(t)
	endpoint := tsHTTPServer(t, "oauth", as.URL)

	var mu sync.Mutex
	var pages []acp.CreateElicitationRequest
	var completed []string
	fc := &acptest.FakeClient{
		CreateElicitationFunc: func(ctx context.Context, r *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
			if r.Mode != "url" {
				// The paste-back form: the loopback redirect wins and
				// acpd withdraws it.
				<-ctx.Done()
				return nil, ctx.Err()
			}
			mu.Lock()
			pages = append(pages, *r)
			mu.Unlock()
			loc, err := oauthtest.Consent(r.URL)
			if err != nil {
				return nil, err
			}
			if err := oauthtest.Follow(loc); err != nil {
				return nil, err
			}
			return &acp.CreateElicitationResponse{Action: acp.ElicitAccept}, nil
		},
		OnElicitationComplete: func(n acp.CompleteElicitationNotification) {
			mu.Lock()
			completed = append(completed, n.ElicitationID)
			mu.Unlock()
		},
	}
	caps := elicitingEditor()
	d, sid := mcpSession(t, ctx, fc, acp.MCPServer{Type: "http", Name: "ts", URL: endpoint, Headers: []acp.HTTPHeader{}}, &caps)
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(pages) == 1 && len(completed) == 1 && as.Counts().Exchanged == 1
	})
	mu.Lock()
	page := pages[0]
	mu.Unlock()
	assert.Equal(t, sid, page.SessionID)
	assert.Contains(t, page.Message, `MCP server "ts" asks you to sign in`)
	u, err := url.Parse(page.URL)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(page.URL, as.URL+"/authorize?"), "the issuer named by the TypeScript server's metadata: %s", page.URL)
	assert.Equal(t, endpoint, u.Query().Get("resource"))
	assert.Equal(t, "S256", u.Query().Get("code_challenge_method"))
	c := as.Counts()
	assert.Equal(t, 1, c.Registered)
	assert.Equal(t, 1, c.Exchanged)
	assert.Equal(t, []string{endpoint}, c.Resources)

	// The tools reach the model at the next turn, and the call carries the
	// token the TypeScript middleware accepts.
	d.model.Add(mcpCall("mcp__ts__whoami", `{}`), modeltest.Response{Text: "ok"})
	var res string
	require.Eventually(t, func() bool {
		m := len(d.cc.Updates())
		_, err := d.cc.Prompt(ctx, sid, "who am I")
		require.NoError(t, err)
		for _, u := range finished(d.cc.Updates()[m:]) {
			if u.Status == acp.StatusCompleted && len(u.Content) > 0 {
				res = u.Content[0].Content.Text
			}
		}
		if res == "" {
			d.model.Add(mcpCall("mcp__ts__whoami", `{}`), modeltest.Response{Text: "ok"})
		}
		return res != ""
	}, 30*time.Second, 200*time.Millisecond)
	assert.Regexp(t, `^client=client-\w+ scopes=(mcp,offline_access|offline_access,mcp)$`, res, "the TypeScript server saw the token acpd got for the client it registered")
}
