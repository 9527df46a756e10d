package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Change is one path a rewind puts back: its state now and the state it
// had before the turn.
type Change struct {
	Path     string // absolute
	Now, To  Entry
	Conflict bool // changed since the last checkpointed turn that touched it ended
	root     string
	rel      string
}

// Plan is what rewinding to before a turn would do. Applying it again
// after an interruption gives the same result: a path already in its
// target state is no change.
type Plan struct {
	Turn    int
	Changes []Change
	// Skipped are paths the checkpoints hold that lie outside the
	// session's roots now; they are left alone.
	Skipped []string
	pk      *pack
}

// Conflicts lists the paths changed since the turns (by the user, or
// anything else) that the rewind would replace.
func (p *Plan) Conflicts() []string {
	var out []string
	for _, c := range p.Changes {
		if c.Conflict {
			out = append(out, c.Path)
		}
	}
	return out
}

// PlanRewind works out the rewind of a session's workspace to before turn,
// from the checkpoints of that turn and every later one not yet rewound.
// roots are the session's roots now: nothing outside them is planned.
func (s *Store) PlanRewind(sid string, turn int, roots []string) (*Plan, error) {
	cps, err := s.List(sid)
	if err != nil {
		return nil, err
	}
	var live []*Checkpoint
	for _, cp := range cps {
		if cp.Turn >= turn && cp.Rewound == nil {
			live = append(live, cp)
		}
	}
	pk, err := s.pack(sid, false)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Turn: turn, pk: pk}
	target := map[string]Entry{}   // the state before the turn, by absolute path
	expected := map[string]Entry{} // the state the last turn touching it left
	known := map[string]bool{}     // expected is known (that turn ended)
	treeRoots := map[string]bool{}
	trees := map[string]tree{} // loaded trees by id
	getTree := func(id string) (tree, error) {
		if t, ok := trees[id]; ok {
			return t, nil
		}
		t, err := loadTree(pk, id)
		if err != nil {
			return nil, err
		}
		trees[id] = t
		return t, nil
	}
	outside := map[string]bool{}
	// touched reports whether checkpoint cp holds abs path p, and its
	// state before and after the turn.
	type state struct {
		before, after Entry
		hasAfter      bool
	}
	lookup := func(cp *Checkpoint, p string) (state, bool, error) {
		if e, ok := cp.Files[p]; ok {
			a, has := cp.AfterFiles[p]
			return state{e, a, has && cp.Ended}, true, nil
		}
		root, rel, ok := rootOf(roots, p)
		if !ok || cp.Trees[root] == "" {
			return state{}, false, nil
		}
		t, err := getTree(cp.Trees[root])
		if err != nil {
			return state{}, false, err
		}
		st := state{before: absent}
		if e, ok := t[rel]; ok {
			st.before = e
		}
		if id := cp.AfterTrees[root]; cp.Ended && id != "" {
			at, err := getTree(id)
			if err != nil {
				return state{}, false, err
			}
			st.after, st.hasAfter = absent, true
			if e, ok := at[rel]; ok {
				st.after = e
			}
		}
		return st, true, nil
	}
	// Every path any of the checkpoints holds, and every path under a
	// snapshotted root now (a file created since is in none of them).
	paths := map[string]bool{}
	current := map[string]Entry{}
	for _, cp := range live {
		for p := range cp.Files {
			if _, _, ok := rootOf(roots, p); !ok {
				outside[p] = true
				continue
			}
			paths[p] = true
		}
		for root, id := range cp.Trees {
			if !slices.Contains(roots, root) {
				continue
			}
			t, err := getTree(id)
			if err != nil {
				return nil, err
			}
			for rel := range t {
				paths[filepath.Join(root, filepath.FromSlash(rel))] = true
			}
			if !treeRoots[root] {
				treeRoots[root] = true
				now, err := s.walk(root, nil)
				if err != nil {
					return nil, err
				}
				for rel, e := range now {
					abs := filepath.Join(root, filepath.FromSlash(rel))
					paths[abs] = true
					current[abs] = e
				}
			}
		}
	}
	for p := range paths {
		for _, cp := range live {
			st, ok, err := lookup(cp, p)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if _, set := target[p]; !set {
				target[p] = st.before
			}
			expected[p], known[p] = st.after, st.hasAfter
		}
	}
	for p, to := range target {
		root, rel, _ := rootOf(roots, p)
		now, ok := current[p]
		if !ok {
			now, err = s.state(p, nil)
			if err != nil {
				return nil, err
			}
			if now.Type == TypeFile && now.Size > MaxTreeFile && treeRoots[root] && to.Type == TypeAbsent {
				continue // over the tree bound: never captured, never removed
			}
		}
		if now.same(to) {
			continue
		}
		c := Change{Path: p, Now: now, To: to, root: root, rel: rel}
		if known[p] && !now.same(expected[p]) {
			c.Conflict = true
		}
		plan.Changes = append(plan.Changes, c)
	}
	for p := range outside {
		plan.Skipped = append(plan.Skipped, p)
	}
	slices.Sort(plan.Skipped)
	slices.SortFunc(plan.Changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return plan, nil
}

