package session_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// A client advertising session.notices is told about a broken agent file
// (warning) and an MCP server that failed to start (error) as notices, and
// the MCP failure is not repeated as agent text; a client without the
// capability sees no notice and the MCP failure as agent text, as before.
func TestE2E_Notices(t *testing.T) {
	for _, capable := range []bool{true, false} {
		name := map[bool]string{true: "with session.notices", false: "without"}[capable]
		t.Run(name, func(t *testing.T) {
			cwd := t.TempDir()
			dir := filepath.Join(cwd, ".claude", "agents")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.md"), []byte("---\nname: broken\n---\nno description\n"), 0o644))
			d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{{Text: "hi"}})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			caps := acp.ClientCapabilities{}
			if capable {
				caps.Session = &acp.ClientSessionCapabilities{Notices: &acp.Capability{}}
			}
			_, err := d.cc.InitializeWith(ctx, caps)
			require.NoError(t, err)
			var nr acp.NewSessionResponse
			require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: cwd, MCPServers: []acp.MCPServer{
				{Name: "gone", Command: filepath.Join(cwd, "no-such-server")},
			}}, &nr))
			waitCommands(t, d, nr.SessionID, 1)
			_, err = d.cc.Prompt(ctx, nr.SessionID, "hello")
			require.NoError(t, err)

			var notices []acp.Notice
			for _, u := range d.cc.Updates() {
				if u.Update.Kind == acp.UpdateNotice {
					notices = append(notices, *u.Update.Notice)
				}
			}
			text := acptest.AgentText(d.cc.Updates(), nr.SessionID)
			if !capable {
				assert.Empty(t, notices)
				assert.Contains(t, text, "MCP server failed to start: ")
				return
			}
			assert.NotContains(t, text, "MCP server failed to start")
			require.Len(t, notices, 2, "%+v", notices)
			byTitle := map[string]acp.Notice{}
			for _, n := range notices {
				byTitle[n.Title] = n
			}
			agent := byTitle["Agent file problem"]
			assert.Equal(t, acp.SeverityWarning, agent.Severity)
			assert.Contains(t, agent.Description, filepath.Join(dir, "broken.md")+`:1: missing the required key "description"`)
			mcp := byTitle["MCP server failed to start"]
			assert.Equal(t, acp.SeverityError, mcp.Severity)
			assert.Contains(t, mcp.Description, "gone")
		})
	}
}

// noticeSession initializes d's connection as a client that takes notices
// (and nothing else: no fs, no terminal) and opens a session in d's
// workspace.
func (d *daemon) noticeSession(ctx context.Context, t testing.TB) string {
	t.Helper()
	_, err := d.cc.InitializeWith(ctx, acp.ClientCapabilities{Session: &acp.ClientSessionCapabilities{Notices: &acp.Capability{}}})
	require.NoError(t, err)
	sid, err := d.cc.NewSession(ctx, d.cwd)
	require.NoError(t, err)
	return sid
}

// A provider that answers 429 and is retried: an info notice says so (with
// the status), and the turn ends normally with the retried answer.
func TestE2E_ProviderRetryNotice(t *testing.T) {
	d := startDaemon(t, nil, []modeltest.Response{{Status: 429, RetryAfter: "1"}, {Text: "hi"}})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sid := d.noticeSession(ctx, t)
	resp, err := d.cc.Prompt(ctx, sid, "hello")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	var retry *acp.Notice
	for _, u := range d.cc.Updates() {
		if n := u.Update.Notice; n != nil && n.Title == "Model provider busy; retrying" {
			retry = n
		}
	}
	require.NotNil(t, retry, "a retry notice")
	assert.Equal(t, acp.SeverityInfo, retry.Severity)
	assert.Contains(t, retry.Description, "answered 429")
	assert.Contains(t, retry.Description, "attempt 1 of 4 is retried in 1s")
	assert.Equal(t, "hi", acptest.AgentText(d.cc.Updates(), sid))
}

// A request that takes the conversation past 80% of
// model.sessionTokenLimit is sent, and the user is told the limit is near.
func TestE2E_BudgetNearNotice(t *testing.T) {
	// What the first request of a session holds (the system prompt and the
	// tools), as /context reports it; the limit is set a little above it,
	// so the request fits and is past 80%.
	d0 := startDaemon(t, nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sid0 := d0.noticeSession(ctx, t)
	_, err := d0.cc.Prompt(ctx, sid0, "/context")
	require.NoError(t, err)
	var used int
	_, err = fmt.Sscanf(regexp.MustCompile(`Used: \d+`).FindString(acptest.AgentText(d0.cc.Updates(), sid0)), "Used: %d", &used)
	require.NoError(t, err)
	limit := used * 115 / 100

	d := startDaemonIn(t, d0.cwd, t.TempDir(), nil, []modeltest.Response{{Text: "hi"}}, "--session-token-limit", fmt.Sprint(limit))
	sid := d.noticeSession(ctx, t)
	resp, err := d.cc.Prompt(ctx, sid, "hello")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	var near []acp.Notice
	for _, u := range d.cc.Updates() {
		if n := u.Update.Notice; n != nil && n.Title == "Token budget 80% used" {
			near = append(near, *n)
		}
	}
	require.Len(t, near, 1, "limit %d, used %d", limit, used)
	assert.Equal(t, acp.SeverityWarning, near[0].Severity)
	assert.Contains(t, near[0].Description, "tokens model.sessionTokenLimit allows")
}
