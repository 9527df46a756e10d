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
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Layout under <dataDir>/checkpoints: one pack per session that has
// checkpoints, <session id>.pack (see objects.go).
const manifestVersion = 1

// Store is the checkpoint store of one data folder.
type Store struct {
	dir string

	mu     sync.Mutex
	caches map[string]*rootCache
	packs  map[string]*pack

	watchOnce sync.Once
	watcher   *watcher
}

// Open opens (creating) the store under dataDir.
func Open(dataDir string) (*Store, error) {
	dir := filepath.Join(dataDir, "checkpoints")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	return &Store{dir: dir, caches: map[string]*rootCache{}, packs: map[string]*pack{}}, nil
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

func manifestTurn(data []byte) (int, bool) {
	var m struct {
		Turn int `json:"turn"`
	}
	if json.Unmarshal(data, &m) != nil || m.Turn < 1 {
		return 0, false
	}
	return m.Turn, true
}

// validSession refuses ids that could name a path outside the store.
func validSession(sid string) error {
	if sid == "" || strings.ContainsAny(sid, `/\`) || strings.HasPrefix(sid, ".") || len(sid) > 128 {
		return fmt.Errorf("checkpoint store: invalid session id %q", sid)
	}
	return nil
}

func (s *Store) packPath(sid string) string { return filepath.Join(s.dir, sid+".pack") }

// pack returns the session's pack, opened (created when create is set) at
// first use; nil without error when it does not exist and create is unset.
func (s *Store) pack(sid string, create bool) (*pack, error) {
	if err := validSession(sid); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.packs[sid]; p != nil {
		return p, nil
	}
	p, err := openPack(s.packPath(sid), create)
	if errors.Is(err, os.ErrNotExist) && !create {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.packs[sid] = p
	return p, nil
}

// Release closes a session's pack (the session ended in this process).
func (s *Store) Release(sid string) error {
	s.mu.Lock()
	p := s.packs[sid]
	delete(s.packs, sid)
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.close()
}

// save appends the manifest after the objects it names and fsyncs the
// pack: the checkpoint is on disk when save returns.
func (s *Store) save(cp *Checkpoint) error {
	p, err := s.pack(cp.Session, true)
	if err != nil {
		return err
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if err := p.putManifest(cp.Turn, data); err != nil {
		return fmt.Errorf("checkpoint store: writing the checkpoint of turn %d: %w", cp.Turn, err)
	}
	return nil
}

// Load returns the checkpoint of a session's turn; fs.ErrNotExist when the
// turn has none.
func (s *Store) Load(sid string, turn int) (*Checkpoint, error) {
	p, err := s.pack(sid, false)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fs.ErrNotExist
	}
	p.mu.Lock()
	data, ok := p.mans[turn]
	p.mu.Unlock()
	if !ok {
		return nil, fs.ErrNotExist
	}
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint store: checkpoint of turn %d of session %s is damaged: %w", turn, sid, err)
	}
	return &cp, nil
}

// List returns a session's checkpoints in turn order.
func (s *Store) List(sid string) ([]*Checkpoint, error) {
	p, err := s.pack(sid, false)
	if err != nil || p == nil {
		return nil, err
	}
	p.mu.Lock()
	turns := make([]int, 0, len(p.mans))
	for t := range p.mans {
		turns = append(turns, t)
	}
	p.mu.Unlock()
	slices.Sort(turns)
	out := make([]*Checkpoint, 0, len(turns))
	for _, t := range turns {
		cp, err := s.Load(sid, t)
		if err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	return out, nil
}

// Sessions lists the ids of the sessions that have checkpoints.
func (s *Store) Sessions() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".pack"); ok && e.Type().IsRegular() && validSession(id) == nil {
			out = append(out, id)
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
	p      *pack
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
		pk, err := r.pack()
		if err != nil {
			return err
		}
		e, err := r.s.state(p, pk)
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
	_, in, err := lookupTree(r.p, r.cp.Trees[root], rel)
	return err == nil && in
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
	pk, err := r.pack()
	if err != nil {
		return err
	}
	trees := map[string]string{}
	for _, root := range r.cp.Roots {
		id, err := r.s.snapshot(root, pk)
		if err != nil {
			return fmt.Errorf("checkpoint: snapshot of %s: %w", root, err)
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
	pk := r.p
	for p := range r.cp.Files {
		e, err := r.s.state(p, pk)
		if err != nil {
			return err
		}
		after[p] = e
	}
	trees := map[string]string{}
	for root := range r.cp.Trees {
		id, err := r.s.snapshot(root, pk)
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

// pack is the turn's session pack, created at the first capture.
func (r *Recorder) pack() (*pack, error) {
	if r.p == nil {
		p, err := r.s.pack(r.cp.Session, true)
		if err != nil {
			return nil, err
		}
		r.p = p
	}
	return r.p, nil
}

// state is the current state of an absolute path, never following a
// symlink at it; with a pack a file's content is stored in it.
func (s *Store) state(p string, pk *pack) (Entry, error) {
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
	data, fi, err := readRegular(p, maxCapture)
	if errors.Is(err, os.ErrNotExist) {
		return absent, nil
	}
	if err != nil {
		return Entry{}, err
	}
	id := hashID(data)
	if pk != nil {
		if id, err = pk.put(data); err != nil {
			return Entry{}, err
		}
	}
	return Entry{Type: TypeFile, Mode: fi.Mode().Perm(), Size: int64(len(data)), ID: id}, nil
}

// Content returns the bytes of a file stored for a session.
func (s *Store) Content(sid, id string) ([]byte, error) {
	p, err := s.pack(sid, false)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fs.ErrNotExist
	}
	return p.get(id)
}

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
