package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/mcp/oauth"
	"github.com/acpd/acpd/session/mcp/oauth/oauthtest"
)

// protected is an MCP server behind the test authorization server.
func protected(t *testing.T, as *oauthtest.AS) string {
	s := sdk.NewServer(&sdk.Implementation{Name: "p", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "hello"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hi"}}}, nil, nil
	})
	return as.Protect(t, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
}

// connect connects to endpoint through h, under ctx.
func connect(ctx context.Context, endpoint string, h *oauth.Handler) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: h, MaxRetries: -1}, nil)
}

// browser opens the page; follow makes it go on to acpd's loopback
// listener, as a browser on acpd's machine does; otherwise it returns the
// address the browser was sent to, as a user pastes it.
func browser(t *testing.T, follow bool, pages *atomic.Int32) oauth.Prompt {
	return func(_ context.Context, p *oauth.Page) (string, error) {
		pages.Add(1)
		assert.Equal(t, "docs", p.Server)
		assert.True(t, strings.HasPrefix(p.RedirectURL, "http://127.0.0.1:"), p.RedirectURL)
		loc, err := oauthtest.Consent(p.URL)
		if err != nil {
			return "", err
		}
		if follow {
			return "", oauthtest.Follow(loc)
		}
		return loc, nil
	}
}

func TestSignIn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		follow bool
	}{{"loopback", true}, {"paste-back", false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			as := oauthtest.NewAS(t)
			endpoint := protected(t, as)
			dir := filepath.Join(t.TempDir(), "state", "mcp-oauth")
			store := oauth.NewStore(dir)

			// Connecting never asks: without a prompt the server waits
			// for a sign-in.
			h := oauth.NewHandler("docs", endpoint, store, nil, nil)
			_, err := connect(t.Context(), endpoint, h)
			require.Error(t, err)
			assert.True(t, oauth.IsSignInRequired(err), "%v", err)

			var pages atomic.Int32
			ctx := oauth.WithPrompt(t.Context(), browser(t, tt.follow, &pages))
			cs, err := connect(ctx, endpoint, h)
			require.NoError(t, err)
			res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "hello"})
			require.NoError(t, err)
			assert.Equal(t, "hi", res.Content[0].(*sdk.TextContent).Text)
			require.NoError(t, cs.Close())
			assert.Equal(t, int32(1), pages.Load())
			c := as.Counts()
			assert.Equal(t, 1, c.Registered, "dynamic registration")
			assert.Equal(t, 1, c.Exchanged)
			assert.Equal(t, []string{endpoint}, c.Resources, "the resource indicator at the token endpoint")

			// Stored for the user alone, under the issuer.
			fi, err := os.Stat(dir)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, ents, 1)
			fi, err = os.Stat(filepath.Join(dir, ents[0].Name()))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
			g, err := store.Find(endpoint)
			require.NoError(t, err)
			require.NotNil(t, g)
			assert.Equal(t, as.URL, g.Issuer)
			assert.NotEmpty(t, g.Token.RefreshToken)

			// Another process (a new handler) uses the stored token
			// without asking.
			cs, err = connect(t.Context(), endpoint, oauth.NewHandler("docs", endpoint, store, nil, nil))
			require.NoError(t, err)
			require.NoError(t, cs.Close())
			assert.Equal(t, 1, as.Counts().Exchanged)
		})
	}
}

// A token past its expiry is refreshed before use, without asking, and
// the new one is stored.
func TestSignIn_Refresh(t *testing.T) {
	t.Parallel()
	as := oauthtest.NewAS(t)
	as.TokenTTL = 5 * time.Second // inside oauth2's ten-second margin: refreshed at once
	endpoint := protected(t, as)
	store := oauth.NewStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	var pages atomic.Int32
	h := oauth.NewHandler("docs", endpoint, store, nil, nil)
	require.NoError(t, h.SignIn(t.Context(), nil, browser(t, true, &pages)))
	first, err := store.Find(endpoint)
	require.NoError(t, err)

	cs, err := connect(t.Context(), endpoint, oauth.NewHandler("docs", endpoint, store, nil, nil))
	require.NoError(t, err)
	require.NoError(t, cs.Close())
	assert.Equal(t, int32(1), pages.Load(), "not asked again")
	assert.GreaterOrEqual(t, as.Counts().Refreshed, 1)
	now, err := store.Find(endpoint)
	require.NoError(t, err)
	assert.NotEqual(t, first.Token.AccessToken, now.Token.AccessToken, "the refreshed token is stored")
	assert.NotEqual(t, first.Token.RefreshToken, now.Token.RefreshToken, "rotated")

	// Signed out: nothing stored, and the server waits for a sign-in.
	gone, err := oauth.NewHandler("docs", endpoint, store, nil, nil).SignOut()
	require.NoError(t, err)
	assert.True(t, gone)
	_, err = connect(t.Context(), endpoint, oauth.NewHandler("docs", endpoint, store, nil, nil))
	assert.True(t, oauth.IsSignInRequired(err), "%v", err)
}

// The loopback listener takes only the redirect of the flow it waits for;
// a declined prompt ends the sign-in; a refusal by the authorization
// server is reported.
func TestSignIn_Failures(t *testing.T) {
	t.Parallel()
	as := oauthtest.NewAS(t)
	endpoint := protected(t, as)
	store := oauth.NewStore(filepath.Join(t.TempDir(), "mcp-oauth"))
	h := oauth.NewHandler("docs", endpoint, store, nil, nil)

	err := h.SignIn(t.Context(), nil, func(_ context.Context, p *oauth.Page) (string, error) {
		u, _ := url.Parse(p.RedirectURL)
		resp, err := http.Get(u.String() + "?code=x&state=forged")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		return "", context.Canceled
	})
	require.ErrorIs(t, err, context.Canceled)

	err = h.SignIn(t.Context(), nil, func(_ context.Context, p *oauth.Page) (string, error) {
		u, _ := url.Parse(p.URL)
		return p.RedirectURL + "?error=access_denied&error_description=no+thanks&state=" + u.Query().Get("state"), nil
	})
	require.ErrorContains(t, err, "access_denied: no thanks")
	g, err := store.Find(endpoint)
	require.NoError(t, err)
	assert.Nil(t, g)
}

// A server that answers without asking for a token needs no sign-in.
func TestSignIn_NotNeeded(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": "acpd-sign-in", "result": map[string]any{}})
	}))
	defer srv.Close()
	h := oauth.NewHandler("open", srv.URL, oauth.NewStore(t.TempDir()), nil, nil)
	require.NoError(t, h.SignIn(t.Context(), nil, func(context.Context, *oauth.Page) (string, error) {
		t.Error("asked")
		return "", nil
	}))
}

func TestCanonicalResource(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"HTTPS://Example.COM/mcp#x": "https://example.com/mcp",
		"https://example.com/":      "https://example.com",
		"https://example.com/a/":    "https://example.com/a/",
	} {
		assert.Equal(t, want, oauth.CanonicalResource(in), in)
	}
}
