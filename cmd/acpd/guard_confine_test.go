package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model/anthropic/anthropictest"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/model/responses/responsestest"
	sbx "github.com/acpd/acpd/session/tools/sandbox"
)

// confineAgent builds testdata/confineagent, whose every turn tries to
// write outside its workspace, read ~/.ssh/id_rsa (a fake key in a home
// of its own) and find secrets in its environment, and writes in its
// workspace; the returned agent's environment holds the secrets, and
// outside is the folder it may not write.
func confineAgent(t *testing.T) (a guardAgent, outside string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("acpd's sandbox confines on Linux only")
	}
	if st := sbx.Probe(); !st.Usable() {
		t.Skipf("the kernel cannot confine: %v", st.Err)
	}
	bin := filepath.Join(t.TempDir(), "confineagent")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/confineagent").CombinedOutput()
	require.NoError(t, err, "%s", out)
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte("-----BEGIN FAKE KEY-----\n"), 0o600))
	outside = t.TempDir()
	return guardAgent{name: "confine-agent", ws: newWorkspace(t), cmd: []string{bin},
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CONFINE_OUTSIDE=" + outside,
			"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
			// What the agent must not see: acpd's serve token, a provider's
			// key (not this agent's), any other secret.
			"ACPD_SERVER_TOKEN=secret-value-token", "ANTHROPIC_API_KEY=secret-value-key", "DEPLOY_PASSWORD=secret-value-pw",
			"PLAIN_SETTING=not-secret"}}, outside
}

// agentText is the text of the agent_message_chunk updates the editor got.
func (g *guarded) agentText() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var b strings.Builder
	for _, raw := range g.updates {
		var n acp.SessionNotification
		if json.Unmarshal(raw, &n) == nil && n.Update.Kind == "agent_message_chunk" && n.Update.Content != nil {
			b.WriteString(n.Update.Content.Text)
		}
	}
	return b.String()
}

// TestGuard_Confine: in front of an agent, acpd guard --confine keeps its
// turn from writing outside its workspace, reading the SSH key and seeing
// acpd's token or another provider's key, in proxy mode and with the
// network open, while the turn itself completes; without --confine the
// same agent does all of it (the control).
func TestGuard_Confine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		flags   []string
		network string
	}{
		{"proxy", []string{"--confine"}, "proxy"},
		{"network open", []string{"--confine"}, "true"},
		{"unconfined control", nil, "proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, outside := confineAgent(t)
			a.env = append(a.env, "ACPD_SANDBOX_NETWORK="+tc.network)
			g := startGuard(t, a, filepath.Join(t.TempDir(), "data"), tc.flags...)
			stop, rpcErr := g.prompt(g.newSession(a.ws), "do your thing")
			require.Nil(t, rpcErr, "stderr:\n%s", g.stderr.String())
			assert.Equal(t, acp.StopEndTurn, stop)
			text := g.agentText()
			assert.Contains(t, text, "write-workspace: ok", "the workspace is the agent's to write")
			made, err := os.ReadFile(filepath.Join(a.ws, "made-by-agent.txt"))
			require.NoError(t, err)
			assert.Equal(t, "ok", string(made))
			_, statErr := os.Stat(filepath.Join(outside, "escaped.txt"))
			if tc.flags == nil {
				assert.Contains(t, text, "write-outside: ok")
				assert.Contains(t, text, "read-ssh-key: ok")
				assert.Contains(t, text, "secrets-in-env: ACPD_SERVER_TOKEN,ANTHROPIC_API_KEY,DEPLOY_PASSWORD")
				assert.NoError(t, statErr)
			} else {
				assert.Contains(t, text, "write-outside: failed: ")
				assert.Contains(t, text, "read-ssh-key: failed: ")
				assert.Contains(t, text, "permission denied")
				assert.Contains(t, text, "secrets-in-env: \n", "the agent saw a secret")
				assert.ErrorIs(t, statErr, os.ErrNotExist, "the agent wrote outside its workspace")
			}
			g.closeAndCheck()
		})
	}
}

