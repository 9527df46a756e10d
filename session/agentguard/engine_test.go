package agentguard

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/stats"
	"github.com/acpd/acpd/session/telemetry"
	"github.com/acpd/acpd/session/telemetry/telemetrytest"
)

func TestMain(m *testing.M) {
	// `<test binary> fake-agent MODE [ARG]` is the fake agent as a real
	// process, for the lifecycle tests.
	if len(os.Args) > 2 && os.Args[1] == "fake-agent" {
		arg := ""
		if len(os.Args) > 3 {
			arg = os.Args[3]
		}
		fakeAgentMain(os.Args[2], arg)
		return
	}
	os.Exit(m.Run())
}

// shape plays one tool call the way one kind of agent sends it (guard.md
// §2); n numbers the call, args is the call's real input.
type shape func(a *fakeAgent, sid string, n int, args string)

// The shapes of spec §2. Each ends with the call completed.
var shapes = map[string]shape{
	// qwen-code 0.24: full rawInput and _meta.toolName on the first frame.
	"full first": func(a *fakeAgent, sid string, n int, args string) {
		id := fmt.Sprintf("read_file-%d", n)
		a.toolCall(sid, id, `,"title":"ReadFile: x","kind":"read","status":"in_progress","rawInput":`+args+`,"_meta":{"toolName":"read_file"}`)
		a.toolUpdate(sid, id, `,"status":"completed"`)
	},
	// Claude adapter 0.16: empty rawInput first, then a second tool_call with
	// the same id carrying the full input, then updates.
	"empty then full": func(a *fakeAgent, sid string, n int, args string) {
		id := fmt.Sprintf("toolu_%08d", n)
		a.toolCall(sid, id, `,"title":"Read File","kind":"read","status":"pending","rawInput":{},"_meta":{"claudeCode":{"toolName":"Read"}}`)
		a.toolCall(sid, id, `,"title":"Read x","kind":"read","status":"pending","rawInput":`+args+`,"_meta":{"claudeCode":{"toolName":"Read"}}`)
		a.toolUpdate(sid, id, `,"status":"in_progress"`)
		a.toolUpdate(sid, id, `,"status":"completed","content":[{"type":"content","content":{"type":"text","text":"ok"}}]`)
	},
	// OpenCode 1.18: a partial rawInput while pending, the full one with the
	// first in_progress update, repeated.
	"partial then full": func(a *fakeAgent, sid string, n int, args string) {
		id := fmt.Sprintf("call_%d", n)
		a.toolCall(sid, id, `,"title":"bash","kind":"execute","status":"pending","rawInput":{"cwd":"/w"}`)
		a.toolUpdate(sid, id, `,"status":"in_progress","rawInput":`+args)
		a.toolUpdate(sid, id, `,"status":"in_progress","rawInput":`+args)
		a.toolUpdate(sid, id, `,"status":"completed"`)
	},
	// qwen-code's preparing phase: {} with _meta.phase, then the start as
	// a second tool_call of the same id.
	"preparing": func(a *fakeAgent, sid string, n int, args string) {
		id := fmt.Sprintf("call-%d", n)
		a.toolCall(sid, id, `,"title":"read_file","kind":"read","status":"pending","rawInput":{},"_meta":{"toolName":"read_file","phase":"preparing"}`)
		a.toolCall(sid, id, `,"title":"ReadFile: x","kind":"read","status":"pending","rawInput":`+args+`,"_meta":{"toolName":"read_file"}`)
		a.toolUpdate(sid, id, `,"status":"completed"`)
	},
	// Gemini CLI: a call needing approval sends no tool_call, only the
	// permission request without rawInput, then an update when done. The
	// input is the title.
	"permission only": func(a *fakeAgent, sid string, n int, args string) {
		id := fmt.Sprintf("run_shell_command-17123456789%02d-%d", n%100, n)
		if a.askPermission(sid, fmt.Sprintf(`{"toolCallId":%q,"title":%s,"kind":"execute"}`, id, args)) != "allow" {
			return
		}
		a.toolUpdate(sid, id, `,"status":"completed"`)
	},
	// Codex: shell rawInput is the whole event with per-call ids.
	"volatile ids": func(a *fakeAgent, sid string, n int, args string) {
		id := fmt.Sprintf("call_%06d", n)
		var in map[string]any
		_ = json.Unmarshal([]byte(args), &in)
		in["call_id"], in["turn_id"], in["process_id"] = id, fmt.Sprintf("turn-%d", n), 4000+n
		in["events"] = []any{map[string]any{"id": id}}
		b, _ := json.Marshal(in)
		a.toolCall(sid, id, `,"title":"Tool: shell","kind":"execute","status":"in_progress","rawInput":`+string(b))
		a.toolUpdate(sid, id, `,"status":"completed"`)
	},
	// codex-acp 0.16.0 (measured, guard.md): the exec event as rawInput,
	// already in_progress, no _meta and no name; started_at_ms is the
	// agent's clock at the call, different on every call.
	"codex 0.16": func(a *fakeAgent, sid string, n int, args string) {
		id := fmt.Sprintf("call_%d_0_0", n)
		var in map[string]any
		_ = json.Unmarshal([]byte(args), &in)
		in["call_id"], in["turn_id"], in["process_id"] = id, "01a2f3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b", fmt.Sprint(27000+n)
		in["started_at_ms"] = time.Now().UnixMilli() + int64(n)
		in["cwd"], in["source"] = "/tmp/ws", "unified_exec_startup"
		in["parsed_cmd"] = []any{map[string]any{"type": "unknown", "cmd": in["command"]}}
		b, _ := json.Marshal(in)
		a.toolCall(sid, id, `,"title":"Run cat","kind":"execute","status":"in_progress","rawInput":`+string(b))
		a.toolUpdate(sid, id, `,"status":"completed","rawOutput":{"exit_code":0,"completed_at_ms":`+fmt.Sprint(time.Now().UnixMilli())+`}`)
	},
	// claude-agent-acp 0.23.1 (measured, guard.md): rawInput {} and a
	// generic title first, the full input in a tool_call_update with no
	// status, then in_progress and completed.
	"claude 0.23": func(a *fakeAgent, sid string, n int, args string) {
		id := fmt.Sprintf("toolu_01%010d", n)
		a.toolCall(sid, id, `,"title":"Terminal","kind":"execute","status":"pending","rawInput":{},"_meta":{"claudeCode":{"toolName":"Bash"}}`)
		a.toolUpdate(sid, id, `,"title":"cat x","rawInput":`+args+`,"_meta":{"claudeCode":{"toolName":"Bash"}}`)
		a.toolUpdate(sid, id, `,"status":"in_progress"`)
		a.toolUpdate(sid, id, `,"status":"completed","content":[{"type":"content","content":{"type":"text","text":"ok"}}]`)
	},
}

