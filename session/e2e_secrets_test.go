package session_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// e2eSecrets are the variables the daemon (and, for the terminal test,
// the editor) holds that no command may see.
func e2eSecrets() map[string]string {
	return map[string]string{
		"OPENAI_API_KEY":             "sk-openai-e2e-secret",
		"LLM_ACCESS":                 "configured-key-e2e-secret",
		"SERVE_BEARER":               "serve-token-e2e-secret",
		"ACPD_SERVER_TOKEN":          "acpd-token-e2e-secret",
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=otel-e2e-secret",
		"GITHUB_TOKEN":               "ghp-e2e-secret",
	}
}

// secretsConfig names a key variable and a token variable of its own, and
// passes GH_TOKEN on purpose.
func secretsConfig(t *testing.T) string {
	cfg := filepath.Join(t.TempDir(), "acpd.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(`[model]
apiKeyEnv = "LLM_ACCESS"
[server]
tokenEnv = "SERVE_BEARER"
[tools]
sandboxPassEnv = ["GH_TOKEN"]
`), 0o600))
	return cfg
}

// TestE2E_Sandbox_CommandsDoNotInheritSecrets: the built acpd, given a
// provider key, a configured key variable, a serve token variable, OTLP
// headers and a GitHub token, runs `env` for the model: none of them is in
// the output, confined or not, while a variable passed on purpose
// (tools.sandboxPassEnv) and an ordinary one are.
func TestE2E_Sandbox_CommandsDoNotInheritSecrets(t *testing.T) {
	t.Parallel()
	secrets, cfg := e2eSecrets(), secretsConfig(t)
	var env []string
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	env = append(env, "GH_TOKEN=passed-on-purpose", "ORDINARY_SETTING=kept")
	for _, tc := range []struct {
		name, sandbox string
		caps          acp.ClientCapabilities
	}{
		{"confined", "required", localCaps},
		{"sandbox off", "off", localCaps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sandbox != "off" {
				sandboxtest.Require(t)
			}
			t.Parallel()
			ws := t.TempDir()
			d := startDaemonEnv(t, ws, t.TempDir(), env, nil, nil, "--config", cfg, "--sandbox", tc.sandbox)
			_, results := shellTurn(t, d, tc.caps, []string{"env; echo end-of-env"})
			out := results[0]
			require.Contains(t, out, "end-of-env")
			for k, v := range secrets {
				assert.NotContains(t, out, v, "%s reached the command", k)
			}
			assert.Contains(t, out, "GH_TOKEN=passed-on-purpose")
			assert.Contains(t, out, "ORDINARY_SETTING=kept")
		})
	}
}

// TestE2E_Sandbox_TerminalCommandsDoNotInheritSecrets: the same through the
// editor's terminal, whose environment is the editor's: the editor (this
// test) holds the secrets too. acpd sends them empty, and a confined
// command's helper removes them.
func TestE2E_Sandbox_TerminalCommandsDoNotInheritSecrets(t *testing.T) {
	secrets, cfg := e2eSecrets(), secretsConfig(t)
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	for _, mode := range []string{"required", "off"} {
		t.Run(mode, func(t *testing.T) {
			if mode != "off" {
				sandboxtest.Require(t)
			}
			d := startDaemonEnv(t, t.TempDir(), t.TempDir(), nil, nil, nil, "--config", cfg, "--sandbox", mode)
			_, results := shellTurn(t, d, terminalCaps, []string{"env; echo end-of-env"})
			out := results[0]
			require.Contains(t, out, "end-of-env")
			for k, v := range secrets {
				assert.NotContains(t, out, v, "%s reached the command", k)
			}
		})
	}
}

// TestE2E_Sandbox_SecretsUnreadable: the built acpd's commands cannot read
// the user's SSH key and cloud credentials, acpd's own configuration file,
// another session's transcript or the serve token — not by their paths,
// not by searching the folders holding them — locally and in the editor's
// terminal, while the workspace and the rest of the home folder stay
// readable.
func TestE2E_Sandbox_SecretsUnreadable(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	for _, caps := range []acp.ClientCapabilities{localCaps, terminalCaps} {
		t.Run(fmt.Sprintf("terminal=%v", caps.Terminal), func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			home, configHome, ws := filepath.Join(root, "home"), filepath.Join(root, "config"), filepath.Join(root, "home", "proj")
			files := map[string]string{
				filepath.Join(home, ".ssh", "id_rsa"):            "ssh-key-secret",
				filepath.Join(home, ".aws", "credentials"):       "aws-secret",
				filepath.Join(configHome, "acpd", "config.toml"): "# config-secret\n",
				filepath.Join(home, "notes.txt"):                 "home-readable",
				filepath.Join(ws, "main.go"):                     "workspace-readable",
			}
			for p, s := range files {
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
				require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
			}
			d := startDaemonEnv(t, ws, configHome, []string{"HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache")}, nil, nil, "--sandbox", "required")
			token := filepath.Join(d.dataDir, "server.token")
			require.NoError(t, os.WriteFile(token, []byte("serve-token-secret-0123456789\n"), 0o600))
			// Another session, whose transcript holds the prompt.
			d.model.Add(modeltest.Response{Text: "noted"})
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			_, err := d.cc.InitializeWith(ctx, caps)
			require.NoError(t, err)
			other, err := d.cc.NewSession(ctx, ws)
			require.NoError(t, err)
			_, err = d.cc.Prompt(ctx, other, "remember transcript-secret-phrase")
			require.NoError(t, err)

			// Absolute paths: the editor's terminal has the editor's HOME.
			read := `H=` + home + `
cat $H/.ssh/id_rsa $H/.aws/credentials ` + filepath.Join(configHome, "acpd", "config.toml") + " " + token + `
grep -r -h transcript-secret ` + d.dataDir + ` $H/.ssh $H/.aws; for f in $(find ` + d.dataDir + ` -type f); do cat "$f"; done
cat $H/notes.txt main.go; echo; echo end`
			_, results := shellTurn(t, d, caps, []string{read})
			out := results[0]
			require.Contains(t, out, "end")
			for _, secret := range []string{"ssh-key-secret", "aws-secret", "config-secret", "serve-token-secret", "transcript-secret-phrase"} {
				assert.NotContains(t, out, secret)
			}
			assert.Contains(t, out, "Permission denied")
			assert.Contains(t, out, "home-readable")
			assert.Contains(t, out, "workspace-readable")
		})
	}
}

// TestE2E_Sandbox_NoSharedShm: where the kernel gives acpd no namespaces
// (simulated), two workspaces' confined commands do not share a writable
// /dev/shm: neither can write the machine's, so what one would plant there
// the other cannot see. (With namespaces each session's /dev/shm is its
// own: TestRemote_TwoWorkspaces.)
func TestE2E_Sandbox_NoSharedShm(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	marker := fmt.Sprintf("acpd-e2e-shm-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = os.Remove(filepath.Join("/dev/shm", marker)) })
	env := []string{"ACPD_SANDBOX_NO_NAMESPACES=1"}
	for _, mode := range []string{"auto", "required"} {
		a := startDaemonEnv(t, t.TempDir(), t.TempDir(), env, nil, nil, "--sandbox", mode)
		_, results := shellTurn(t, a, localCaps, []string{"echo planted > /dev/shm/" + marker + " && echo wrote"})
		assert.NotContains(t, results[0], "\nwrote", "mode %s: %s", mode, results[0])
		assert.Contains(t, results[0], "Permission denied")
		assert.Contains(t, results[0], "/dev/shm is not writable")
		assert.NoFileExists(t, filepath.Join("/dev/shm", marker))
	}
}
