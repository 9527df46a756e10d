package tools

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// TestRunShellCommand_EnvironmentWithoutSecrets: a command sees none of the
// variables acpd reads credentials from — provider keys, the configured
// key and token variables, ACPD_*, the OTLP headers, names that say they
// hold a secret — in every way a command runs: the spawn server, the
// per-command helper, the editor's terminal (whose environment acpd can
// only add to), and with the sandbox off. A variable passed deliberately
// and the ordinary ones still arrive.
func TestRunShellCommand_EnvironmentWithoutSecrets(t *testing.T) {
	secrets := map[string]string{
		"OPENAI_API_KEY":             "sk-openai-secret",
		"ANTHROPIC_API_KEY":          "sk-ant-secret",
		"LLM_ACCESS":                 "configured-key-secret",
		"SERVE_BEARER":               "serve-token-secret",
		"ACPD_SERVER_TOKEN":          "acpd-token-secret",
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=otel-secret",
		"GITHUB_TOKEN":               "ghp-secret",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("GH_TOKEN", "passed-on-purpose")
	t.Setenv("ORDINARY_SETTING", "kept")
	envPolicy := sandbox.EnvPolicy{Drop: []string{"LLM_ACCESS", "SERVE_BEARER"}, Pass: []string{"GH_TOKEN"}}
	for _, tc := range []struct {
		name     string
		mode     sandbox.Mode
		terminal bool
		noServer bool
	}{
		{"spawn server", sandbox.ModeRequired, false, false},
		{"per-command helper", sandbox.ModeRequired, false, true},
		{"editor terminal", sandbox.ModeRequired, true, false},
		{"sandbox off", sandbox.ModeOff, false, false},
		{"sandbox off, editor terminal", sandbox.ModeOff, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mode != sandbox.ModeOff {
				sandboxtest.Require(t)
			}
			w := newWorkspace(t)
			p := &sandbox.Policy{Mode: tc.mode, Helper: mustExe(t), TempRoot: t.TempDir(), CacheDir: filepath.Join(t.TempDir(), "cache"),
				Env: envPolicy, NoSpawnServer: tc.noServer}
			w.env.Sandbox = p.NewSession(w.env.Roots)
			t.Cleanup(func() { w.env.Sandbox.Close() })
			lt := &localTerminals{}
			if tc.terminal {
				fc := &fakeClient{t: t}
				lt.install(fc)
				w.env.Client, w.env.Caps = fc, acp.ClientCapabilities{Terminal: true}
				w.env.Update = func(context.Context, acp.ToolCallUpdate) error { return nil }
			}
			_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "env; echo end-of-env"})
			require.NoError(t, res.Err)
			out := res.LLMContent
			require.Contains(t, out, "end-of-env")
			for k, v := range secrets {
				assert.NotContains(t, out, v, "%s reached the command", k)
			}
			assert.Contains(t, out, "GH_TOKEN=passed-on-purpose")
			assert.Contains(t, out, "ORDINARY_SETTING=kept")
			if tc.terminal {
				require.Len(t, lt.creates, 1)
				sent := envText(lt.creates[0].Env)
				for _, v := range secrets {
					assert.NotContains(t, sent, v, "no secret is sent to the editor either")
				}
				assert.Contains(t, sent, "OPENAI_API_KEY=\n", "blanked in the terminal's environment")
			}
			if tc.mode == sandbox.ModeOff {
				assert.NotContains(t, out, "[sandbox", out)
			} else {
				assert.True(t, strings.Contains(out, "TMPDIR="), "confined: %s", out)
			}
		})
	}
}
