package acp_test

import (
	"encoding/json"
	"testing"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

// TestTypes_MarshalMatchesSchema marshals what acpd sends and validates it
// against the schema entry, with the exact expected JSON.
func TestTypes_MarshalMatchesSchema(t *testing.T) {
	v, err := acptest.DefaultValidator()
	require.NoError(t, err)
	block := acp.TextBlock("")
	tests := []struct {
		name, def string
		value     any
		want      string
	}{
		{"empty text block keeps text", "ContentBlock", acp.TextBlock(""), `{"type":"text","text":""}`},
		{"text block drops other variants' fields", "ContentBlock", acp.ContentBlock{Type: "text", Text: "a", URI: "file:///x", Name: "n"}, `{"type":"text","text":"a"}`},
		{"image", "ContentBlock", acp.ContentBlock{Type: "image", Data: "AAAA", MimeType: "image/png"}, `{"type":"image","data":"AAAA","mimeType":"image/png"}`},
		{"resource link", "ContentBlock", acp.ContentBlock{Type: "resource_link", URI: "file:///a", Name: "a", Size: ptr[int64](3)}, `{"type":"resource_link","uri":"file:///a","name":"a","size":3}`},
		{"embedded text resource", "ContentBlock", acp.ContentBlock{Type: "resource", Resource: &acp.EmbeddedResource{URI: "file:///a", Text: ptr("x")}}, `{"type":"resource","resource":{"uri":"file:///a","text":"x"}}`},
		{"diff new file", "ToolCallContent", acp.DiffContent("/a.go", nil, ""), `{"type":"diff","path":"/a.go","newText":""}`},
		{"diff edit", "ToolCallContent", acp.DiffContent("/a.go", ptr("old"), "new"), `{"type":"diff","path":"/a.go","oldText":"old","newText":"new"}`},
		{"terminal", "ToolCallContent", acp.TerminalContent("term1"), `{"type":"terminal","terminalId":"term1"}`},
		{"content", "ToolCallContent", acp.TextContent("x"), `{"type":"content","content":{"type":"text","text":"x"}}`},
		{"stdio server", "McpServer", acp.MCPServer{Name: "fs", Command: "/bin/fs"}, `{"name":"fs","command":"/bin/fs","args":[],"env":[]}`},
		{"http server", "McpServer", acp.MCPServer{Type: "http", Name: "h", URL: "https://x"}, `{"type":"http","name":"h","url":"https://x","headers":[]}`},
		{"initialize response", "InitializeResponse", acp.InitializeResponse{ProtocolVersion: 1}, `{"protocolVersion":1,"agentCapabilities":{"loadSession":false,"promptCapabilities":{"image":false,"audio":false,"embeddedContext":false},"mcpCapabilities":{"http":false,"sse":false},"sessionCapabilities":{}},"authMethods":[]}`},
		{"list sessions empty", "ListSessionsResponse", acp.ListSessionsResponse{}, `{"sessions":[]}`},
		{"set config option empty", "SetSessionConfigOptionResponse", acp.SetSessionConfigOptionResponse{}, `{"configOptions":[]}`},
		{"config option", "SessionConfigOption", acp.SessionConfigOption{ID: "mode", Name: "Mode", Type: "select", CurrentValue: "ask"}, `{"id":"mode","name":"Mode","type":"select","currentValue":"ask","options":[]}`},
		{"permission request", "RequestPermissionRequest", acp.RequestPermissionRequest{SessionID: "s", ToolCall: acp.ToolCallUpdate{ToolCallID: "t"}}, `{"sessionId":"s","toolCall":{"toolCallId":"t"},"options":[]}`},
		{"chunk", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &block, MessageID: "m1"}, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""},"messageId":"m1"}`},
		{"tool call", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &acp.ToolCall{ToolCallID: "t", Title: "x", Kind: acp.KindRead, Status: acp.StatusPending}}, `{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","kind":"read","status":"pending"}`},
		{"tool call update", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{ToolCallID: "t", Status: acp.StatusFailed}}, `{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"failed"}`},
		{"empty plan", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdatePlan}, `{"sessionUpdate":"plan","entries":[]}`},
		{"usage with cost", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateUsage, Used: 10, Size: 100, Cost: &acp.Cost{Amount: 0.5, Currency: "USD"}}, `{"sessionUpdate":"usage_update","used":10,"size":100,"cost":{"amount":0.5,"currency":"USD"}}`},
		{"current mode", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateCurrentMode, CurrentModeID: "code"}, `{"sessionUpdate":"current_mode_update","currentModeId":"code"}`},
		{"session info", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateSessionInfo, Title: ptr("t")}, `{"sessionUpdate":"session_info_update","title":"t"}`},
		{"tool call with name", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &acp.ToolCall{ToolCallID: "t", Title: "Read a.go", Name: "read_file", Kind: acp.KindRead}}, `{"sessionUpdate":"tool_call","toolCallId":"t","title":"Read a.go","name":"read_file","kind":"read"}`},
		{"notice", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateNotice, Notice: &acp.Notice{Severity: acp.SeverityWarning, Title: "Agent file problem", Description: "a.md:1: bad"}}, `{"sessionUpdate":"notice","severity":"warning","title":"Agent file problem","description":"a.md:1: bad"}`},
		{"compaction started", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateCompaction, Compaction: &acp.CompactionUpdate{CompactionID: "c1", Status: acp.CompactionInProgress}}, `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"in_progress"}`},
		{"compaction failed", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateCompaction, Compaction: &acp.CompactionUpdate{CompactionID: "c1", Status: acp.CompactionFailed, Error: "boom"}}, `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"failed","error":"boom"}`},
		{"compaction summary chunk", "SessionUpdate", acp.SessionUpdate{Kind: acp.UpdateCompactionChunk, CompactionID: "c1", Content: &block}, `{"sessionUpdate":"compaction_summary_chunk","compactionId":"c1","content":{"type":"text","text":""}}`},
		{"boolean config option", "SessionConfigOption", acp.SessionConfigOption{ID: "auto_approve", Name: "Auto-approve", Type: "boolean", Bool: true}, `{"id":"auto_approve","name":"Auto-approve","type":"boolean","currentValue":true}`},
		{"permission selected", "RequestPermissionOutcome", acp.PermissionOutcome{Outcome: "selected", OptionID: "a"}, `{"outcome":"selected","optionId":"a"}`},
		{"permission cancelled", "RequestPermissionOutcome", acp.PermissionOutcome{Outcome: "cancelled"}, `{"outcome":"cancelled"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.value)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(b))
			assert.NoError(t, v.ValidateDef(tt.def, b))
		})
	}
}

func TestTypes_MarshalRejectsBrokenUnions(t *testing.T) {
	block := acp.TextBlock("")
	for _, v := range []any{
		acp.ContentBlock{Type: "video"},
		acp.ContentBlock{Type: "resource"},
		acp.ToolCallContent{Type: "content"},
		acp.MCPServer{Type: "acp", Name: "x"},
		acp.SessionUpdate{Kind: "plan_update"},
		acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk},
		acp.SessionUpdate{Kind: acp.UpdateNotice, Notice: &acp.Notice{Severity: acp.SeverityInfo}},
		acp.SessionUpdate{Kind: acp.UpdateCompaction, Compaction: &acp.CompactionUpdate{Status: acp.CompactionCompleted}},
		acp.SessionUpdate{Kind: acp.UpdateCompactionChunk, Content: &block},
		acp.EmbeddedResource{URI: "file:///a"},
	} {
		_, err := json.Marshal(v)
		assert.Error(t, err, "%#v", v)
	}
}

func TestSessionUpdate_RoundTrip(t *testing.T) {
	block := acp.TextBlock("hi")
	for _, u := range []acp.SessionUpdate{
		{Kind: acp.UpdateAgentThoughtChunk, Content: &block, MessageID: "m"},
		{Kind: acp.UpdateToolCall, ToolCall: &acp.ToolCall{ToolCallID: "t", Title: "x", Content: []acp.ToolCallContent{acp.DiffContent("/a", nil, "n")}}},
		{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{ToolCallID: "t", Title: ptr("y")}},
		{Kind: acp.UpdatePlan, Entries: []acp.PlanEntry{{Content: "a", Priority: "high", Status: "pending"}}},
		{Kind: acp.UpdateAvailableCommands, AvailableCommands: []acp.AvailableCommand{{Name: "test", Description: "d"}}},
		{Kind: acp.UpdateUsage, Used: 1, Size: 2},
		{Kind: acp.UpdateNotice, Notice: &acp.Notice{Severity: acp.SeverityInfo, Title: "x"}},
		{Kind: acp.UpdateCompaction, Compaction: &acp.CompactionUpdate{CompactionID: "c", Status: acp.CompactionCompleted, Summary: []acp.ContentBlock{block}}},
		{Kind: acp.UpdateCompactionChunk, CompactionID: "c", Content: &block},
	} {
		b, err := json.Marshal(u)
		require.NoError(t, err)
		var got acp.SessionUpdate
		require.NoError(t, json.Unmarshal(b, &got))
		b2, err := json.Marshal(got)
		require.NoError(t, err)
		assert.JSONEq(t, string(b), string(b2))
	}
	var u acp.SessionUpdate
	assert.Error(t, json.Unmarshal([]byte(`{"sessionUpdate":"plan_update","entries":[]}`), &u))
}

func TestSessionConfigOption_RoundTrip(t *testing.T) {
	for _, o := range []acp.SessionConfigOption{
		{ID: "auto_approve", Name: "Auto-approve", Type: "boolean", Bool: true},
		{ID: "mode", Name: "Mode", Type: "select", CurrentValue: "plan", Options: []acp.SessionConfigSelectOption{{Value: "plan", Name: "Plan"}}},
	} {
		b, err := json.Marshal(o)
		require.NoError(t, err)
		var got acp.SessionConfigOption
		require.NoError(t, json.Unmarshal(b, &got))
		assert.Equal(t, o, got)
	}
}

func TestDecodeParams(t *testing.T) {
	tests := []struct {
		name, method, params, field string
	}{
		{"ok", acp.MethodSessionNew, `{"cwd":"/w","mcpServers":[{"name":"a","command":"/bin/a","args":[],"env":[]}]}`, ""},
		{"relative mcp command", acp.MethodSessionNew, `{"cwd":"/w","mcpServers":[{"name":"a","command":"a"}]}`, "mcpServers[0].command"},
		{"unsupported mcp type", acp.MethodSessionNew, `{"cwd":"/w","mcpServers":[{"type":"acp","name":"a"}]}`, "mcpServers[0].type"},
		{"case-mangled key", acp.MethodSessionNew, `{"CWD":"/w","mcpServers":[]}`, "CWD"},
		{"unknown key ignored", acp.MethodSessionNew, `{"cwd":"/w","mcpServers":[],"future":1}`, ""},
		{"null params", acp.MethodSessionNew, `null`, "params"},
		{"list without params", acp.MethodSessionList, ``, ""},
		{"image without data", acp.MethodSessionPrompt, `{"sessionId":"s","prompt":[{"type":"image","mimeType":"image/png"}]}`, "prompt[0].data"},
		{"blob and text", acp.MethodSessionPrompt, `{"sessionId":"s","prompt":[{"type":"resource","resource":{"uri":"u","text":"a","blob":"b"}}]}`, "prompt[0].resource"},
		{"nested type error", acp.MethodSessionPrompt, `{"sessionId":"s","prompt":[{"type":"text","text":5}]}`, "prompt.text"},
		{"boolean config", acp.MethodSessionSetConfigOption, `{"sessionId":"s","configId":"c","type":"boolean","value":true}`, ""},
		{"boolean config with string", acp.MethodSessionSetConfigOption, `{"sessionId":"s","configId":"c","type":"boolean","value":"on"}`, "value"},
		{"float request id", acp.MethodCancelRequest, `{"requestId":1.5}`, "requestId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := paramsFor(tt.method)
			err := acp.DecodeParams(tt.method, json.RawMessage(tt.params), p)
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var ae *acp.Error
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, acp.CodeInvalidParams, ae.Code)
			assert.Equal(t, map[string]any{"field": tt.field}, ae.Data)
		})
	}
}

func paramsFor(method string) acp.Params {
	switch method {
	case acp.MethodInitialize:
		return new(acp.InitializeRequest)
	case acp.MethodAuthenticate:
		return new(acp.AuthenticateRequest)
	case acp.MethodLogout:
		return new(acp.LogoutRequest)
	case acp.MethodSessionNew:
		return new(acp.NewSessionRequest)
	case acp.MethodSessionLoad:
		return new(acp.LoadSessionRequest)
	case acp.MethodSessionResume:
		return new(acp.ResumeSessionRequest)
	case acp.MethodSessionList:
		return new(acp.ListSessionsRequest)
	case acp.MethodSessionSetMode:
		return new(acp.SetSessionModeRequest)
	case acp.MethodSessionSetConfigOption:
		return new(acp.SetSessionConfigOptionRequest)
	case acp.MethodSessionPrompt:
		return new(acp.PromptRequest)
	case acp.MethodCancelRequest:
		return new(acp.CancelRequestNotification)
	default: // close, delete, cancel
		return new(acp.SessionIDRequest)
	}
}

// Type errors name the field and the JSON kind expected, not a Go type.
func TestDecodeParams_TypeErrorsSpeakJSON(t *testing.T) {
	tests := []struct {
		method, params, field, want string
	}{
		{acp.MethodSessionPrompt, `{"sessionId":"s","prompt":"x"}`, "prompt", "expected array, got JSON string"},
		{acp.MethodSessionPrompt, `{"sessionId":5,"prompt":[]}`, "sessionId", "expected string, got JSON number"},
		{acp.MethodInitialize, `{"protocolVersion":"1"}`, "protocolVersion", "expected integer, got JSON string"},
		{acp.MethodSessionNew, `{"cwd":"/w","mcpServers":{}}`, "mcpServers", "expected array, got JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.field, func(t *testing.T) {
			var err error
			switch tt.method {
			case acp.MethodSessionPrompt:
				err = acp.DecodeParams(tt.method, json.RawMessage(tt.params), &acp.PromptRequest{})
			case acp.MethodInitialize:
				err = acp.DecodeParams(tt.method, json.RawMessage(tt.params), &acp.InitializeRequest{})
			case acp.MethodSessionNew:
				err = acp.DecodeParams(tt.method, json.RawMessage(tt.params), &acp.NewSessionRequest{})
			}
			var e *acp.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, acp.CodeInvalidParams, e.Code)
			assert.Contains(t, e.Message, tt.want)
			assert.Equal(t, map[string]any{"field": tt.field}, e.Data)
		})
	}
}

// TestInitializeResponse_HandEncodedMatchesSchema validates the hand-encoded
// initialize answer against the schema's InitializeResponse, for every
// combination of the optional capabilities and each shape of auth and agent
// info.
func TestInitializeResponse_HandEncodedMatchesSchema(t *testing.T) {
	v, err := acptest.DefaultValidator()
	require.NoError(t, err)
	caps := []string{"list", "delete", "additionalDirectories", "resume", "close", "fork"}
	for mask := range 1 << len(caps) {
		sc := acp.SessionCapabilities{}
		fields := []**acp.Capability{&sc.List, &sc.Delete, &sc.AdditionalDirectories, &sc.Resume, &sc.Close, &sc.Fork}
		for i, f := range fields {
			if mask&(1<<i) != 0 {
				*f = &acp.Capability{}
			}
		}
		for _, auth := range []*acp.AgentAuthCapabilities{nil, {}, {Logout: &acp.Capability{}}} {
			r := acp.InitializeResponse{
				ProtocolVersion: acp.ProtocolVersion,
				AgentCapabilities: acp.AgentCapabilities{LoadSession: mask%2 == 0, SessionCapabilities: sc, Auth: auth,
					PromptCapabilities: acp.PromptCapabilities{Image: true, EmbeddedContext: mask%3 == 0},
					MCPCapabilities:    acp.MCPCapabilities{HTTP: true}},
				AuthMethods: []acp.AuthMethod{{ID: "openai", Name: "Use OpenAI API key", Description: "Requires <OPENAI_API_KEY> & \u2028"}},
				AgentInfo:   &acp.Implementation{Name: "acpd", Title: "acpd", Version: "dev"},
			}
			if mask%4 == 1 {
				r.AuthMethods, r.AgentInfo = nil, nil
			}
			b, err := json.Marshal(&r)
			require.NoError(t, err)
			require.NoError(t, v.ValidateDef("InitializeResponse", b), "%s", b)
		}
	}
}
