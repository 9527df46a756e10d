package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/mcp/mcptest"
	"github.com/acpd/acpd/session/mcp/oauth/oauthtest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestE2E_MCPOAuth runs the built daemon against an MCP server that
// requires OAuth (a test authorization server on loopback: metadata
// discovery, dynamic registration, PKCE, the resource indicator): after
// session/new the daemon shows the authorization page as an ACP URL
// elicitation; the browser's redirect reaches acpd's loopback listener
// (an editor on acpd's machine) or its address is pasted back in a form
// (an editor elsewhere). The server's tools then reach the model, and
// the token is stored 0600 in the data folder, not in the workspace.
func TestE2E_MCPOAuth(t *testing.T) {
	for _, mode := range []string{"loopback", "paste-back"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
			defer cancel()
			as := oauthtest.NewAS(t)
			s := mcptest.NewServer(0, nil)
			h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
			var listed atomic.Int32 // tools/list calls with a token: connected
			endpoint := as.Protect(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if b, err := io.ReadAll(r.Body); err == nil {
					if strings.Contains(string(b), `"tools/list"`) {
						listed.Add(1)
					}
					r.Body = io.NopCloser(bytes.NewReader(b))
				}
				h.ServeHTTP(w, r)
			}))

			var mu sync.Mutex
			var asked []acp.CreateElicitationRequest
			var completed []string
			var landed string
			fc := &acptest.FakeClient{
				CreateElicitationFunc: func(ctx context.Context, r *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
					mu.Lock()
					asked = append(asked, *r)
					mu.Unlock()
					switch r.Mode {
					case "url":
						loc, err := oauthtest.Consent(r.URL)
						if err != nil {
							return nil, err
						}
						mu.Lock()
						landed = loc
						mu.Unlock()
						if mode == "loopback" {
							if err := oauthtest.Follow(loc); err != nil {
								return nil, err
							}
						}
						return &acp.CreateElicitationResponse{Action: acp.ElicitAccept}, nil
					default:
						if mode == "loopback" {
							// The redirect already reached acpd, which
							// withdraws the question.
							<-ctx.Done()
							return nil, ctx.Err()
						}
						mu.Lock()
						v, _ := json.Marshal(landed)
						mu.Unlock()
						return &acp.CreateElicitationResponse{Action: acp.ElicitAccept, Content: map[string]json.RawMessage{"redirect": v}}, nil
					}
				},
				OnElicitationComplete: func(n acp.CompleteElicitationNotification) {
					mu.Lock()
					completed = append(completed, n.ElicitationID)
					mu.Unlock()
				},
			}
			caps := elicitingEditor()
			d, sid := mcpSession(t, ctx, fc, acp.MCPServer{Type: "http", Name: "srv", URL: endpoint, Headers: []acp.HTTPHeader{}}, &caps)
			waitFor(t, func() bool { return as.Counts().Exchanged == 1 && listed.Load() > 0 })

			mu.Lock()
			require.NotEmpty(t, asked)
			page := asked[0]
			mu.Unlock()
			assert.Equal(t, "url", page.Mode)
			assert.Equal(t, sid, page.SessionID)
			assert.Contains(t, page.Message, `MCP server "srv" asks you to sign in`)
			u, err := url.Parse(page.URL)
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(page.URL, as.URL+"/authorize?"), page.URL)
			assert.Equal(t, endpoint, u.Query().Get("resource"))
			assert.Equal(t, "S256", u.Query().Get("code_challenge_method"))
			assert.Equal(t, []string{endpoint}, as.Counts().Resources)
			if mode == "loopback" {
				waitFor(t, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return slices.Contains(completed, page.ElicitationID)
				})
			}

			// The server's tools reach the model at the next turn.
			d.model.Add(mcpCall("mcp__srv__echo", `{"text":"signed in"}`), modeltest.Response{Text: "ok"})
			_, err = d.cc.Prompt(ctx, sid, "echo")
			require.NoError(t, err)
			done := finished(d.cc.Updates())
			require.Len(t, done, 1)
			assert.Equal(t, acp.StatusCompleted, done[0].Status)
			assert.Equal(t, "echo: signed in", done[0].Content[0].Content.Text)

			// Stored for the user alone, in the data folder.
			files, err := filepath.Glob(filepath.Join(d.dataDir, "mcp-oauth", "*.json"))
			require.NoError(t, err)
			require.Len(t, files, 1)
			fi, err := os.Stat(files[0])
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
			b, err := os.ReadFile(files[0])
			require.NoError(t, err)
			assert.Contains(t, string(b), endpoint)
			found, err := filepath.Glob(filepath.Join(d.cwd, "*"))
			require.NoError(t, err)
			for _, f := range found {
				c, _ := os.ReadFile(f)
				assert.NotContains(t, string(c), "at-", "no token in the workspace")
			}

			// A second session of the same daemon uses the stored token
			// without asking.
			n := len(asked)
			var ns acp.NewSessionResponse
			require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: d.cwd,
				MCPServers: []acp.MCPServer{{Type: "http", Name: "srv", URL: endpoint, Headers: []acp.HTTPHeader{}}}}, &ns))
			d.model.Add(mcpCall("mcp__srv__echo", `{"text":"again"}`), modeltest.Response{Text: "ok"})
			m := len(d.cc.Updates())
			_, err = d.cc.Prompt(ctx, ns.SessionID, "echo")
			require.NoError(t, err)
			done = finished(d.cc.Updates()[m:])
			require.Len(t, done, 1)
			assert.Equal(t, "echo: again", done[0].Content[0].Content.Text)
			mu.Lock()
			assert.Len(t, asked, n, "not asked again")
			mu.Unlock()
			assert.Equal(t, 1, as.Counts().Exchanged)
		})
	}
}
