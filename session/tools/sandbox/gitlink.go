package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// GitLink is the git folder that a ".git" file names, accepted as the git
// folder of a linked worktree or a submodule at WorkTree.
//
// A ".git" file is workspace content: a command (or write_file) can plant
// one naming any folder at all, even "/". What it names is believed only
// when the git folder points back at this very work tree, which nothing in
// the workspace can forge for a folder outside it:
//   - a linked worktree's git folder is <common>/worktrees/<name>; its
//     "gitdir" file names the worktree's .git file, and its "commondir"
//     names <common>, a repository (HEAD, objects);
//   - a submodule's git folder is a repository whose core.worktree names
//     the submodule's folder.
//
// Neither folder may be "/", the home folder, the work tree or a folder
// above either: granting one would make everything below it writable.
type GitLink struct {
	// WorkTree is the folder holding the .git file (real path).
	WorkTree string
	// Dir is the git folder (real path).
	Dir string
	// Common is the linked worktree's common git folder (real path), ""
	// for a submodule.
	Common string
}

// Dirs are the folders git writes for this work tree: Dir, and Common
// when there is one.
func (l GitLink) Dirs() []string {
	if l.Common == "" {
		return []string{l.Dir}
	}
	return []string{l.Dir, l.Common}
}

// ErrNotGitLink wraps every reason ReadGitLink refuses a ".git" file.
var ErrNotGitLink = errors.New("not a linked worktree or submodule of this folder")

// maxGitFile bounds what is read of each small git file.
const maxGitFile = 4096

// ReadGitLink reads the ".git" file of workTree and returns the git
// folders it names, or an error wrapping ErrNotGitLink saying why they are
// not believed. It reads only small files and starts no program.
func ReadGitLink(workTree string) (GitLink, error) {
	refuse := func(format string, a ...any) (GitLink, error) {
		return GitLink{}, fmt.Errorf("%w: %s", ErrNotGitLink, fmt.Sprintf(format, a...))
	}
	wt, err := filepath.EvalSymlinks(workTree)
	if err != nil {
		return refuse("%v", err)
	}
	dotGit := filepath.Join(wt, ".git")
	if fi, err := os.Lstat(dotGit); err != nil || !fi.Mode().IsRegular() {
		return refuse("%s is not a regular file", dotGit)
	}
	b, err := readSmallFile(dotGit)
	if err != nil {
		return refuse("%v", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	named, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok || strings.TrimSpace(named) == "" {
		return refuse("%s does not start with \"gitdir: \"", dotGit)
	}
	dir, err := realDir(wt, strings.TrimSpace(named))
	if err != nil {
		return refuse("its gitdir: %v", err)
	}
	if err := notAbove(dir, wt); err != nil {
		return refuse("its gitdir %s %v", dir, err)
	}
	link := GitLink{WorkTree: wt, Dir: dir}
	if c, err := readSmallFile(filepath.Join(dir, "commondir")); err == nil {
		// A linked worktree.
		common, err := realDir(dir, strings.TrimSpace(string(c)))
		if err != nil {
			return refuse("its commondir: %v", err)
		}
		if err := notAbove(common, wt); err != nil {
			return refuse("its common git folder %s %v", common, err)
		}
		if filepath.Dir(dir) != filepath.Join(common, "worktrees") {
			return refuse("%s is not in the worktrees folder of %s", dir, common)
		}
		if !isRepository(common) {
			return refuse("%s is not a git repository", common)
		}
		back, err := readSmallFile(filepath.Join(dir, "gitdir"))
		if err != nil {
			return refuse("%s has no gitdir file naming this worktree", dir)
		}
		p := strings.TrimSpace(string(back))
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if r, err := filepath.EvalSymlinks(p); err != nil || r != dotGit {
			return refuse("%s belongs to the worktree %s, not to this one", dir, filepath.Dir(p))
		}
		link.Common = common
		return link, nil
	}
	// A submodule: a repository whose core.worktree is this folder.
	if !isRepository(dir) {
		return refuse("%s is not a git repository", dir)
	}
	cfg, err := readSmallFile(filepath.Join(dir, "config"))
	if err != nil {
		return refuse("%s has no config naming this work tree", dir)
	}
	w := coreWorktree(cfg)
	if w == "" {
		return refuse("%s names no core.worktree", dir)
	}
	if !filepath.IsAbs(w) {
		w = filepath.Join(dir, w)
	}
	if r, err := filepath.EvalSymlinks(w); err != nil || r != wt {
		return refuse("%s belongs to the work tree %s, not to this one", dir, w)
	}
	return link, nil
}

// realDir resolves p (relative to base) to the real path of a folder.
func realDir(base, p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s is not a folder", r)
	}
	return r, nil
}

// notAbove refuses a folder that is "/", the home folder, the work tree
// or a folder above the work tree or the home folder.
func notAbove(dir, wt string) error {
	holds := func(outer, inner string) bool {
		return outer == inner || outer == string(filepath.Separator) || strings.HasPrefix(inner, outer+string(filepath.Separator))
	}
	if holds(dir, wt) {
		return errors.New("holds the work tree")
	}
	if home, err := os.UserHomeDir(); err == nil {
		if h, err := filepath.EvalSymlinks(home); err == nil && holds(dir, h) {
			return errors.New("holds the home folder")
		}
	}
	return nil
}

// isRepository reports whether dir looks like a git folder: a HEAD file
// and an objects folder.
func isRepository(dir string) bool {
	head, err := os.Lstat(filepath.Join(dir, "HEAD"))
	if err != nil || !head.Mode().IsRegular() {
		return false
	}
	obj, err := os.Stat(filepath.Join(dir, "objects"))
	return err == nil && obj.IsDir()
}

// coreWorktree is core.worktree from a git config file's text, "" when it
// has none or it cannot be read plainly (then the submodule is refused,
// which costs a failing git commit in it, not a wider sandbox).
func coreWorktree(cfg []byte) string {
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(cfg))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "["), "]")
			section = strings.ToLower(strings.TrimSpace(name))
			continue
		}
		if section != "core" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "worktree") {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		if strings.ContainsAny(v, "\"\\;#") {
			return ""
		}
		return v
	}
	return ""
}

// readSmallFile reads at most maxGitFile bytes of a regular file.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, maxGitFile))
}
