package checkpoint

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/session/tools"
)

// Entry is the state of one path: a regular file (its content's id, size
// and permission bits), a symlink (its target, never followed), a
// directory, or Absent.
type Entry struct {
	Type   string      `json:"type"` // TypeFile, TypeSymlink, TypeDir, TypeAbsent
	Mode   fs.FileMode `json:"mode,omitempty"`
	Size   int64       `json:"size,omitempty"`
	ID     string      `json:"id,omitempty"`
	Target string      `json:"target,omitempty"`
}

// Entry types.
const (
	TypeFile    = "file"
	TypeSymlink = "symlink"
	TypeDir     = "dir"
	TypeAbsent  = "absent"
)

var absent = Entry{Type: TypeAbsent}

// same reports whether two states are the same content (for a file: bytes
// and permission bits).
func (e Entry) same(o Entry) bool {
	switch {
	case e.Type != o.Type:
		return false
	case e.Type == TypeFile:
		return e.ID == o.ID && e.Mode.Perm() == o.Mode.Perm()
	case e.Type == TypeSymlink:
		return e.Target == o.Target
	}
	return true
}

// MaxTreeFile is the size bound of a whole-tree snapshot: a bigger file is
// neither captured nor, at a rewind, removed or touched (a build artefact
// or a data set, which a checkpoint before every shell command would copy
// again at each change). The file tools' before-images have no bound.
const MaxTreeFile = 4 << 20

// MaxTreeEntries bounds the paths of one root a tree snapshot walks; a
// bigger workspace (a home folder) fails the snapshot, and with it the
// command, rather than copying it.
const MaxTreeEntries = 200_000

// walkWorkers is how many directories a tree walk reads at once.
const walkWorkers = 4

// statKey is what the stat cache keys an unchanged file on, as git's index
// does: a file whose size, modification time, inode and mode are the same
// as when it was hashed is taken to have the same content.
type statKey struct {
	size  int64
	mtime int64
	ino   uint64
	mode  fs.FileMode
}

type cached struct {
	key statKey
	id  string
	// racy: the file was modified in the same second it was hashed, so a
	// later write in that second could leave the key unchanged; it is
	// hashed again next time.
	racy bool
}

// rootCache is one workspace root's stat cache, shared by every snapshot
// of the root in this process.
type rootCache struct {
	mu    sync.Mutex
	files map[string]cached
	// last is the root's last tree stored and its id: an unchanged tree is
	// not encoded and hashed again.
	last   tree
	lastID string
}

// equal reports whether two trees hold the same entries.
func (t tree) equal(o tree) bool {
	if len(t) != len(o) {
		return false
	}
	for p, e := range t {
		if oe, ok := o[p]; !ok || oe != e {
			return false
		}
	}
	return true
}

// putTree stores the tree of root in pk and returns its id.
func (s *Store) putTree(root string, t tree, pk *pack) (string, error) {
	rc := s.cache(root)
	rc.mu.Lock()
	last, lastID := rc.last, rc.lastID
	rc.mu.Unlock()
	if lastID != "" && pk.has(lastID) && t.equal(last) {
		return lastID, nil
	}
	id, err := pk.put(t.encode())
	if err != nil {
		return "", err
	}
	rc.mu.Lock()
	rc.last, rc.lastID = t, id
	rc.mu.Unlock()
	return id, nil
}

// tree is a snapshot of one root: slash-separated relative paths to entries.
type tree map[string]Entry

// encode writes the tree as sorted lines `type mode size id "target" "path"`.
func (t tree) encode() []byte {
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var b bytes.Buffer
	b.Grow(len(paths) * 100)
	var line []byte
	for _, p := range paths {
		e := t[p]
		id := e.ID
		if id == "" {
			id = "-"
		}
		line = append(line[:0], e.Type...)
		line = append(line, ' ')
		line = strconv.AppendUint(line, uint64(e.Mode.Perm()), 8)
		line = append(line, ' ')
		line = strconv.AppendInt(line, e.Size, 10)
		line = append(line, ' ')
		line = append(line, id...)
		line = append(line, ' ')
		line = strconv.AppendQuote(line, e.Target)
		line = append(line, ' ')
		line = strconv.AppendQuote(line, p)
		line = append(line, '\n')
		b.Write(line)
	}
	return b.Bytes()
}

func decodeTree(data []byte) (tree, error) {
	t := tree{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.SplitN(line, " ", 5)
		if len(f) != 5 {
			return nil, fmt.Errorf("checkpoint tree: bad line %q", line)
		}
		mode, err1 := strconv.ParseUint(f[1], 8, 32)
		size, err2 := strconv.ParseInt(f[2], 10, 64)
		target, err3 := strconv.QuotedPrefix(f[4])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("checkpoint tree: bad line %q: %v", line, err)
		}
		rest := strings.TrimPrefix(f[4][len(target):], " ")
		p, err := strconv.Unquote(rest)
		if err != nil {
			return nil, fmt.Errorf("checkpoint tree: bad path in %q", line)
		}
		target, _ = strconv.Unquote(target)
		e := Entry{Type: f[0], Mode: fs.FileMode(mode), Size: size, Target: target}
		if f[3] != "-" {
			e.ID = f[3]
		}
		t[p] = e
	}
	return t, sc.Err()
}

