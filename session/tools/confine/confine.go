// Package confine keeps a tool's paths inside the session's workspace
// roots. Roots.Path checks a path before any I/O: absolute, free of "..",
// NUL bytes and Windows forms, outside /proc, /sys and /dev, and — after
// resolving the symlinks of its longest existing prefix — inside one of the
// roots. A Target, the path that passed, then does its local I/O through an
// *os.Root of its root and O_NOFOLLOW, so a file or folder swapped for a
// symlink after the check is refused at use time. RootCache keeps a
// session's roots resolved and held open between calls.
package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ErrOutsideWorkspace is wrapped by every confinement refusal.
var ErrOutsideWorkspace = errors.New("path is not allowed")

// Roots are the workspace folders a session's tools may touch: the session
// cwd first, then its additional directories.
type Roots struct {
	Dirs []string
	// Cache, when set, keeps the roots' resolution for the session.
	Cache *RootCache
}

// Target is a path that passed confinement.
type Target struct {
	path string // cleaned absolute path as given: sent to the editor and shown in frames
	real string // symlinks resolved: used for local I/O
	root string // the resolved workspace root holding real
	rel  string // real relative to root; "." for the root itself
	// roots, when set, holds the session's roots open (see heldRoot).
	roots *RootCache
}

// Path is the cleaned absolute path as the model gave it: what the editor
// is sent and frames show.
func (t Target) Path() string { return t.path }

// Real is the path with its symlinks resolved: where local I/O happens.
func (t Target) Real() string { return t.real }

// Root is the resolved workspace root holding Real.
func (t Target) Root() string { return t.root }

// Rel is Real relative to Root; "." for the root itself.
func (t Target) Rel() string { return t.rel }

// forbiddenTrees are refused even when a workspace root contains them:
// reading them leaks process state and writing them has side effects.
var forbiddenTrees = []string{"/proc", "/sys", "/dev"}

// Path checks that p (the value of parameter field) is an absolute POSIX
// path that, after resolving symlinks, lies inside one of the roots. It
// touches the file system only to resolve symlinks (lstat/readlink), never
// to read or write the target.
func (rs Roots) Path(field, p string) (Target, error) {
	refuse := func(format string, a ...any) (Target, error) {
		return Target{}, fmt.Errorf("%w: %s %s", ErrOutsideWorkspace, field, fmt.Sprintf(format, a...))
	}
	switch {
	case p == "":
		return refuse("must not be empty")
	case strings.ContainsRune(p, 0):
		return refuse("contains a NUL byte")
	case strings.ContainsRune(p, '\\') || (len(p) >= 2 && p[1] == ':' && isASCIILetter(p[0])):
		return refuse("%q looks like a Windows path; use an absolute path inside the workspace", p)
	case !filepath.IsAbs(p):
		return refuse("must be an absolute path, got %q", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return refuse("%q must not contain '..'", p)
		}
	}
	clean := filepath.Clean(p)
	if inForbiddenTree(clean) {
		return refuse("%q is in a system directory that tools may not touch", p)
	}
	real, ok := rs.resolveBelowRoot(clean)
	if !ok {
		var err error
		if real, err = resolveExisting(clean); err != nil {
			return refuse("%q cannot be resolved: %v", p, err)
		}
	}
	if inForbiddenTree(real) {
		return refuse("%q resolves to %q, a system directory that tools may not touch", p, real)
	}
	if len(rs.Dirs) == 0 {
		return refuse("%q cannot be used: the session has no workspace directories", p)
	}
	for _, r := range rs.Dirs {
		rr, err := rs.resolveRoot(r)
		if err != nil {
			continue
		}
		if rel, ok := Within(rr, real); ok {
			return Target{path: clean, real: real, root: rr, rel: rel, roots: rs.Cache}, nil
		}
	}
	if real != clean {
		return refuse("%q resolves to %q, outside the workspace directories: %s", p, real, strings.Join(rs.Dirs, ", "))
	}
	return refuse("%q is outside the workspace directories: %s", p, strings.Join(rs.Dirs, ", "))
}

// Recheck repeats confinement just before use, so a path swapped for a
// symlink after the check is refused before the editor is asked to touch it.
func (rs Roots) Recheck(t Target, field string) error {
	again, err := rs.Path(field, t.path)
	if err != nil {
		return err
	}
	if again.real != t.real {
		return fmt.Errorf("%w: %s %q changed since the call was validated (now resolves to %q)", ErrOutsideWorkspace, field, t.path, again.real)
	}
	return nil
}

// RootCache remembers where a session's workspace roots resolve to, so a
// call resolves only the part of its path below the root. It changes no
// check: confinement still resolves the whole path when anything below the
// root is a symlink, and the use-time checks (os.Root, O_NOFOLLOW, the
// opened file's real path) still refuse a file that is not below the
// resolved root. The zero value is ready; safe for concurrent use.
type RootCache struct {
	mu     sync.Mutex
	m      map[string]string
	held   map[string]*held // by resolved root
	closed bool
}

// held is a workspace root kept open, and the identity of that directory.
type held struct {
	r        *os.Root
	dev, ino uint64
}

