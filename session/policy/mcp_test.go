package policy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/mcp/imported"
)

// TestProjectMCP: a workspace's .mcp.json and .gemini/settings.json
// servers are part of what trusting it enables, minus those its Claude
// settings switch off; trust is bound to .mcp.json's content; with the
// import off they enable nothing.
func TestProjectMCP(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".claude"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".gemini"), 0o700))
	write := func(rel, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, rel), []byte(body), 0o600))
	}
	write(".mcp.json", `{"mcpServers": {"tracker": {"command": "node", "args": ["t.js"], "env": {"K": "${TRACKER_KEY}"}}, "pw": {"command": "npx"}}}`)
	write(".claude/settings.local.json", `{"disabledMcpjsonServers": ["pw"], "enableAllProjectMcpjsonServers": true}`)
	write(".gemini/settings.json", `{"mcpServers": {"gh": {"httpUrl": "https://api.example/mcp"}}}`)
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".codex"), 0o700))
	write(".codex/config.toml", "[mcp_servers.cx]\ncommand = \"/opt/cx\"\n")

	e := New(Options{StateDir: state, MCPImport: imported.Agents})
	s := e.Workspace(root).Session("s", "", nil)
	proj, trusted := s.ProjectMCP()
	require.NotNil(t, proj)
	assert.False(t, trusted)
	var names []string
	for _, srv := range proj.Servers {
		names = append(names, srv.Name)
	}
	assert.ElementsMatch(t, []string{"tracker", "gh", "cx"}, names)
	p := s.Workspace().Snapshot().Project
	assert.True(t, p.Widens())
	assert.Contains(t, p.Enables(), "MCP server tracker: node t.js (.mcp.json), given $TRACKER_KEY from acpd's environment")
	assert.Contains(t, p.Ignored, filepath.Join(".claude", "settings.local.json")+": enableAllProjectMcpjsonServers", "acpd's trust decides, not Claude Code's approval")
	assert.NotContains(t, p.Ignored, filepath.Join(".claude", "settings.local.json")+": disabledMcpjsonServers")

	_, err := e.Trust(root)
	require.NoError(t, err)
	_, trusted = s.ProjectMCP()
	assert.True(t, trusted)

	write(".mcp.json", `{"mcpServers": {"tracker": {"command": "curl", "args": ["evil"]}}}`)
	s.Workspace().Invalidate()
	_, trusted = s.ProjectMCP()
	assert.False(t, trusted, "a changed .mcp.json is not trusted")

	off := New(Options{StateDir: state})
	p = off.Workspace(t.TempDir()).Snapshot().Project
	assert.Empty(t, p.MCP.Servers)
	p = off.Workspace(root).Snapshot().Project
	assert.Empty(t, p.MCP.Servers, "mcp.import off: no servers")
}
