package store

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
)

// A steer record replays where it landed (after the results it followed)
// and rebuilds the same user message the model read, in the same place.
func TestTranscript_Steer(t *testing.T) {
	steer := []acp.ContentBlock{acp.TextBlock("use the blue file")}
	tr := transcript(
		Record{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("go")}, MessageID: "msg_p"},
		Record{Kind: KindToolCalls, ToolCalls: []ToolCall{{ID: "c1", Name: "run_shell_command", Arguments: json.RawMessage(`{"command":"sleep 2"}`)}}},
		Record{Kind: KindToolCall, Tool: &ToolCallRecord{ToolCallID: "c1", Title: "sleep 2", Status: acp.StatusInProgress}},
		Record{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: "c1", Name: "run_shell_command", Status: acp.StatusCompleted, ModelText: "ok"}},
		Record{Kind: KindSteer, Prompt: steer, MessageID: "msg_s"},
		Record{Kind: KindText, Text: "done", MessageID: "m2"},
		Record{Kind: KindTurnEnd, StopReason: acp.StopEndTurn},
	)
	got := updatesJSON(t, tr.Updates())
	require.Len(t, got, 5)
	assert.JSONEq(t, `{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed"}`, got[2])
	assert.JSONEq(t, `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"use the blue file"},"messageId":"msg_s"}`, got[3])
	assert.JSONEq(t, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"},"messageId":"m2"}`, got[4])

	toUser := func(b []acp.ContentBlock) (model.Message, error) {
		return model.Message{Role: model.RoleUser, Content: "converted: " + b[0].Text}, nil
	}
	msgs := tr.Messages(toUser)
	require.Len(t, msgs, 5)
	assert.Equal(t, model.RoleTool, msgs[2].Role)
	assert.Equal(t, model.Message{Role: model.RoleUser, Content: "converted: use the blue file"}, msgs[3])
	assert.Equal(t, model.RoleAssistant, msgs[4].Role)
	assert.Equal(t, "go", tr.Title, "a steer is not the session's title")
}

func TestRecord_SteerNeedsAPrompt(t *testing.T) {
	r := Record{Kind: KindSteer, Prompt: []acp.ContentBlock{}}
	require.ErrorIs(t, r.validate(), ErrInvalidRecord)
	r.Prompt = []acp.ContentBlock{acp.TextBlock("x")}
	require.NoError(t, r.validate())
	assert.Equal(t, KindSteer, PeekKind([]byte(`{"v":1,"t":"2026-01-01T00:00:00Z","kind":"steer","prompt":[]}`)))
}
