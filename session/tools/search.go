package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// skipDirs are never descended by glob and grep_search.
var skipDirs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{".git": true, ".hg": true, ".svn": true, "node_modules": true}
})

// openDir opens the directory t as an *os.Root for walking; everything read
// below it is confined to it at use time.
func (t target) openDir() (*os.Root, error) {
	r, err := t.openRoot()
	if err != nil {
		return nil, err
	}
	if t.rel == "." {
		return r, nil
	}
	defer r.Close()
	fi, err := r.Lstat(t.rel)
	if err != nil {
		return nil, rootErr(err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		// Build resolved every link, so a link here was swapped in since.
		return nil, fmt.Errorf("%w: %s became a symlink after it was checked", ErrOutsideWorkspace, t.path)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: %w", t.path, syscall.ENOTDIR)
	}
	sub, err := r.OpenRoot(t.rel)
	return sub, rootErr(err)
}

// dirFailure maps an error opening a search directory to a failed Result.
func dirFailure(err error) Result {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return failure(ErrTypeSearchPathNotFound, err)
	case errors.Is(err, syscall.ENOTDIR):
		return failure(ErrTypePathIsNotADirectory, err)
	}
	return failure(classify(err), err)
}

// walkSearch walks dir (the opened directory of t) in lexical order for glob
// and grep_search, calling fn for every entry that is not a directory. It
// does not descend into skipDirs or git-ignored directories and skips
// git-ignored files; unreadable entries are skipped, as ripgrep does.
func walkSearch(ctx context.Context, t target, dir *os.Root, fn func(p string, d fs.DirEntry) error) error {
	ign := newGitIgnorer(t, dir)
	return fs.WalkDir(dir.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if d.IsDir() {
			if p != "." && (skipDirs()[d.Name()] || ign.ignored(p, true)) {
				return fs.SkipDir
			}
			ign.enterDir(p)
			return nil
		}
		if ign.ignored(p, false) {
			return nil
		}
		return fn(p, d)
	})
}