// argsFor is the input of call i: the same for every call when same.
func argsFor(i int, same bool) string {
	if same {
		return `"cat same.txt"`
	}
	return fmt.Sprintf(`"cat file-%d.txt"`, i)
}

// inputFor wraps argsFor as a JSON object, except for the permission-only
// shape whose "input" is the title.
func inputFor(shapeName string, i int, same bool) string {
	if shapeName == "permission only" {
		return argsFor(i, same)
	}
	return `{"command":` + argsFor(i, same) + `}`
}

// calls is a prompt script: n calls of one shape, then end_turn.
func calls(s shape, name string, n int, same func(i int) bool) func(a *fakeAgent, p *prompt) {
	return func(a *fakeAgent, p *prompt) {
		for i := 1; i <= n; i++ {
			select {
			case <-p.cancelled:
				a.answer(p, "cancelled")
				return
			default:
			}
			s(a, p.sessionID, i, inputFor(name, i, same(i)))
		}
		a.answer(p, "end_turn")
	}
}

// TestShapes: every shape of spec §2 is counted once per call and keyed on
// its real input: six identical calls stop on the sixth with
// skipLoopDetection false, six distinct ones do not, and an explicit cap
// of 3 stops the fourth call whatever the shape.
func TestShapes(t *testing.T) {
	t.Parallel()
	for name, s := range shapes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dup := func(int) bool { return true }
			distinct := func(int) bool { return false }

			h := newHarness(t, Options{SkipLoopDetection: false}, func(a *fakeAgent) { a.onPrompt = calls(s, name, 6, distinct) })
			sid := h.session()
			r := h.prompt(sid, "distinct")
			require.Nil(t, r.Error, r.line)
			assert.Equal(t, "end_turn", r.StopReason)

			h.agent.onPrompt = calls(s, name, 8, dup)
			d := h.prompt(sid, "same").loopData(t)
			assert.Equal(t, string(loopdetect.LoopGlobalToolCallDuplicate), d["loopType"])
			assert.EqualValues(t, 6, d["toolCalls"], "counted once per call")
			assert.EqualValues(t, 6, d["maxKeyRepeat"])

			h.agent.onPrompt = calls(s, name, 10, distinct)
			h2 := newHarness(t, Options{Cap: loopdetect.Cap{Max: 3, Explicit: true}}, func(a *fakeAgent) { a.onPrompt = calls(s, name, 10, distinct) })
			sid2 := h2.session()
			d = h2.prompt(sid2, "many").loopData(t)
			assert.Equal(t, "explicit", d["capReason"])
			assert.EqualValues(t, 4, d["toolCalls"])
		})
	}
}

