// Package checkpoint keeps what a prompt turn's tools changed in the
// workspace so the turn can be undone: before the first mutating call of a
// turn it records the before-images of the files the file tools touch and,
// before a shell command or an MCP tool, a snapshot of every workspace
// root; at the turn's end the state after it. Content lives in acpd's data
// folder (never in the user's repository; no git runs), stored by hash and
// cut into content-defined chunks, so checkpoints share what did not change.
// A rewind puts every path back to its state before a turn, asking before
// it replaces a file changed since.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Layout under <dataDir>/checkpoints:
//
//	objects/<2 hex>/<62 hex>      content (see objects.go)
//	sessions/<session id>/<turn>.json  one manifest per checkpointed turn
const manifestVersion = 1

// Store is the checkpoint store of one data folder.
type Store struct {
	dir string
	obj *objects

	mu     sync.Mutex
	caches map[string]*rootCache
}

// Open opens (creating) the store under dataDir.
func Open(dataDir string) (*Store, error) {
	dir := filepath.Join(dataDir, "checkpoints")
	for _, d := range []string{dir, filepath.Join(dir, "objects"), filepath.Join(dir, "sessions")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("checkpoint store: %w", err)
		}
	}
	return &Store{dir: dir, obj: newObjects(filepath.Join(dir, "objects")), caches: map[string]*rootCache{}}, nil
}

// Dir is the store's folder.
func (s *Store) Dir() string { return s.dir }

// Checkpoint is one turn's manifest: the state before the turn of what it
// changed, and (Ended) the state after it.
type Checkpoint struct {
	V       int       `json:"v"`
	Session string    `json:"session"`
	Turn    int       `json:"turn"`
	Time    time.Time `json:"time"`
	Prompt  string    `json:"prompt,omitempty"`
	Roots   []string  `json:"roots"`
	// Files are before-images by absolute path, taken at each path's first
	// touch by a file tool in the turn.
	Files map[string]Entry `json:"files,omitempty"`
	// Trees are whole-root snapshots (a tree object's id) by root, taken
	// before the turn's first shell command or MCP tool. A path under such
	// a root missing from its tree (and not ignored) did not exist.
	Trees map[string]string `json:"trees,omitempty"`
	// Ended is set once the turn ended; AfterFiles and AfterTrees are then
	// the same paths' state after it. A turn cut off by a crash has none.
	Ended      bool              `json:"ended,omitempty"`
	AfterFiles map[string]Entry  `json:"afterFiles,omitempty"`
	AfterTrees map[string]string `json:"afterTrees,omitempty"`
	// Rewound is when the conversation was rewound to before this turn.
	Rewound *time.Time `json:"rewound,omitempty"`
}

func (s *Store) sessionDir(sid string) string { return filepath.Join(s.dir, "sessions", sid) }

func (s *Store) manifestPath(sid string, turn int) string {
	return filepath.Join(s.sessionDir(sid), fmt.Sprintf("%06d.json", turn))
}

