package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
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

// tree is a snapshot of one root, flattened: slash-separated relative
// paths to entries (a folder's entry carries no id).
type tree map[string]Entry

// A root's snapshot is stored as one object per folder, listing the
// folder's direct children in name order, one line each:
//
//	type mode size id "target" "name"
//
// after the header line treeHeader; a folder's line carries the id of the
// folder's own object. A snapshot in which one file changed stores that
// folder's listing and its parents' again, and shares every other folder's
// object with the snapshot before it. The first format of the store (before
// this one) was a single object listing every path of the root, its lines
// the same but for the full relative path in place of the name and no id on
// folders; it has no header, and loadTree still reads it.
const treeHeader = "acpd tree 2\n"

// dirList is one folder of a snapshot: its children sorted by name.
type dirList struct {
	names []string
	ents  []Entry
	// keys are the stat data of the regular files when they were hashed
	// (zero for the other entries), racy whether that hash cannot be
	// trusted by the stat data alone (see statKey).
	keys []statKey
	racy []bool
	// id is the folder's object in the store, once stored.
	id string
	// ino is the folder's inode when it was listed; volatile says it holds
	// a racy file or one with several links, so it is listed at every walk
	// even when watched; gitignore is the stat of its .gitignore (zero for
	// none).
	ino       uint64
	volatile  bool
	gitignore statKey
}

func (d *dirList) find(name string) int {
	if d == nil {
		return -1
	}
	i, ok := slices.BinarySearch(d.names, name)
	if !ok {
		return -1
	}
	return i
}

// sameListing reports whether two listings encode to the same object.
func (d *dirList) sameListing(o *dirList) bool {
	return o != nil && slices.Equal(d.names, o.names) && slices.Equal(d.ents, o.ents)
}

// encode writes the folder's object.
func (d *dirList) encode() []byte {
	b := make([]byte, 0, len(treeHeader)+len(d.names)*100)
	b = append(b, treeHeader...)
	for i, name := range d.names {
		b = appendLine(b, d.ents[i], name)
	}
	return b
}

func appendLine(b []byte, e Entry, name string) []byte {
	id := e.ID
	if id == "" {
		id = "-"
	}
	b = append(b, e.Type...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(e.Mode.Perm()), 8)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.Size, 10)
	b = append(b, ' ')
	b = append(b, id...)
	b = append(b, ' ')
	b = strconv.AppendQuote(b, e.Target)
	b = append(b, ' ')
	b = strconv.AppendQuote(b, name)
	return append(b, '\n')
}

// parseLines reads `type mode size id "target" "name"` lines.
func parseLines(data []byte, each func(name string, e Entry) error) error {
	for len(data) > 0 {
		var line string
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = string(data[:i]), data[i+1:]
		} else {
			line, data = string(data), nil
		}
		f := strings.SplitN(line, " ", 5)
		if len(f) != 5 {
			return fmt.Errorf("checkpoint tree: bad line %q", line)
		}
		mode, err1 := strconv.ParseUint(f[1], 8, 32)
		size, err2 := strconv.ParseInt(f[2], 10, 64)
		target, err3 := strconv.QuotedPrefix(f[4])
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("checkpoint tree: bad line %q: %v", line, err)
		}
		rest := strings.TrimPrefix(f[4][len(target):], " ")
		p, err := strconv.Unquote(rest)
		if err != nil {
			return fmt.Errorf("checkpoint tree: bad path in %q", line)
		}
		target, _ = strconv.Unquote(target)
		e := Entry{Type: f[0], Mode: fs.FileMode(mode), Size: size, Target: target}
		if f[3] != "-" {
			e.ID = f[3]
		}
		if err := each(p, e); err != nil {
			return err
		}
	}
	return nil
}

// decodeDir reads a folder's object; ok is false for a snapshot of the
// first format (a flat listing of the whole root).
func decodeDir(data []byte) (d *dirList, ok bool, err error) {
	body, ok := bytes.CutPrefix(data, []byte(treeHeader))
	if !ok {
		return nil, false, nil
	}
	d = &dirList{}
	err = parseLines(body, func(name string, e Entry) error {
		if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
			return fmt.Errorf("checkpoint tree: bad name %q", name)
		}
		if n := len(d.names); n > 0 && d.names[n-1] >= name {
			return fmt.Errorf("checkpoint tree: names out of order at %q", name)
		}
		if e.Type == TypeDir && e.ID == "" {
			return fmt.Errorf("checkpoint tree: folder %q has no object", name)
		}
		d.names = append(d.names, name)
		d.ents = append(d.ents, e)
		return nil
	})
	return d, true, err
}

