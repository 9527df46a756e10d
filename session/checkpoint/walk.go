package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/acpd/acpd/session/tools"
)

// walkWorkers is how many folders a tree walk reads at once.
const walkWorkers = 4

// errTooBig: a file is over the size bound of its read (for a tree
// snapshot, MaxTreeFile: it grew between its listing and its read).
var errTooBig = errors.New("over the snapshot's size bound")

// statKey is what a file's hash is reused on without reading the file
// again: its size, modification and status-change times (nanoseconds),
// inode, device and mode bits. A write changes the size or the
// modification time; a write that resets the modification time afterwards
// (touch -r, tar, rsync -t) still moves the change time, which no one but
// the kernel can set; an editor's save by rename, or a copy that keeps the
// times, gives a new inode.
//
// What the key cannot see is a second write in the same tick of the file
// system's clock as the read that hashed the file (the times move in ticks
// of up to a few milliseconds on Linux, two seconds on FAT). So a file
// whose modification or change time is less than racyWindow before the
// walk that hashed it began (or after) is "racy": the next walk reads and
// hashes it again whatever its stat data says, and trusts it only once its
// times are old enough. A clock set back by more than the window could
// defeat this; nothing short of reading every file would not.
type statKey struct {
	size  int64
	mtime int64
	ctime int64
	ino   uint64
	dev   uint64
	mode  uint32
}

// racyWindow is a variable for the tests only, which shorten it rather
// than wait.
var racyWindow = 2 * time.Second

func (k statKey) racy(start time.Time) bool {
	edge := start.Add(-racyWindow).UnixNano()
	return k.mtime >= edge || k.ctime >= edge
}

// fileStat is a path's lstat, as the walk needs it.
type fileStat struct {
	kind  fs.FileMode // fs.ModeDir, fs.ModeSymlink, 0 (regular) or fs.ModeIrregular
	perm  fs.FileMode
	key   statKey
	nlink uint64
}

// rootCache is one workspace root's last snapshot, folder by folder,
// shared by every snapshot of the root in this process: a file whose
// stat data did not change is not read again, and a folder whose listing
// did not change is not encoded, hashed or stored again.
type rootCache struct {
	// storing is held by a walk that stores: the events it takes are
	// accounted against the listings it leaves, so two such walks of one
	// root run one after the other.
	storing sync.Mutex
	mu      sync.Mutex
	dirs    map[string]*dirList // by slash-separated folder, "." the root
	// With a watcher (see watcher): the folders watched, the folders with
	// an event since the last walk, all after an overflow; exclude is the
	// stat of .git/info/exclude at the last walk.
	watch   bool
	watched map[string]bool
	dirty   map[string]bool
	all     bool
	exclude statKey
	// reused is how many folders the last walk took from the one before
	// without reading them.
	reused int
}

func (s *Store) cache(root string) *rootCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc := s.caches[root]
	if rc == nil {
		s.watchOnce.Do(func() {
			if s.watcher = newWatcher(); s.watcher != nil {
				runtime.AddCleanup(s, (*watcher).close, s.watcher)
			}
		})
		rc = &rootCache{dirs: map[string]*dirList{}, watched: map[string]bool{}, dirty: map[string]bool{}, all: true}
		rc.watch = s.watcher.usable(root)
		s.caches[root] = rc
	}
	return rc
}

// skipName is left out of every tree: git's own folder (and a worktree's
// .git file) is the user's repository state, never the workspace's.
func skipName(name string) bool { return name == ".git" }

// snapshot stores root's tree in pk and returns its id.
func (s *Store) snapshot(root string, pk *pack) (string, error) {
	dirs, err := s.scan(root, pk)
	if err != nil {
		return "", err
	}
	return dirs["."].id, nil
}

