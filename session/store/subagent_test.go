package store

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
)

// subagentTurn is a prompt turn whose one agent call (call_a) ran a
// subagent that read a file, was stopped by its guard, and whose failure
// the session's model then answered.
func subagentTurn() []Record {
	return []Record{
		{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("find the config")}},
		{Kind: KindToolCalls, ToolCalls: []ToolCall{{ID: "call_a", Name: "agent", Arguments: json.RawMessage(`{"description":"Find it","prompt":"where?"}`)}}},
		{Kind: KindToolCall, Tool: &ToolCallRecord{ToolCallID: "call_a", Name: "agent", Title: "Find it", Kind: acp.KindOther, Status: acp.StatusInProgress}},
		{Kind: KindAgentStart, Parent: "call_a", Agent: &AgentRun{Type: "Explore", Description: "Find it", Prompt: "where?"}},
		{Kind: KindText, Parent: "call_a", Text: "Looking."},
		{Kind: KindToolCalls, Parent: "call_a", ToolCalls: []ToolCall{{ID: "call_s", Name: "read_file", Arguments: json.RawMessage(`{"file_path":"/w/a"}`)}}},
		{Kind: KindToolCall, Parent: "call_a", Tool: &ToolCallRecord{ToolCallID: "call_s", Name: "read_file", Title: "Read a", Kind: acp.KindRead, Status: acp.StatusInProgress}},
		{Kind: KindToolResult, Parent: "call_a", Tool: &ToolCallRecord{ToolCallID: "call_s", Name: "read_file", Status: acp.StatusCompleted, ModelText: "a"}},
		{Kind: KindUsage, Parent: "call_a", Usage: &Usage{PromptTokens: 9, Used: 9, Size: 100}},
		{Kind: KindLoopStop, Parent: "call_a", Loop: &LoopStop{LoopType: "turn_tool_call_cap", CapReason: "stuck", ToolCalls: 101}},
		{Kind: KindAgentEnd, Parent: "call_a", Agent: &AgentRun{Error: "loop protection stopped the subagent"}},
		{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: "call_a", Name: "agent", Status: acp.StatusFailed, ModelText: "stopped"}},
		{Kind: KindText, Text: "The subagent looped."},
		{Kind: KindTurnEnd, StopReason: acp.StopEndTurn},
	}
}

func TestTranscript_SubagentRecordsReplayNested(t *testing.T) {
	tr := transcript(subagentTurn()...)
	assert.Nil(t, tr.PendingLoop, "a subagent's loop stop ends its run, not the turn")
	got := updatesJSON(t, tr.Updates())
	want := []string{
		`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"find the config"},"messageId":"msg_r1"}`,
		`{"sessionUpdate":"tool_call","toolCallId":"call_a","title":"Find it","name":"agent","kind":"other","status":"in_progress"}`,
		`{"sessionUpdate":"tool_call","toolCallId":"call_s","title":"Read a","name":"read_file","kind":"read","status":"in_progress","_meta":{"acpd.parentToolCallId":"call_a"}}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"call_s","status":"completed","_meta":{"acpd.parentToolCallId":"call_a"}}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"call_a","status":"failed"}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"The subagent looped."},"messageId":"msg_r13"}`,
	}
	require.Len(t, got, len(want), "%q", got)
	for i := range want {
		assert.JSONEq(t, want[i], got[i], "update %d", i)
	}
}

func TestTranscript_SubagentRecordsStayOutOfHistory(t *testing.T) {
	tr := transcript(subagentTurn()...)
	msgs := tr.Messages(nil)
	require.Len(t, msgs, 4)
	assert.Equal(t, model.RoleUser, msgs[0].Role)
	require.Len(t, msgs[1].ToolCalls, 1)
	assert.Equal(t, "call_a", msgs[1].ToolCalls[0].ID)
	assert.Equal(t, model.Message{Role: model.RoleTool, ToolCallID: "call_a", Name: "agent", Content: "stopped"}, msgs[2])
	assert.Equal(t, "The subagent looped.", msgs[3].Content)
}

func TestStore_SubagentRecordsRoundTrip(t *testing.T) {
	recs := subagentTurn()
	tr := roundTrip(t, t.TempDir(), SessionMeta{ID: "sess-sub", Cwd: "/w"}, recs)
	for i, want := range recs {
		got := tr.Records[i+1]
		assert.Equal(t, want.Kind, got.Kind)
		assert.Equal(t, want.Parent, got.Parent, "record %d", i)
		assert.Equal(t, want.Agent, got.Agent, "record %d", i)
	}
}

func TestRecord_AgentValidation(t *testing.T) {
	for _, tc := range []struct {
		rec  Record
		want string
	}{
		{Record{Kind: KindAgentStart, Agent: &AgentRun{Type: "Explore"}}, "field parent is empty"},
		{Record{Kind: KindAgentStart, Parent: "c"}, "field agent is missing"},
		{Record{Kind: KindAgentStart, Parent: "c", Agent: &AgentRun{}}, "field agent.type is empty"},
		{Record{Kind: KindAgentEnd, Parent: "c"}, "field agent is missing"},
	} {
		err := tc.rec.validate()
		require.ErrorIs(t, err, ErrInvalidRecord)
		assert.ErrorContains(t, err, tc.want)
	}
	assert.NoError(t, (&Record{Kind: KindAgentEnd, Parent: "c", Agent: &AgentRun{StopReason: acp.StopEndTurn}}).validate())
}

func TestScan_SubagentLines(t *testing.T) {
	assert.Equal(t, KindAgentStart, PeekKind([]byte(`{"v":1,"t":"2026-01-01T00:00:00Z","kind":"agent_start","parent":"c","agent":{"type":"x"}}`)))
	assert.Equal(t, KindAgentEnd, PeekKind([]byte(`{"v":1,"t":"2026-01-01T00:00:00Z","kind":"agent_end","parent":"c","agent":{}}`)))
	rec := Record{V: 1, Kind: KindToolCalls, Parent: "call_a", ToolCalls: []ToolCall{{ID: "x", Name: "glob"}}}
	line, err := rec.encode(nil)
	require.NoError(t, err)
	calls, parent, err := DecodeToolCalls(line, nil)
	require.NoError(t, err)
	assert.Equal(t, "call_a", parent)
	require.Len(t, calls, 1)
	assert.Equal(t, "glob", calls[0].Name)
}
