package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

// seedSessions writes n transcripts directly (as a previous acpd would
// have left them) so big fixtures cost no fsyncs. Session i has cwd
// /w/<i%3>, the prompt "task <i>", and updatedAt base+i/3 seconds, so runs
// of three sessions tie on updatedAt.
func seedSessions(tb testing.TB, dir string, n int) {
	tb.Helper()
	sd := filepath.Join(dir, "sessions")
	require.NoError(tb, os.MkdirAll(sd, 0o700))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("s%05d", i)
		t := base.Add(time.Duration(i/3) * time.Second)
		var b []byte
		for _, r := range []Record{
			{V: 1, T: base, Kind: KindMeta, Meta: &SessionMeta{ID: id, Cwd: fmt.Sprintf("/w/%d", i%3), CreatedAt: base}},
			{V: 1, T: t, Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock(fmt.Sprintf("task %d\nmore detail", i))}},
		} {
			j, err := json.Marshal(r)
			require.NoError(tb, err)
			b = append(append(b, j...), '\n')
		}
		require.NoError(tb, os.WriteFile(filepath.Join(sd, id+".jsonl"), b, 0o600))
	}
}

// walk lists every page and returns the ids in order.
func walk(t *testing.T, s *Store, opts ListOptions) ([]SessionInfo, int) {
	t.Helper()
	var all []SessionInfo
	pages := 0
	for {
		page, next, err := s.List(opts)
		require.NoError(t, err)
		pages++
		all = append(all, page...)
		if next == "" {
			return all, pages
		}
		require.Len(t, page, opts.Limit, "only the last page may be short")
		opts.Cursor = next
		require.Less(t, pages, 10000, "pagination does not terminate")
	}
}

func assertNewestFirst(t *testing.T, all []SessionInfo) {
	t.Helper()
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		ok := a.UpdatedAt.After(b.UpdatedAt) || (a.UpdatedAt.Equal(b.UpdatedAt) && a.ID < b.ID)
		require.True(t, ok, "entries %d (%s %s) and %d (%s %s) out of order", i-1, a.ID, a.UpdatedAt, i, b.ID, b.UpdatedAt)
	}
}

func TestStore_ListPaginates1000(t *testing.T) {
	dir := t.TempDir()
	seedSessions(t, dir, 1000)
	s := openStore(t, dir)

	tests := []struct {
		name  string
		opts  ListOptions
		want  int
		pages int
	}{
		{"all, page 7", ListOptions{Limit: 7}, 1000, 143},
		{"all, default page", ListOptions{}, 1000, 10},
		{"all, one page", ListOptions{Limit: MaxPageSize}, 1000, 1},
		{"cwd filter", ListOptions{Cwd: "/w/1", Limit: 50}, 333, 7},
		{"cwd filter, unclean path", ListOptions{Cwd: "/w/2/", Limit: 100}, 333, 4},
		{"cwd filter, no match", ListOptions{Cwd: "/nowhere", Limit: 10}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts.Limit == 0 {
				opts.Limit = DefaultPageSize
			}
			all, pages := walk(t, s, opts)
			require.Len(t, all, tt.want)
			assert.Equal(t, tt.pages, pages)
			seen := map[string]bool{}
			for _, in := range all {
				require.False(t, seen[in.ID], "session %s listed twice", in.ID)
				seen[in.ID] = true
				if tt.opts.Cwd != "" {
					require.Equal(t, filepath.Clean(tt.opts.Cwd), in.Cwd)
				}
			}
			assertNewestFirst(t, all)
		})
	}

	page, _, err := s.List(ListOptions{Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []string{"s00999", "s00996"}, ids(page), "newest first, ties by id")
	assert.Equal(t, "task 999", page[0].Title, "title from the first prompt's first line")
	assert.Equal(t, "/w/0", page[0].Cwd)
}

func TestStore_ListRejectsBadCursor(t *testing.T) {
	s := openStore(t, t.TempDir())
	for _, c := range []string{"x", "c1.!!!", "c1." + "bm9jb2xvbg", "c1.MTIzOi4uL3g", "c1.YWJjOmlk"} {
		t.Run(c, func(t *testing.T) {
			_, _, err := s.List(ListOptions{Cursor: c})
			assert.ErrorIs(t, err, ErrInvalidCursor)
			assert.ErrorContains(t, err, "field cursor")
		})
	}
	_, _, err := s.List(ListOptions{Limit: -1})
	assert.ErrorContains(t, err, "field limit")
}

func TestStore_ListCursorSurvivesDeletion(t *testing.T) {
	dir := t.TempDir()
	seedSessions(t, dir, 10)
	s := openStore(t, dir)
	page, next, err := s.List(ListOptions{Limit: 3})
	require.NoError(t, err)
	require.NoError(t, s.Delete(page[2].ID))
	rest, _ := walk(t, s, ListOptions{Limit: 3, Cursor: next})
	assert.Len(t, rest, 7)
}