// validSession refuses ids that could name a path outside the store.
func validSession(sid string) error {
	if sid == "" || strings.ContainsAny(sid, `/\`) || sid == "." || sid == ".." || len(sid) > 128 {
		return fmt.Errorf("checkpoint store: invalid session id %q", sid)
	}
	return nil
}

// save writes the manifest durably: the objects it names first, then the
// manifest (temporary file, fsync, rename, fsync of the folder).
func (s *Store) save(cp *Checkpoint) error {
	if err := s.obj.flush(); err != nil {
		return fmt.Errorf("checkpoint store: syncing objects: %w", err)
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	dir := s.sessionDir(cp.Session)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.manifestPath(cp.Session, cp.Turn))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("checkpoint store: writing the checkpoint of turn %d: %w", cp.Turn, err)
	}
	return syncPathDir(dir)
}

func syncPathDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Load returns the checkpoint of a session's turn; fs.ErrNotExist when the
// turn has none.
func (s *Store) Load(sid string, turn int) (*Checkpoint, error) {
	if err := validSession(sid); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.manifestPath(sid, turn))
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint store: checkpoint of turn %d of session %s is damaged: %w", turn, sid, err)
	}
	return &cp, nil
}

// List returns a session's checkpoints in turn order.
func (s *Store) List(sid string) ([]*Checkpoint, error) {
	if err := validSession(sid); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(s.sessionDir(sid))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Checkpoint
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		n, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		cp, err := s.Load(sid, n)
		if err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b *Checkpoint) int { return a.Turn - b.Turn })
	return out, nil
}

// Sessions lists the ids of the sessions that have checkpoints.
func (s *Store) Sessions() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "sessions"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && validSession(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// MarkRewound records that the conversation was rewound to before turn:
// that turn's and every later checkpoint are no longer offered.
func (s *Store) MarkRewound(sid string, turn int, at time.Time) error {
	cps, err := s.List(sid)
	if err != nil {
		return err
	}
	for _, cp := range cps {
		if cp.Turn < turn || cp.Rewound != nil {
			continue
		}
		cp.Rewound = &at
		if err := s.save(cp); err != nil {
			return err
		}
	}
	return nil
}

// Recorder builds one turn's checkpoint; safe for concurrent use (the
// subagent runs of a response record for the same turn at once).
type Recorder struct {
	s      *Store
	mu     sync.Mutex
	cp     *Checkpoint
	saved  bool
	failed error
}

// Begin starts the checkpoint of a session's turn. Nothing is written until
// the first mutating call.
func (s *Store) Begin(sid string, turn int, prompt string, roots []string) *Recorder {
	return &Recorder{s: s, cp: &Checkpoint{
		V: manifestVersion, Session: sid, Turn: turn, Prompt: prompt,
		Roots: slices.Clone(roots),
	}}
}

// Files records the before-images of paths (absolute) not yet recorded in
// this turn, durably, before the call that changes them runs. An error
// means the checkpoint is not complete: the call must not run.
func (r *Recorder) Files(paths []string) error {
	if err := validSession(r.cp.Session); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	added := false
	for _, p := range paths {
		p = filepath.Clean(p)
		if _, ok := r.cp.Files[p]; ok || r.inTree(p) {
			continue
		}
		e, err := r.s.state(p, true)
		if err != nil {
			return fmt.Errorf("checkpoint: capturing %s: %w", p, err)
		}
		if r.cp.Files == nil {
			r.cp.Files = map[string]Entry{}
		}
		r.cp.Files[p] = e
		added = true
	}
	if !added && r.saved {
		return nil
	}
	return r.saveLocked()
}

// inTree reports whether p is captured by the turn's tree of its root.
func (r *Recorder) inTree(p string) bool {
	root, rel, ok := rootOf(r.cp.Roots, p)
	if !ok || r.cp.Trees[root] == "" {
		return false
	}
	t, err := r.s.loadTree(r.cp.Trees[root])
	if err != nil {
		return false
	}
	_, in := t[rel]
	return in
}

// Tree snapshots every root, once per turn, before a call that may change
// anything in the workspace (a shell command, an MCP tool).
func (r *Recorder) Tree() error {
	if err := validSession(r.cp.Session); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cp.Trees != nil {
		return nil
	}
	trees := map[string]string{}
	for _, root := range r.cp.Roots {
		t, err := r.s.walk(root, true)
		if err != nil {
			return fmt.Errorf("checkpoint: snapshot of %s: %w", root, err)
		}
		id, err := r.s.obj.put(t.encode())
		if err != nil {
			return err
		}
		trees[root] = id
	}
	r.cp.Trees = trees
	return r.saveLocked()
}

func (r *Recorder) saveLocked() error {
	if r.cp.Time.IsZero() {
		r.cp.Time = time.Now().UTC()
	}
	if err := r.s.save(r.cp); err != nil {
		return err
	}
	r.saved = true
	return nil
}

// Taken reports whether the turn has a checkpoint.
func (r *Recorder) Taken() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saved
}

// End records the state after the turn of every path the checkpoint
// holds. A turn without a checkpoint writes nothing.
func (r *Recorder) End() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.saved {
		return nil
	}
	after := map[string]Entry{}
	for p := range r.cp.Files {
		e, err := r.s.state(p, true)
		if err != nil {
			return err
		}
		after[p] = e
	}
	trees := map[string]string{}
	for root := range r.cp.Trees {
		t, err := r.s.walk(root, true)
		if err != nil {
			return err
		}
		id, err := r.s.obj.put(t.encode())
		if err != nil {
			return err
		}
		trees[root] = id
	}
	r.cp.AfterFiles, r.cp.Ended = after, true
	if len(trees) > 0 {
		r.cp.AfterTrees = trees
	}
	return r.saveLocked()
}

// state is the current state of an absolute path, never following a
// symlink at it; with store set a file's content is stored.
func (s *Store) state(p string, store bool) (Entry, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return absent, nil
	}
	if err != nil {
		return Entry{}, err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return Entry{}, err
		}
		return Entry{Type: TypeSymlink, Target: t}, nil
	case fi.IsDir():
		return Entry{Type: TypeDir, Mode: fi.Mode().Perm()}, nil
	case !fi.Mode().IsRegular():
		return Entry{}, fmt.Errorf("%s is not a regular file", p)
	}
	data, fi, err := readRegular(p)
	if errors.Is(err, os.ErrNotExist) {
		return absent, nil
	}
	if err != nil {
		return Entry{}, err
	}
	id := hashID(data)
	if store {
		if id, err = s.obj.put(data); err != nil {
			return Entry{}, err
		}
	}
	return Entry{Type: TypeFile, Mode: fi.Mode().Perm(), Size: int64(len(data)), ID: id}, nil
}

func (s *Store) loadTree(id string) (tree, error) {
	data, err := s.obj.get(id)
	if err != nil {
		return nil, err
	}
	return decodeTree(data)
}

// Content returns a stored file's bytes.
func (s *Store) Content(id string) ([]byte, error) { return s.obj.get(id) }

// rootOf finds the root holding absolute path p (the longest one) and p
// relative to it, slash-separated.
func rootOf(roots []string, p string) (root, rel string, ok bool) {
	for _, r := range roots {
		rp, err := filepath.Rel(r, p)
		if err != nil || rp == "." || rp == ".." || strings.HasPrefix(rp, ".."+string(filepath.Separator)) {
			continue
		}
		if !ok || len(r) > len(root) {
			root, rel, ok = r, filepath.ToSlash(rp), true
		}
	}
	return root, rel, ok
}
