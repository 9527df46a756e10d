package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

func TestScanner_ReadOnlyScan(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	require.NoError(t, err)
	w, err := st.Create(SessionMeta{ID: "s1", Cwd: "/w"})
	require.NoError(t, err)
	big := strings.Repeat("x", 600<<10) // longer than the scanner's buffer
	require.NoError(t, w.Append(Record{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock(big)}}))
	require.NoError(t, w.Append(Record{Kind: KindToolCalls, ToolCalls: []ToolCall{
		{ID: "a", Name: "read_file", Arguments: json.RawMessage(`{"file_path":"/w/x"}`)}, {ID: "b", Name: "grep_search"}}}))
	require.NoError(t, w.Append(Record{Kind: KindToolResult, Tool: &ToolCallRecord{ToolCallID: "a", Status: acp.StatusCompleted}}))
	require.NoError(t, w.EndTurn(acp.StopEndTurn, ""))
	require.NoError(t, w.Close())
	f, err := os.OpenFile(filepath.Join(dir, "sessions", "s1.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, _ = f.WriteString(`{"v":1,"t":"2026-01-01T00:00:00Z","kind":"tool_ca`)
	require.NoError(t, f.Close())
	before, err := os.ReadFile(filepath.Join(dir, "sessions", "s1.jsonl"))
	require.NoError(t, err)

	ids, err := SessionIDs(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"s1"}, ids)

	sc := NewScanner()
	var kinds []Kind
	var calls []ToolCall
	var torn int
	require.NoError(t, sc.ScanFile(dir, "s1", func(k Kind, line []byte) error {
		kinds = append(kinds, k)
		switch k {
		case KindUser:
			tm, err := DecodeTime(line)
			require.NoError(t, err)
			assert.WithinDuration(t, time.Now(), tm, time.Minute)
			assert.Greater(t, len(line), 600<<10)
		case KindToolCalls:
			cs, _, err := DecodeToolCalls(line, nil)
			require.NoError(t, err)
			for _, c := range cs {
				c.Name, c.ID = strings.Clone(c.Name), strings.Clone(c.ID)
				c.Arguments = append(json.RawMessage(nil), c.Arguments...)
				calls = append(calls, c)
			}
		case "":
			var r Record
			assert.ErrorIs(t, Decode(line, &r), ErrInvalidRecord)
			torn++
		}
		return nil
	}))
	assert.Equal(t, []Kind{KindMeta, KindUser, KindToolCalls, KindToolResult, KindTurnEnd, ""}, kinds)
	assert.Equal(t, 1, torn, "the torn last line is passed and does not decode")
	require.Len(t, calls, 2)
	assert.Equal(t, "read_file", calls[0].Name)
	assert.JSONEq(t, `{"file_path":"/w/x"}`, string(calls[0].Arguments))

	after, err := os.ReadFile(filepath.Join(dir, "sessions", "s1.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, before, after, "scanning changes nothing")
	require.ErrorIs(t, sc.ScanFile(dir, "nope", func(Kind, []byte) error { return nil }), ErrNotFound)

	_, _, err = DecodeToolCalls([]byte(`{"v":1,"kind":"tool_calls","toolCalls":[{"id":"","name":"x"}]}`), nil)
	require.ErrorIs(t, err, ErrInvalidRecord)
	_, _, err = DecodeToolCalls([]byte(`{"v":9,"kind":"tool_calls","toolCalls":[{"id":"a"}]}`), nil)
	require.ErrorIs(t, err, ErrInvalidRecord)
	assert.Equal(t, KindToolResult, PeekKind([]byte(`{"v":1,"t":"2026-01-01T00:00:00Z","kind":"tool_result","tool":{}}`)))
	assert.Equal(t, Kind(""), PeekKind([]byte(`{"kind":"user"}`)))
}