// TestStopFactsIncludeTheCrossingCall: when the call that crosses a cap
// arrives with its input complete (qwen-code, Codex, acpd itself), the
// stop's maxKeyRepeat counts that call too, as the daemon counts the batch
// it stops and as acpd stats later reports the turn.
func TestStopFactsIncludeTheCrossingCall(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"full first", "volatile ids"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dup := func(int) bool { return true }
			h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 3, Explicit: true}}, func(a *fakeAgent) { a.onPrompt = calls(shapes[name], name, 10, dup) })
			d := h.prompt(h.session(), "same").loopData(t)
			assert.Equal(t, "explicit", d["capReason"])
			assert.EqualValues(t, 4, d["toolCalls"])
			assert.EqualValues(t, 4, d["maxKeyRepeat"], "the crossing call's repeat is counted")
		})
	}
}

// TestCrossingCallKeyedOnFullInput: a stuck turn under the default cap
// stops at call 101 with capReason stuck, and the call that crosses the
// cap is keyed on its real input even when its first frame held a
// placeholder: maxKeyRepeat is 101 and acpd stats sees one key.
func TestCrossingCallKeyedOnFullInput(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"claude 0.23", "codex 0.16", "empty then full", "partial then full", "preparing"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dup := func(int) bool { return true }
			h := newHarness(t, Options{SkipLoopDetection: true}, func(a *fakeAgent) { a.onPrompt = calls(shapes[name], name, 120, dup) })
			d := h.prompt(h.session(), "same").loopData(t)
			assert.Equal(t, "stuck", d["capReason"])
			assert.EqualValues(t, 101, d["toolCalls"])
			assert.EqualValues(t, 101, d["maxKeyRepeat"], "the crossing call is keyed on its full input")
			h.eng.Close()
			rep, err := stats.Collect(stats.Options{DataDir: h.data})
			require.NoError(t, err)
			require.Len(t, rep.Turns, 1)
			assert.Equal(t, 1, rep.Turns[0].DistinctKeys)
			assert.Equal(t, 101, rep.Turns[0].MaxRepeat)
		})
	}
}

