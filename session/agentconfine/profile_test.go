package agentconfine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	sbx "github.com/acpd/acpd/session/tools/sandbox"
)

func TestFor(t *testing.T) {
	env := []string{"HOME=/h", "ANTHROPIC_BASE_URL=http://127.0.0.1:9000/v1", "CODEX_HOME=/c"}
	tests := []struct {
		argv                   []string
		agent                  string
		dirs, files, readable  []string
		passEnv                []string
		hostsHave, hostsHaveNo string
	}{
		{argv: []string{"npx", "@zed-industries/claude-code-acp@0.5.1"}, agent: "claude",
			dirs: []string{"/h/.npm", "/h/.claude"}, files: []string{"/h/.claude.json"}, readable: []string{"/h/.claude/.credentials.json"},
			passEnv: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}, hostsHave: "127.0.0.1:9000", hostsHaveNo: "api.openai.com"},
		{argv: []string{"/opt/bin/codex-acp"}, agent: "codex", dirs: []string{"/h/.npm", "/c"}, readable: []string{"/c/auth.json"},
			passEnv: []string{"OPENAI_API_KEY", "CODEX_API_KEY"}, hostsHave: "api.openai.com", hostsHaveNo: "api.anthropic.com"},
		{argv: []string{"gemini", "--experimental-acp"}, agent: "gemini", dirs: []string{"/h/.npm", "/h/.gemini"},
			readable: []string{"/h/.gemini/oauth_creds.json"}, passEnv: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"},
			hostsHave: "generativelanguage.googleapis.com"},
		{argv: []string{"/x/node", "/m/@qwen-code/qwen-code/cli-entry.js", "--acp", "--openai-base-url", "http://127.0.0.1:5555/v1"}, agent: "qwen-code",
			dirs: []string{"/h/.npm", "/h/.qwen"}, readable: []string{"/h/.qwen/oauth_creds.json"}, passEnv: []string{"OPENAI_API_KEY", "DASHSCOPE_API_KEY"},
			hostsHave: "127.0.0.1:5555"},
		{argv: []string{"opencode", "acp"}, agent: "opencode",
			dirs:     []string{"/h/.npm", "/h/.local/share/opencode", "/h/.config/opencode", "/h/.local/state/opencode"},
			readable: []string{"/h/.local/share/opencode/auth.json"}, passEnv: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}, hostsHave: "models.dev"},
		{argv: []string{"./my-agent", "--claude"}, dirs: []string{"/h/.npm"}},
	}
	for _, tc := range tests {
		n := For(tc.argv, env)
		assert.Equal(t, tc.agent, n.Agent, tc.argv)
		assert.Equal(t, tc.dirs, n.Dirs, tc.argv)
		assert.Equal(t, tc.files, n.Files, tc.argv)
		assert.Equal(t, tc.readable, n.Readable, tc.argv)
		assert.Equal(t, tc.passEnv, n.PassEnv, tc.argv)
		if tc.hostsHave != "" {
			assert.Contains(t, n.Hosts, tc.hostsHave, tc.argv)
		}
		if tc.hostsHaveNo != "" {
			assert.NotContains(t, n.Hosts, tc.hostsHaveNo, tc.argv)
		}
	}
}

func TestApply(t *testing.T) {
	n := Needs{Agent: "codex", Dirs: []string{"/h/.codex"}, Readable: []string{"/h/.codex/auth.json"},
		PassEnv: []string{"OPENAI_API_KEY"}, Hosts: []string{"api.openai.com"}}
	base := sbx.Settings{Writable: []string{"/w"}, DenyRead: []string{"/h/.ssh", "/h/.codex/auth.json", "/h/.gemini/oauth_creds.json"},
		Env: sbx.EnvPolicy{Drop: []string{"ACPD_TOKEN"}, Pass: []string{"FOO_TOKEN"}}, AllowedDomains: []string{"github.com"}}
	s := n.Apply(base)
	assert.Equal(t, []string{"/w", "/h/.codex"}, s.Writable)
	assert.Equal(t, []string{"/h/.ssh", "/h/.gemini/oauth_creds.json"}, s.DenyRead, "only the agent's own credential leaves the list")
	assert.Equal(t, []string{"FOO_TOKEN", "OPENAI_API_KEY"}, s.Env.Pass)
	assert.Equal(t, []string{"github.com", "api.openai.com"}, s.AllowedDomains)
	assert.True(t, s.Env.Drops("ACPD_TOKEN"))
	assert.True(t, s.Env.Drops("ANTHROPIC_API_KEY"), "another provider's key")
	assert.False(t, s.Env.Drops("OPENAI_API_KEY"))
	assert.Equal(t, []string{"/h/.ssh", "/h/.codex/auth.json", "/h/.gemini/oauth_creds.json"}, base.DenyRead, "the base settings are not changed")
}

func TestMakeState(t *testing.T) {
	home := t.TempDir()
	n := For([]string{"claude-code-acp"}, []string{"HOME=" + home})
	assert.NoError(t, n.MakeState())
	b, err := os.ReadFile(filepath.Join(home, ".claude.json"))
	assert.NoError(t, err)
	assert.Equal(t, "{}\n", string(b))
	assert.DirExists(t, filepath.Join(home, ".claude"))
	assert.DirExists(t, filepath.Join(home, ".npm"))
	assert.NoError(t, os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"numStartups":3}`), 0o600))
	assert.NoError(t, n.MakeState())
	b, _ = os.ReadFile(filepath.Join(home, ".claude.json"))
	assert.Equal(t, `{"numStartups":3}`, string(b), "an existing file is kept")
}
