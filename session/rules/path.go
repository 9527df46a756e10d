package rules

import (
	"errors"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Workspace is what a rule set is compiled for: where its path patterns
// are anchored.
type Workspace struct {
	// Root is the workspace's folder (the session's cwd), its real path:
	// `./x`, `x` and, for acpd's own files, `/x` are anchored there.
	Root string
	// Home anchors `~/x`.
	Home string
}

// foldCase: the file systems acpd meets there fold case by default, so a
// deny or ask rule on `.env` holds for `.ENV` too.
var foldCase = runtime.GOOS == "darwin" || runtime.GOOS == "windows"

// pathPattern is a compiled path rule: an absolute doublestar pattern in
// slash form, matching a path or anything under it.
type pathPattern struct {
	glob string
	fold bool
}

// checkPath refuses a pattern doublestar cannot read.
func checkPath(spec string) error {
	if !doublestar.ValidatePattern(strings.TrimPrefix(spec, "//")) {
		return errors.New("not a valid path pattern")
	}
	return nil
}

// compilePath anchors a gitignore-style pattern (Claude Code's):
//
//	//abs/x   the file system's root
//	~/x       the home folder
//	/x        the rule's source's anchor (the project root; acpd's own files: the workspace root)
//	./x, a/x  the workspace root
//	x         a name without a slash: at any depth under the workspace root
//
// restrictive (deny, ask) widens a one-folder pattern `src/**` to any
// `src` folder at any depth, as Claude Code does; an allow keeps it at the
// root.
func compilePath(spec string, src Source, ws Workspace, restrictive bool) (pathPattern, bool) {
	root := slash(ws.Root)
	s := strings.TrimSuffix(spec, "/")
	var g string
	switch {
	case strings.HasPrefix(s, "//"):
		g = s[1:]
	case s == "~" || strings.HasPrefix(s, "~/"):
		if ws.Home == "" {
			return pathPattern{}, false
		}
		g = slash(ws.Home) + s[1:]
	case strings.HasPrefix(s, "/"):
		anchor := root
		if src.Anchor != "" {
			anchor = slash(src.Anchor)
		}
		g = anchor + s
	case strings.HasPrefix(s, "./"):
		g = root + s[1:]
	case !strings.Contains(s, "/"):
		g = root + "/**/" + s
	default:
		first, rest, _ := strings.Cut(s, "/")
		if restrictive && rest == "**" && !strings.ContainsAny(first, "*?[{\\") {
			g = root + "/**/" + s
		} else {
			g = root + "/" + s
		}
	}
	if root == "" && !strings.HasPrefix(g, "/") {
		return pathPattern{}, false // no workspace to anchor at
	}
	g = cleanGlob(g)
	fold := restrictive && foldCase
	if fold {
		g = strings.ToLower(g)
	}
	return pathPattern{glob: g, fold: fold}, true
}

// cleanGlob collapses "." and ".." and doubled slashes in a pattern; ".."
// never climbs above the root.
func cleanGlob(g string) string {
	if len(g) >= 2 && g[1] == ':' { // a Windows drive
		return g[:2] + path.Clean(g[2:])
	}
	return path.Clean(g)
}

// match reports whether p (absolute, slash form) is the pattern's path or
// lies under it.
func (pp pathPattern) match(p string) bool {
	if pp.fold {
		p = strings.ToLower(p)
	}
	if ok, _ := doublestar.Match(pp.glob, p); ok {
		return true
	}
	for d := path.Dir(p); d != p && len(d) > 1; p, d = d, path.Dir(d) {
		if ok, _ := doublestar.Match(pp.glob, d); ok {
			return true
		}
	}
	return false
}

// slash is a path in the slash form the patterns use.
func slash(p string) string { return filepath.ToSlash(p) }

// realFile resolves a file a shell line names (relative to dir, ~ to home)
// to the path a path rule judges: cleaned, and with symlinks resolved as
// far as the path exists; false when the name is decided only when the
// line runs (an expansion, a glob).
func realFile(name, dir, home string) (string, bool) {
	if dynamic(name) || strings.ContainsAny(name, "*?[") {
		return "", false
	}
	switch {
	case name == "~" || strings.HasPrefix(name, "~/"):
		if home == "" {
			return "", false
		}
		name = filepath.Join(home, name[1:])
	case strings.HasPrefix(name, "~"):
		return "", false // another user's home
	case !filepath.IsAbs(name):
		if dir == "" {
			return "", false
		}
		name = filepath.Join(dir, name)
	}
	return slash(resolveExisting(filepath.Clean(name))), true
}

// resolveExisting resolves the symlinks of the longest part of p that
// exists, keeping the rest as written.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}