// TestCancelMisbehaviour: an agent that answers the cancel with end_turn,
// and one that never answers; the editor gets the loop error either way,
// at once or after the grace period, and the next prompt works.
func TestCancelMisbehaviour(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		onCancel func(a *fakeAgent, p *prompt)
		minWait  time.Duration
	}{
		{"answers end_turn", func(a *fakeAgent, p *prompt) { a.answer(p, "end_turn") }, 0},
		{"answers cancelled", func(a *fakeAgent, p *prompt) { a.answer(p, "cancelled") }, 0},
		{"never answers", func(*fakeAgent, *prompt) {}, 300 * time.Millisecond},
		{"answers late", func(a *fakeAgent, p *prompt) { time.Sleep(600 * time.Millisecond); a.answer(p, "end_turn") }, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 2, Explicit: true}, CancelGrace: 300 * time.Millisecond}, nil)
			h.agent.onPrompt = func(a *fakeAgent, p *prompt) {
				for i := 1; ; i++ {
					shapes["full first"](a, p.sessionID, i, fmt.Sprintf(`{"path":"f%d"}`, i))
					select {
					case <-p.cancelled:
						tt.onCancel(a, p)
						return
					case <-time.After(10 * time.Millisecond):
					}
					if i > 50 {
						a.answer(p, "end_turn")
						return
					}
				}
			}
			sid := h.session()
			start := time.Now()
			d := h.prompt(sid, "go").loopData(t)
			assert.GreaterOrEqual(t, time.Since(start), tt.minWait)
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.Equal(t, "explicit", d["capReason"])
			assert.EqualValues(t, 3, d["toolCalls"])

			// A late answer is dropped; the next prompt is the agent's.
			h.agent.onPrompt = func(a *fakeAgent, p *prompt) { a.answer(p, "end_turn") }
			time.Sleep(400 * time.Millisecond)
			r := h.prompt(sid, "again")
			assert.Nil(t, r.Error, r.line)
			assert.Equal(t, "end_turn", r.StopReason)
			for _, l := range h.got() {
				assert.NotContains(t, l, `"stopReason"`, "no second answer to the stopped prompt reaches the editor")
			}
		})
	}
}

// TestStopRefusesPermissions: a permission request pending at the editor
// when a later call crosses the cap is answered cancelled to the agent and
// withdrawn from the editor with $/cancel_request; the editor's late answer
// is dropped; permission requests after the stop never reach the editor.
func TestStopRefusesPermissions(t *testing.T) {
	t.Parallel()
	outcomes := make(chan string, 4)
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 2, Explicit: true}, CancelGrace: 2 * time.Second}, nil)
	h.permission = func(json.RawMessage) string { return "" } // the user is away
	h.agent.onPrompt = func(a *fakeAgent, p *prompt) {
		shapes["full first"](a, p.sessionID, 1, `{"path":"a"}`)
		go func() {
			outcomes <- a.askPermission(p.sessionID, `{"toolCallId":"w2","title":"Write b","kind":"edit","rawInput":{"path":"b"}}`)
		}()
		time.Sleep(100 * time.Millisecond)
		// A third call crosses the cap while the permission is pending.
		shapes["full first"](a, p.sessionID, 3, `{"path":"c"}`)
		<-p.cancelled
		outcomes <- a.askPermission(p.sessionID, `{"toolCallId":"w4","title":"Write d","kind":"edit","rawInput":{"path":"d"}}`)
		a.answer(p, "cancelled")
	}
	sid := h.session()
	d := h.prompt(sid, "go").loopData(t)
	assert.EqualValues(t, 3, d["toolCalls"])
	assert.Equal(t, "cancelled", <-outcomes, "the pending permission is answered cancelled toward the agent")
	assert.Equal(t, "cancelled", <-outcomes, "a permission after the stop is refused")

	var withdrawn string
	perms := 0
	for _, l := range h.got() {
		if strings.Contains(l, `"session/request_permission"`) {
			perms++
		}
		if strings.Contains(l, `"$/cancel_request"`) {
			withdrawn = l
		}
	}
	assert.Equal(t, 1, perms, "only the permission asked before the stop reached the editor")
	h.mu.Lock()
	held := append([]json.RawMessage(nil), h.held...)
	h.mu.Unlock()
	require.Len(t, held, 1)
	assert.JSONEq(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%s}}`, held[0]), withdrawn)

	// The editor answers the withdrawn request anyway: it must not reach
	// the agent, which already has its answer.
	before := len(h.agent.seenLines())
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`, held[0]))
	h.call("_acpd/ping", `{}`) // a round trip: everything before it has been relayed
	for _, l := range h.agent.seenLines()[before:] {
		assert.NotContains(t, l, `"optionId":"allow"`)
	}
}