func TestStore_IndexRebuilt(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"deleted", func(t *testing.T, dir string) { require.NoError(t, os.Remove(filepath.Join(dir, "index.json"))) }},
		{"not json", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "index.json"), "{\"v\":1,\"sess") }},
		{"wrong version", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "index.json"), `{"v":9,"sessions":[]}`)
		}},
		{"emptied", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "index.json"), `{"v":1,"sessions":[]}`)
		}},
		{"stale entry and missing entry", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "index.json"),
				`{"v":1,"sessions":[{"id":"ghost","cwd":"/g","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2030-01-01T00:00:00Z","size":1}]}`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			for i, id := range []string{"a", "b", "c"} {
				w, err := s.Create(SessionMeta{ID: id, Cwd: "/w", CreatedAt: time.Unix(int64(100+i), 0).UTC()})
				require.NoError(t, err)
				require.NoError(t, w.Append(Record{Kind: KindUser, T: time.Unix(int64(200+i), 0).UTC(), Prompt: []acp.ContentBlock{acp.TextBlock("prompt " + id)}}))
				require.NoError(t, w.EndTurn(acp.StopEndTurn, ""))
				require.NoError(t, w.Close())
			}
			want, _, err := s.List(ListOptions{})
			require.NoError(t, err)
			require.Len(t, want, 3)

			tt.damage(t, dir)
			s2 := openStore(t, dir)
			got, _, err := s2.List(ListOptions{})
			require.NoError(t, err)
			assert.Equal(t, want, got)
			// The live store notices the damaged index too.
			tt.damage(t, dir)
			got, _, err = s.List(ListOptions{})
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestStore_IndexSeesOtherStores(t *testing.T) {
	dir := t.TempDir()
	s1, s2 := openStore(t, dir), openStore(t, dir)
	w, err := s1.Create(SessionMeta{ID: "one", Cwd: "/w"})
	require.NoError(t, err)
	require.NoError(t, w.Append(Record{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("   \n  first   line  \nsecond")}}))
	page, _, err := s2.List(ListOptions{})
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, "first line", page[0].Title)
	require.NoError(t, w.Append(Record{Kind: KindTitle, Title: "Named"}))
	require.NoError(t, w.Append(Record{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("later prompt")}}))
	require.NoError(t, w.EndTurn(acp.StopEndTurn, ""))
	page, _, err = s2.List(ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Named", page[0].Title, "a title record wins over the prompt")

	// A transcript file that appears without an index update (copied in,
	// or written before a crash) is listed after the directory changes.
	writeFile(t, filepath.Join(dir, "sessions", "copied.jsonl"), sessionLines(t, "copied", 2))
	page, _, err = s1.List(ListOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"one", "copied"}, ids(page))
	// A vanished file drops out.
	require.NoError(t, os.Remove(filepath.Join(dir, "sessions", "copied.jsonl")))
	page, _, err = s2.List(ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"one"}, ids(page))
	require.NoError(t, w.Close())
}

func TestStore_ReopenRescansGrownFiles(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	w, err := s.Create(SessionMeta{ID: "g", Cwd: "/w", CreatedAt: time.Unix(10, 0).UTC()})
	require.NoError(t, err)
	// Appended mid-turn with no EndTurn or Close: the index is stale, as
	// after a crash.
	later := time.Unix(5000, 0).UTC()
	require.NoError(t, w.Append(Record{Kind: KindText, T: later, Text: "partial answer"}))
	require.NoError(t, w.Sync())
	page, _, err := openStore(t, dir).List(ListOptions{})
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.True(t, later.Equal(page[0].UpdatedAt), "updatedAt %s", page[0].UpdatedAt)
	require.NoError(t, w.Close())
}

func TestTitleFromPrompt(t *testing.T) {
	long := strings.Repeat("é", 100)
	tests := []struct {
		name   string
		prompt []acp.ContentBlock
		want   string
	}{
		{"first line", []acp.ContentBlock{acp.TextBlock("Fix it\nplease")}, "Fix it"},
		{"skips blank lines and squeezes space", []acp.ContentBlock{acp.TextBlock("\n\n  a \t b  \n")}, "a b"},
		{"first text block", []acp.ContentBlock{{Type: "image", Data: "x", MimeType: "image/png"}, acp.TextBlock("after image")}, "after image"},
		{"cut at 80 characters", []acp.ContentBlock{acp.TextBlock(long)}, strings.Repeat("é", 79) + "…"},
		{"exactly 80", []acp.ContentBlock{acp.TextBlock(strings.Repeat("a", 80))}, strings.Repeat("a", 80)},
		{"no text", []acp.ContentBlock{{Type: "resource_link", URI: "file:///x"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := TitleFromPrompt(tt.prompt)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len([]rune(got)), MaxTitleLen)
		})
	}
}

