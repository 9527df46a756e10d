package chat

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// TestBuildRequest_Messages pins the wire form of each message kind (spec
// §2): only the messages array is compared, as JSON.
func TestBuildRequest_Messages(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{ "path": "a.go" }`)
	tests := []struct {
		name   string
		system string
		msgs   []model.Message
		want   string
	}{
		{"system prompt first", "You are a coder.", []model.Message{{Role: model.RoleUser, Content: "hi"}},
			`[{"role":"system","content":"You are a coder."},{"role":"user","content":"hi"}]`},
		{"no system prompt", "", []model.Message{{Role: model.RoleUser, Content: "hi"}},
			`[{"role":"user","content":"hi"}]`},
		{"tool call and result", "", []model.Message{
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_abc", Name: "read_file", Arguments: args}}},
			{Role: model.RoleTool, ToolCallID: "call_abc", Content: `{"temp":72}`},
		}, `[{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]},
			{"role":"tool","tool_call_id":"call_abc","content":"{\"temp\":72}"}]`},
		{"no-arg call sends {}", "", []model.Message{
			{Role: model.RoleAssistant, Content: "Listing.", ToolCalls: []model.ToolCall{{ID: "c", Name: "list"}}},
			{Role: model.RoleTool, ToolCallID: "c", Content: "x"},
		}, `[{"role":"assistant","content":"Listing.","tool_calls":[{"id":"c","type":"function","function":{"name":"list","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c","content":"x"}]`},
		{"invalid call echoes the model's raw text", "", []model.Message{
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c", Name: "edit", Arguments: json.RawMessage(`"{\"a\": "`), Invalid: "truncated"}}},
			{Role: model.RoleTool, ToolCallID: "c", Content: "error"},
		}, `[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"edit","arguments":"{\"a\": "}}]},
			{"role":"tool","tool_call_id":"c","content":"error"}]`},
		{"missing ids are synthesised in order", "", []model.Message{
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{Name: "a"}, {ID: "x", Name: "b"}, {Name: "c"}}},
			{Role: model.RoleTool, Content: "ra"}, {Role: model.RoleTool, ToolCallID: "x", Content: "rb"}, {Role: model.RoleTool, Content: "rc"},
		}, `[{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_0_0","type":"function","function":{"name":"a","arguments":"{}"}},
				{"id":"x","type":"function","function":{"name":"b","arguments":"{}"}},
				{"id":"call_0_2","type":"function","function":{"name":"c","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_0_0","content":"ra"},
			{"role":"tool","tool_call_id":"x","content":"rb"},
			{"role":"tool","tool_call_id":"call_0_2","content":"rc"}]`},
		{"reasoning echoed with tool calls, content empty not null", "", []model.Message{
			{Role: model.RoleAssistant, Reasoning: "plan", ToolCalls: []model.ToolCall{{ID: "c", Name: "list"}}},
			{Role: model.RoleTool, ToolCallID: "c", Content: "x"},
		}, `[{"role":"assistant","content":"","reasoning_content":"plan","tool_calls":[{"id":"c","type":"function","function":{"name":"list","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c","content":"x"}]`},
		{"reasoning of a finished answer is not echoed", "", []model.Message{
			{Role: model.RoleUser, Content: "q"},
			{Role: model.RoleAssistant, Reasoning: "thought", Content: "answer"},
			{Role: model.RoleAssistant, Reasoning: "only thought"},
		}, `[{"role":"user","content":"q"},{"role":"assistant","content":"answer"},{"role":"assistant","content":null}]`},
		{"thinking model: later tool calls carry reasoning_content even empty", "", []model.Message{
			{Role: model.RoleAssistant, Reasoning: "r", Content: "a"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c", Name: "list"}}},
			{Role: model.RoleTool, ToolCallID: "c", Content: "x"},
		}, `[{"role":"assistant","content":"a"},
			{"role":"assistant","content":"","reasoning_content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"list","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c","content":"x"}]`},
		{"non-thinking model: tool calls without the field", "", []model.Message{
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c", Name: "list"}}},
			{Role: model.RoleTool, ToolCallID: "c", Content: "x"},
			{Role: model.RoleAssistant, Reasoning: "late", ToolCalls: []model.ToolCall{{ID: "d", Name: "list"}}},
			{Role: model.RoleTool, ToolCallID: "d", Content: "y"},
		}, `[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"list","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c","content":"x"},
			{"role":"assistant","content":"","reasoning_content":"late","tool_calls":[{"id":"d","type":"function","function":{"name":"list","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"d","content":"y"}]`},
		{"images as data URLs after the text part", "", []model.Message{
			{Role: model.RoleUser, Content: "see", Images: []model.Image{{MimeType: "image/png", Data: "iVBO"}, {MimeType: "image/jpeg", Data: "/9j/"}}},
		}, `[{"role":"user","content":[{"type":"text","text":"see"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},
			{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/"}}]}]`},
		{"image without text has no empty text part", "", []model.Message{
			{Role: model.RoleUser, Images: []model.Image{{MimeType: "image/png", Data: "iVBO"}}},
		}, `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, err := buildRequestBytes(model.Request{Model: "m", System: tt.system, Messages: tt.msgs})
			require.NoError(t, err)
			var got struct {
				Messages json.RawMessage `json:"messages"`
			}
			require.NoError(t, json.Unmarshal(body, &got))
			assert.JSONEq(t, tt.want, string(got.Messages))
		})
	}
}

// TestBuildRequest_TopLevel pins the request fields around the messages.
func TestBuildRequest_TopLevel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  model.Request
		want string
	}{
		{"minimal", model.Request{Model: "qwen3-max"},
			`{"model":"qwen3-max","messages":[],"stream":true,"stream_options":{"include_usage":true}}`},
		{"empty tools slice is omitted", model.Request{Model: "m", Tools: []model.ToolSpec{}},
			`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`},
		{"max_tokens, never max_completion_tokens", model.Request{Model: "m", MaxTokens: 512},
			`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true},"max_tokens":512}`},
		{"tools with schema and a default schema", model.Request{Model: "m", Tools: []model.ToolSpec{
			{Name: "getCurrentWeather", Description: "Weather", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`)},
			{Name: "list"},
		}}, `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true},"tools":[
			{"type":"function","function":{"name":"getCurrentWeather","description":"Weather","parameters":{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}}},
			{"type":"function","function":{"name":"list","parameters":{"type":"object","properties":{}}}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, err := buildRequestBytes(tt.req)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(body))
		})
	}
	_, err := buildRequestBytes(model.Request{MaxTokens: -1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "maxTokens")
	_, err = buildRequestBytes(model.Request{Messages: []model.Message{{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c"}}}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "messages[0].toolCalls[0].name")
}

// buildRequestBytes is buildRequest with the body in one piece.
func buildRequestBytes(req model.Request) ([]byte, error) {
	b, err := buildRequest(req, messageCache(req.Cache), false)
	if err != nil {
		return nil, err
	}
	return b.bytes(), nil
}

// Every attempt of a request reads the whole body afresh, through Read or
// through WriteTo (which the HTTP transport uses), and reading never
// changes the cached parts it shares.
func TestRequestBody_ReadersAreIndependent(t *testing.T) {
	t.Parallel()
	cache := &model.Cache{}
	msgs := []model.Message{{Role: model.RoleUser, Content: "hi"}, {Role: model.RoleAssistant, Content: "a"}, {Role: model.RoleUser, Content: "again"}}
	body, err := buildRequest(model.Request{Model: "m", System: "sys", Messages: msgs}, messageCache(cache), false)
	require.NoError(t, err)
	want := body.bytes()
	require.True(t, json.Valid(want), "%s", want)
	require.Equal(t, int64(len(want)), body.size)
	for range 3 {
		got, err := io.ReadAll(body.reader())
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		var buf bytes.Buffer
		_, err = io.Copy(&buf, body.reader())
		require.NoError(t, err)
		require.Equal(t, string(want), buf.String())
	}
	require.NoError(t, iotest.TestReader(body.reader(), want))
	again, err := buildRequest(model.Request{Model: "m", System: "sys", Messages: msgs}, messageCache(cache), false)
	require.NoError(t, err)
	require.Equal(t, string(want), string(again.bytes()))
}
