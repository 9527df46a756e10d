package acptest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// step is one line of a scripted connection: c is a client line, a an
// agent line; wantErr is a substring of the error the agent line must
// raise ("" means it must pass).
type step struct {
	c, a    string
	wantErr string
}

func cli(s string) step          { return step{c: s} }
func ag(s string) step           { return step{a: s} }
func bad(s, wantErr string) step { return step{a: s, wantErr: wantErr} }
func upd(sid, update string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":` + update + `}}`
}

// Prefixes shared by the scripts.
var (
	initAll     = cli(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}}`)
	initNone    = cli(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	initAnswer  = ag(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false,"sessionCapabilities":{"close":{}}},"authMethods":[]}}`)
	newSession  = cli(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	newAnswer   = ag(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s","modes":{"currentModeId":"a","availableModes":[{"id":"a","name":"A"},{"id":"b","name":"B"}]},"configOptions":[` + modeOpt("a") + `,` + modelOpt("m1") + `]}}`)
	prompt      = cli(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"go"}]}}`)
	endTurn     = `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`
	cancelledOK = `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`
	toolCall    = ag(upd("s", `{"sessionUpdate":"tool_call","toolCallId":"t1","title":"run","status":"in_progress"}`))
	toolDone    = ag(upd("s", `{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}`))
	termCreate  = ag(`{"jsonrpc":"2.0","id":"acpd-1","method":"terminal/create","params":{"sessionId":"s","command":"sh"}}`)
	termCreated = cli(`{"jsonrpc":"2.0","id":"acpd-1","result":{"terminalId":"term-1"}}`)
	termEmbed   = ag(upd("s", `{"sessionUpdate":"tool_call_update","toolCallId":"t1","content":[{"type":"terminal","terminalId":"term-1"}]}`))
	termRelease = `{"jsonrpc":"2.0","id":"acpd-2","method":"terminal/release","params":{"sessionId":"s","terminalId":"term-1"}}`
	chunk       = upd("s", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}`)
)

func modeOpt(cur string) string {
	return `{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"` + cur + `","options":[{"value":"a","name":"A"},{"value":"b","name":"B"}]}`
}

func modelOpt(cur string) string {
	return `{"id":"model","name":"Model","category":"model","type":"select","currentValue":"` + cur + `","options":[{"group":"g","name":"G","options":[{"value":"m1","name":"M1"},{"value":"m2","name":"M2"}]}]}`
}

func plan(entries ...string) string {
	var es []string
	for _, e := range entries {
		content, status, _ := strings.Cut(e, ":")
		es = append(es, fmt.Sprintf(`{"content":%q,"priority":"medium","status":%q}`, content, status))
	}
	return ag(upd("s", `{"sessionUpdate":"plan","entries":[`+strings.Join(es, ",")+`]}`)).a
}

func setConfig(id, value string) step {
	return cli(`{"jsonrpc":"2.0","id":3,"method":"session/set_config_option","params":{"sessionId":"s","configId":"` + id + `","value":"` + value + `"}}`)
}

func setConfigAnswer(opts ...string) string {
	return `{"jsonrpc":"2.0","id":3,"result":{"configOptions":[` + strings.Join(opts, ",") + `]}}`
}

func script(steps ...[]step) []step {
	var out []step
	for _, s := range steps {
		out = append(out, s...)
	}
	return out
}