// TestGuard_ConfineQwenCode: qwen-code from npm, confined with the network
// only through acpd's proxy, completes a turn of tool calls against the
// scripted model server on loopback: its provider address, from its
// --openai-base-url, is the host:port the proxy lets it reach, and node
// finds the proxy in HTTPS_PROXY/HTTP_PROXY.
func TestGuard_ConfineQwenCode(t *testing.T) {
	t.Parallel()
	if st := sbx.Probe(); !st.Usable() {
		t.Skipf("the kernel cannot confine: %v", st.Err)
	}
	srv := modeltest.NewServer(t)
	a := qwenAgent(t, srv)
	a.env = append(a.env, "ACPD_SANDBOX_NETWORK=proxy")
	scenario{calls: 3, batch: 1, args: distinctArgs}.install(srv, a.ws)
	g := startGuard(t, a, filepath.Join(t.TempDir(), "data"), "--confine", "--log-level", "info")
	stop, rpcErr := g.prompt(g.newSession(a.ws), "read three lines")
	require.Nil(t, rpcErr, "stderr:\n%s", g.stderr.String())
	assert.Equal(t, acp.StopEndTurn, stop, "stderr:\n%s", g.stderr.String())
	assert.GreaterOrEqual(t, len(srv.Requests()), 4, "three tool calls and the answer went through the proxy")
	// In proxy mode the agent runs in a network namespace with nothing but
	// loopback: the proxy is its only way to the model server.
	assert.Contains(t, g.stderr.String(), `"profile":"qwen-code"`)
	assert.Contains(t, g.stderr.String(), `"network":"proxy"`)
	assert.NotContains(t, g.stderr.String(), "connection was refused")
	g.closeAndCheck()
}

// TestGuard_ConfineClaudeAgentACP: claude-agent-acp from npm (with the Claude
// Code it runs), confined with the network only through acpd's proxy,
// completes a turn of three Read calls against the scripted Messages API
// server on loopback: its state in ~/.claude and ~/.claude.json is
// writable, its ANTHROPIC_API_KEY passes, and $ANTHROPIC_BASE_URL's
// host:port is the allowed host.
func TestGuard_ConfineClaudeAgentACP(t *testing.T) {
	t.Parallel()
	if st := sbx.Probe(); !st.Usable() {
		t.Skipf("the kernel cannot confine: %v", st.Err)
	}
	srv := anthropictest.NewServer(t)
	a := claudeAgent(t, srv)
	a.env = append(a.env, "ACPD_SANDBOX_NETWORK=proxy")
	claudeScript(srv, a.ws, 3, func(i int) string { return fmt.Sprintf(`"offset":%d,"limit":1`, i) })
	g := startGuard(t, a, filepath.Join(t.TempDir(), "data"), "--confine", "--log-level", "info")
	stop, rpcErr := g.prompt(g.newSession(a.ws), "read the file")
	require.Nil(t, rpcErr, "stderr:\n%s", g.stderr.String())
	assert.Equal(t, acp.StopEndTurn, stop, "stderr:\n%s", g.stderr.String())
	assert.GreaterOrEqual(t, len(srv.Requests()), 4, "three tool calls and the answer went through the proxy")
	assert.Contains(t, g.stderr.String(), `"profile":"claude"`)
	assert.Contains(t, g.stderr.String(), `"network":"proxy"`)
	g.closeAndCheck()
}

// TestGuard_ConfineCodexACP: codex-acp from npm (a Rust binary), confined
// with the network only through acpd's proxy, runs a turn of three shell
// commands against the scripted Responses API server on loopback. Its
// provider address is in its config.toml, which acpd does not read, and its
// key variable is the test's own: both come from the configuration, as a
// user would add them (tools.sandboxAllowedDomains, tools.sandboxPassEnv).
// Codex's commands run inside the same confinement: one that writes outside
// the workspace fails.
func TestGuard_ConfineCodexACP(t *testing.T) {
	t.Parallel()
	if st := sbx.Probe(); !st.Usable() {
		t.Skipf("the kernel cannot confine: %v", st.Err)
	}
	srv := responsestest.NewServer(t)
	srv.SetLaxReasoning(true)
	a := codexAgent(t, srv)
	outside := t.TempDir()
	host := strings.TrimPrefix(srv.URL, "http://")
	a.env = append(a.env, "ACPD_SANDBOX_NETWORK=proxy", "ACPD_SANDBOX_ALLOWED_DOMAINS="+host, "ACPD_SANDBOX_PASS_ENV=MOCK_API_KEY")
	codexScript(srv, 3, func(i int) string {
		if i == 2 {
			return "echo escaped > " + filepath.Join(outside, "escaped.txt")
		}
		return fmt.Sprintf("echo %d > made-%d.txt", i, i)
	})
	g := startGuard(t, a, filepath.Join(t.TempDir(), "data"), "--confine", "--log-level", "info")
	stop, rpcErr := g.prompt(g.newSession(a.ws), "write the files")
	require.Nil(t, rpcErr, "stderr:\n%s", g.stderr.String())
	assert.Equal(t, acp.StopEndTurn, stop, "stderr:\n%s", g.stderr.String())
	assert.GreaterOrEqual(t, len(srv.Requests()), 4, "three tool calls and the answer went through the proxy")
	assert.Contains(t, g.stderr.String(), `"profile":"codex"`)
	assert.FileExists(t, filepath.Join(a.ws, "made-1.txt"))
	assert.FileExists(t, filepath.Join(a.ws, "made-3.txt"))
	assert.NoFileExists(t, filepath.Join(outside, "escaped.txt"), "a command of the agent wrote outside the workspace")
	g.closeAndCheck()
}
