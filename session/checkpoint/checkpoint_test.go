package checkpoint

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func write(t *testing.T, p, s string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(s), mode))
	require.NoError(t, os.Chmod(p, mode))
}

// snapshotDir reads every file, symlink and folder below root (.git aside).
func snapshotDir(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, p)
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			tg, _ := os.Readlink(p)
			out[rel] = "link:" + tg
		case fi.IsDir():
			out[rel] = "dir"
		default:
			b, _ := os.ReadFile(p)
			out[rel] = fi.Mode().Perm().String() + ":" + string(b)
		}
		return nil
	}))
	return out
}

// A turn that edits files through the file tools and runs a command that
// creates, deletes and rewrites others is rewound to the byte, modes and
// symlinks included; a second turn's checkpoint shares the first's
// content; a file changed after the turn is a conflict, kept on request.
func TestRewindRestoresEverything(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "alpha\n", 0o644)
	write(t, filepath.Join(ws, "dir/b.sh"), "#!/bin/sh\necho b\n", 0o755)
	write(t, filepath.Join(ws, "gone.txt"), "to be deleted\n", 0o600)
	write(t, filepath.Join(ws, ".gitignore"), "build/\n", 0o644)
	write(t, filepath.Join(ws, "build/out.bin"), "ignored", 0o644)
	require.NoError(t, os.Symlink("a.txt", filepath.Join(ws, "link")))
	before := snapshotDir(t, ws)

	st, err := Open(t.TempDir())
	require.NoError(t, err)
	r := st.Begin("s1", 1, "edit things", []string{ws})
	require.NoError(t, r.Files([]string{filepath.Join(ws, "a.txt"), filepath.Join(ws, "new.txt")}))
	write(t, filepath.Join(ws, "a.txt"), "ALPHA\n", 0o644)
	write(t, filepath.Join(ws, "new.txt"), "created\n", 0o644)
	require.NoError(t, r.Tree())
	write(t, filepath.Join(ws, "dir/b.sh"), "#!/bin/sh\necho B\n", 0o600)
	require.NoError(t, os.Remove(filepath.Join(ws, "gone.txt")))
	write(t, filepath.Join(ws, "sub/deep/made.txt"), "by shell\n", 0o644)
	require.NoError(t, os.Remove(filepath.Join(ws, "link")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(ws, "link")))
	write(t, filepath.Join(ws, "build/out.bin"), "rebuilt", 0o644)
	require.NoError(t, r.End())

	cps, err := st.List("s1")
	require.NoError(t, err)
	require.Len(t, cps, 1)
	chs, err := st.Changes(cps[0])
	require.NoError(t, err)
	var names []string
	for _, c := range chs {
		rel, _ := filepath.Rel(ws, c.Path)
		names = append(names, rel)
	}
	require.Equal(t, []string{"a.txt", "dir/b.sh", "gone.txt", "link", "new.txt", "sub/deep/made.txt"}, names)
	require.Equal(t, 1, chs[0].Added)
	require.Equal(t, 1, chs[0].Removed)
	require.Contains(t, chs[0].Unified(), "-alpha\n+ALPHA\n")

	// The user edits a file the turn wrote.
	write(t, filepath.Join(ws, "new.txt"), "user's own\n", 0o644)
	plan, err := st.PlanRewind("s1", 1, []string{ws})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(ws, "new.txt")}, plan.Conflicts())
	require.NoError(t, st.Apply(plan, map[string]bool{filepath.Join(ws, "new.txt"): true}))
	after := snapshotDir(t, ws)
	require.Equal(t, "-rw-r--r--:user's own\n", after["new.txt"])
	delete(after, "new.txt")
	want := map[string]string{}
	for k, v := range before {
		want[k] = v
	}
	want["build/out.bin"] = "-rw-r--r--:rebuilt" // ignored: never captured, left alone
	require.Equal(t, want, after)

	// Re-running the rewind changes nothing more and finds only the kept file.
	plan, err = st.PlanRewind("s1", 1, []string{ws})
	require.NoError(t, err)
	require.Len(t, plan.Changes, 1)
	require.NoError(t, st.Apply(plan, nil))
	_, err = os.Stat(filepath.Join(ws, "new.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A turn that replaces a symlink with a folder holding files (and a file
// with a folder) is rewound: the files the turn made in the folder go, and
// the symlink and the file come back where the folder was.
func TestRewindSymlinkReplacedByFolder(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "target/x.txt"), "x\n", 0o644)
	require.NoError(t, os.Symlink("target", filepath.Join(ws, "link")))
	write(t, filepath.Join(ws, "plain"), "plain\n", 0o644)
	before := snapshotDir(t, ws)

	st, err := Open(t.TempDir())
	require.NoError(t, err)
	r := st.Begin("s1", 1, "make folders", []string{ws})
	require.NoError(t, r.Tree())
	require.NoError(t, os.Remove(filepath.Join(ws, "link")))
	write(t, filepath.Join(ws, "link/a.txt"), "a\n", 0o644)
	write(t, filepath.Join(ws, "link/deep/b.txt"), "b\n", 0o644)
	require.NoError(t, os.Remove(filepath.Join(ws, "plain")))
	write(t, filepath.Join(ws, "plain/c.txt"), "c\n", 0o644)
	require.NoError(t, r.End())

	plan, err := st.PlanRewind("s1", 1, []string{ws})
	require.NoError(t, err)
	require.Empty(t, plan.Conflicts())
	require.NoError(t, st.Apply(plan, nil))
	require.Equal(t, before, snapshotDir(t, ws))
}