// heldRoot returns the session's open *os.Root for the resolved root rr,
// opening it on first use. It is returned only while verified: the
// directory now at rr is the one held open (same device and inode), and
// when it was opened rr had no symlink in it, so a file opened below the
// Root is below rr. Otherwise (a root whose path now names another
// directory, a symlink, or nothing) ok is false and the caller opens the
// root by path and checks the opened file's real path, as without a cache.
// The caller must not close the Root. A session's calls run one at a time
// and the cache is closed after its last; a Root closed under a concurrent
// user would only make that user's open fail (os.ErrClosed).
func (c *RootCache) heldRoot(rr string) (r *os.Root, ok bool) {
	if c == nil {
		return nil, false
	}
	dev, ino, err := statID(rr)
	if err != nil {
		c.drop(rr)
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	if h := c.held[rr]; h != nil {
		if dev == h.dev && ino == h.ino {
			return h.r, true
		}
		h.r.Close()
		delete(c.held, rr)
	}
	r, err = os.OpenRoot(rr)
	if err != nil {
		return nil, false
	}
	same := false
	if fi, err := r.Stat("."); err == nil {
		d, i, ok := infoID(fi)
		same = ok && d == dev && i == ino
	}
	if !same {
		r.Close() // changed between the stat and the open
		return nil, false
	}
	if real, err := filepath.EvalSymlinks(rr); err != nil || real != rr {
		r.Close() // rr goes through a symlink now
		return nil, false
	}
	if c.held == nil {
		c.held = map[string]*held{}
	}
	c.held[rr] = &held{r: r, dev: dev, ino: ino}
	return r, true
}

func (c *RootCache) drop(rr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.held[rr]; h != nil {
		h.r.Close()
		delete(c.held, rr)
	}
}

// Close releases the roots held open; later calls open roots per use.
func (c *RootCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for k, h := range c.held {
		h.r.Close()
		delete(c.held, k)
	}
}

// resolveRoot is root with symlinks resolved, from rs.Cache when set.
// Failures are not remembered (a root may be created later).
func (rs Roots) resolveRoot(root string) (string, error) {
	c := rs.Cache
	if c == nil {
		return filepath.EvalSymlinks(filepath.Clean(root))
	}
	c.mu.Lock()
	rr, ok := c.m[root]
	c.mu.Unlock()
	if ok {
		return rr, nil
	}
	rr, err := filepath.EvalSymlinks(filepath.Clean(root))
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[root] = rr
	c.mu.Unlock()
	return rr, nil
}

// resolveBelowRoot is resolveExisting's fast path for a path written below
// a workspace root (as the model writes them): the root's resolution is
// known, so only the components below it are looked at, one lstat each. It
// gives up (false) on a symlink or any error other than a missing
// component, and resolveExisting then decides.
func (rs Roots) resolveBelowRoot(clean string) (string, bool) {
	for _, r := range rs.Dirs {
		rel, ok := Within(filepath.Clean(r), clean)
		if !ok {
			continue
		}
		rr, err := rs.resolveRoot(r)
		if err != nil {
			return "", false
		}
		// The cached resolution is trusted only while the directory at rr
		// is the one held open: lstat below would follow a root (or an
		// ancestor) swapped for a symlink. The full resolution then
		// compares against the cached root and refuses it.
		if rs.Cache != nil {
			if _, ok := rs.Cache.heldRoot(rr); !ok {
				return "", false
			}
		}
		if rel == "." {
			return rr, true
		}
		cur := strings.TrimSuffix(rr, "/")
		rest := rel
		for rest != "" {
			el, more, _ := strings.Cut(rest, "/")
			cur += "/" + el
			rest = more
			fi, err := os.Lstat(cur)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				// Nothing below a missing component exists either.
				if rest != "" {
					cur += "/" + rest
				}
				return cur, true
			case err != nil || fi.Mode()&fs.ModeSymlink != 0:
				return "", false
			}
		}
		return cur, true
	}
	return "", false
}

// resolveExisting resolves symlinks in the longest existing prefix of p and
// appends the rest. A dangling symlink anywhere is refused: its target could
// be created outside the workspace.
func resolveExisting(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if fi, lerr := os.Lstat(p); lerr == nil {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%s is a symlink whose target does not exist", p)
		}
		return "", err
	}
	parent := filepath.Dir(p)
	if parent == p {
		return "", err
	}
	rp, err := resolveExisting(parent)
	if err != nil {
		return "", err
	}
	return filepath.Join(rp, filepath.Base(p)), nil
}

// Within reports whether p is root or below it, and p relative to root.
func Within(root, p string) (string, bool) {
	if p == root {
		return ".", true
	}
	prefix := root
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if !strings.HasPrefix(p, prefix) {
		return "", false
	}
	return p[len(prefix):], true
}

func inForbiddenTree(p string) bool {
	for _, f := range forbiddenTrees {
		if _, ok := Within(f, p); ok {
			return true
		}
	}
	return false
}

func isASCIILetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// Shown is p as shown in titles: relative to the session cwd when inside
// it, absolute otherwise.
func (rs Roots) Shown(p string) string {
	if len(rs.Dirs) > 0 {
		if rel, ok := Within(filepath.Clean(rs.Dirs[0]), p); ok {
			return rel
		}
	}
	return p
}

// OpenRoot opens t's workspace root as an *os.Root: every later open below
// it refuses paths and symlinks that escape the root, at use time.
func (t Target) OpenRoot() (*os.Root, error) {
	return os.OpenRoot(t.root)
}
