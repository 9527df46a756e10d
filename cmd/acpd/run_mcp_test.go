package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model/modeltest"
)

// acpd run takes MCP servers from --mcp-config; a server's question (a
// form elicitation) is declined, since nobody can answer it, and stderr
// names the server and the question. The call goes on with the server's
// answer to the decline.
func TestRunCmd_MCPQuestionDeclined(t *testing.T) {
	t.Parallel()
	server := filepath.Join(t.TempDir(), "mcpserver")
	out, err := exec.Command("go", "build", "-o", server, "github.com/acpd/acpd/session/mcp/testdata/mcpserver").CombinedOutput()
	require.NoError(t, err, "%s", out)
	e := newRunEnv(t)
	cfg := filepath.Join(e.dir, "mcp.json")
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"srv": map[string]any{"command": server}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg, b, 0o644))

	srv := modeltest.NewServer(t,
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: "c1", Name: "mcp__srv__ask_form", Arguments: `{}`}}},
		modeltest.Response{Text: "Declined."},
	)
	e.env = append(e.env, "OPENAI_API_KEY=test-key")
	o := e.run(t, "", "run", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "m1", "--cwd", e.ws,
		"--yolo", "--mcp-config", cfg, "--answer", "not for servers", "who am I?")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stderr, `acpd run: declined a question from MCP server srv, since a headless run cannot ask the user: MCP server "srv": Who are you?`)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	var tool string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			tool = m.Text()
		}
	}
	assert.Equal(t, "form: action=decline name=<nil> color=<nil>", tool)

	o = e.run(t, "", "run", "--mcp-config", filepath.Join(e.dir, "missing.json"), "hi")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "--mcp-config")
}