// A big file edited one line per turn costs a chunk per version, not the
// whole file, and every version reads back whole.
func TestChunkedVersionsShareContent(t *testing.T) {
	st, err := Open(t.TempDir())
	require.NoError(t, err)
	var buf bytes.Buffer
	for i := 0; buf.Len() < 1<<20; i++ {
		buf.WriteString(strings.Repeat("x", i%70) + " line\n")
	}
	data := buf.Bytes()
	pk, err := st.pack("s", true)
	require.NoError(t, err)
	id1, err := pk.put(data)
	require.NoError(t, err)
	require.NoError(t, pk.w.Flush())
	size1 := dirSize(t, st.Dir())
	edited := bytes.Replace(data, []byte("xxx line"), []byte("yyy line"), 1)
	id2, err := pk.put(edited)
	require.NoError(t, err)
	require.NoError(t, pk.w.Flush())
	require.Less(t, dirSize(t, st.Dir())-size1, int64(32<<10))
	got, err := st.Content("s", id1)
	require.NoError(t, err)
	require.Equal(t, data, got)
	got, err = st.Content("s", id2)
	require.NoError(t, err)
	require.Equal(t, edited, got)
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			n += fi.Size()
		}
		return err
	}))
	return n
}

// A pack cut in the middle of a record (the process died while writing)
// opens with every whole checkpoint before the cut, and the next one is
// written after them.
func TestPackTornTail(t *testing.T) {
	ws, dataDir := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "one\n", 0o644)
	st, err := Open(dataDir)
	require.NoError(t, err)
	r := st.Begin("s1", 1, "p", []string{ws})
	require.NoError(t, r.Files([]string{filepath.Join(ws, "a.txt")}))
	require.NoError(t, st.Release("s1"))
	path := filepath.Join(st.Dir(), "s1.pack")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{recMan, 0, 0, 1, 0, '{', '"'})
	require.NoError(t, err)
	require.NoError(t, f.Close())

	st2, err := Open(dataDir)
	require.NoError(t, err)
	cps, err := st2.List("s1")
	require.NoError(t, err)
	require.Len(t, cps, 1)
	require.Equal(t, "one\n", string(must(st2.Content("s1", cps[0].Files[filepath.Join(ws, "a.txt")].ID))))
	write(t, filepath.Join(ws, "b.txt"), "two\n", 0o644)
	r = st2.Begin("s1", 2, "p", []string{ws})
	require.NoError(t, r.Files([]string{filepath.Join(ws, "b.txt")}))
	require.NoError(t, st2.Release("s1"))
	fi2, err := os.Stat(path)
	require.NoError(t, err)
	require.Greater(t, fi2.Size(), fi.Size())
	st3, err := Open(dataDir)
	require.NoError(t, err)
	cps, err = st3.List("s1")
	require.NoError(t, err)
	require.Len(t, cps, 2, "the torn record was overwritten, not kept before the new one")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Prune removes the least recently written sessions first, down to the
// bound, and never a session this process has open.
func TestPruneOldestFirst(t *testing.T) {
	ws, dataDir := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), strings.Repeat("x", 10_000), 0o644)
	st, err := Open(dataDir)
	require.NoError(t, err)
	for _, sid := range []string{"old", "mid", "new"} {
		require.NoError(t, st.Begin(sid, 1, "p", []string{ws}).Files([]string{filepath.Join(ws, "a.txt")}))
		if sid != "new" {
			require.NoError(t, st.Release(sid))
		}
	}
	old := filepath.Join(st.Dir(), "old.pack")
	past := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(old, past, past))
	// The bound is what the two newer packs hold (their manifests' times
	// can differ in length, so not twice the old one's size).
	var rest int64
	for _, sid := range []string{"mid", "new"} {
		fi, err := os.Stat(filepath.Join(st.Dir(), sid+".pack"))
		require.NoError(t, err)
		rest += fi.Size()
	}
	res, err := st.Prune(rest)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, res.Removed)
	res, err = st.Prune(0)
	require.NoError(t, err)
	require.Equal(t, []string{"mid"}, res.Removed, "the open session stays")
	cps, err := st.List("new")
	require.NoError(t, err)
	require.Len(t, cps, 1)
}

// A file tool's capture reads a file of at most 256 MiB: a bigger one (a
// sparse file here, as a workspace can plant) fails the capture with the
// reason before anything is read into memory, so the change does not run.
func TestFilesCaptureIsBounded(t *testing.T) {
	ws := t.TempDir()
	big := filepath.Join(ws, "big.bin")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxCapture+1))
	require.NoError(t, f.Close())
	st, err := Open(t.TempDir())
	require.NoError(t, err)
	r := st.Begin("s1", 1, "overwrite", []string{ws})
	err = r.Files([]string{big})
	require.ErrorIs(t, err, errTooBig)
	require.ErrorContains(t, err, "256 MiB")
}
