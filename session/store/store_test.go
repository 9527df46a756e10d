package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	return s
}

func ptr[T any](v T) *T { return &v }

// roundTrip writes a session of meta and recs into a store in dir and
// loads it back through a store opened afresh: it must load whole, with
// the meta record first.
func roundTrip(t *testing.T, dir string, meta SessionMeta, recs []Record) *Transcript {
	t.Helper()
	w, err := openStore(t, dir).Create(meta)
	require.NoError(t, err)
	for _, r := range recs {
		require.NoError(t, w.Append(r), "append %s", r.Kind)
	}
	require.NoError(t, w.Close())
	tr, err := openStore(t, dir).Load(meta.ID)
	require.NoError(t, err)
	assert.Empty(t, tr.Warnings)
	require.Len(t, tr.Records, len(recs)+1)
	return tr
}

// everyKind returns one record of each kind after meta, with every payload
// field populated.
func everyKind(id string) []Record {
	base := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	return []Record{
		{Kind: KindUser, T: at(1), Prompt: []acp.ContentBlock{
			acp.TextBlock("fix the bug\nin main.go"),
			{Type: "resource_link", URI: "file:///w/main.go", Name: "main.go"},
			{Type: "resource", Resource: &acp.EmbeddedResource{URI: "file:///w/a.txt", Text: ptr("hello")}},
			{Type: "image", MimeType: "image/png", Data: "iVBORw0KGgo="},
		}},
		{Kind: KindReasoning, T: at(2), Text: "look at main.go first", MessageID: "m1"},
		{Kind: KindText, T: at(3), Text: "Reading the file.", MessageID: "m1"},
		{Kind: KindToolCalls, T: at(4), ToolCalls: []ToolCall{
			{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"main.go"}`)},
			{ID: "call_2", Name: "shell", Arguments: json.RawMessage(`"{bad"`), Invalid: "unexpected end of JSON input"},
		}},
		{Kind: KindToolCall, T: at(5), Tool: &ToolCallRecord{
			ToolCallID: "call_1", Name: "read_file", Title: "Read main.go", Kind: acp.KindRead,
			Status: acp.StatusPending, Locations: []acp.ToolCallLocation{{Path: "/w/main.go", Line: ptr(3)}},
			RawInput: json.RawMessage(`{"path":"main.go"}`),
		}},
		{Kind: KindToolResult, T: at(6), Tool: &ToolCallRecord{
			ToolCallID: "call_1", Name: "read_file", Title: "Read main.go", Kind: acp.KindRead,
			Status: acp.StatusCompleted, Locations: []acp.ToolCallLocation{{Path: "/w/main.go"}},
			RawInput: json.RawMessage(`{"path":"main.go"}`), RawOutput: json.RawMessage(`{"bytes":12}`),
			Content:   []acp.ToolCallContent{acp.TextContent("package main"), acp.DiffContent("/w/main.go", nil, "x")},
			ModelText: "1\tpackage main",
		}},
		{Kind: KindReminder, T: at(7), Text: "you are repeating yourself"},
		{Kind: KindPlan, T: at(8), Plan: []acp.PlanEntry{{Content: "fix", Priority: "high", Status: "in_progress"}}},
		{Kind: KindMode, T: at(9), ModeID: "plan"},
		{Kind: KindModel, T: at(10), ModelID: "qwen3-coder"},
		{Kind: KindLoopStop, T: at(11), Loop: &LoopStop{LoopType: "consecutive_identical_tool_calls", Message: "a loop was detected"}},
		{Kind: KindTitle, T: at(12), Title: "Fixing main.go"},
		{Kind: KindUsage, T: at(13), Usage: &Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Used: 15, Size: 128000}},
		{Kind: KindExt, T: at(14), Data: json.RawMessage(`{"x":[1,2]}`)},
		{Kind: KindTurnEnd, T: at(15), StopReason: acp.StopEndTurn},
		{Kind: KindTurnEnd, T: at(16), Error: "model request failed: 500"},
		{Kind: KindMeta, T: at(17), Meta: &SessionMeta{ID: id, Cwd: "/w2", AdditionalDirectories: []string{"/lib"}, CreatedAt: base}},
	}
}

func TestStore_RoundTripEveryKind(t *testing.T) {
	dir := t.TempDir()
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	recs := everyKind("sess-1")
	tr := roundTrip(t, dir, SessionMeta{ID: "sess-1", Cwd: "/w", AdditionalDirectories: []string{"/x"}, CreatedAt: created}, recs)
	assert.Equal(t, KindMeta, tr.Records[0].Kind)
	assert.Equal(t, SessionMeta{ID: "sess-1", Cwd: "/w", AdditionalDirectories: []string{"/x"}, CreatedAt: created}, *tr.Records[0].Meta)
	for i, want := range recs {
		want.V = Version
		got := tr.Records[i+1]
		// Compare through JSON: time zones and RawMessage spacing are the
		// only things allowed to differ.
		wj, err := json.Marshal(want)
		require.NoError(t, err)
		gj, err := json.Marshal(got)
		require.NoError(t, err)
		assert.JSONEq(t, string(wj), string(gj), "record %d (%s)", i+1, want.Kind)
		assert.True(t, want.T.Equal(got.T), "record %d time", i+1)
	}
	assert.Equal(t, "Fixing main.go", tr.Title)
	assert.Equal(t, "plan", tr.ModeID)
	assert.Equal(t, "qwen3-coder", tr.ModelID)
	assert.Equal(t, "/w2", tr.Meta.Cwd)
	assert.Equal(t, []string{"/lib"}, tr.Meta.AdditionalDirectories)
	assert.True(t, recs[len(recs)-1].T.Equal(tr.UpdatedAt))
	assert.Equal(t, &LoopStop{LoopType: "consecutive_identical_tool_calls", Message: "a loop was detected"}, tr.PendingLoop)
}

func TestWriter_AppendRejectsInvalidRecords(t *testing.T) {
	s := openStore(t, t.TempDir())
	w, err := s.Create(SessionMeta{ID: "a", Cwd: "/w"})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	tests := []struct {
		name string
		rec  Record
		want string
	}{
		{"empty kind", Record{}, "field kind is empty"},
		{"unknown kind", Record{Kind: "bogus"}, `unknown kind "bogus"`},
		{"user without prompt", Record{Kind: KindUser}, "field prompt"},
		{"tool result without id", Record{Kind: KindToolResult, Tool: &ToolCallRecord{}}, "tool.toolCallId"},
		{"tool call bad raw input", Record{Kind: KindToolCall, Tool: &ToolCallRecord{ToolCallID: "x", RawInput: json.RawMessage("{")}}, "tool.rawInput"},
		{"tool calls empty", Record{Kind: KindToolCalls}, "toolCalls is empty"},
		{"tool calls no id", Record{Kind: KindToolCalls, ToolCalls: []ToolCall{{Name: "x"}}}, "toolCalls[0].id"},
		{"mode empty", Record{Kind: KindMode}, "modeId"},
		{"loop without type", Record{Kind: KindLoopStop, Loop: &LoopStop{}}, "loop.loopType"},
		{"turn end empty", Record{Kind: KindTurnEnd}, "stopReason"},
		{"meta of another session", Record{Kind: KindMeta, Meta: &SessionMeta{ID: "b", Cwd: "/w"}}, `meta.id is "b"`},
		{"future version", Record{V: 2, Kind: KindTitle, Title: "x"}, "field v is 2"},
		{"ext not json", Record{Kind: KindExt, Data: json.RawMessage("nope")}, "field data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := w.Append(tt.rec)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidRecord)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	tr, err := s.Load("a")
	require.NoError(t, err)
	assert.Len(t, tr.Records, 1, "rejected records must not reach the file")
}

func TestStore_Permissions(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	s := openStore(t, root)
	w, err := s.Create(SessionMeta{ID: "p", Cwd: "/w"})
	require.NoError(t, err)
	require.NoError(t, w.EndTurn(acp.StopEndTurn, ""))
	require.NoError(t, w.Close())
	for path, want := range map[string]os.FileMode{
		root:                                    0o700,
		filepath.Join(root, "sessions"):         0o700,
		filepath.Join(root, "sessions/p.jsonl"): 0o600,
		filepath.Join(root, "index.json"):       0o600,
		filepath.Join(root, "index.lock"):       0o600,
	} {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode().Perm(), path)
	}
}

func TestStore_RejectsEscapingIDs(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	for _, id := range []string{"../x", "a/b", "", "..", ".", strings.Repeat("a", 129), "a b", "a\x00b", `a\b`, "é", "/etc/passwd"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			_, err := s.Create(SessionMeta{ID: id, Cwd: "/w"})
			if id == "" {
				// Create generates an id when none is given.
				require.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrInvalidID)
			_, err = s.OpenWriter(id)
			assert.ErrorIs(t, err, ErrInvalidID)
			_, err = s.Load(id)
			assert.ErrorIs(t, err, ErrInvalidID)
			assert.ErrorIs(t, s.Delete(id), ErrInvalidID)
			assert.False(t, s.Exists(id))
		})
	}
	assert.ErrorIs(t, ValidateID(""), ErrInvalidID)
	assert.NoError(t, ValidateID(strings.Repeat("a", 128)))
	entries, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotEqual(t, "x.jsonl", e.Name())
	}
}

func TestNewID_IsValidAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		require.NoError(t, ValidateID(id))
		require.False(t, seen[id])
		seen[id] = true
	}
}

func TestStore_CreateValidates(t *testing.T) {
	s := openStore(t, t.TempDir())
	_, err := s.Create(SessionMeta{ID: "a", Cwd: "relative"})
	assert.ErrorContains(t, err, "field cwd")
	w, err := s.Create(SessionMeta{ID: "a", Cwd: "/w/../w/"})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = s.Create(SessionMeta{ID: "a", Cwd: "/w"})
	assert.ErrorIs(t, err, ErrExists)
	tr, err := s.Load("a")
	require.NoError(t, err)
	assert.Equal(t, "/w", tr.Meta.Cwd)
	_, err = s.Load("nope")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.OpenWriter("nope")
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestStore_LockAcrossStores(t *testing.T) {
	dir := t.TempDir()
	s1, s2 := openStore(t, dir), openStore(t, dir)
	w, err := s1.Create(SessionMeta{ID: "busy", Cwd: "/w"})
	require.NoError(t, err)

	_, err = s2.OpenWriter("busy")
	require.ErrorIs(t, err, ErrLocked)
	assert.EqualError(t, err, "resume session busy: session busy is in use by another acpd process")
	var le *LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "busy", le.ID)
	_, err = s1.OpenWriter("busy")
	assert.ErrorIs(t, err, ErrLocked, "a second writer in the same store is refused too")
	assert.ErrorIs(t, s2.Delete("busy"), ErrLocked)

	// Reads do not need the lock.
	_, err = s2.Load("busy")
	require.NoError(t, err)

	require.NoError(t, w.Close())
	w2, err := s2.OpenWriter("busy")
	require.NoError(t, err, "the lock is released on Close")
	require.NoError(t, w2.Append(Record{Kind: KindTitle, Title: "second"}))
	require.NoError(t, w2.Close())
	assert.ErrorIs(t, w2.Append(Record{Kind: KindTitle, Title: "x"}), ErrClosed)
	assert.NoError(t, w2.Close(), "Close is idempotent")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

func sessionLines(t *testing.T, id string, n int) string {
	t.Helper()
	var b strings.Builder
	meta := Record{V: 1, T: time.Unix(1000, 0).UTC(), Kind: KindMeta, Meta: &SessionMeta{ID: id, Cwd: "/w", CreatedAt: time.Unix(1000, 0).UTC()}}
	j, err := json.Marshal(meta)
	require.NoError(t, err)
	b.Write(j)
	b.WriteByte('\n')
	for i := 1; i < n; i++ {
		r := Record{V: 1, T: time.Unix(1000+int64(i), 0).UTC(), Kind: KindText, Text: fmt.Sprintf("line %d", i+1)}
		j, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestStore_LoadDamaged(t *testing.T) {
	good := func(t *testing.T) string { return sessionLines(t, "d", 4) } // lines 1..4
	tests := []struct {
		name        string
		content     func(t *testing.T) string
		records     int
		corruptLine int
		warn        string
		resumeKeeps int // records after Resume repairs and one more append
	}{
		{"torn last line", func(t *testing.T) string { return good(t) + `{"v":1,"t":"2026-01-01T00:00:00Z","kind":"te` }, 4, 0, "line 5: torn or corrupt last record skipped", 5},
		{"corrupt last line with newline", func(t *testing.T) string { return good(t) + "\x00\x00\x00\x00\n" }, 4, 0, "line 5: torn or corrupt last record skipped", 5},
		{"whole last record without newline", func(t *testing.T) string { return strings.TrimSuffix(good(t), "\n") }, 4, 0, "", 5},
		{"corrupt middle line", func(t *testing.T) string {
			l := strings.SplitAfter(good(t), "\n")
			return l[0] + l[1] + "{not json\n" + l[2] + l[3]
		}, 2, 3, "line 3: corrupt record", 3},
		{"blank line", func(t *testing.T) string {
			l := strings.SplitAfter(good(t), "\n")
			return l[0] + "\n" + l[1] + l[2] + l[3]
		}, 4, 0, "line 2: blank line skipped", 5},
		{"unknown kind is skipped, not fatal", func(t *testing.T) string {
			l := strings.SplitAfter(good(t), "\n")
			return l[0] + `{"v":1,"t":"2026-01-01T00:00:00Z","kind":"hologram"}` + "\n" + l[1] + l[2] + l[3]
		}, 4, 0, `line 2: invalid record: field kind: unknown kind "hologram"; skipped`, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			p := filepath.Join(dir, "sessions", "d.jsonl")
			writeFile(t, p, tt.content(t))

			tr, err := s.Load("d")
			require.NoError(t, err)
			assert.Len(t, tr.Records, tt.records)
			assert.Equal(t, tt.corruptLine, tr.CorruptLine)
			if tt.warn == "" {
				assert.Empty(t, tr.Warnings)
			} else {
				require.NotEmpty(t, tr.Warnings)
				assert.Contains(t, tr.Warnings[0].String(), tt.warn)
			}
			for i, r := range tr.Records[1:] {
				assert.Equal(t, fmt.Sprintf("line %d", i+2), r.Text, "records keep their order")
			}

			// Resume repairs the file so that new records are loadable.
			w, tr2, err := s.Resume("d")
			require.NoError(t, err)
			assert.Len(t, tr2.Records, tt.records)
			require.NoError(t, w.Append(Record{Kind: KindText, Text: "after"}))
			require.NoError(t, w.Close())
			tr3, err := s.Load("d")
			require.NoError(t, err)
			if tt.warn == "" || strings.Contains(tt.warn, "corrupt") {
				assert.Empty(t, tr3.Warnings, "the repaired file loads cleanly")
			} else {
				assert.Len(t, tr3.Warnings, 1, "a skipped whole line stays skipped, nothing more")
			}
			require.Len(t, tr3.Records, tt.resumeKeeps)
			assert.Equal(t, "after", tr3.Records[len(tr3.Records)-1].Text)
			if tt.corruptLine > 0 || strings.Contains(tt.warn, "torn") {
				damaged, _ := filepath.Glob(p + ".damaged-*")
				assert.Len(t, damaged, 1, "the cut tail is kept aside")
			}
		})
	}
}

func TestStore_LoadWithoutMeta(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	writeFile(t, filepath.Join(dir, "sessions", "m.jsonl"), "garbage\n"+sessionLines(t, "m", 2))
	_, err := s.Load("m")
	assert.ErrorIs(t, err, ErrNoMeta)
	assert.ErrorContains(t, err, "line 1")
	writeFile(t, filepath.Join(dir, "sessions", "e.jsonl"), "")
	_, err = s.Load("e")
	assert.ErrorIs(t, err, ErrNoMeta)
}

func TestStore_DeleteRemovesFromList(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	for _, id := range []string{"a", "b", "c"} {
		w, err := s.Create(SessionMeta{ID: id, Cwd: "/w"})
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	require.NoError(t, s.Delete("b"))
	require.NoError(t, s.Delete("b"), "deleting twice succeeds")
	require.NoError(t, s.Delete("never-existed"))
	assert.False(t, s.Exists("b"))
	assert.True(t, s.Exists("a"))
	page, _, err := s.List(ListOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "c"}, ids(page))
	_, err = s.Load("b")
	assert.ErrorIs(t, err, ErrNotFound)

	// Another store on the same directory sees the deletion.
	page, _, err = openStore(t, dir).List(ListOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "c"}, ids(page))
}

func ids(infos []SessionInfo) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.ID
	}
	return out
}

func TestErrors_AreDistinct(t *testing.T) {
	all := []error{ErrInvalidID, ErrLocked, ErrNotFound, ErrExists, ErrInvalidCursor, ErrClosed, ErrNoMeta, ErrInvalidRecord}
	for i, a := range all {
		for j, b := range all {
			assert.Equal(t, i == j, errors.Is(a, b))
		}
	}
}
