package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/responses/responsestest"
)

// guardCodexDir pins codex-acp 0.16.0; its Linux binary comes as the
// optional dependency @zed-industries/codex-acp-linux-x64.
const guardCodexDir = "testdata/guard-codex"

// codexAgent is codex-acp 0.16.0 against a scripted Responses API server
// (Codex speaks no other wire protocol), approving nothing and sandboxing
// nothing, so the guard is the only limit.
func codexAgent(t testing.TB, srv *responsestest.Server) guardAgent {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the pinned codex-acp binary is linux-x64's")
	}
	_, npm := acptest.NodeAndNPM(t, "the codex-acp guard test")
	bin := filepath.Join("@zed-industries", "codex-acp-linux-x64", "bin", "codex-acp")
	modules := acptest.NPMInstall(t, npm, guardCodexDir, bin, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	ws := newWorkspace(t)
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o755))
	config := fmt.Sprintf(`model = "scripted"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.mock]
name = "mock"
base_url = %q
wire_api = "responses"
env_key = "MOCK_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects.%q]
trust_level = "trusted"

[analytics]
enabled = false
`, srv.BaseURL(), ws)
	require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o644))
	return guardAgent{name: "codex-acp", ws: ws, cmd: []string{filepath.Join(modules, bin)},
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + codexHome, "MOCK_API_KEY=test-key",
			"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "RUST_LOG=warn", "NO_COLOR=1"}}
}

// codexScript makes srv answer every request that offers tools with one
// exec_command call of cmd(i) until n were made, then text.
func codexScript(srv *responsestest.Server, n int, cmd func(i int) string) {
	var mu sync.Mutex
	served := 0
	srv.SetResponder(func(r responsestest.Request) (responsestest.Response, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(r.Tools) == 0 || served >= n {
			return responsestest.Response{Text: "done"}, true
		}
		served++
		return responsestest.Response{Calls: []responsestest.Call{{ID: fmt.Sprintf("call_%d", served), Name: "exec_command",
			Arguments: fmt.Sprintf(`{"cmd":%q,"yield_time_ms":250}`, cmd(served))}}}, true
	})
}

// TestGuard_CodexACP: acpd guard in front of codex-acp 0.16.0. Its exec
// calls carry per-call stamps (call_id, process_id, started_at_ms) and its
// results (rawOutput only) completed_at_ms and a duration; keyed and
// digested right, 130 identical `ls` calls stop at about 101 with
// capReason stuck under both stuck signals (under warn: warned at 101,
// stopped at 102 with stuck_after_warning), skipLoopDetection=false stops
// the sixth repeat, and a productive turn of distinct commands ends
// normally. Codex takes about a second a call here, so the turns are kept
// to what the rules need.
func TestGuard_CodexACP(t *testing.T) {
	t.Parallel()
	same := func(int) string { return "ls" }
	distinct := func(i int) string { return fmt.Sprintf("echo %d", i) }
	for _, tt := range []struct {
		name   string
		flags  []string
		n      int
		cmd    func(int) string
		reason string
		loop   string
	}{
		{"stuck", nil, 130, same, "stuck", "turn_tool_call_cap"},
		// Its results are in rawOutput only, stamped and timed per call.
		{"stuck, results", []string{"--stuck-signal", "results"}, 130, same, "stuck", "turn_tool_call_cap"},
		// Warned at call 101 (in the editor: the guard cannot reach Codex's
		// model), stopped when the same call comes again.
		{"stuck, results, warn", []string{"--stuck-signal", "results", "--loop-recovery", "warn"}, 130, same, "stuck_after_warning", "turn_tool_call_cap"},
		{"sixth repeat", []string{"--loop-detection"}, 20, same, "", "global_tool_call_duplicate"},
		{"productive", nil, 10, distinct, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := responsestest.NewServer(t)
			srv.SetLaxReasoning(true)
			a := codexAgent(t, srv)
			codexScript(srv, tt.n, tt.cmd)
			data := t.TempDir()
			g := startGuard(t, a, data, tt.flags...)
			sid := g.newSession(a.ws)
			stop, e := g.prompt(sid, "list the files")
			if tt.loop == "" {
				require.Nil(t, e, "stderr:\n%s", g.stderr.String())
				assert.Equal(t, acp.StopEndTurn, stop)
			} else {
				d := loopData(t, e)
				t.Logf("loop data: %v", d)
				assert.Equal(t, tt.loop, d["loopType"])
				if tt.reason == "stuck_after_warning" {
					assert.Equal(t, tt.reason, d["capReason"])
					assert.Equal(t, true, d["warned"])
					assert.EqualValues(t, 102, d["toolCalls"], "stopped at the repeat after the warning")
					assert.Equal(t, 1, g.warningsShown(), "the editor is shown the warning once")
				} else if tt.reason != "" {
					assert.Equal(t, tt.reason, d["capReason"])
					assert.InDelta(t, 101, d["toolCalls"], 2, "about 101")
				} else {
					assert.EqualValues(t, 6, d["repeatCount"])
				}
			}
			// What the guard recorded is keyed as it counted: one key for
			// the identical calls, one per distinct call.
			g.closeAndCheck()
			distinct, maxRepeat := statsKeys(t, a, data)
			if tt.loop == "" {
				assert.Equal(t, tt.n, distinct, "acpd stats: a key per distinct call")
			} else {
				assert.Equal(t, 1, distinct, "acpd stats: one key for the identical calls")
				assert.EqualValues(t, loopData(t, e)["maxKeyRepeat"], maxRepeat)
			}
			if testing.Verbose() {
				g.mu.Lock()
				for i, u := range g.updates {
					if i < 6 && strings.Contains(string(u), "tool_call") {
						t.Logf("update: %s", u)
					}
				}
				g.mu.Unlock()
			}
		})
	}
}
