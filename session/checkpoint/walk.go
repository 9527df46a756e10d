package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// errTooBig: a file grew over MaxTreeFile between its listing and its read.
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

const racyWindow = 2 * time.Second

func (k statKey) racy(start time.Time) bool {
	edge := start.Add(-racyWindow).UnixNano()
	return k.mtime >= edge || k.ctime >= edge
}

// fileStat is a path's lstat, as the walk needs it.
type fileStat struct {
	kind fs.FileMode // fs.ModeDir, fs.ModeSymlink, 0 (regular) or fs.ModeIrregular
	perm fs.FileMode
	key  statKey
}

// rootCache is one workspace root's last snapshot, folder by folder,
// shared by every snapshot of the root in this process: a file whose
// stat data did not change is not read again, and a folder whose listing
// did not change is not encoded, hashed or stored again.
type rootCache struct {
	mu   sync.Mutex
	dirs map[string]*dirList // by slash-separated folder, "." the root
}

func (s *Store) cache(root string) *rootCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc := s.caches[root]
	if rc == nil {
		rc = &rootCache{dirs: map[string]*dirList{}}
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
	rc.mu.Lock()
	prev := rc.dirs
	rc.mu.Unlock()
	rr, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	ign := tools.NewIgnorer(rr)
	start := time.Now()
	var (
		mu      sync.Mutex
		firstEr error
		failed  atomic.Bool
		count   atomic.Int64
		wg      sync.WaitGroup
		queue   = make(chan string, 1024)
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
	enqueue := func(dir string) {
		pending.Add(1)
		select {
		case queue <- dir:
		default:
			go func() { queue <- dir }()
		}
	}
	visit := func(dir string) {
		defer pending.Done()
		d, subdirs, err := s.listDir(rr, ign, root, dir, prev[dir], pk, start)
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
	enqueue(".")
	pending.Wait()
	close(queue)
	wg.Wait()
	if firstEr != nil {
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
		return nil, err
	}
	rc.mu.Lock()
	rc.dirs = out
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

// listDir reads one folder (slash-separated, relative to root), reusing
// the hashes of prev (its listing in the last snapshot) for files whose
// stat data is unchanged and not racy. It returns the listing (nil when the
// folder is gone) and the subfolders to read.
func (s *Store) listDir(rr *os.Root, ign *tools.Ignorer, root, dir string, prev *dirList, pk *pack, start time.Time) (*dirList, []string, error) {
	ign.EnterDir(dir)
	f, err := rr.Open(filepath.FromSlash(dir))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	defer f.Close()
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
	// Every file of prev is in pk when prev's listing is: a listing is
	// stored after the files it names.
	prevStored := prev != nil && prev.id != "" && pk != nil && pk.has(prev.id)
	d := &dirList{
		names: make([]string, 0, len(names)),
		ents:  make([]Entry, 0, len(names)),
		keys:  make([]statKey, 0, len(names)),
		racy:  make([]bool, 0, len(names)),
	}
	var subdirs []string
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
			e = Entry{Type: TypeDir, Mode: st.perm}
			subdirs = append(subdirs, rel)
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
	}
	return d, subdirs, nil
}