// Apply carries out the plan, leaving the paths in keep as they are (the
// conflicts the user chose to keep). Every write goes through an os.Root of
// the path's workspace root, so no symlink leads it outside; files are
// written to a temporary name and renamed into place, symlinks restored as
// symlinks.
func (s *Store) Apply(p *Plan, keep map[string]bool) error {
	rootsOpen := map[string]*os.Root{}
	defer func() {
		for _, r := range rootsOpen {
			r.Close()
		}
	}()
	open := func(root string) (*os.Root, error) {
		if r := rootsOpen[root]; r != nil {
			return r, nil
		}
		r, err := os.OpenRoot(root)
		if err != nil {
			return nil, err
		}
		rootsOpen[root] = r
		return r, nil
	}
	var removeDirs []Change
	var errs []error
	// Directories first, parents before children; then the paths to
	// remove, files and then folders, children before parents; then files
	// and symlinks. Removing first empties a folder the turn put where a
	// file or symlink was (its files are the turn's, to remove), so the
	// file or symlink can take its place again.
	changes := slices.Clone(p.Changes)
	for _, c := range changes {
		if keep[c.Path] || c.To.Type != TypeDir {
			continue
		}
		r, err := open(c.root)
		if err != nil {
			return err
		}
		if c.Now.Type != TypeAbsent && c.Now.Type != TypeDir {
			if err := r.Remove(filepath.FromSlash(c.rel)); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := r.MkdirAll(filepath.FromSlash(c.rel), c.To.Mode.Perm()|0o700); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.Chmod(filepath.FromSlash(c.rel), c.To.Mode.Perm()); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range changes {
		if keep[c.Path] || c.To.Type != TypeAbsent {
			continue
		}
		r, err := open(c.root)
		if err != nil {
			return err
		}
		if c.Now.Type == TypeDir {
			removeDirs = append(removeDirs, c)
			continue
		}
		if err := r.Remove(filepath.FromSlash(c.rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	slices.SortFunc(removeDirs, func(a, b Change) int { return strings.Compare(b.Path, a.Path) })
	for _, c := range removeDirs {
		r, err := open(c.root)
		if err != nil {
			return err
		}
		// Only an empty folder goes: what is left in it was never the
		// turn's (ignored, or over the size bound).
		_ = r.Remove(filepath.FromSlash(c.rel))
	}
	for _, c := range changes {
		if keep[c.Path] || (c.To.Type != TypeFile && c.To.Type != TypeSymlink) {
			continue
		}
		r, err := open(c.root)
		if err != nil {
			return err
		}
		if err := restoreOne(p.pk, r, c); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
		}
	}
	return errors.Join(errs...)
}

// restoreOne writes a file or symlink back through r.
func restoreOne(pk *pack, r *os.Root, c Change) error {
	rel := filepath.FromSlash(c.rel)
	if dir := path.Dir(c.rel); dir != "." {
		if err := r.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return err
		}
	}
	if c.Now.Type == TypeDir {
		if err := r.Remove(rel); err != nil {
			return fmt.Errorf("a folder is in the way: %w", err)
		}
	}
	tmp := filepath.Join(filepath.Dir(rel), ".acpd-rewind-"+filepath.Base(rel))
	_ = r.Remove(tmp)
	if c.To.Type == TypeSymlink {
		if err := r.Symlink(c.To.Target, tmp); err != nil {
			return err
		}
		return r.Rename(tmp, rel)
	}
	if pk == nil {
		return fmt.Errorf("no checkpoint holds its content")
	}
	data, err := pk.get(c.To.ID)
	if err != nil {
		return err
	}
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, c.To.Mode.Perm())
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Chmod(tmp, c.To.Mode.Perm())
	}
	if err == nil {
		err = r.Rename(tmp, rel)
	}
	if err != nil {
		_ = r.Remove(tmp)
	}
	return err
}