// TestLoadReplayIsNotATurn: history replayed during session/load is not
// counted; the next prompt is.
func TestLoadReplayIsNotATurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 5, Explicit: true}}, func(a *fakeAgent) {
		a.onLoad = func(a *fakeAgent, sid string) {
			for i := range 50 {
				shapes["full first"](a, sid, i, `{"path":"same"}`)
			}
		}
		a.onPrompt = calls(shapes["full first"], "full first", 5, func(int) bool { return true })
	})
	h.call("initialize", `{"protocolVersion":1}`)
	l := h.call("session/load", fmt.Sprintf(`{"sessionId":"old-1","cwd":%q,"mcpServers":[]}`, t.TempDir()))
	assert.Contains(t, l, `"result":{}`)
	r := h.prompt("old-1", "go on")
	assert.Nil(t, r.Error, r.line)
	assert.Equal(t, "end_turn", r.StopReason)
	h.agent.onPrompt = calls(shapes["full first"], "full first", 6, func(int) bool { return false })
	assert.EqualValues(t, 6, h.prompt("old-1", "more").loopData(t)["toolCalls"])
}

// TestSessionsAreSeparate: two sessions on one connection count apart.
func TestSessionsAreSeparate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 4, Explicit: true}}, func(a *fakeAgent) {
		a.onPrompt = calls(shapes["full first"], "full first", 3, func(int) bool { return false })
	})
	s1, s2 := h.session(), h.session()
	for range 2 {
		for _, s := range []string{s1, s2} {
			r := h.prompt(s, "go")
			assert.Nil(t, r.Error, r.line)
		}
	}
}

// TestRepeatedFailures: with the repeated-failure guard enforcing, a tool
// that keeps failing stops the turn (repeated_tool_execution_failure); a
// failure the user caused by refusing permission is not a tool failure.
func TestRepeatedFailures(t *testing.T) {
	t.Parallel()
	// Every call reads a missing file and fails.
	failing := func(a *fakeAgent, sid string, n int, args string) {
		id := fmt.Sprintf("c%d", n)
		a.toolCall(sid, id, `,"title":"read","kind":"read","status":"in_progress","rawInput":`+args+`,"_meta":{"toolName":"read_file"}`)
		a.toolUpdate(sid, id, `,"status":"failed"`)
	}
	fail := func(n int) func(a *fakeAgent, p *prompt) {
		return calls(failing, "failing", n, func(int) bool { return false })
	}
	h := newHarness(t, Options{FailureGuard: loopdetect.FailureModeEnforce}, func(a *fakeAgent) { a.onPrompt = fail(20) })
	sid := h.session()
	d := h.prompt(sid, "go").loopData(t)
	assert.Equal(t, string(loopdetect.LoopRepeatedToolExecutionFailure), d["loopType"])
	assert.EqualValues(t, loopdetect.RepeatedToolFailureThreshold+1, d["toolCalls"])

	shadow := newHarness(t, Options{FailureGuard: loopdetect.FailureModeShadow}, func(a *fakeAgent) { a.onPrompt = fail(20) })
	r := shadow.prompt(shadow.session(), "go")
	assert.Nil(t, r.Error, "shadow mode only logs")

	rejected := newHarness(t, Options{FailureGuard: loopdetect.FailureModeEnforce}, func(a *fakeAgent) {
		a.onPrompt = func(a *fakeAgent, p *prompt) {
			for i := 1; i <= 20; i++ {
				id := fmt.Sprintf("w%d", i)
				a.askPermission(p.sessionID, fmt.Sprintf(`{"toolCallId":%q,"title":"Write","kind":"edit","rawInput":{"path":"f%d"}}`, id, i))
				a.toolUpdate(p.sessionID, id, `,"status":"failed"`)
			}
			a.answer(p, "end_turn")
		}
	})
	rejected.permission = func(json.RawMessage) string { return `{"outcome":{"outcome":"selected","optionId":"reject"}}` }
	r = rejected.prompt(rejected.session(), "go")
	assert.Nil(t, r.Error, "refused calls are not tool failures: %s", r.line)
}

