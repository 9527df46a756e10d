package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func treeOf(t *testing.T, st *Store, sid string, turn int, ws string) tree {
	t.Helper()
	r := st.Begin(sid, turn, "p", []string{ws})
	require.NoError(t, r.Tree())
	cp, err := st.Load(sid, turn)
	require.NoError(t, err)
	pk, err := st.pack(sid, false)
	require.NoError(t, err)
	tr, err := loadTree(pk, cp.Trees[ws])
	require.NoError(t, err)
	return tr
}

// A file rewritten with the same size and its modification time set back
// is read again: right after it was hashed (racy: the same clock tick), and
// long after (its change time moved).
func TestSnapshotSeesSameSizeSameMtimeRewrite(t *testing.T) {
	ws := t.TempDir()
	p := filepath.Join(ws, "f.txt")
	write(t, p, "aaaa\n", 0o644)
	st, err := Open(t.TempDir())
	require.NoError(t, err)
	fi, err := os.Stat(p)
	require.NoError(t, err)

	first := treeOf(t, st, "s", 1, ws)["f.txt"].ID
	require.NoError(t, os.WriteFile(p, []byte("bbbb\n"), 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	second := treeOf(t, st, "s", 2, ws)["f.txt"].ID
	require.NotEqual(t, first, second, "a fresh file rewritten in the same tick")
	require.Equal(t, hashID([]byte("bbbb\n")), second)

	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(p, old, old))
	treeOf(t, st, "s", 3, ws) // hashed while old: trusted from now on
	require.NoError(t, os.WriteFile(p, []byte("cccc\n"), 0o644))
	require.NoError(t, os.Chtimes(p, old, old))
	require.Equal(t, hashID([]byte("cccc\n")), treeOf(t, st, "s", 4, ws)["f.txt"].ID, "an old file rewritten with its times put back")
}

// A snapshot in which one file changed stores that file, its folder's
// listing and its parents' only; the other folders' objects are shared.
func TestSnapshotSharesUnchangedFolders(t *testing.T) {
	ws := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for d := range 5 {
		for f := range 5 {
			p := filepath.Join(ws, "d"+strconv.Itoa(d), "sub", "f"+strconv.Itoa(f))
			write(t, p, p, 0o644)
			require.NoError(t, os.Chtimes(p, old, old))
		}
	}
	st, err := Open(t.TempDir())
	require.NoError(t, err)
	treeOf(t, st, "s", 1, ws)
	pk, err := st.pack("s", false)
	require.NoError(t, err)
	objs := len(pk.objs)
	write(t, filepath.Join(ws, "d2", "sub", "f3"), "changed", 0o644)
	tr := treeOf(t, st, "s", 2, ws)
	// the file, d2/sub, d2 and the root
	require.Equal(t, objs+4, len(pk.objs))
	require.Equal(t, hashID([]byte("changed")), tr["d2/sub/f3"].ID)
	require.Len(t, tr, 5+5+25)
	e, ok, err := lookupTree(pk, must(st.Load("s", 2)).Trees[ws], "d2/sub/f3")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, tr["d2/sub/f3"], e)
	_, ok, err = lookupTree(pk, must(st.Load("s", 2)).Trees[ws], "d2/nope/f3")
	require.NoError(t, err)
	require.False(t, ok)

	// A second store (another process) shares no cache: the same tree.
	st2, err := Open(t.TempDir())
	require.NoError(t, err)
	require.Equal(t, tr, treeOf(t, st2, "s", 1, ws))
}

// encodeFlat writes a snapshot in the store's first format: one object
// listing every path of the root, no header.
func encodeFlat(t tree) []byte {
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var b []byte
	for _, p := range paths {
		b = appendLine(b, t[p], p) // a flattened tree's folders carry no id

	}
	return b
}

// A store written before folders had objects of their own (one flat
// listing per snapshot) still lists, diffs and rewinds.
func TestRewindFromFirstFormatStore(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "keep.txt"), "kept\n", 0o644)
	write(t, filepath.Join(ws, "dir/edit.txt"), "before\n", 0o600)
	require.NoError(t, os.Symlink("keep.txt", filepath.Join(ws, "link")))
	before := snapshotDir(t, ws)

	st, err := Open(t.TempDir())
	require.NoError(t, err)
	cur, err := st.walk(ws, nil)
	require.NoError(t, err)
	pk, err := st.pack("old", true)
	require.NoError(t, err)
	for _, content := range []string{"kept\n", "before\n"} {
		_, err := pk.put([]byte(content))
		require.NoError(t, err)
	}
	bid, err := pk.put(encodeFlat(cur))
	require.NoError(t, err)
	cp := &Checkpoint{V: 1, Session: "old", Turn: 1, Time: time.Now().UTC(), Roots: []string{ws}, Trees: map[string]string{ws: bid}}
	require.NoError(t, st.save(cp))

	write(t, filepath.Join(ws, "dir/edit.txt"), "after\n", 0o644)
	write(t, filepath.Join(ws, "made.txt"), "made\n", 0o644)
	require.NoError(t, os.Remove(filepath.Join(ws, "keep.txt")))
	now, err := st.walk(ws, nil)
	require.NoError(t, err)
	aid, err := pk.put(encodeFlat(now))
	require.NoError(t, err)
	cp.Ended, cp.AfterTrees = true, map[string]string{ws: aid}
	require.NoError(t, st.save(cp))
	require.NoError(t, st.Release("old"))

	st2, err := Open(filepath.Dir(st.Dir()))
	require.NoError(t, err)
	cps, err := st2.List("old")
	require.NoError(t, err)
	chs, err := st2.Changes(cps[0])
	require.NoError(t, err)
	require.Len(t, chs, 3)
	plan, err := st2.PlanRewind("old", 1, []string{ws})
	require.NoError(t, err)
	require.Empty(t, plan.Conflicts())
	require.NoError(t, st2.Apply(plan, nil))
	require.Equal(t, before, snapshotDir(t, ws))
}
