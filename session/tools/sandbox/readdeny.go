package sandbox

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Reading, denied by path. Landlock only ever allows: once a ruleset
// handles the right to read files, a file is readable only when a rule
// grants that right on it or on a folder above it. So "everything but
// ~/.ssh" is built from its complement: for each folder on the way from
// "/" to a denied path, every entry but the next step on that way gets
// the right — "/" is split into its entries but home, home into its
// entries but the user's folder, that one into its entries but .ssh, and
// so on. What lies below an entry granted that way is readable whatever is
// made there later; the denied path, and whatever is made inside it, is
// not.
//
// Limits of the design, written down where they are decided:
//   - An entry made later in a folder that was split (a new file in the
//     home folder) has no rule until the ruleset is built again: it is not
//     readable, never the other way round. The folders split are stamped
//     (type and modification time, see readStamp), and the session's
//     spawn server is replaced when a stamp changes, so the next command
//     reads it.
//   - A symlink among the entries is never granted: the file it names has
//     rules of its own, so a link to a denied path stays unreadable.
//   - Folder listings stay allowed (the right to read folders is not
//     handled): `ls ~/.ssh` shows the names, `cat ~/.ssh/id_rsa` fails.
//   - A denied path reachable under another mount (a bind mount of the
//     home folder elsewhere) is denied there too (readAliases); a hard link
//     to a denied file from elsewhere is another file as far as paths go,
//     and is readable.
//   - A denied path inside a folder commands may write (a workspace that
//     is the home folder) stays unreadable, but a command could move it to
//     a new name there that the next ruleset grants: the session reports
//     such paths (Plan.DenyGaps), and a command there does not count as
//     one that cannot read secrets.

// readRight is the one reading right the ruleset handles when paths are
// denied: reading a file (executing one opens it for reading too).
const readRight = 1 << 2 // LANDLOCK_ACCESS_FS_READ_FILE

// readPlan is the rules that let a command read everything but denied.
type readPlan struct {
	// grants are the paths given the right to read (entries of the folders
	// split on the way to a denied path).
	grants []string
	// split are the folders whose entries were listed.
	split []string
}

// denyTree is the denied paths as a tree of path components.
type denyTree struct {
	denied   bool
	children map[string]*denyTree
}

func (t *denyTree) add(parts []string) {
	n := t
	for _, p := range parts {
		if n.denied {
			return // a folder above is denied already
		}
		if n.children == nil {
			n.children = map[string]*denyTree{}
		}
		c := n.children[p]
		if c == nil {
			c = &denyTree{}
			n.children[p] = c
		}
		n = c
	}
	n.denied, n.children = true, nil
}

// resolveDenied is path with the symlinks of its existing part resolved,
// as Landlock sees it: a denied path that does not exist yet is denied at
// the real place it would be made.
func resolveDenied(path string) string {
	path = filepath.Clean(path)
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	dir, base := filepath.Split(path)
	if dir == "" || dir == path || filepath.Clean(dir) == path {
		return path
	}
	return filepath.Join(resolveDenied(filepath.Clean(dir)), base)
}

// resolveAll is resolveDenied of each path (a relative one is kept as it
// is), done once for the checks that compare the paths with several
// folders: each resolution costs a few lstat calls, and a command's plan
// compares the deny list of a default configuration (some fifty paths)
// with every writable folder.
func resolveAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if filepath.IsAbs(p) {
			p = resolveDenied(p)
		}
		out[i] = p
	}
	return out
}

// newDenyTree builds the tree of the denied paths, resolved, together
// with their aliases under other mounts (aliases, nil off Linux).
func newDenyTree(denied []string, aliases func(string) []string) *denyTree {
	return resolvedDenyTree(resolveAll(denied), aliases)
}

// resolvedDenyTree is newDenyTree of paths resolved already.
func resolvedDenyTree(resolved []string, aliases func(string) []string) *denyTree {
	t := &denyTree{}
	for _, r := range resolved {
		if !filepath.IsAbs(r) {
			continue
		}
		paths := []string{r}
		if aliases != nil {
			paths = append(paths, aliases(r)...)
		}
		for _, p := range paths {
			if p == "/" {
				continue // denying everything is not a deny list; refused by the configuration
			}
			t.add(strings.Split(strings.TrimPrefix(p, "/"), "/"))
		}
	}
	return t
}

// planReads lists the rules for the tree: nil grants and no split when
// nothing is denied (the caller then handles no reading right at all).
func planReads(t *denyTree) readPlan {
	var p readPlan
	if len(t.children) == 0 {
		return p
	}
	p.walk("/", t)
	return p
}

func (p *readPlan) walk(dir string, n *denyTree) {
	p.split = append(p.split, dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		// A folder acpd's user cannot list (another user's home) is not
		// readable to its commands either; nothing below it is granted.
		return
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		child := n.children[e.Name()]
		switch {
		case child != nil && child.denied:
		case e.Type()&os.ModeSymlink != 0:
			// The file a link names has rules of its own.
		case child != nil && e.IsDir():
			p.walk(path, child)
		default:
			p.grants = append(p.grants, path)
		}
	}
}

// readStamp identifies the state of the folders a ruleset for denied
// splits, as seen now: type and modification time of each folder on the
// way to a denied path. A ruleset built for one stamp is out of date when
// the stamp changes (an entry was made or removed in one of them).
func readStamp(denied []string) string { return resolvedReadStamp(resolveAll(denied)) }

// resolvedReadStamp is readStamp of paths resolved already.
func resolvedReadStamp(resolved []string) string {
	if len(resolved) == 0 {
		return ""
	}
	h := fnv.New64a()
	var visit func(dir string, n *denyTree)
	visit = func(dir string, n *denyTree) {
		fi, err := os.Lstat(dir)
		if err != nil {
			fmt.Fprintf(h, "%s:none;", dir)
			return
		}
		fmt.Fprintf(h, "%s:%v:%d;", dir, fi.Mode(), fi.ModTime().UnixNano())
		keys := make([]string, 0, len(n.children))
		for k := range n.children {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if c := n.children[k]; !c.denied {
				visit(filepath.Join(dir, k), c)
			}
		}
	}
	visit("/", resolvedDenyTree(resolved, nil))
	return fmt.Sprintf("%x", h.Sum64())
}

// deniedWithin lists the denied paths that lie in one of dirs (real paths
// compared): those a folder commands may write holds.
func deniedWithin(denied, dirs []string) []string {
	return resolvedDeniedWithin(denied, resolveAll(denied), resolveAll(dirs))
}

// resolvedDeniedWithin is deniedWithin with both lists resolved already
// (resolved[i] is denied[i]'s real path).
func resolvedDeniedWithin(denied, resolved, dirs []string) []string {
	var out []string
	for i, d := range denied {
		r := resolved[i]
		for _, w := range dirs {
			if r == w || strings.HasPrefix(r, w+"/") || w == "/" {
				out = append(out, d)
				break
			}
		}
	}
	return out
}
