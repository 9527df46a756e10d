package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
)

// A compaction record rebuilds the compacted history on reload; records
// after it append to it, and a refused turn after it is still undone.
func TestTranscript_MessagesAppliesCompaction(t *testing.T) {
	tr := &Transcript{Records: []Record{
		{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("one")}},
		{Kind: KindToolCalls, ToolCalls: []ToolCall{{ID: "c1", Name: "read_file"}}},
		{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: "c1", Name: "read_file", ModelText: "big result"}},
		{Kind: KindText, Text: "answer one"},
		{Kind: KindTurnEnd, StopReason: acp.StopEndTurn},
		{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("two")}},
		{Kind: KindToolCalls, ToolCalls: []ToolCall{{ID: "c2", Name: "read_file"}}},
		{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: "c2", Name: "read_file", ModelText: "second result"}},
		{Kind: KindCompaction, Compaction: &Compaction{Method: "summary", Cut: 5, Pinned: 4,
			Stubs:   []Stub{{ToolCallID: "c1", Tokens: 3}},
			Head:    []HeadMessage{{Role: model.RoleUser, Text: "summary"}, {Role: model.RoleAssistant, Text: "ok"}},
			Summary: "summary", Detail: "Summarised 4 earlier messages.",
			Title: "Compacting conversation (10 → 5 tokens)", ToolCallID: "compact"}},
		{Kind: KindText, Text: "answer two"},
		{Kind: KindTurnEnd, StopReason: acp.StopEndTurn},
	}}
	msgs := tr.Messages(nil)
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Role)+":"+m.Content)
	}
	assert.Equal(t, []string{"user:summary", "assistant:ok", "user:two", "assistant:", "tool:second result", "assistant:answer two"}, got)

	ups := tr.Updates()
	var compaction *acp.ToolCall
	for _, u := range ups {
		if u.ToolCall != nil && u.ToolCall.ToolCallID == "compact" {
			compaction = u.ToolCall
		}
	}
	require.NotNil(t, compaction, "the replay shows the compaction")
	assert.Equal(t, acp.KindThink, compaction.Kind)
	assert.Equal(t, acp.StatusCompleted, compaction.Status)
	assert.Equal(t, "compact", compaction.Name)

	// A client with session.compaction gets the compaction entity, where
	// the tool call frame was, and no frame.
	wire := tr.UpdatesFor(ReplayOptions{Compaction: true})
	require.Len(t, wire, len(ups)+2, "in_progress, one chunk, completed for the frame")
	var kinds []string
	for _, u := range wire {
		require.False(t, u.ToolCall != nil && u.ToolCall.ToolCallID == "compact", "no frame")
		if u.Kind == acp.UpdateCompaction || u.Kind == acp.UpdateCompactionChunk {
			kinds = append(kinds, u.Kind)
		}
	}
	assert.Equal(t, []string{acp.UpdateCompaction, acp.UpdateCompactionChunk, acp.UpdateCompaction}, kinds)
	for i, u := range ups {
		if u.ToolCall != nil && u.ToolCall.ToolCallID == "compact" {
			assert.Equal(t, acp.CompactionInProgress, wire[i].Compaction.Status, "at the frame's place")
			assert.Equal(t, "summary", wire[i+1].Content.Text)
			assert.Equal(t, acp.CompactionCompleted, wire[i+2].Compaction.Status)
		}
	}
}

func TestCompaction_ApplyRefusesABadCut(t *testing.T) {
	msgs := []model.Message{
		{Role: model.RoleUser, Content: "p"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c"}}},
		{Role: model.RoleTool, ToolCallID: "c"},
	}
	c := &Compaction{Method: "drop", Cut: 2, Pinned: -1}
	out, _, ok := c.Apply(msgs)
	assert.False(t, ok, "a cut between a call and its result")
	assert.Equal(t, msgs, out)
	_, _, ok = (&Compaction{Method: "drop", Cut: 9, Pinned: -1}).Apply(msgs)
	assert.False(t, ok)
	r := Record{V: Version, Kind: KindCompaction, Compaction: &Compaction{Method: "other", Pinned: -1}}
	assert.ErrorIs(t, r.validate(), ErrInvalidRecord)
	r.Compaction.Method, r.Compaction.Pinned, r.Compaction.Cut = "summary", 3, 2
	assert.ErrorContains(t, r.validate(), "pinned")
}

func TestStubTextLen(t *testing.T) {
	long := make([]byte, 300)
	for _, tc := range []struct {
		args   []byte
		tokens int
	}{{nil, 0}, {[]byte(`{"a":1}`), 9}, {[]byte(`{}`), 10}, {long, 123456}, {long[:MaxStubArgs], 99}} {
		assert.Equal(t, len(AppendStubText(nil, "read_file", tc.args, tc.tokens)), StubTextLen("read_file", tc.args, tc.tokens))
	}
}
