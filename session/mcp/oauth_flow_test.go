package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/mcp/mcptest"
	"github.com/acpd/acpd/session/mcp/oauth"
	"github.com/acpd/acpd/session/mcp/oauth/oauthtest"
	"github.com/acpd/acpd/session/tools"
)

// follow is a browser on acpd's machine: it consents and comes back to
// the loopback listener.
func follow(_ context.Context, p *oauth.Page) (string, error) {
	loc, err := oauthtest.Consent(p.URL)
	if err != nil {
		return "", err
	}
	return "", oauthtest.Follow(loc)
}

// A server that asks for OAuth does not start until signed in; SignIn
// connects it and the session hears of its tools.
func TestOAuth_SignInConnects(t *testing.T) {
	t.Parallel()
	as := oauthtest.NewAS(t)
	s := mcptest.NewServer(0, nil)
	endpoint := as.Protect(t, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	opts, _ := testOptions(t)
	opts.Tokens = oauth.NewStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	var changed atomic.Int32
	opts.Changed = func() { changed.Add(1) }
	set, errs := Connect(t.Context(), []acp.MCPServer{{Type: TypeHTTP, Name: "docs", URL: endpoint}}, opts)
	t.Cleanup(func() { _ = set.Close() })
	require.Len(t, errs, 1)
	assert.True(t, oauth.IsSignInRequired(errs[0]), "%v", errs[0])
	assert.Equal(t, []string{"docs"}, set.NeedsSignIn())
	assert.Empty(t, set.Tools())

	require.NoError(t, set.SignIn(t.Context(), "docs", follow))
	assert.Empty(t, set.NeedsSignIn())
	assert.Eventually(t, func() bool { return changed.Load() > 0 }, 5*time.Second, 10*time.Millisecond)
	set.Refresh(t.Context())
	tl := findTool(t, set, "mcp__docs__echo")
	env := &tools.Env{ToolCallID: "c1"}
	call, err := tl.Build(env, []byte(`{"text":"in"}`))
	require.NoError(t, err)
	r := call.Execute(t.Context(), env)
	require.NoError(t, r.Err, r.LLMContent)
	assert.Equal(t, "echo: in", r.LLMContent)

	// A server given an Authorization header is not signed in.
	opts.Changed = nil
	set2, errs := Connect(t.Context(), []acp.MCPServer{{Type: TypeHTTP, Name: "h", URL: endpoint, Headers: []acp.HTTPHeader{{Name: "Authorization", Value: "Bearer nope"}}}}, opts)
	t.Cleanup(func() { _ = set2.Close() })
	require.Len(t, errs, 1)
	assert.False(t, oauth.IsSignInRequired(errs[0]), "%v", errs[0])
	assert.Empty(t, set2.NeedsSignIn())
}

// The token never follows a redirect to another host: the server that
// redirects is refused, and the other host gets no request at all.
func TestOAuth_TokenNeverFollowsRedirect(t *testing.T) {
	t.Parallel()
	var other atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { other.Add(1) }))
	defer elsewhere.Close()
	as := oauthtest.NewAS(t)
	endpoint := as.Protect(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	opts, _ := testOptions(t)
	opts.Tokens = oauth.NewStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	set, errs := Connect(t.Context(), []acp.MCPServer{{Type: TypeHTTP, Name: "docs", URL: endpoint}}, opts)
	t.Cleanup(func() { _ = set.Close() })
	require.Len(t, errs, 1)
	err := set.SignIn(t.Context(), "docs", follow)
	require.Error(t, err, "signed in, then refused at the redirect")
	assert.Contains(t, err.Error(), "redirect")
	assert.Equal(t, 1, as.Counts().Exchanged, "a token was issued")
	assert.Zero(t, other.Load(), "the other host got nothing")
}
