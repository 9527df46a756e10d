package tools

import (
	"os"
	"path"
	"sync"
)

// Ignorer tells which paths of a walk over a whole workspace root the
// root's .gitignore files and .git/info/exclude ignore, with the rules the
// search tools use. It is safe for concurrent use: a parallel walk enters
// every directory before it asks about the directory's entries.
type Ignorer struct {
	mu sync.Mutex
	g  *gitIgnorer
}

// NewIgnorer reads the ignore files of the workspace root r through r, so
// nothing outside it is read.
func NewIgnorer(r *os.Root) *Ignorer {
	g := &gitIgnorer{dir: r, byDir: map[string]*ignoreFile{}}
	g.base = chainFile(nil, "", readIgnoreFile(r, ".git/info/exclude"))
	return &Ignorer{g: g}
}

// EnterDir loads the .gitignore of p (slash-separated, relative to the
// root; "." for the root); call it for a directory before its entries.
func (i *Ignorer) EnterDir(p string) {
	rules := readIgnoreFile(i.g.dir, path.Join(p, ".gitignore"))
	i.mu.Lock()
	defer i.mu.Unlock()
	parent := i.g.base
	if p != "." {
		parent = i.g.byDir[path.Dir(p)]
	}
	base := p
	if p == "." {
		base = ""
	}
	i.g.byDir[p] = chainFile(parent, base, rules)
}

// Ignored reports whether p (not ".") is ignored; its directory must have
// been entered.
func (i *Ignorer) Ignored(p string, isDir bool) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.g.ignored(p, isDir)
}