// walk is root's tree now, flattened, with nothing stored (a rewind's or
// a diff's look at the current state).
func (s *Store) walk(root string, pk *pack) (tree, error) {
	dirs, err := s.scan(root, pk)
	if err != nil {
		return nil, err
	}
	t := tree{}
	for dir, d := range dirs {
		for i, name := range d.names {
			rel := name
			if dir != "." {
				rel = dir + "/" + name
			}
			e := d.ents[i]
			if e.Type == TypeDir {
				e.ID = ""
			}
			t[rel] = e
		}
	}
	return t, nil
}

// scan lists every folder of root: every folder, regular file (up to
// MaxTreeFile) and symlink that .gitignore does not ignore. Every entry is
// lstat'ed; only the files whose stat data changed since the cache last
// saw them (or that were racy then) are read. With pk set, the changed
// files and folder listings are stored in it, each folder gets its id and
// the cache is updated; with pk nil nothing is stored.
func (s *Store) scan(root string, pk *pack) (map[string]*dirList, error) {
	rc := s.cache(root)
	if pk != nil {
		rc.storing.Lock()
		defer rc.storing.Unlock()
	}
	rr, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	start := time.Now()
	// The folders changed since the last walk, as of now: an event after
	// this point is seen by the next walk, since every folder listed below
	// is watched before it is read.
	var nw narrow
	if pk != nil && rc.watch {
		s.watcher.drain()
		excl, _ := lstatAt(nil, root, ".git/info/exclude")
		rc.mu.Lock()
		nw = narrow{w: s.watcher, rc: rc, dirty: rc.dirty, watched: maps.Clone(rc.watched), all: rc.all || excl.key != rc.exclude}
		rc.dirty, rc.all, rc.exclude = map[string]bool{}, false, excl.key
		rc.mu.Unlock()
	}
	rc.mu.Lock()
	prev := rc.dirs
	rc.mu.Unlock()
	rootStat, err := lstatAt(nil, filepath.Dir(root), filepath.Base(root))
	if err != nil {
		return nil, err
	}
	ign := tools.NewIgnorer(rr)
	var (
		mu      sync.Mutex
		firstEr error
		failed  atomic.Bool
		count   atomic.Int64
		wg      sync.WaitGroup
		queue   = make(chan dirItem, 1024)
		pending sync.WaitGroup
		out     = make(map[string]*dirList, len(prev)+1)
	)
	setErr := func(err error) {
		mu.Lock()
		if firstEr == nil {
			firstEr = err
		}
		mu.Unlock()
		failed.Store(true)
	}
	enqueue := func(dir dirItem) {
		pending.Add(1)
		select {
		case queue <- dir:
		default:
			go func() { queue <- dir }()
		}
	}
	visit := func(item dirItem) {
		defer pending.Done()
		dir := item.dir
		d, subdirs, err := s.listDir(rr, ign, root, item, prev[dir], pk, start, &nw)
		if err != nil {
			setErr(err)
			return
		}
		if d == nil {
			return // gone since its parent was read
		}
		if count.Add(int64(len(d.names))) > MaxTreeEntries {
			setErr(fmt.Errorf("the workspace %s holds more than %d files and folders not ignored by .gitignore; a checkpoint would copy all of them", root, MaxTreeEntries))
			return
		}
		mu.Lock()
		out[dir] = d
		mu.Unlock()
		for _, sub := range subdirs {
			enqueue(sub)
		}
	}
	for range walkWorkers {
		wg.Go(func() {
			for dir := range queue {
				if failed.Load() {
					pending.Done()
					continue
				}
				visit(dir)
			}
		})
	}
	enqueue(dirItem{dir: ".", ino: rootStat.key.ino})
	pending.Wait()
	close(queue)
	wg.Wait()
	// A walk that fails lost the marks it took: the next one lists
	// everything.
	relist := func() {
		if nw.rc != nil {
			rc.mu.Lock()
			rc.all = true
			rc.mu.Unlock()
		}
	}
	if firstEr != nil {
		relist()
		return nil, firstEr
	}
	if out["."] == nil {
		return nil, fmt.Errorf("%s: %w", root, fs.ErrNotExist)
	}
	// A folder that vanished between its parent's listing and its own read
	// is left out of the parent too.
	for dir, d := range out {
		for i := len(d.names) - 1; i >= 0; i-- {
			if d.ents[i].Type == TypeDir && out[childPath(dir, d.names[i])] == nil {
				d.names = slices.Delete(d.names, i, i+1)
				d.ents = slices.Delete(d.ents, i, i+1)
				d.keys = slices.Delete(d.keys, i, i+1)
				d.racy = slices.Delete(d.racy, i, i+1)
			}
		}
	}
	if pk == nil {
		return out, nil
	}
	if err := storeDirs(out, prev, pk); err != nil {
		relist()
		return nil, err
	}
	rc.mu.Lock()
	rc.dirs, rc.reused = out, int(nw.reused.Load())
	rc.mu.Unlock()
	return out, nil
}

