package session_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestE2E_ImportedMCP: the MCP servers a user configured for Claude Code
// and Codex start in acpd's sessions through the built binary. A Go SDK
// stdio server in a fake ~/.claude.json (user scope, and local scope for
// the workspace with a ${VAR:-default} in its env) and in a fake
// ~/.codex/config.toml is offered at once; one in
// the workspace's .mcp.json is not started while the workspace is
// untrusted (declined), is started by the prompt that trusts it (its tool
// in that prompt's first model request, and callable), and is there from
// the start in a session of the trusted workspace, without a question.
func TestE2E_ImportedMCP(t *testing.T) {
	server := buildMCPServer(t)
	home, cwd, dataDir := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(path string, v any) {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, data, 0o600))
	}
	write(filepath.Join(home, ".claude.json"), map[string]any{
		"numStartups": 12,
		"mcpServers":  map[string]any{"home": map[string]any{"type": "stdio", "command": server, "args": []string{}}},
		"projects": map[string]any{cwd: map[string]any{
			"allowedTools": []string{},
			"mcpServers":   map[string]any{"loc": map[string]any{"command": server, "env": map[string]string{"MODE": "${ACPD_TEST_UNSET:-quiet}"}}},
		}},
	})
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".codex"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".codex", "config.toml"),
		[]byte("model = \"o4\"\n\n[mcp_servers.cx]\ncommand = \""+server+"\"\nenv_vars = [\"HOME\"]\n"), 0o600))
	write(filepath.Join(cwd, ".mcp.json"), map[string]any{
		"mcpServers": map[string]any{"proj": map[string]any{"command": server}},
	})

	start := func(answer string, resps ...modeltest.Response) (*daemon, string, *permissionLog) {
		a := &permissionLog{}
		d := startDaemonEnv(t, cwd, t.TempDir(), []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=", "CODEX_HOME=", "ACPD_MCP_IMPORT=claude,codex"}, a.client(trustAnswer(answer)), resps,
			"--data-dir", dataDir, "--approval-mode", "yolo")
		ctx := ctxFor(t)
		_, err := d.cc.InitializeWith(ctx, acp.ClientCapabilities{})
		require.NoError(t, err)
		sid, err := d.cc.NewSession(ctx, cwd)
		require.NoError(t, err)
		return d, sid, a
	}
	offered := func(d *daemon, i int) []string {
		var names []string
		for _, tl := range d.model.Requests()[i].Tools {
			if strings.HasPrefix(tl.Function.Name, "mcp__") {
				names = append(names, tl.Function.Name)
			}
		}
		return names
	}

	d, sid, a := start("decline", modeltest.Response{Text: "ok"})
	_, err := d.cc.Prompt(ctxFor(t), sid, "hello")
	require.NoError(t, err)
	assert.Equal(t, 1, trustAsked(a.requests()), "the workspace's .mcp.json makes acpd ask")
	assert.Contains(t, a.requests()[0].ToolCall.Content[0].Content.Text, "MCP server proj: "+server+" (.mcp.json)", "the question names the server")
	names := offered(d, 0)
	assert.Contains(t, names, "mcp__home__echo", "the user scope of ~/.claude.json")
	assert.Contains(t, names, "mcp__loc__echo", "the local scope of ~/.claude.json")
	assert.Contains(t, names, "mcp__cx__echo", "~/.codex/config.toml")
	for _, n := range names {
		assert.NotContains(t, n, "mcp__proj__", "an untrusted workspace's server is not started")
	}

	d, sid, a = start("trust",
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: "mcp__proj__echo", Arguments: `{"text":"from the project"}`}}},
		modeltest.Response{Text: "done"})
	_, err = d.cc.Prompt(ctxFor(t), sid, "use it")
	require.NoError(t, err)
	assert.Equal(t, 1, trustAsked(a.requests()))
	assert.Contains(t, offered(d, 0), "mcp__proj__echo", "trusted: the project's server starts for this prompt")
	assert.Contains(t, strings.Join(toolText(d.cc.Updates(), acp.StatusCompleted), "\n"), "from the project")

	d, sid, a = start("decline", modeltest.Response{Text: "ok"})
	_, err = d.cc.Prompt(ctxFor(t), sid, "again")
	require.NoError(t, err)
	assert.Zero(t, trustAsked(a.requests()), "trusted as it is: no question")
	assert.Contains(t, offered(d, 0), "mcp__proj__echo")
	assert.Contains(t, offered(d, 0), "mcp__home__echo")
}
