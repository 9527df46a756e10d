package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// assembled is a response as the session keeps it, built from its events.
func assembled(t *testing.T, body string) model.Message {
	t.Helper()
	m := model.Message{Role: model.RoleAssistant}
	err := streamSSE(strings.NewReader(body), NewAssembler(nil), func(ev model.Event) bool {
		switch ev.Kind {
		case model.EventText:
			m.Content += ev.Text
		case model.EventReasoning:
			m.Reasoning += ev.Text
		case model.EventThinking:
			m.Thinking = append(m.Thinking, ev.Thinking)
		case model.EventToolCall:
			m.ToolCalls = append(m.ToolCalls, ev.ToolCall)
		}
		return true
	})
	require.NoError(t, err)
	return m
}

// requestJSON builds the next request after m and decodes its messages.
func requestJSON(t *testing.T, m model.Message) []map[string]json.RawMessage {
	t.Helper()
	msgs := []model.Message{{Role: model.RoleUser, Content: "go"}, m}
	for _, tc := range m.ToolCalls {
		msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: tc.ID, Content: "ok"})
	}
	body, err := buildRequest(model.Request{Model: "m", Messages: msgs}, nil, false)
	require.NoError(t, err)
	var req struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body.bytes(), &req))
	return req.Messages
}

// OpenRouter streams a Claude model's thinking as reasoning_details pieces
// (text in fragments, the signature last, all at index 0): the assistant
// message goes back with the items whole and unmodified.
func TestReasoningDetails_MergedAndSentBack(t *testing.T) {
	const fmtClaude = `"format":"anthropic-claude-v1"`
	body := `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Let me","reasoning_details":[{"type":"reasoning.text","text":"Let me",` + fmtClaude + `,"index":0}]}}]}

data: {"choices":[{"index":0,"delta":{"reasoning":" look.","reasoning_details":[{"type":"reasoning.text","text":" look.",` + fmtClaude + `,"index":0}]}}]}

data: {"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.text","signature":"ErUBCkYIBRgCIkD==",` + fmtClaude + `,"index":0}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"ls","arguments":"{}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	m := assembled(t, body)
	assert.Equal(t, "Let me look.", m.Reasoning, "streamed once, from the reasoning field")
	require.Len(t, m.Thinking, 1)
	assert.Equal(t, Protocol, m.Thinking[0].Protocol)
	assert.Equal(t, TypeReasoningDetails, m.Thinking[0].Type)
	assert.JSONEq(t, `[{"type":"reasoning.text","text":"Let me look.","signature":"ErUBCkYIBRgCIkD==","format":"anthropic-claude-v1","index":0}]`, string(m.Thinking[0].Raw))

	msgs := requestJSON(t, m)
	assert.JSONEq(t, string(m.Thinking[0].Raw), string(msgs[1]["reasoning_details"]))
	assert.NotContains(t, msgs[0], "reasoning_details")
}

// The recorded OpenRouter o4-mini stream carries an encrypted item; it is
// kept byte for byte.
func TestReasoningDetails_RecordedEncryptedItem(t *testing.T) {
	body, err := os.ReadFile("testdata/fixtures/11-openrouter-o4-mini-tool-index1-finish-stop.sse")
	require.NoError(t, err)
	m := assembled(t, string(body))
	require.Len(t, m.Thinking, 1)
	var items []map[string]any
	require.NoError(t, json.Unmarshal(m.Thinking[0].Raw, &items))
	require.Len(t, items, 1)
	assert.Equal(t, "reasoning.encrypted", items[0]["type"])
	assert.Equal(t, "rs_68597f0647d0819091018c65f206ba2e", items[0]["id"])
	data := items[0]["data"].(string)
	assert.True(t, bytes.Contains(body, []byte(`"data":"`+data+`"`)), "the ciphertext as received")
}

// Gemini's OpenAI-compatible endpoint puts a call's thought signature in
// extra_content.google: it rides on the call and goes back on it.
func TestExtraContent_RidesOnTheCall(t *testing.T) {
	body := `data: {"choices":[{"delta":{"role":"assistant","tool_calls":[{"extra_content":{"google":{"thought_signature":"CiQBjz1rX9vX=="}},"function":{"arguments":"{\"city\":\"Paris\"}","name":"weather"},"id":"function-call-1","type":"function","index":0}]},"index":0}]}

data: {"choices":[{"delta":{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"city\":\"Rome\"}","name":"weather"},"id":"function-call-2","type":"function","index":1}]},"index":0,"finish_reason":"tool_calls"}]}

data: [DONE]

`
	m := assembled(t, body)
	require.Len(t, m.ToolCalls, 2)
	require.Len(t, m.ToolCalls[0].Thinking, 1)
	assert.Equal(t, TypeExtraContent, m.ToolCalls[0].Thinking[0].Type)
	assert.JSONEq(t, `{"google":{"thought_signature":"CiQBjz1rX9vX=="}}`, string(m.ToolCalls[0].Thinking[0].Raw))
	assert.Empty(t, m.ToolCalls[1].Thinking)
	assert.Empty(t, m.Thinking)

	msgs := requestJSON(t, m)
	var calls []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(msgs[1]["tool_calls"], &calls))
	require.Len(t, calls, 2)
	assert.JSONEq(t, `{"google":{"thought_signature":"CiQBjz1rX9vX=="}}`, string(calls[0]["extra_content"]))
	assert.NotContains(t, calls[1], "extra_content")
}

// Blocks of other protocols never reach a chat request.
func TestThinkingOfOtherProtocolsIsNotSent(t *testing.T) {
	m := model.Message{Role: model.RoleAssistant, Content: "x",
		Thinking:  []model.Thinking{{Protocol: "anthropic", Type: "thinking", Text: "t", Signature: "s"}},
		ToolCalls: []model.ToolCall{{ID: "c", Name: "ls", Arguments: json.RawMessage(`{}`), Thinking: []model.Thinking{{Protocol: "gemini", Type: "thought_signature", Signature: "g"}}}}}
	msgs := requestJSON(t, m)
	assert.NotContains(t, msgs[1], "reasoning_details")
	assert.NotContains(t, string(msgs[1]["tool_calls"]), "extra_content")
}
