package store

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
)

func transcript(recs ...Record) *Transcript {
	all := append([]Record{{V: 1, Kind: KindMeta, Meta: &SessionMeta{ID: "r", Cwd: "/w"}}}, recs...)
	tr := &Transcript{Records: all}
	if err := tr.finish("r"); err != nil {
		panic(err)
	}
	return tr
}

func updatesJSON(t *testing.T, us []acp.SessionUpdate) []string {
	t.Helper()
	out := make([]string, len(us))
	for i, u := range us {
		b, err := json.Marshal(u)
		require.NoError(t, err)
		out[i] = string(b)
	}
	return out
}

func TestTranscript_Updates(t *testing.T) {
	tr := transcript(everyKind("r")...)
	got := updatesJSON(t, tr.Updates())
	want := []string{
		`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"fix the bug\nin main.go"},"messageId":"msg_r1"}`,
		`{"sessionUpdate":"user_message_chunk","content":{"type":"resource_link","uri":"file:///w/main.go","name":"main.go"},"messageId":"msg_r1"}`,
		`{"sessionUpdate":"user_message_chunk","content":{"type":"resource","resource":{"uri":"file:///w/a.txt","text":"hello"}},"messageId":"msg_r1"}`,
		`{"sessionUpdate":"user_message_chunk","content":{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},"messageId":"msg_r1"}`,
		`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"look at main.go first"},"messageId":"m1"}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Reading the file."},"messageId":"m1"}`,
		`{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"Read main.go","name":"read_file","kind":"read","status":"pending","locations":[{"path":"/w/main.go","line":3}],"rawInput":{"path":"main.go"}}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","title":"Read main.go","kind":"read","status":"completed","content":[{"type":"content","content":{"type":"text","text":"package main"}},{"type":"diff","path":"/w/main.go","newText":"x"}],"locations":[{"path":"/w/main.go"}],"rawOutput":{"bytes":12}}`,
		`{"sessionUpdate":"plan","entries":[{"content":"fix","priority":"high","status":"in_progress"}]}`,
		`{"sessionUpdate":"current_mode_update","currentModeId":"plan"}`,
		`{"sessionUpdate":"session_info_update","title":"Fixing main.go"}`,
		`{"sessionUpdate":"usage_update","used":15,"size":128000}`,
	}
	require.Len(t, got, len(want))
	for i := range want {
		assert.JSONEq(t, want[i], got[i], "update %d", i)
	}
}

func TestTranscript_UpdatesClosesInterruptedToolCalls(t *testing.T) {
	tr := transcript(
		Record{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("go")}},
		Record{Kind: KindToolCalls, ToolCalls: []ToolCall{{ID: "c1", Name: "shell"}}},
		Record{Kind: KindToolCall, Tool: &ToolCallRecord{ToolCallID: "c1", Title: "Run", Status: acp.StatusInProgress}},
	)
	got := updatesJSON(t, tr.Updates())
	require.Len(t, got, 3)
	assert.JSONEq(t, `{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"failed",
		"content":[{"type":"content","content":{"type":"text","text":"interrupted: acpd stopped before this tool call finished"}}]}`, got[2])
}