// TestStatsListsGuardedTurns: the guarded turns are in the data folder,
// listed by acpd stats' reader with the agent's name, and the what-if
// replay of the recorded calls agrees with what the guard decided.
func TestStatsListsGuardedTurns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Options{SkipLoopDetection: false}, func(a *fakeAgent) {
		a.name = "opencode"
		a.onPrompt = calls(shapes["partial then full"], "partial then full", 4, func(int) bool { return false })
	})
	sid := h.session()
	require.Nil(t, h.prompt(sid, "productive").Error)
	h.agent.onPrompt = calls(shapes["partial then full"], "partial then full", 9, func(int) bool { return true })
	h.prompt(sid, "stuck").loopData(t)
	h.eng.Close()

	rep, err := stats.Collect(stats.Options{DataDir: h.data})
	require.NoError(t, err)
	require.Len(t, rep.Turns, 2)
	assert.Equal(t, "opencode", rep.Turns[0].Agent)
	assert.Equal(t, 4, rep.Turns[0].ToolCalls)
	assert.Equal(t, 4, rep.Turns[0].DistinctKeys)
	assert.Equal(t, "end_turn", rep.Turns[0].Outcome)
	assert.Equal(t, "loop", rep.Turns[1].Outcome)
	assert.Equal(t, string(loopdetect.LoopGlobalToolCallDuplicate), rep.Turns[1].LoopType)
	assert.Equal(t, 6, rep.Turns[1].ToolCalls)
	assert.Equal(t, 6, rep.Turns[1].MaxRepeat)
	assert.Equal(t, "bash", rep.Turns[1].MaxRepeatTool)

	// Replaying under the guard's own settings changes nothing; with the
	// global duplicate check off the stopped turn would have gone on.
	rep, err = stats.Collect(stats.Options{DataDir: h.data, WhatIf: &stats.Settings{Cap: loopdetect.DefaultCap()}})
	require.NoError(t, err)
	assert.Nil(t, rep.Turns[0].WhatIf)
	assert.Nil(t, rep.Turns[1].WhatIf)
	rep, err = stats.Collect(stats.Options{DataDir: h.data, WhatIf: &stats.Settings{Cap: loopdetect.DefaultCap(), SkipLoopDetection: true}})
	require.NoError(t, err)
	require.NotNil(t, rep.Turns[1].WhatIf)
	assert.False(t, rep.Turns[1].WhatIf.Stops)
}

