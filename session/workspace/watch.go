package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher calls a function when something changes under a set of folders.
// One Watcher — one inotify instance and one goroutine, blocked in the
// kernel while nothing happens — serves every Watch of the process, and a
// folder several Watches need is watched once.
//
// A folder that does not exist yet is watched through its nearest existing
// parent, so its creation is seen; a tree's subfolders are watched too, up
// to maxDirs a tree. Events that concern no watched tree (a file saved next
// to a missing .acpd folder) cost a string comparison per Watch and are
// otherwise ignored.
type Watcher struct {
	mu      sync.Mutex
	fs      *fsnotify.Watcher // started by the first Watch
	failed  error             // inotify could not be set up: nothing is watched
	dirs    map[string]int    // watched folder → Watches using it
	watches map[*Watch]struct{}
	closed  bool
}

// Watch is one subscription: fn runs (on its own goroutine, once per burst
// of changes) after something under trees changed.
type Watch struct {
	w     *Watcher
	trees []string
	fn    func()
	dirs  []string    // the folders watched for it now
	timer *time.Timer // runs fire; made at the first change
	due   time.Time   // when the pending call of fn is due; zero: none
}

// debounce gathers a burst of events (an editor writes a temporary file,
// then renames it) into one call.
const debounce = 50 * time.Millisecond

// maxDirs bounds the subfolders watched under one tree.
const maxDirs = 256

// NewWatcher returns a Watcher; nothing is started before the first Watch.
func NewWatcher() *Watcher {
	return &Watcher{dirs: map[string]int{}, watches: map[*Watch]struct{}{}}
}

// process is the Watcher of the whole process: one inotify instance, of
// the 128 a user gets by default, however many Managers (a daemon has one;
// tests make many).
var process = sync.OnceValue(NewWatcher)

// Watch calls fn after changes under trees (absolute folder paths, which
// need not exist), until Close. The error says when some or all of the
// changes cannot be watched (no inotify instance or watch to be had); the
// caller then sees those only when it looks for itself.
func (w *Watcher) Watch(trees []string, fn func()) (*Watch, error) {
	x := &Watch{w: w, trees: trees, fn: fn}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return x, errors.New("the watcher is closed")
	}
	if err := w.start(); err != nil {
		return x, err
	}
	w.watches[x] = struct{}{}
	return x, w.arm(x)
}

// start creates the inotify instance once. Callers hold w.mu.
func (w *Watcher) start() error {
	if w.fs != nil {
		return nil
	}
	if w.failed != nil {
		return w.failed
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		w.failed = err
		return err
	}
	w.fs = fw
	go w.loop(fw)
	return nil
}

// arm watches the folders x needs now and stops watching those it no longer
// needs; an error names a folder that could not be watched. Callers hold
// w.mu.
func (w *Watcher) arm(x *Watch) error {
	want := foldersFor(x.trees)
	var errs []error
	for _, d := range want {
		if slices.Contains(x.dirs, d) {
			continue
		}
		if w.dirs[d] == 0 {
			if err := w.fs.Add(d); err != nil {
				// Gone again (seen at its parent's next event), or out of
				// inotify watches (seen at the next prompt's own check).
				if !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, fmt.Errorf("%s: %w", d, err))
				}
				continue
			}
		}
		w.dirs[d]++
		x.dirs = append(x.dirs, d)
	}
	keep := x.dirs[:0]
	for _, d := range x.dirs {
		if slices.Contains(want, d) {
			keep = append(keep, d)
			continue
		}
		w.release(d)
	}
	x.dirs = keep
	return errors.Join(errs...)
}

// release drops one use of the watched folder d. Callers hold w.mu.
func (w *Watcher) release(d string) {
	w.dirs[d]--
	if w.dirs[d] > 0 {
		return
	}
	delete(w.dirs, d)
	// The watch may be gone with its folder already.
	_ = w.fs.Remove(d)
}

// foldersFor lists the folders to watch for trees: each tree's nearest
// existing folder (itself, or the parent where it would be created) and,
// when the tree exists, its subfolders.
func foldersFor(trees []string) []string {
	var out []string
	add := func(d string) {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, t := range trees {
		d := filepath.Clean(t)
		for {
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				break
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
		add(d)
		if d != filepath.Clean(t) {
			continue
		}
		n := 0
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() || p == d {
				return nil
			}
			if n++; n > maxDirs {
				return fs.SkipAll
			}
			add(p)
			return nil
		})
	}
	return out
}

// concerns reports whether a change at path matters to tree: it is the
// tree, inside it, or a folder on the way to it (the tree may have just
// been created or removed with it).
func concerns(tree, path string) bool {
	sep := string(filepath.Separator)
	return path == tree || strings.HasPrefix(path, tree+sep) || strings.HasPrefix(tree, path+sep)
}

func (w *Watcher) loop(fw *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			w.changed(ev.Name)
		case _, ok := <-fw.Errors:
			if !ok {
				return
			}
			// An overflow lost events: anything may have changed.
			w.changed("")
		}
	}
}

// changed schedules the Watches that path concerns; "" concerns all.
func (w *Watcher) changed(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for x := range w.watches {
		if path == "" || slices.ContainsFunc(x.trees, func(t string) bool { return concerns(t, path) }) {
			x.schedule()
		}
	}
}

// schedule has fn called after the debounce, pushing back a pending call.
// Callers hold w.mu.
func (x *Watch) schedule() {
	x.due = time.Now().Add(debounce)
	if x.timer == nil {
		x.timer = time.AfterFunc(debounce, x.fire)
		return
	}
	x.timer.Reset(debounce)
}

// fire re-arms x (folders may have come or gone) and calls its function
// when the pending call is due. The timer can go off just as a change
// pushes the call back: this fire then waits for the lock while schedule
// resets the timer, which makes the timer go off once more. The due time
// settles it: the early fire finds the call not due yet and leaves it to
// the reset timer, and whichever fire comes after the call finds none
// pending — one call per burst, a debounce after its last change.
func (x *Watch) fire() {
	w := x.w
	w.mu.Lock()
	if _, live := w.watches[x]; !live || x.due.IsZero() {
		w.mu.Unlock()
		return
	}
	if wait := time.Until(x.due); wait > 0 {
		x.timer.Reset(wait)
		w.mu.Unlock()
		return
	}
	x.due = time.Time{}
	w.arm(x)
	w.mu.Unlock()
	x.fn()
}

// Close ends the Watch; its function is not called after Close returns,
// unless a call had already begun.
func (x *Watch) Close() {
	w := x.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, live := w.watches[x]; !live {
		return
	}
	delete(w.watches, x)
	if x.timer != nil {
		x.timer.Stop()
	}
	for _, d := range x.dirs {
		w.release(d)
	}
	x.dirs = nil
}

// Close ends every Watch and the watcher's goroutine.
func (w *Watcher) Close() {
	w.mu.Lock()
	w.closed = true
	for x := range w.watches {
		if x.timer != nil {
			x.timer.Stop()
		}
	}
	clear(w.watches)
	clear(w.dirs)
	fw := w.fs
	w.fs = nil
	w.mu.Unlock()
	// Outside the lock: the loop may be waiting for it with an event.
	if fw != nil {
		_ = fw.Close()
	}
}
