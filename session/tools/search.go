package tools

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/acpd/acpd/session/tools/confine"
)

// skipDirs are never descended by glob and grep_search.
var skipDirs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{".git": true, ".hg": true, ".svn": true, "node_modules": true}
})

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
func walkSearch(ctx context.Context, t confine.Target, dir *os.Root, fn func(p string, d fs.DirEntry) error) error {
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
