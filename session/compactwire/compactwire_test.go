package compactwire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
)

func record(t *testing.T) (Send, func() []acp.SessionUpdate) {
	var got []acp.SessionUpdate
	v, err := acptest.DefaultValidator()
	require.NoError(t, err)
	return func(u acp.SessionUpdate) {
			b, err := json.Marshal(u)
			require.NoError(t, err)
			require.NoError(t, v.ValidateDef("SessionUpdate", b), "%s", b)
			got = append(got, u)
		}, func() []acp.SessionUpdate {
			return got
		}
}

func kinds(us []acp.SessionUpdate) []string {
	var out []string
	for _, u := range us {
		k := u.Kind
		if u.Compaction != nil {
			k += ":" + string(u.Compaction.Status)
		}
		out = append(out, k)
	}
	return out
}

func TestOnTheWire(t *testing.T) {
	send, got := record(t)
	c := Start(send, true, "compact_1", "Compacting conversation (9,000 tokens)", nil)
	c.Complete("Compacting conversation (9,000 → 2,000 tokens)", "Summarised 8 earlier messages; kept 2 verbatim.", "Goal: fix the build.\n\nDone: read main.go.\n\n\nNext: run tests.")
	us := got()
	assert.Equal(t, []string{"compaction_update:in_progress", "compaction_summary_chunk", "compaction_summary_chunk", "compaction_summary_chunk", "compaction_update:completed"}, kinds(us))
	var text strings.Builder
	for _, u := range us[1:4] {
		assert.Equal(t, "compact_1", u.CompactionID)
		text.WriteString(u.Content.Text)
	}
	assert.Equal(t, "Goal: fix the build.\n\nDone: read main.go.\n\n\nNext: run tests.", text.String())

	send, got = record(t)
	c = Start(send, true, "compact_2", "x", nil)
	c.Complete("y", "Replaced 3 old tool results with stubs.", "")
	us = got()
	require.Len(t, us, 3)
	assert.Equal(t, "Replaced 3 old tool results with stubs.", us[1].Content.Text, "without a summary, the account is the summary")

	send, got = record(t)
	Start(send, true, "compact_3", "x", nil).Fail("failed", "The summary failed.", false)
	Start(send, true, "compact_4", "x", nil).Fail("failed", "Cancelled.", true)
	us = got()
	assert.Equal(t, []string{"compaction_update:in_progress", "compaction_update:failed", "compaction_update:in_progress", "compaction_update:cancelled"}, kinds(us))
	assert.Equal(t, "The summary failed.", us[1].Compaction.Error)
}

func TestWithoutTheCapabilityAToolCall(t *testing.T) {
	send, got := record(t)
	c := Start(send, false, "compact_1", "Compacting conversation (9,000 tokens)", acp.Meta{"acpd": map[string]any{"compaction": "auto"}})
	c.Complete("Compacting conversation (9,000 → 2,000 tokens)", "Summarised.", "a summary")
	Start(send, false, "compact_2", "t", nil).Fail("t failed", "Cancelled.", true)
	us := got()
	assert.Equal(t, []string{"tool_call", "tool_call_update", "tool_call", "tool_call_update"}, kinds(us))
	assert.Equal(t, ToolName, us[0].ToolCall.Name)
	assert.Equal(t, acp.StatusCompleted, us[1].ToolCallUpdate.Status)
	assert.Equal(t, "Summarised.", us[1].ToolCallUpdate.Content[0].Content.Text)
	assert.Equal(t, acp.StatusFailed, us[3].ToolCallUpdate.Status)
}

func TestReplay(t *testing.T) {
	us := Replay(true, "compact_1", "T", "Summarised.", "S1\n\nS2", nil)
	assert.Equal(t, []string{"compaction_update:in_progress", "compaction_summary_chunk", "compaction_summary_chunk", "compaction_update:completed"}, kinds(us))
	us = Replay(false, "compact_1", "T", "Summarised.", "S1", nil)
	require.Len(t, us, 1)
	assert.Equal(t, acp.StatusCompleted, us[0].ToolCall.Status)
	assert.Equal(t, ToolName, us[0].ToolCall.Name)
}

func TestParagraphs(t *testing.T) {
	for _, s := range []string{"", "one", "a\n\nb", "a\n\n\n\nb\n\n", "\n\nx"} {
		assert.Equal(t, s, strings.Join(Paragraphs(s), ""), "%q", s)
	}
	assert.Equal(t, []string{"a\n\n", "b"}, Paragraphs("a\n\nb"))
}
