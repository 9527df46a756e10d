package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Whatever happens in the workspace between two snapshots, the next
// snapshot of a store that follows the folders' events (and reuses the
// listings of the folders without one) equals a full walk by a store that
// has never seen the workspace: files written, truncated, chmodded,
// renamed, folders made, moved and removed, symlinks swapped, a
// .gitignore above an untouched folder edited, a file changed through a
// hard link from outside the workspace, a folder's times put back.
func TestNarrowedSnapshotEqualsFullWalk(t *testing.T) {
	shortRacy(t)
	ws, outside := t.TempDir(), t.TempDir()
	old := time.Now().Add(-time.Hour)
	age := func(p string) { require.NoError(t, os.Chtimes(p, old, old)) }
	for d := range 6 {
		for f := range 6 {
			p := filepath.Join(ws, fmt.Sprintf("d%d/s%d/f%d.txt", d, f%2, f))
			write(t, p, p, 0o644)
			age(p)
		}
	}
	write(t, filepath.Join(outside, "shared"), "linked v1", 0o644)
	require.NoError(t, os.Link(filepath.Join(outside, "shared"), filepath.Join(ws, "d0/s0/hard.txt")))
	age(filepath.Join(outside, "shared"))
	st, err := Open(t.TempDir())
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(7, 8))
	pick := func() string { return fmt.Sprintf("d%d/s%d", rng.IntN(6), rng.IntN(2)) }
	ops := []func(){
		func() { write(t, filepath.Join(ws, pick(), "f1.txt"), fmt.Sprint(rng.Int()), 0o644) },
		func() { write(t, filepath.Join(ws, pick(), fmt.Sprintf("n%d", rng.IntN(5))), "new", 0o600) },
		func() { _ = os.Chmod(filepath.Join(ws, pick(), "f3.txt"), 0o700) },
		func() { _ = os.Truncate(filepath.Join(ws, pick(), "f5.txt"), 1) },
		func() { _ = os.RemoveAll(filepath.Join(ws, pick())) },
		func() { _ = os.Rename(filepath.Join(ws, pick()), filepath.Join(ws, pick()+"x")) },
		func() {
			_ = os.MkdirAll(filepath.Join(ws, pick(), "deep/er"), 0o755)
			write(t, filepath.Join(ws, pick(), "deep/er/z"), "z", 0o644)
		},
		func() {
			p := filepath.Join(ws, pick(), "ln")
			_ = os.Remove(p)
			_ = os.Symlink(fmt.Sprint(rng.IntN(3)), p)
		},
		func() {
			pats := []string{"*.txt\n", "s1/\n", "", "!f1.txt\n*.txt\n"}
			write(t, filepath.Join(ws, ".gitignore"), pats[rng.IntN(len(pats))], 0o644)
		},
		func() {
			write(t, filepath.Join(outside, "shared"), fmt.Sprintf("linked %d", rng.IntN(1000)), 0o644)
			age(filepath.Join(outside, "shared"))
		},
		func() {
			p := filepath.Join(ws, pick(), "f0.txt")
			if fi, err := os.Stat(p); err == nil {
				require.NoError(t, os.WriteFile(p, []byte(p[:len(p)-1]+"X"), 0o644))
				require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
			}
		},
	}
	reused := 0
	for turn := 1; turn <= 60; turn++ {
		for range 1 + rng.IntN(3) {
			ops[rng.IntN(len(ops))]()
		}
		time.Sleep(2 * racyWindow)
		got := treeOf(t, st, "s", turn, ws)
		reused += st.cache(ws).reused
		fresh, err := Open(t.TempDir())
		require.NoError(t, err)
		want, err := fresh.walk(ws, nil)
		require.NoError(t, err)
		require.Equal(t, want, got, "turn %d", turn)
	}
	require.Greater(t, reused, 60*5, "most folders are taken from the last snapshot")
}

// shortRacy lets files written by the test be trusted by their stat data
// after a few milliseconds instead of two seconds.
func shortRacy(t *testing.T) {
	old := racyWindow
	racyWindow = 20 * time.Millisecond
	t.Cleanup(func() { racyWindow = old })
}

// A file written through a hard link in a folder outside the workspace
// (which gives the workspace's folder no event) is read again.
func TestNarrowedSnapshotSeesHardLinkWrite(t *testing.T) {
	shortRacy(t)
	ws, outside := t.TempDir(), t.TempDir()
	old := time.Now().Add(-time.Hour)
	write(t, filepath.Join(outside, "shared"), "v1", 0o644)
	require.NoError(t, os.Chtimes(filepath.Join(outside, "shared"), old, old))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "d"), 0o755))
	require.NoError(t, os.Link(filepath.Join(outside, "shared"), filepath.Join(ws, "d/hard")))
	st, err := Open(t.TempDir())
	require.NoError(t, err)
	time.Sleep(2 * racyWindow)
	treeOf(t, st, "s", 1, ws)
	write(t, filepath.Join(outside, "shared"), "v2", 0o644)
	require.NoError(t, os.Chtimes(filepath.Join(outside, "shared"), old, old))
	time.Sleep(2 * racyWindow)
	require.Equal(t, hashID([]byte("v2")), treeOf(t, st, "s", 3, ws)["d/hard"].ID)
}