// TestTransparent: what the guard does not act on reaches the other side
// byte for byte: extension methods and _meta, $/cancel_request, the
// agent's requests to the editor and their answers, the agent's own
// initialize answer, and multi-megabyte lines in both directions.
func TestTransparent(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef", 3<<16) // 3 MiB
	fsAnswer := make(chan string, 1)
	h := newHarness(t, Options{}, func(a *fakeAgent) {
		a.onPrompt = func(a *fakeAgent, p *prompt) {
			a.send(`{"jsonrpc":"2.0","id":"fs-1","method":"fs/read_text_file","params":{"sessionId":"` + p.sessionID + `","path":"/x","_meta":{"k":[1,{"z":null}]}}}`)
			a.toolCall(p.sessionID, "big", `,"title":"Write","kind":"edit","status":"in_progress","rawInput":{"content":"`+big+`"}`)
			a.toolUpdate(p.sessionID, "big", `,"status":"completed","content":[{"type":"content","content":{"type":"text","text":"`+big+`"}}]`)
			a.send(`{"jsonrpc":"2.0","method":"_vendor/progress","params":{"sessionId":"` + p.sessionID + `","n":1e3}}`)
			a.answer(p, "end_turn")
		}
	})
	h.permission = func(json.RawMessage) string { return "" }
	init := h.call("initialize", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}},"_meta":{"zed":true}}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"agentInfo":{"name":"fake-agent","version":"1.0"},"authMethods":[]}}`, init)
	sid := h.session()

	ext := `{"jsonrpc":"2.0","id":"x-1","method":"_zed/custom","params":{"a":"\u00e9\u2028","_meta":{"b":2}}}`
	h.send(ext)
	cancelReq := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"x-1"}}`
	h.send(cancelReq)
	unknown := `{ "method" : "unknown/notification" , "jsonrpc" : "2.0" }`
	h.send(unknown)

	go func() {
		// The editor answers the agent's fs request when it arrives.
		for l := range h.raw {
			if strings.Contains(l, `"fs/read_text_file"`) {
				answer := `{"jsonrpc":"2.0","id":"fs-1","result":{"content":"` + big + `","_meta":{"m":1}}}`
				h.send(answer)
				fsAnswer <- answer
				return
			}
		}
	}()
	_, ch := h.start("session/prompt", `{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"`+big+`"}],"_meta":{"p":true}}`)
	r := parsePromptResult(t, h.await(ch))
	assert.Equal(t, "end_turn", r.StopReason)
	answer := <-fsAnswer
	h.call("_acpd/ping", `{}`) // everything sent before it has been relayed

	seen := h.agent.seenLines()
	for _, want := range []string{ext, cancelReq, unknown, answer} {
		assert.Contains(t, seen, want)
	}
	var prompt string
	for _, l := range seen {
		if strings.Contains(l, `"session/prompt"`) {
			prompt = l
		}
	}
	assert.Len(t, prompt, len(`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"`+big+`"}],"_meta":{"p":true}}}`))
	got := strings.Join(h.got(), "\n")
	assert.Contains(t, got, `{"jsonrpc":"2.0","id":"fs-1","method":"fs/read_text_file","params":{"sessionId":"`+sid+`","path":"/x","_meta":{"k":[1,{"z":null}]}}}`)
	assert.Contains(t, got, `{"jsonrpc":"2.0","method":"_vendor/progress","params":{"sessionId":"`+sid+`","n":1e3}}`)
	assert.Contains(t, got, `"text":"`+big+`"}}]}}}`)
}