func TestTranscript_Messages(t *testing.T) {
	tests := []struct {
		name   string
		recs   []Record
		toUser func([]acp.ContentBlock) (model.Message, error)
		want   []model.Message
	}{
		{
			name: "full turn with tools",
			recs: []Record{
				{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("hi"), {Type: "image", MimeType: "image/png", Data: "AA=="}}},
				{Kind: KindReasoning, Text: "think"},
				{Kind: KindText, Text: "Let me "},
				{Kind: KindText, Text: "look."},
				{Kind: KindToolCalls, ToolCalls: []ToolCall{{ID: "a", Name: "read", Arguments: json.RawMessage(`{"p":1}`)}, {ID: "b", Name: "ls"}}},
				{Kind: KindToolCall, Tool: &ToolCallRecord{ToolCallID: "a"}},
				{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: "a", Name: "read", ModelText: "content"}},
				{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: "b", Name: "ls", ModelText: "x y"}},
				{Kind: KindReminder, Text: "stay on task"},
				{Kind: KindText, Text: "Done."},
				{Kind: KindTurnEnd, StopReason: acp.StopEndTurn},
			},
			want: []model.Message{
				{Role: model.RoleUser, Content: "hi", Images: []model.Image{{MimeType: "image/png", Data: "AA=="}}},
				{Role: model.RoleAssistant, Content: "Let me look.", Reasoning: "think", ToolCalls: []model.ToolCall{
					{ID: "a", Name: "read", Arguments: json.RawMessage(`{"p":1}`)}, {ID: "b", Name: "ls", Arguments: json.RawMessage(`{}`)}}},
				{Role: model.RoleTool, ToolCallID: "a", Name: "read", Content: "content"},
				{Role: model.RoleTool, ToolCallID: "b", Name: "ls", Content: "x y"},
				{Role: model.RoleUser, Content: "stay on task"},
				{Role: model.RoleAssistant, Content: "Done."},
			},
		},
		{
			name: "interrupted tool call, back-to-back responses, stray result",
			recs: []Record{
				{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("go")}},
				{Kind: KindToolCalls, ToolCalls: []ToolCall{{ID: "a", Name: "x"}}},
				{Kind: KindText, Text: "second response"},
				{Kind: KindToolCalls, ToolCalls: []ToolCall{{ID: "b", Name: "y"}}},
				{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: "zzz", ModelText: "stray"}},
				{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: "b", Name: "y", ModelText: "ok"}},
			},
			want: []model.Message{
				{Role: model.RoleUser, Content: "go"},
				{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "a", Name: "x", Arguments: json.RawMessage(`{}`)}}},
				{Role: model.RoleTool, ToolCallID: "a", Name: "x", Content: InterruptedToolResult},
				{Role: model.RoleAssistant, Content: "second response", ToolCalls: []model.ToolCall{{ID: "b", Name: "y", Arguments: json.RawMessage(`{}`)}}},
				{Role: model.RoleTool, ToolCallID: "b", Name: "y", Content: "ok"},
			},
		},
		{
			name: "loop stop leads the next prompt; host conversion",
			recs: []Record{
				{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("one")}},
				{Kind: KindLoopStop, Loop: &LoopStop{LoopType: "x", Message: "LOOP"}},
				{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("two")}},
				{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("bad")}},
			},
			toUser: func(b []acp.ContentBlock) (model.Message, error) {
				if b[0].Text == "bad" {
					return model.Message{}, errors.New("nope")
				}
				return model.Message{Role: model.RoleUser, Content: "<" + b[0].Text + ">"}, nil
			},
			want: []model.Message{
				{Role: model.RoleUser, Content: "<one>"},
				{Role: model.RoleUser, Content: "LOOP\n\n<two>"},
				{Role: model.RoleUser, Content: "bad"},
			},
		},
		{
			name: "resources and links in the plain conversion",
			recs: []Record{{Kind: KindUser, Prompt: []acp.ContentBlock{
				acp.TextBlock("see"),
				{Type: "resource_link", URI: "file:///a"},
				{Type: "resource", Resource: &acp.EmbeddedResource{URI: "file:///b", Text: ptr("B")}},
			}}},
			want: []model.Message{{Role: model.RoleUser, Content: "see\n@file:///a\n<resource uri=\"file:///b\">\nB\n</resource>"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := transcript(tt.recs...).Messages(tt.toUser)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestTranscript_PendingLoop(t *testing.T) {
	loop := &LoopStop{LoopType: "x", Message: "m"}
	assert.Equal(t, loop, transcript(Record{Kind: KindLoopStop, Loop: loop}, Record{Kind: KindTurnEnd, Error: "loop"}).PendingLoop)
	assert.Nil(t, transcript(Record{Kind: KindLoopStop, Loop: loop}, Record{Kind: KindUser, Prompt: []acp.ContentBlock{}}).PendingLoop)
}

// ACP leaves a refused turn out of the next prompt: the rebuilt history
// drops it, and a loop note it consumed is pending again.
func TestTranscript_RefusedTurnLeftOut(t *testing.T) {
	loop := &LoopStop{LoopType: "x", Message: "note"}
	text := func(s string) []acp.ContentBlock { return []acp.ContentBlock{acp.TextBlock(s)} }
	tr := transcript(
		Record{Kind: KindUser, Prompt: text("one")},
		Record{Kind: KindText, Text: "hello"},
		Record{Kind: KindTurnEnd, StopReason: acp.StopEndTurn},
		Record{Kind: KindLoopStop, Loop: loop},
		Record{Kind: KindTurnEnd, Error: "loop"},
		Record{Kind: KindUser, Prompt: text("forbidden")},
		Record{Kind: KindText, Text: "I won't"},
		Record{Kind: KindTurnEnd, StopReason: acp.StopRefusal},
	)
	assert.Equal(t, loop, tr.PendingLoop)
	assert.Equal(t, []model.Message{
		{Role: model.RoleUser, Content: "one"},
		{Role: model.RoleAssistant, Content: "hello"},
	}, tr.Messages(nil))
}