func childPath(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// storeDirs gives every folder its id, deepest first (a folder's listing
// holds its subfolders' ids), storing the listings that changed.
func storeDirs(out, prev map[string]*dirList, pk *pack) error {
	order := make([]string, 0, len(out))
	for dir := range out {
		order = append(order, dir)
	}
	depth := func(dir string) int {
		if dir == "." {
			return 0
		}
		return strings.Count(dir, "/") + 1
	}
	slices.SortFunc(order, func(a, b string) int { return depth(b) - depth(a) })
	for _, dir := range order {
		d := out[dir]
		for i, name := range d.names {
			if d.ents[i].Type == TypeDir {
				d.ents[i].ID = out[childPath(dir, name)].id
			}
		}
		if p := prev[dir]; p != nil && p.id != "" && d.sameListing(p) && pk.has(p.id) {
			d.id = p.id
			continue
		}
		id, err := pk.put(d.encode())
		if err != nil {
			return err
		}
		d.id = id
	}
	return nil
}

// dirItem is a folder the walk is to read: its inode as its parent's
// listing saw it, and stale when a .gitignore above it changed (the last
// listing's choice of what is ignored no longer holds).
type dirItem struct {
	dir   string
	ino   uint64
	stale bool
}

// narrow is what a walk knows from the watcher; rc nil: nothing, every
// folder is listed.
type narrow struct {
	w              *watcher
	rc             *rootCache
	dirty, watched map[string]bool
	all            bool
	reused         atomic.Int64
}

// reusable reports whether the folder's last listing still holds without
// reading it: watched since before it was listed, no event since, the same
// inode, nothing in it volatile, no .gitignore above it changed.
func (n *narrow) reusable(item dirItem, prev *dirList, prevStored bool) bool {
	return n.rc != nil && !n.all && !item.stale && prevStored && !prev.volatile && prev.ino == item.ino &&
		n.watched[item.dir] && !n.dirty[item.dir]
}

func (d *dirList) subdirs(dir string, stale bool) []dirItem {
	var out []dirItem
	for i, e := range d.ents {
		if e.Type == TypeDir {
			out = append(out, dirItem{dir: childPath(dir, d.names[i]), ino: d.keys[i].ino, stale: stale})
		}
	}
	return out
}

// listDir reads one folder (slash-separated, relative to root), reusing
// the hashes of prev (its listing in the last snapshot) for files whose
// stat data is unchanged and not racy, or prev whole when the watcher
// says nothing in it changed. It returns the listing (nil when the folder
// is gone) and the subfolders to read.
func (s *Store) listDir(rr *os.Root, ign *tools.Ignorer, root string, item dirItem, prev *dirList, pk *pack, start time.Time, nw *narrow) (*dirList, []dirItem, error) {
	dir := item.dir
	ign.EnterDir(dir)
	// Every file of prev is in pk when prev's listing is: a listing is
	// stored after the files it names.
	prevStored := prev != nil && prev.id != "" && pk != nil && pk.has(prev.id)
	if nw.reusable(item, prev, prevStored) {
		nw.reused.Add(1)
		d := *prev
		d.names, d.ents = slices.Clone(prev.names), slices.Clone(prev.ents)
		d.keys, d.racy = slices.Clone(prev.keys), slices.Clone(prev.racy)
		return &d, d.subdirs(dir, false), nil
	}
	f, err := rr.Open(filepath.FromSlash(dir))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	defer f.Close()
	if nw.rc != nil && nw.w.add(f, nw.rc, dir) {
		nw.rc.mu.Lock()
		nw.rc.watched[dir] = true
		nw.rc.mu.Unlock()
	}
	self, err := statFile(f)
	if err != nil {
		return nil, nil, err
	}
	// Names only: the entries are lstat'ed below, once each (a listing's
	// own types would cost a second lstat per entry for a folder opened
	// through a root).
	names, err := f.Readdirnames(-1)
	if err != nil {
		if dir != "." && errors.Is(err, syscall.ENOTDIR) {
			return nil, nil, nil // replaced by a file since its parent was read
		}
		return nil, nil, err
	}
	slices.Sort(names)
	abs := root
	if dir != "." {
		abs = filepath.Join(root, filepath.FromSlash(dir))
	}
	d := &dirList{
		ino:   self.key.ino,
		names: make([]string, 0, len(names)),
		ents:  make([]Entry, 0, len(names)),
		keys:  make([]statKey, 0, len(names)),
		racy:  make([]bool, 0, len(names)),
	}
	gitignoreRacy := false
	for _, name := range names {
		if skipName(name) {
			continue
		}
		st, err := lstatAt(f, abs, name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // gone since the listing
			}
			return nil, nil, err
		}
		if name == ".gitignore" {
			d.gitignore, gitignoreRacy = st.key, st.key.racy(start)
		}
		if st.kind == 0 && st.nlink > 1 {
			d.volatile = true // a write through its other name is not this folder's event
		}
		if st.kind == fs.ModeIrregular {
			continue // devices, pipes, sockets: nothing to restore
		}
		rel := childPath(dir, name)
		if ign.Ignored(rel, st.kind == fs.ModeDir) {
			continue
		}
		var (
			e    Entry
			key  statKey
			racy bool
		)
		switch st.kind {
		case fs.ModeDir:
			e, key = Entry{Type: TypeDir, Mode: st.perm}, st.key
		case fs.ModeSymlink:
			target, err := readlinkAt(f, abs, name)
			if err != nil {
				continue
			}
			e = Entry{Type: TypeSymlink, Target: target}
		case 0:
			if st.key.size > MaxTreeFile {
				continue
			}
			if i := prev.find(name); i >= 0 && prev.ents[i].Type == TypeFile && prev.keys[i] == st.key && !prev.racy[i] &&
				(pk == nil || prevStored || pk.has(prev.ents[i].ID)) {
				e, key = prev.ents[i], st.key
				break
			}
			data, st2, err := readAt(f, abs, name)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errTooBig) {
					continue
				}
				return nil, nil, err
			}
			if len(data) > MaxTreeFile {
				continue
			}
			var id string
			if pk != nil {
				if id, err = pk.put(data); err != nil {
					return nil, nil, err
				}
			} else {
				id = hashID(data)
			}
			// The key is the open file's, taken before it was read: a write
			// after that moves it, so the next walk reads the file again.
			e = Entry{Type: TypeFile, Mode: st2.perm, Size: int64(len(data)), ID: id}
			key, racy = st2.key, st2.key.racy(start)
			if key.size != int64(len(data)) {
				racy = true // written while it was read
			}
		default:
			continue
		}
		d.names = append(d.names, name)
		d.ents = append(d.ents, e)
		d.keys = append(d.keys, key)
		d.racy = append(d.racy, racy)
		if racy {
			d.volatile = true
		}
	}
	stale := item.stale || prev == nil || prev.gitignore != d.gitignore || gitignoreRacy
	return d, d.subdirs(dir, stale), nil
}
