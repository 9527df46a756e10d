package tools

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

// target is a path that passed confinement.
type target struct {
	path string // cleaned absolute path as given: sent to the editor and shown in frames
	real string // symlinks resolved: used for local I/O
	root string // the resolved workspace root holding real
	rel  string // real relative to root; "." for the root itself
	// roots, when set, holds the session's roots open (see heldRoot).
	roots *RootCache
}

// forbiddenTrees are refused even when a workspace root contains them:
// reading them leaks process state and writing them has side effects.
var forbiddenTrees = []string{"/proc", "/sys", "/dev"}

// confine checks that p (the value of parameter field) is an absolute POSIX
// path that, after resolving symlinks, lies inside one of env.Roots. It
// touches the file system only to resolve symlinks (lstat/readlink), never
// to read or write the target.
func confine(env *Env, field, p string) (target, error) {
	refuse := func(format string, a ...any) (target, error) {
		return target{}, fmt.Errorf("%w: %s %s", ErrOutsideWorkspace, field, fmt.Sprintf(format, a...))
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
	real, ok := resolveBelowRoot(env, clean)
	if !ok {
		var err error
		if real, err = resolveExisting(clean); err != nil {
			return refuse("%q cannot be resolved: %v", p, err)
		}
	}
	if inForbiddenTree(real) {
		return refuse("%q resolves to %q, a system directory that tools may not touch", p, real)
	}
	if len(env.Roots) == 0 {
		return refuse("%q cannot be used: the session has no workspace directories", p)
	}
	for _, r := range env.Roots {
		rr, err := env.resolveRoot(r)
		if err != nil {
			continue
		}
		if rel, ok := within(rr, real); ok {
			return target{path: clean, real: real, root: rr, rel: rel, roots: env.RootCache}, nil
		}
	}
	if real != clean {
		return refuse("%q resolves to %q, outside the workspace directories: %s", p, real, strings.Join(env.Roots, ", "))
	}
	return refuse("%q is outside the workspace directories: %s", p, strings.Join(env.Roots, ", "))
}

// recheck repeats confinement just before use, so a path swapped for a
// symlink after Build is refused before the editor is asked to touch it.
func (t target) recheck(env *Env, field string) error {
	again, err := confine(env, field, t.path)
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

// resolveRoot is root with symlinks resolved, from env.RootCache when set.
// Failures are not remembered (a root may be created later).
func (env *Env) resolveRoot(root string) (string, error) {
	c := env.RootCache
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
func resolveBelowRoot(env *Env, clean string) (string, bool) {
	for _, r := range env.Roots {
		rel, ok := within(filepath.Clean(r), clean)
		if !ok {
			continue
		}
		rr, err := env.resolveRoot(r)
		if err != nil {
			return "", false
		}
		// The cached resolution is trusted only while the directory at rr
		// is the one held open: lstat below would follow a root (or an
		// ancestor) swapped for a symlink. The full resolution then
		// compares against the cached root and refuses it.
		if env.RootCache != nil {
			if _, ok := env.RootCache.heldRoot(rr); !ok {
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

// within reports whether p is root or below it, and p relative to root.
func within(root, p string) (string, bool) {
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
		if _, ok := within(f, p); ok {
			return true
		}
	}
	return false
}

func isASCIILetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// shownPath is p as shown in titles: relative to the session cwd when inside
// it, absolute otherwise.
func shownPath(env *Env, p string) string {
	if len(env.Roots) > 0 {
		if rel, ok := within(filepath.Clean(env.Roots[0]), p); ok {
			return rel
		}
	}
	return p
}

// openRoot opens t's workspace root as an *os.Root: every later open below
// it refuses paths and symlinks that escape the root, at use time.
func (t target) openRoot() (*os.Root, error) {
	return os.OpenRoot(t.root)
}

// confineFile confines the file_path argument of a tool that writes a file:
// inside the workspace, and not a directory.
func confineFile(env *Env, tool, path string) (target, error) {
	tg, err := confine(env, "file_path", path)
	if err != nil {
		return target{}, err
	}
	if tg.isDirLocal() {
		return target{}, fmt.Errorf("invalid parameters for %s: params/file_path: %s is a directory, not a file", tool, tg.path)
	}
	return tg, nil
}
