package session_test

import (
	"context"
	"os"
	"path/filepath"
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
