package workspace

import (
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// calls counts the calls of a Watch's function.
type calls struct{ n atomic.Int32 }

func (c *calls) fn() { c.n.Add(1) }

// waitCalls waits until c has been called at least n times.
func waitCalls(t *testing.T, c *calls, n int32) {
	t.Helper()
	require.Eventually(t, func() bool { return c.n.Load() >= n }, 5*time.Second, 5*time.Millisecond,
		"%d calls, want %d", c.n.Load(), n)
}

// quiet checks that c is not called again for a while.
func quiet(t *testing.T, c *calls) {
	t.Helper()
	n := c.n.Load()
	time.Sleep(4 * debounce)
	assert.Equal(t, n, c.n.Load(), "called without a change that concerns it")
}

// watched is what x watches now.
func watched(x *Watch) []string {
	x.w.mu.Lock()
	defer x.w.mu.Unlock()
	return append([]string(nil), x.dirs...)
}

// uses is how many Watches use each watched folder.
func uses(w *Watcher) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.dirs)
}

// change makes one change to the watched files as one burst: the watcher
// handles no event until it is done (they wait in the kernel's queue), then
// gets them back to back. The debounce is a wall-clock window, and a loaded
// machine can stall a test between two writes for longer than that; held
// this way, no stall splits what the test means as one change into two
// bursts, and two calls.
func change(w *Watcher, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

func mkfile(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

// TestWatch_TreeCreatedLater: a command folder that does not exist is
// watched through its parent; its creation, then changes deep inside it,
// are each reported once; files beside it are not.
func TestWatch_TreeCreatedLater(t *testing.T) {
	w := NewWatcher()
	defer w.Close()
	root := t.TempDir()
	tree := filepath.Join(root, ".acpd", "commands")
	var c calls
	x, err := w.Watch([]string{tree}, c.fn)
	require.NoError(t, err)
	defer x.Close()
	assert.Equal(t, []string{root}, watched(x))

	change(w, func() { mkfile(t, filepath.Join(root, "main.go"), "package main") })
	quiet(t, &c)

	change(w, func() { mkfile(t, filepath.Join(tree, "git", "commit.md"), "Commit.") })
	waitCalls(t, &c, 1)
	quiet(t, &c)
	assert.Contains(t, watched(x), filepath.Join(tree, "git"), "the new folders are watched now")

	change(w, func() { mkfile(t, filepath.Join(tree, "git", "push.md"), "Push.") })
	waitCalls(t, &c, 2)
	quiet(t, &c)
	change(w, func() { require.NoError(t, os.RemoveAll(filepath.Join(root, ".acpd"))) })
	waitCalls(t, &c, 3)
	quiet(t, &c)
	assert.Equal(t, []string{root}, watched(x), "back to waiting for the folder")
	change(w, func() { mkfile(t, filepath.Join(tree, "again.md"), "Again.") })
	waitCalls(t, &c, 4)
	quiet(t, &c)
}

// TestWatch_SharedFolders: two Watches of one tree watch its folders once;
// closing one leaves the other working, and a closed Watch is never called.
func TestWatch_SharedFolders(t *testing.T) {
	w := NewWatcher()
	defer w.Close()
	tree := filepath.Join(t.TempDir(), "commands")
	require.NoError(t, os.MkdirAll(tree, 0o755))
	var a, b calls
	xa, err := w.Watch([]string{tree}, a.fn)
	require.NoError(t, err)
	xb, err := w.Watch([]string{tree}, b.fn)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{tree: 2}, uses(w))

	change(w, func() { mkfile(t, filepath.Join(tree, "one.md"), "One.") })
	waitCalls(t, &a, 1)
	waitCalls(t, &b, 1)
	xa.Close()
	assert.Equal(t, map[string]int{tree: 1}, uses(w))
	change(w, func() { mkfile(t, filepath.Join(tree, "two.md"), "Two.") })
	waitCalls(t, &b, 2)
	quiet(t, &a)
	xb.Close()
	assert.Empty(t, uses(w))
}

// TestWatch_Burst: many writes in a row make one call.
func TestWatch_Burst(t *testing.T) {
	w := NewWatcher()
	defer w.Close()
	tree := t.TempDir()
	var c calls
	x, err := w.Watch([]string{tree}, c.fn)
	require.NoError(t, err)
	defer x.Close()
	change(w, func() {
		for i := range 20 {
			mkfile(t, filepath.Join(tree, "c.md"), string(rune('a'+i)))
		}
	})
	waitCalls(t, &c, 1)
	quiet(t, &c)
	assert.Equal(t, int32(1), c.n.Load())
}

// TestWatch_ChangeAsTheCallFires: a change that comes just as the pending
// call's timer goes off (the timer's goroutine then waits for the lock the
// change holds) pushes the call back rather than adding a second one.
func TestWatch_ChangeAsTheCallFires(t *testing.T) {
	w := NewWatcher()
	defer w.Close()
	var c calls
	x, err := w.Watch([]string{t.TempDir()}, c.fn)
	require.NoError(t, err)
	defer x.Close()

	w.mu.Lock()
	x.schedule()
	require.Eventually(t, firing, 5*time.Second, time.Millisecond, "the timer went off and waits for the lock")
	x.schedule()
	pushed := time.Now()
	w.mu.Unlock()
	waitCalls(t, &c, 1)
	assert.GreaterOrEqual(t, time.Since(pushed), debounce, "called a debounce after the last change")
	quiet(t, &c)
	assert.Equal(t, int32(1), c.n.Load())
}

// firing reports whether a goroutine is in (*Watch).fire.
func firing() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), ".(*Watch).fire(")
}

func TestConcerns(t *testing.T) {
	assert.True(t, concerns("/w/.acpd/commands", "/w/.acpd/commands"))
	assert.True(t, concerns("/w/.acpd/commands", "/w/.acpd/commands/a/b.md"))
	assert.True(t, concerns("/w/.acpd/commands", "/w/.acpd"), "a folder on the way")
	assert.False(t, concerns("/w/.acpd/commands", "/w/main.go"))
	assert.False(t, concerns("/w/.acpd/commands", "/w/.acpd/commandsX"))
	assert.False(t, concerns("/w/.acpd/commands", "/w/.acp"))
}