// decodeFlat reads a snapshot of the first format.
func decodeFlat(data []byte) (tree, error) {
	t := tree{}
	err := parseLines(data, func(p string, e Entry) error {
		t[p] = e
		return nil
	})
	return t, err
}

// maxTreeDepth bounds the folder nesting loadTree follows, so a damaged
// store naming a folder's own object inside it cannot loop.
const maxTreeDepth = 4096

// loadTree returns the snapshot stored as object id, flattened.
func loadTree(p *pack, id string) (tree, error) {
	if p == nil {
		return nil, fmt.Errorf("checkpoint store: no pack holds tree %s", id)
	}
	data, err := p.get(id)
	if err != nil {
		return nil, err
	}
	d, ok, err := decodeDir(data)
	if err != nil {
		return nil, err
	}
	if !ok {
		return decodeFlat(data)
	}
	t := tree{}
	var add func(prefix string, d *dirList, depth int) error
	add = func(prefix string, d *dirList, depth int) error {
		if depth > maxTreeDepth {
			return fmt.Errorf("%w: folders nested deeper than %d", errCorrupt, maxTreeDepth)
		}
		for i, name := range d.names {
			rel := name
			if prefix != "" {
				rel = prefix + "/" + name
			}
			e := d.ents[i]
			if e.Type != TypeDir {
				t[rel] = e
				continue
			}
			sub, err := loadDir(p, e.ID)
			if err != nil {
				return err
			}
			e.ID = ""
			t[rel] = e
			if err := add(rel, sub, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return t, add("", d, 0)
}

func loadDir(p *pack, id string) (*dirList, error) {
	data, err := p.get(id)
	if err != nil {
		return nil, err
	}
	d, ok, err := decodeDir(data)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %s is not a folder listing", errCorrupt, id[:12])
	}
	return d, err
}

// lookupTree finds one relative path in the snapshot stored as object id,
// reading only the folders on its way.
func lookupTree(p *pack, id, rel string) (Entry, bool, error) {
	if p == nil {
		return Entry{}, false, fmt.Errorf("checkpoint store: no pack holds tree %s", id)
	}
	data, err := p.get(id)
	if err != nil {
		return Entry{}, false, err
	}
	d, ok, err := decodeDir(data)
	if err != nil {
		return Entry{}, false, err
	}
	if !ok {
		t, err := decodeFlat(data)
		e, in := t[rel]
		return e, in, err
	}
	for {
		name, rest, more := strings.Cut(rel, "/")
		i := d.find(name)
		if i < 0 {
			return Entry{}, false, nil
		}
		e := d.ents[i]
		if !more {
			if e.Type == TypeDir {
				e.ID = ""
			}
			return e, true, nil
		}
		if e.Type != TypeDir {
			return Entry{}, false, nil
		}
		if d, err = loadDir(p, e.ID); err != nil {
			return Entry{}, false, err
		}
		rel = rest
	}
}

// maxCapture bounds a file a file tool's change captures before it runs
// (the whole-tree snapshot's bound is MaxTreeFile): the workspace decides a
// file's size, and the capture holds the whole of it in memory. A change to
// a bigger file fails with the reason rather than run uncaptured.
const maxCapture = 256 << 20

// readRegular reads a regular file of at most max bytes (errTooBig past
// it, also when it grows while read) without following a symlink at its
// name and without blocking on a FIFO swapped in after the listing.
func readRegular(abs string, max int64) ([]byte, fs.FileInfo, error) {
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
	if fi.Size() > max {
		return nil, nil, fmt.Errorf("%s: %w (%d MiB)", abs, errTooBig, max>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if int64(len(data)) > max {
		return nil, nil, fmt.Errorf("%s: %w (%d MiB)", abs, errTooBig, max>>20)
	}
	return data, fi, err
}