// With IndexInBackground, Open returns before the index is read; the first
// index operation waits for it and sees every session, including one
// created while the index was loading. A deferred load (DeferIndexLoad)
// behaves the same once the first operation has started it.
func TestOpen_IndexInBackground(t *testing.T) {
	for name, opts := range map[string]Options{
		"background": {IndexInBackground: true},
		"deferred":   {DeferIndexLoad: true},
	} {
		t.Run(name, func(t *testing.T) { testIndexInBackground(t, opts) })
	}
}

func testIndexInBackground(t *testing.T, opts Options) {
	dir := t.TempDir()
	seedSessions(t, dir, 300)
	// Another process holds the index lock, so the load is sure to be
	// running while the session is created and titled.
	lock, err := os.OpenFile(filepath.Join(dir, indexLockName), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	s, err := Open(dir, opts)
	require.NoError(t, err)
	w, err := s.Create(SessionMeta{ID: "fresh", Cwd: "/w/new"})
	require.NoError(t, err)
	require.NoError(t, w.Append(Record{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("fresh task")}}))
	s.idx.pendingMu.Lock()
	pending := slices.Clone(s.idx.pending)
	s.idx.pendingMu.Unlock()
	assert.Equal(t, []string{"fresh", "fresh"}, pending, "the writer must not wait for the load")
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_UN))
	all, _ := walk(t, s, ListOptions{Limit: 100})
	require.Len(t, all, 301)
	page, _, err := s.List(ListOptions{Cwd: "/w/new"})
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, "fresh", page[0].ID)
	assert.Equal(t, "fresh task", page[0].Title)
	require.NoError(t, w.Close())
	// A damaged index is rebuilt in the background too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.json"), []byte("{not json"), 0o600))
	s2, err := Open(dir, opts)
	require.NoError(t, err)
	all, _ = walk(t, s2, ListOptions{Limit: 100})
	require.Len(t, all, 301)
}

// A deferred load touches nothing of the index until LoadIndex: no lock
// file, no index read or written. LoadIndex starts it without waiting for
// it, and the next listing sees every session.
func TestOpen_DeferIndexLoad_WaitsForLoadIndex(t *testing.T) {
	dir := t.TempDir()
	seedSessions(t, dir, 50)
	s, err := Open(dir, Options{DeferIndexLoad: true})
	require.NoError(t, err)
	assert.NoFileExists(t, filepath.Join(dir, indexLockName), "the deferred load took the index lock before LoadIndex")
	assert.NoFileExists(t, filepath.Join(dir, indexName), "the deferred load wrote the index before LoadIndex")
	s.LoadIndex()
	s.LoadIndex() // a second call is a no-op
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, indexName))
		return err == nil
	}, 10*time.Second, time.Millisecond, "LoadIndex did not start the load")
	all, _ := walk(t, s, ListOptions{Limit: 20})
	require.Len(t, all, 50)
}

// Without LoadIndex, each kind of index operation starts a deferred load
// itself rather than waiting for it forever: a listing, a writer's index
// update and a delete.
func TestOpen_DeferIndexLoad_FirstUseStartsIt(t *testing.T) {
	t.Run("list", func(t *testing.T) {
		dir := t.TempDir()
		seedSessions(t, dir, 10)
		s, err := Open(dir, Options{DeferIndexLoad: true})
		require.NoError(t, err)
		page, _, err := s.List(ListOptions{})
		require.NoError(t, err)
		assert.Len(t, page, 10)
	})
	t.Run("writer", func(t *testing.T) {
		dir := t.TempDir()
		seedSessions(t, dir, 10)
		s, err := Open(dir, Options{DeferIndexLoad: true})
		require.NoError(t, err)
		w, err := s.Create(SessionMeta{ID: "fresh", Cwd: "/w/new"})
		require.NoError(t, err)
		require.NoError(t, w.Append(Record{Kind: KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("fresh task")}}))
		// No listing: the writer's deferred put alone gets the load going,
		// and the load writes the new session into index.json.
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(filepath.Join(dir, indexName))
			return err == nil && strings.Contains(string(b), `"fresh task"`)
		}, 10*time.Second, time.Millisecond, "the writer's update did not start the deferred load")
		require.NoError(t, w.Close())
	})
	t.Run("delete", func(t *testing.T) {
		dir := t.TempDir()
		seedSessions(t, dir, 10)
		s, err := Open(dir, Options{DeferIndexLoad: true})
		require.NoError(t, err)
		require.NoError(t, s.Delete("s00003"))
		page, _, err := s.List(ListOptions{})
		require.NoError(t, err)
		assert.Len(t, page, 9)
	})
}
