package confine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// rootErr marks os.Root's refusals (a symlink or path escaping the root, seen
// at use time) as confinement errors.
func rootErr(err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes") {
		return fmt.Errorf("%w: %v", ErrOutsideWorkspace, err)
	}
	return err
}

// Open opens t below its root without following a final symlink, and
// checks where the opened file really is. Together with os.Root (which
// refuses escapes in every component) this closes the window between the
// check in Build and the use here. With the session's RootCache the root
// stays open, and the real-path check is needed only when the directory at
// the root's path is not verified to be the one held open.
func (t Target) Open(flag int, perm fs.FileMode) (*os.File, error) {
	r, verified, done, err := t.useRoot()
	if err != nil {
		return nil, err
	}
	defer done()
	f, err := r.OpenFile(t.rel, flag|oNoFollow|syscall.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s became a symlink after it was checked", ErrOutsideWorkspace, t.path)
		}
		return nil, rootErr(err)
	}
	if !verified && runtime.GOOS == "linux" {
		if real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil {
			if _, ok := Within(t.root, real); !ok {
				f.Close()
				return nil, fmt.Errorf("%w: %s opened %s, outside the workspace", ErrOutsideWorkspace, t.path, real)
			}
		}
	}
	return f, nil
}

// useRoot returns t's root for one use: the session's held Root when it is
// verified, else the root opened by its path (closed by done).
func (t Target) useRoot() (r *os.Root, verified bool, done func(), err error) {
	if r, ok := t.roots.heldRoot(t.root); ok {
		return r, true, func() {}, nil
	}
	// The root's path must still lead to itself: a root swapped for a
	// symlink would have an open or mkdir below it act elsewhere before
	// the real-path check could refuse it.
	if now, err := filepath.EvalSymlinks(t.root); err == nil && now != t.root {
		return nil, false, nil, fmt.Errorf("%w: the workspace root %s now resolves to %s", ErrOutsideWorkspace, t.root, now)
	}
	if r, err = t.OpenRoot(); err != nil {
		return nil, false, nil, err
	}
	return r, false, func() { r.Close() }, nil
}

// MkdirParents creates t's missing parent folders below its root, confined
// to the root like every local write.
func (t Target) MkdirParents() error {
	dir := filepath.Dir(t.rel)
	if dir == "." {
		return nil
	}
	r, _, done, err := t.useRoot()
	if err != nil {
		return err
	}
	err = r.MkdirAll(dir, 0o755)
	done()
	return rootErr(err)
}

// WriteFile replaces the file at t with content, creating parent
// directories. The file is truncated only after the open was verified.
func (t Target) WriteFile(content string) error {
	if err := t.MkdirParents(); err != nil {
		return err
	}
	f, err := t.Open(os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	if _, err := io.WriteString(f, content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// IsDir reports whether t is an existing directory (false on any error).
func (t Target) IsDir() bool {
	fi, err := os.Stat(t.real)
	return err == nil && fi.IsDir()
}

// OpenDir opens the directory t as an *os.Root for walking; everything read
// below it is confined to it at use time.
func (t Target) OpenDir() (*os.Root, error) {
	r, err := t.OpenRoot()
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
