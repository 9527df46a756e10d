package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/anthropic/anthropictest"
)

// guardClaudeDir pins claude-agent-acp 0.23.1 (with the Claude Code it runs,
// @anthropic-ai/claude-agent-sdk 0.2.83).
const guardClaudeDir = "testdata/guard-claude"

// claudeAgent is claude-agent-acp 0.23.1 against a scripted Messages API
// server, with its home and configuration in temporary folders and every
// request Claude Code makes besides the model's switched off by env. Only
// loopback bypasses the proxy, a loopback listener that refuses and
// records whatever reaches it: the test fails if anything did.
func claudeAgent(t testing.TB, srv *anthropictest.Server) guardAgent {
	t.Helper()
	var mu sync.Mutex
	var outside []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		outside = append(outside, r.Method+" "+r.Host+r.URL.Path)
		mu.Unlock()
		http.Error(w, "no network in tests", http.StatusForbidden)
	}))
	t.Cleanup(func() {
		proxy.Close()
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, outside, "requests outside loopback")
	})
	node, npm := acptest.NodeAndNPM(t, "the claude-agent-acp guard test")
	entry := filepath.Join("@zed-industries", "claude-agent-acp", "dist", "index.js")
	modules := acptest.NPMInstall(t, npm, guardClaudeDir, entry, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	ws := newWorkspace(t)
	home := t.TempDir()
	config := filepath.Join(home, ".claude")
	require.NoError(t, os.MkdirAll(config, 0o755))
	return guardAgent{name: "claude-agent-acp", ws: ws, cmd: []string{node, filepath.Join(modules, entry)},
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CLAUDE_CONFIG_DIR=" + config,
			"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
			"XDG_STATE_HOME=" + filepath.Join(home, ".state"), "TMPDIR=" + t.TempDir(),
			"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=test-key",
			"ANTHROPIC_MODEL=claude-sonnet-4-5", "ANTHROPIC_SMALL_FAST_MODEL=claude-haiku-4-5",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
			"DISABLE_ERROR_REPORTING=1", "DISABLE_BUG_COMMAND=1", "DISABLE_COST_WARNINGS=1",
			"CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1", "CLAUDE_CODE_ENABLE_TELEMETRY=0",
			// Simple mode: without it Claude Code 2.x fetches the plugin
			// marketplace's security list from GitHub at every start, which
			// no setting above switches off.
			"CLAUDE_CODE_SIMPLE=1",
			"HTTP_PROXY=" + proxy.URL, "HTTPS_PROXY=" + proxy.URL, "http_proxy=" + proxy.URL, "https_proxy=" + proxy.URL,
			"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
			// Claude Code refuses to run as root outside a sandbox.
			"IS_SANDBOX=1", "NO_COLOR=1"}}
}

// claudeScript makes srv answer every request that offers tools with one
// Read call of args(i) until n were made, then text; side requests
// (without tools) get text.
func claudeScript(srv *anthropictest.Server, ws string, n int, args func(i int) string) {
	var mu sync.Mutex
	served := 0
	srv.SetResponder(func(r anthropictest.Request) (anthropictest.Response, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(r.Tools) == 0 || served >= n {
			return anthropictest.Response{Text: "done"}, true
		}
		served++
		// Claude Code turns thinking on; the server then requires each
		// tool-calling answer's signed thinking back, as the API does.
		return anthropictest.Response{Thinking: "Reading the file.", ToolCalls: []anthropictest.ToolCall{{ID: fmt.Sprintf("toolu_%d", served), Name: "Read",
			Arguments: fmt.Sprintf(`{"file_path":%q,%s}`, filepath.Join(ws, "target.txt"), args(served))}}}, true
	})
}

// TestGuard_ClaudeAgentACP: acpd guard in front of claude-agent-acp 0.23.1.
// Its first frame of a call has rawInput {} and the input follows in a
// status-less tool_call_update; keyed on the full input, 130 identical Read
// calls stop at about 101 with capReason stuck and maxKeyRepeat 101 under
// both stuck signals (under warn: warned at 101, stopped at 102 with
// capReason stuck_after_warning), skipLoopDetection=false stops the sixth
// repeat, and a productive turn of distinct reads ends normally.
func TestGuard_ClaudeAgentACP(t *testing.T) {
	t.Parallel()
	same := func(int) string { return `"offset":1,"limit":1` }
	distinct := func(i int) string { return fmt.Sprintf(`"offset":%d,"limit":1`, i) }
	for _, tt := range []struct {
		name   string
		flags  []string
		n      int
		args   func(int) string
		reason string
		loop   string
	}{
		{"stuck", nil, 130, same, "stuck", "turn_tool_call_cap"},
		// Its results come as tool_call_update content text.
		{"stuck, results", []string{"--stuck-signal", "results"}, 130, same, "stuck", "turn_tool_call_cap"},
		// Warned at call 101 (the warning is the editor's: the guard cannot
		// reach Claude's model), stopped when the same call comes again.
		// The placeholder frame of call 102 must not count as a new call.
		{"stuck, results, warn", []string{"--stuck-signal", "results", "--loop-recovery", "warn"}, 130, same, "stuck_after_warning", "turn_tool_call_cap"},
		{"sixth repeat", []string{"--loop-detection"}, 20, same, "", "global_tool_call_duplicate"},
		{"productive", nil, 10, distinct, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := anthropictest.NewServer(t)
			a := claudeAgent(t, srv)
			claudeScript(srv, a.ws, tt.n, tt.args)
			data := t.TempDir()
			g := startGuard(t, a, data, tt.flags...)
			sid := g.newSession(a.ws)
			stop, e := g.prompt(sid, "read the file")
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
					assert.EqualValues(t, 102, d["maxKeyRepeat"])
					assert.Equal(t, 1, g.warningsShown(), "the editor is shown the warning once")
				} else if tt.reason != "" {
					assert.Equal(t, tt.reason, d["capReason"])
					assert.InDelta(t, 101, d["toolCalls"], 2, "about 101")
					assert.EqualValues(t, 101, d["maxKeyRepeat"])
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
			// The adapter's placeholder first frame is what this test is
			// about: the crossing call must not be keyed on it.
			g.mu.Lock()
			placeholder := false
			for _, u := range g.updates {
				var n struct {
					Update struct {
						SessionUpdate string          `json:"sessionUpdate"`
						RawInput      json.RawMessage `json:"rawInput"`
					} `json:"update"`
				}
				if json.Unmarshal(u, &n) == nil && n.Update.SessionUpdate == "tool_call" {
					placeholder = string(n.Update.RawInput) == "{}"
					break
				}
			}
			g.mu.Unlock()
			assert.True(t, placeholder, "the first tool_call frame has rawInput {}")
			for _, r := range srv.Requests() {
				assert.Empty(t, r.Rejected, "a request the API would reject")
			}
			if testing.Verbose() {
				g.mu.Lock()
				for i, u := range g.updates {
					if i < 8 && strings.Contains(string(u), "tool_call") {
						t.Logf("update: %s", u)
					}
				}
				g.mu.Unlock()
			}
		})
	}
}