// skipName is left out of every tree: git's own folder (and a worktree's
// .git file) is the user's repository state, never the workspace's.
func skipName(name string) bool { return name == ".git" }

// walk snapshots root: every directory, regular file (up to MaxTreeFile)
// and symlink that .gitignore does not ignore, reading and storing only
// the files whose stat data changed since the cache last saw them, into pk.
// With pk nil nothing is written (a rewind's look at the current state).
func (s *Store) walk(root string, pk *pack) (tree, error) {
	rc := s.cache(root)
	rr, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	ign := tools.NewIgnorer(rr)
	out := tree{}
	var (
		mu      sync.Mutex
		firstEr error
		wg      sync.WaitGroup
		queue   = make(chan string, 1024)
		pending sync.WaitGroup
	)
	setErr := func(err error) {
		mu.Lock()
		if firstEr == nil {
			firstEr = err
		}
		mu.Unlock()
	}
	var enqueue func(dir string)
	enqueue = func(dir string) {
		pending.Add(1)
		select {
		case queue <- dir:
		default:
			go func() { queue <- dir }()
		}
	}
	now := time.Now()
	visit := func(dir string) {
		defer pending.Done()
		ign.EnterDir(dir)
		abs := root
		if dir != "." {
			abs = filepath.Join(root, filepath.FromSlash(dir))
		}
		f, err := os.Open(abs)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				setErr(err)
			}
			return
		}
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			setErr(err)
			return
		}
		local := make(map[string]Entry, len(ents))
		for _, de := range ents {
			name := de.Name()
			if skipName(name) {
				continue
			}
			rel := name
			if dir != "." {
				rel = dir + "/" + name
			}
			t := de.Type()
			if t&^(fs.ModeDir|fs.ModeSymlink) != 0 {
				continue // devices, pipes, sockets: nothing to restore
			}
			if ign.Ignored(rel, t.IsDir()) {
				continue
			}
			fi, err := de.Info()
			if err != nil {
				continue // gone since the read
			}
			switch {
			case fi.IsDir():
				local[rel] = Entry{Type: TypeDir, Mode: fi.Mode().Perm()}
				enqueue(rel)
			case fi.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(filepath.Join(abs, name))
				if err != nil {
					continue
				}
				local[rel] = Entry{Type: TypeSymlink, Target: target}
			case fi.Mode().IsRegular():
				if fi.Size() > MaxTreeFile {
					continue
				}
				e, err := s.fileEntry(rc, filepath.Join(abs, name), rel, fi, now, pk)
				if err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						continue
					}
					setErr(err)
					continue
				}
				local[rel] = e
			}
		}
		mu.Lock()
		for k, v := range local {
			out[k] = v
		}
		tooMany := len(out) > MaxTreeEntries
		mu.Unlock()
		if tooMany {
			setErr(fmt.Errorf("the workspace %s holds more than %d files and folders not ignored by .gitignore; a checkpoint would copy all of them", root, MaxTreeEntries))
		}
	}
	for range walkWorkers {
		wg.Go(func() {
			for dir := range queue {
				mu.Lock()
				stop := firstEr != nil
				mu.Unlock()
				if stop {
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
	return out, nil
}

// fileEntry is the entry of a regular file, from the stat cache when its
// stat data is unchanged, else read (and stored when store is set).
func (s *Store) fileEntry(rc *rootCache, abs, rel string, fi fs.FileInfo, now time.Time, pk *pack) (Entry, error) {
	key := statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), ino: inode(fi), mode: fi.Mode()}
	rc.mu.Lock()
	c, ok := rc.files[rel]
	rc.mu.Unlock()
	if ok && c.key == key && !c.racy && (pk == nil || pk.has(c.id)) {
		return Entry{Type: TypeFile, Mode: fi.Mode().Perm(), Size: fi.Size(), ID: c.id}, nil
	}
	data, fi2, err := readRegular(abs)
	if err != nil {
		return Entry{}, err
	}
	var id string
	if pk != nil {
		id, err = pk.put(data)
		if err != nil {
			return Entry{}, err
		}
	} else {
		id = hashID(data)
	}
	key = statKey{size: fi2.Size(), mtime: fi2.ModTime().UnixNano(), ino: inode(fi2), mode: fi2.Mode()}
	racy := now.Sub(fi2.ModTime()) < 2*time.Second
	rc.mu.Lock()
	rc.files[rel] = cached{key: key, id: id, racy: racy}
	rc.mu.Unlock()
	return Entry{Type: TypeFile, Mode: fi2.Mode().Perm(), Size: int64(len(data)), ID: id}, nil
}

// readRegular reads a regular file without following a symlink at its
// name and without blocking on a FIFO swapped in after the listing.
func readRegular(abs string) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(abs, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: %w", abs, fs.ErrNotExist)
	}
	data, err := io.ReadAll(f)
	return data, fi, err
}

func (s *Store) cache(root string) *rootCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc := s.caches[root]
	if rc == nil {
		rc = &rootCache{files: map[string]cached{}}
		s.caches[root] = rc
	}
	return rc
}