// TestTranscript_SemanticChecks runs good and bad connections through a
// Transcript: each bad one must fail on exactly the marked line.
func TestTranscript_SemanticChecks(t *testing.T) {
	open := []step{initAll, initAnswer, newSession, newAnswer}
	openBare := []step{initNone, initAnswer, newSession, newAnswer}
	turn := []step{prompt, toolCall}
	tests := []struct {
		name  string
		steps []step
	}{
		{"fs read with capability", script(open, turn, []step{ag(`{"jsonrpc":"2.0","id":"acpd-1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/w/a"}}`)})},
		{"fs read without capability", script(openBare, turn, []step{bad(`{"jsonrpc":"2.0","id":"acpd-1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/w/a"}}`, "fs.readTextFile")})},
		{"fs write without capability", script(openBare, turn, []step{bad(`{"jsonrpc":"2.0","id":"acpd-1","method":"fs/write_text_file","params":{"sessionId":"s","path":"/w/a","content":""}}`, "fs.writeTextFile")})},
		{"fs write with only read", script([]step{cli(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`), initAnswer, newSession, newAnswer}, turn,
			[]step{bad(`{"jsonrpc":"2.0","id":"acpd-1","method":"fs/write_text_file","params":{"sessionId":"s","path":"/w/a","content":""}}`, "fs.writeTextFile")})},
		{"terminal without capability", script(openBare, turn, []step{bad(termCreate.a, "capability terminal")})},
		{"terminal before initialize", script([]step{newSession, newAnswer}, turn, []step{bad(termCreate.a, "capability terminal")})},
		{"elicitation without capability", script(open, turn, []step{bad(`{"jsonrpc":"2.0","id":"acpd-1","method":"elicitation/create","params":{"sessionId":"s","message":"m","mode":"form","requestedSchema":{"type":"object","properties":{}}}}`, "elicitation")})},
		{"terminal auth method without capability", []step{initAll, bad(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[{"type":"terminal","id":"login","name":"Login"}]}}`, "auth.terminal")}},
		{"unadvertised method answered", script(open, []step{
			cli(`{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}`),
			bad(`{"jsonrpc":"2.0","id":5,"result":{"sessions":[]}}`, "did not advertise"),
		})},
		{"unadvertised method refused", script(open, []step{
			cli(`{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}`),
			ag(`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"Method not found"}}`),
		})},

		{"terminal lifecycle", script(open, turn, []step{termCreate, termCreated, termEmbed, ag(termRelease), toolDone, ag(endTurn)})},
		{"terminal not released before the response", script(open, turn, []step{termCreate, termCreated, termEmbed, toolDone, bad(endTurn, `terminal "term-1" of session "s" not released`)})},
		{"terminal released before embedding", script(open, turn, []step{termCreate, termCreated, bad(termRelease, "before it was embedded")})},
		{"terminal used after release", script(open, turn, []step{termCreate, termCreated, termEmbed, ag(termRelease),
			bad(`{"jsonrpc":"2.0","id":"acpd-3","method":"terminal/output","params":{"sessionId":"s","terminalId":"term-1"}}`, "after its terminal/release")})},
		{"terminal never created", script(open, turn, []step{bad(termEmbed.a, "no terminal/create returned")})},
		{"terminal of a create the agent abandoned", script(open, turn, []step{termCreate, ag(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"acpd-1"}}`), termCreated, bad(termEmbed.a, "no terminal/create returned")})},

		{"tool call finished", script(open, turn, []step{toolDone, ag(endTurn)})},
		{"tool call left in progress", script(open, turn, []step{bad(endTurn, `t1 (in_progress)`)})},
		{"tool call left pending by default", script(open, []step{prompt, ag(upd("s", `{"sessionUpdate":"tool_call","toolCallId":"t1","title":"run"}`)), bad(endTurn, `t1 (pending)`)})},
		{"tool call left running by a cancelled turn", script(open, turn, []step{cli(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`), ag(cancelledOK)})},
		{"tool call status after finishing", script(open, turn, []step{toolDone, bad(upd("s", `{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"in_progress"}`), "after finishing")})},
		{"tool call id reused in a later turn", script(open, turn, []step{toolDone, ag(endTurn), prompt, bad(toolCall.a, "reuses the id")})},

		{"-32800 after session/cancel", script(open, []step{prompt, cli(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`),
			bad(`{"jsonrpc":"2.0","id":2,"error":{"code":-32800,"message":"Request cancelled"}}`, "must answer stopReason `cancelled`")})},
		{"-32800 after $/cancel_request", script(open, []step{prompt, cli(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`), cli(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`),
			ag(`{"jsonrpc":"2.0","id":2,"error":{"code":-32800,"message":"Request cancelled"}}`)})},

		{"plan complete lists", script(open, []step{prompt, ag(plan("a:pending", "b:pending", "c:pending")), ag(plan("a:completed", "b:in_progress", "c:pending")), ag(plan("b:completed", "c:in_progress")), ag(plan("x:pending")), ag(endTurn)})},
		{"plan delta", script(open, []step{prompt, ag(plan("a:pending", "b:pending", "c:pending")), bad(plan("a:completed"), "looks partial")})},

		{"update before session/new answers", []step{initAll, initAnswer, newSession, bad(upd("s", `{"sessionUpdate":"available_commands_update","availableCommands":[]}`), "before the client learned its id")}},
		{"update after session/new answers", script(open, []step{ag(upd("s", `{"sessionUpdate":"available_commands_update","availableCommands":[]}`))})},
		{"update for a loaded session", []step{initAll, initAnswer, cli(`{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"old","cwd":"/w","mcpServers":[]}}`), ag(upd("old", `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"hi"}}`))}},

		{"resume without replay", script(open, []step{cli(`{"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"s","cwd":"/w"}}`), ag(upd("s", `{"sessionUpdate":"available_commands_update","availableCommands":[]}`))})},
		{"resume replays a message", script(open, []step{cli(`{"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"s","cwd":"/w"}}`), bad(chunk, "resume must not replay")})},
		{"resume replays a tool call", script(open, []step{cli(`{"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"s","cwd":"/w"}}`), bad(toolCall.a, "resume must not replay")})},

		{"set_config_option complete", script(open, []step{setConfig("mode", "b"), ag(setConfigAnswer(modeOpt("b"), modelOpt("m1")))})},
		{"set_config_option partial", script(open, []step{setConfig("mode", "b"), bad(setConfigAnswer(modeOpt("b")), `missing ["model"]`)})},
		{"set_config_option value not applied", script(open, []step{setConfig("mode", "b"), bad(setConfigAnswer(modeOpt("a"), modelOpt("m1")), `answered currentValue "a"`)})},
		{"set_config_option currentValue not an option", script(open, []step{setConfig("model", "m9"), bad(setConfigAnswer(modeOpt("a"), modelOpt("m9")), "not among its options")})},
		{"config_option_update currentValue not an option", script(open, []step{bad(upd("s", `{"sessionUpdate":"config_option_update","configOptions":[`+modeOpt("z")+`]}`), "not among its options")})},
		{"boolean option without capability", script(open, []step{bad(upd("s", `{"sessionUpdate":"config_option_update","configOptions":[{"id":"x","name":"X","type":"boolean","currentValue":true}]}`), "session.configOptions.boolean")})},
		{"boolean option with capability", []step{
			cli(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"configOptions":{"boolean":{}}}}}}`), initAnswer, newSession, newAnswer,
			ag(upd("s", `{"sessionUpdate":"config_option_update","configOptions":[{"id":"x","name":"X","type":"boolean","currentValue":true}]}`)),
		}},
		{"modes currentModeId unknown", []step{initAll, initAnswer, newSession, bad(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s","modes":{"currentModeId":"z","availableModes":[{"id":"a","name":"A"}]}}}`, "not among availableModes")}},
		{"current_mode_update unknown", script(open, []step{bad(upd("s", `{"sessionUpdate":"current_mode_update","currentModeId":"z"}`), "not among the session's availableModes")})},

		{"mode switched by the agent with both views", script(open, []step{prompt, ag(upd("s", `{"sessionUpdate":"current_mode_update","currentModeId":"b"}`)),
			ag(upd("s", `{"sessionUpdate":"config_option_update","configOptions":[`+modeOpt("b")+`,`+modelOpt("m1")+`]}`)), ag(endTurn)})},
		{"mode switched by the agent, option stale", script(open, []step{prompt, ag(upd("s", `{"sessionUpdate":"current_mode_update","currentModeId":"b"}`)), bad(endTurn, "kept in sync")})},
		{"mode set by the client", script(open, []step{cli(`{"jsonrpc":"2.0","id":7,"method":"session/set_mode","params":{"sessionId":"s","modeId":"b"}}`), ag(`{"jsonrpc":"2.0","id":7,"result":{}}`),
			setConfig("model", "m2"), ag(setConfigAnswer(modeOpt("b"), modelOpt("m2"))), prompt, ag(endTurn)})},
		{"mode set_mode not reflected in options", script(open, []step{cli(`{"jsonrpc":"2.0","id":7,"method":"session/set_mode","params":{"sessionId":"s","modeId":"b"}}`), ag(`{"jsonrpc":"2.0","id":7,"result":{}}`),
			setConfig("model", "m2"), ag(setConfigAnswer(modeOpt("a"), modelOpt("m2"))), prompt, bad(endTurn, "kept in sync")})},
		{"modes and options disagree at session/new", []step{initAll, initAnswer, newSession,
			bad(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s","modes":{"currentModeId":"b","availableModes":[{"id":"a","name":"A"},{"id":"b","name":"B"}]},"configOptions":[`+modeOpt("a")+`]}}`, "kept in sync")}},
		{"permission for a reported tool call", script(open, turn, []step{ag(`{"jsonrpc":"2.0","id":"acpd-1","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"y","name":"Allow","kind":"allow_once"}]}}`)})},
		{"permission for an unknown tool call with a title", script(open, []step{prompt, ag(`{"jsonrpc":"2.0","id":"acpd-1","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t9","title":"rm -rf"},"options":[{"optionId":"y","name":"Allow","kind":"allow_once"}]}}`)})},
		{"permission for an unknown tool call", script(open, []step{prompt, bad(`{"jsonrpc":"2.0","id":"acpd-1","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t9"},"options":[{"optionId":"y","name":"Allow","kind":"allow_once"}]}}`, "never reported")})},
		{"permission outside a turn", script(open, []step{bad(`{"jsonrpc":"2.0","id":"acpd-1","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t9","title":"x"},"options":[{"optionId":"y","name":"Allow","kind":"allow_once"}]}}`, "outside a prompt turn")})},
		{"close after the prompt answers", script(open, []step{prompt, cli(`{"jsonrpc":"2.0","id":6,"method":"session/close","params":{"sessionId":"s"}}`), ag(cancelledOK), ag(`{"jsonrpc":"2.0","id":6,"result":{}}`)})},
		{"close before the prompt answers", script(open, []step{prompt, cli(`{"jsonrpc":"2.0","id":6,"method":"session/close","params":{"sessionId":"s"}}`), bad(`{"jsonrpc":"2.0","id":6,"result":{}}`, "must answer `cancelled` first")})},
	}
	v, err := DefaultValidator()
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTranscript(v)
			for i, s := range tt.steps {
				if s.c != "" {
					tr.ClientLine([]byte(s.c))
					continue
				}
				err := tr.AgentLine([]byte(s.a))
				if s.wantErr == "" {
					require.NoError(t, err, "step %d: %s", i, s.a)
					continue
				}
				require.Error(t, err, "step %d: %s", i, s.a)
				assert.Contains(t, err.Error(), s.wantErr)
				require.Equal(t, len(tt.steps)-1, i, "a failing step must be the last")
			}
		})
	}
}

func TestTranscript_EndReportsUnreleasedTerminals(t *testing.T) {
	v, err := DefaultValidator()
	require.NoError(t, err)
	tr := NewTranscript(v)
	for _, s := range []step{initAll, initAnswer, newSession, newAnswer, prompt, toolCall, termCreate, termCreated} {
		if s.c != "" {
			tr.ClientLine([]byte(s.c))
		} else {
			require.NoError(t, tr.AgentLine([]byte(s.a)))
		}
	}
	err = tr.End()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "term-1")
	require.NoError(t, tr.AgentLine([]byte(termEmbed.a)))
	require.NoError(t, tr.AgentLine([]byte(termRelease)))
	assert.NoError(t, tr.End())
}
