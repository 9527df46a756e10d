package acptest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidator_CheckAgentLine(t *testing.T) {
	v, err := DefaultValidator()
	require.NoError(t, err)
	sent := map[string]string{"1": "session/prompt", "2": "session/load", `"n"`: "session/new"}
	tests := []struct {
		name    string
		line    string
		wantErr string // substring; "" means valid
	}{
		{"valid prompt response", `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`, ""},
		{"valid load response", `{"jsonrpc":"2.0","id":2,"result":{}}`, ""},
		{"valid update", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`, ""},
		{"valid permission request", `{"jsonrpc":"2.0","id":"acpd-1","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}`, ""},
		{"valid cancel_request", `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"acpd-1"}}`, ""},
		{"valid error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32800,"message":"Request cancelled"}}`, ""},
		{"extension notification", `{"jsonrpc":"2.0","method":"_x/y","params":{"a":1}}`, ""},
		{"wrong enum value", `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"done"}}`, "PromptResponse"},
		{"null result", `{"jsonrpc":"2.0","id":2,"result":null}`, "LoadSessionResponse"},
		{"wrong field", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"current_mode_update","modeId":"x"}}}`, "SessionNotification"},
		{"unknown root key", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","foo":1}}}`, `unknown key "foo"`},
		{"legacy models key", `{"jsonrpc":"2.0","id":"n","result":{"sessionId":"s","models":{}}}`, `unknown key "models"`},
		{"cancelled tool status", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","status":"cancelled"}}}`, "SessionNotification"},
		{"relative location path", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","locations":[{"path":"rel/x.go"}]}}}`, "not absolute"},
		{"relative path in rawInput is free-form", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","rawInput":{"path":"rel"}}}}`, ""},
		{"terminal without command", `{"jsonrpc":"2.0","id":"acpd-2","method":"terminal/create","params":{"sessionId":"s"}}`, "CreateTerminalRequest"},
		{"missing jsonrpc", `{"id":1,"result":{"stopReason":"end_turn"}}`, "envelope"},
		{"response to unknown request", `{"jsonrpc":"2.0","id":99,"result":{}}`, "no schema"},
		{"unstable method", `{"jsonrpc":"2.0","id":"acpd-3","method":"session/fork","params":{}}`, "no schema"},
		{"not JSON", `{"jsonrpc"`, "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.CheckAgentLine([]byte(tt.line), sent)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestTranscript_Ordering(t *testing.T) {
	v, err := DefaultValidator()
	require.NoError(t, err)
	tr := NewTranscript(v)
	update := func(kind, extra string) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"` + kind + `"` + extra + `}}}`)
	}
	toolUpdate := update("tool_call_update", `,"toolCallId":"t1","status":"completed"`)
	chunk := update("agent_message_chunk", `,"content":{"type":"text","text":"x"}`)

	tr.ClientLine([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`))
	require.NoError(t, tr.AgentLine([]byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}`)))
	require.Error(t, tr.AgentLine(chunk), "chunk before any prompt")
	require.NoError(t, tr.AgentLine(update("available_commands_update", `,"availableCommands":[]`)), "allowed outside turns")

	tr.ClientLine([]byte(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	require.NoError(t, tr.AgentLine(chunk))
	require.Error(t, tr.AgentLine(toolUpdate), "update before its tool_call")
	require.NoError(t, tr.AgentLine(update("tool_call", `,"toolCallId":"t1","title":"run"`)))
	require.NoError(t, tr.AgentLine(toolUpdate))
	require.NoError(t, tr.AgentLine([]byte(`{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}`)))
	require.Error(t, tr.AgentLine(toolUpdate), "update after the prompt response")
}