// TestTelemetry: a guarded turn is exported as acpd's own are, with the
// agent's name: the invoke_agent span with the stop's loop type and cap
// reason, one execute_tool span per call under it, the tool calls per turn
// and the loop-stop counter.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	c := telemetrytest.NewCollector(t)
	tel, err := telemetry.Start(t.Context(), telemetry.Config{Enabled: true, Endpoint: c.URL(), Protocol: telemetry.ProtocolHTTP,
		ServiceVersion: "test"})
	require.NoError(t, err)
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 3, Explicit: true}, Telemetry: tel}, func(a *fakeAgent) {
		a.name = "opencode"
		a.onPrompt = calls(shapes["full first"], "full first", 10, func(int) bool { return false })
	})
	sid := h.session()
	h.prompt(sid, "go").loopData(t)
	require.NoError(t, tel.Shutdown(t.Context()))
	assert.Empty(t, c.Errors())

	turns := c.SpansNamed("invoke_agent opencode")
	require.Len(t, turns, 1, "spans: %v", c.Spans())
	a := telemetrytest.Attrs(turns[0].Attributes)
	assert.Equal(t, "opencode", a["gen_ai.agent.name"])
	assert.Equal(t, sid, a["gen_ai.conversation.id"])
	assert.Equal(t, "turn_tool_call_cap", a["loop_type"])
	assert.Equal(t, "explicit", a["cap_reason"])
	assert.Equal(t, int64(4), a["acpd.turn.tool_calls"])
	assert.NotContains(t, a, "gen_ai.provider.name", "the guard does not know the agent's provider")
	tools := c.SpansNamed("execute_tool read_file")
	require.Len(t, tools, 4)
	for _, s := range tools {
		assert.Equal(t, turns[0].SpanId, s.ParentSpanId)
	}
	assert.Equal(t, map[string]int64{"cap_reason=explicit,loop_type=turn_tool_call_cap": 1}, c.Counts("acpd.loop.stops"))
}

// TestResultsFallBackToCalls: under "results", an agent that ends its calls
// without content or rawOutput gives the guard no result to compare; the
// turn counts calls instead (a stuck turn still stops at 101) and the
// guard says so once.
func TestResultsFallBackToCalls(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return log.Write(p)
	}), nil))
	name := "full first" // completes with no content
	h := newHarness(t, Options{SkipLoopDetection: true, Logger: logger,
		Cap: loopdetect.Cap{Max: 100, Signal: loopdetect.SignalResults}},
		func(a *fakeAgent) { a.onPrompt = calls(shapes[name], name, 120, func(int) bool { return true }) })
	sid := h.session()
	d := h.prompt(sid, "same").loopData(t)
	assert.Equal(t, "stuck", d["capReason"])
	assert.EqualValues(t, 101, d["toolCalls"])
	h.agent.onPrompt = calls(shapes[name], name, 3, func(int) bool { return true })
	require.Nil(t, h.prompt(sid, "again").Error)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, strings.Count(log.String(), "falls back"), log.String())
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestWarnWithPlaceholderInput: under "warn", a call that fires the stuck
// signal with a placeholder first frame is warned, not stopped, once its
// key is known; the next repeat stops the turn (every shape).
func TestWarnWithPlaceholderInput(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"claude 0.23", "partial then full", "full first", "codex 0.16"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, Options{SkipLoopDetection: true, Cap: loopdetect.Cap{Max: 100, Recovery: loopdetect.RecoveryWarn}},
				func(a *fakeAgent) { a.onPrompt = calls(shapes[name], name, 120, func(int) bool { return true }) })
			d := h.prompt(h.session(), "same").loopData(t)
			assert.Equal(t, "stuck_after_warning", d["capReason"])
			assert.EqualValues(t, 102, d["toolCalls"], "warned at 101, stopped at the next repeat")
			assert.Equal(t, true, d["warned"])
		})
	}
}

// TestBase32Lower: the hand-written encoder gives what encoding/base32 and
// strings.ToLower gave, so transcript ids of existing sessions are kept.
func TestBase32Lower(t *testing.T) {
	for _, n := range []int{0, 5, 10, 15, 40} {
		for seed := range 50 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(seed*131 + i*197 + seed*i*7)
			}
			want := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
			if got := base32Lower(b); got != want {
				t.Fatalf("base32Lower(%x) = %q, want %q", b, got, want)
			}
		}
	}
	sum := sha256.Sum256([]byte("claude\x00abc"))
	want := "g" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:15]))
	if got := StoreID("claude", "abc"); got != want {
		t.Errorf("StoreID = %q, want %q", got, want)
	}
}
