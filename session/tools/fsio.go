package tools

import (
	"bytes"
	"context"
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
	"unicode/utf8"

	"github.com/acpd/acpd/acp"
)

const (
	// DefaultMaxOutputBytes bounds tool output when Env.MaxOutputBytes is 0.
	DefaultMaxOutputBytes = 128 << 10
	// maxReadBytes is the largest file read_file and edit load (qwen-code's 20 MB).
	maxReadBytes = 20 << 20
)

func maxOutput(env *Env) int {
	if env.MaxOutputBytes > 0 {
		return env.MaxOutputBytes
	}
	return DefaultMaxOutputBytes
}

func clientReads(env *Env) bool  { return env.Client != nil && env.Caps.FS.ReadTextFile }
func clientWrites(env *Env) bool { return env.Client != nil && env.Caps.FS.WriteTextFile }

// failure builds a failed Result: the error text goes to the model and the client.
func failure(errType string, err error) Result {
	return Result{LLMContent: "Error: " + err.Error(), Content: []acp.ToolCallContent{acp.TextContent(err.Error())}, Err: err, ErrType: errType}
}

// classify maps an I/O error (local or from the editor) to an ErrType.
func classify(err error) string {
	var ae *acp.Error
	switch {
	case errors.Is(err, ErrOutsideWorkspace):
		return ErrTypePathNotInWorkspace
	case errors.Is(err, context.Canceled):
		return ErrTypeCancelled
	case errors.Is(err, context.DeadlineExceeded):
		return ErrTypeTimeout
	case errors.Is(err, fs.ErrNotExist):
		return ErrTypeFileNotFound
	case errors.Is(err, fs.ErrPermission):
		return ErrTypePermissionDenied
	case errors.Is(err, syscall.ENOSPC):
		return ErrTypeNoSpaceLeft
	case errors.Is(err, syscall.EISDIR):
		return ErrTypeTargetIsDirectory
	case errors.As(err, &ae) && ae.Code == acp.CodeResourceNotFound:
		return ErrTypeFileNotFound
	}
	// Editors differ in how they report a missing file (Gemini CLI matches
	// strings too); accept the common spellings.
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"enoent", "no such file", "not found", "does not exist"} {
		if strings.Contains(msg, s) {
			return ErrTypeFileNotFound
		}
	}
	return ErrTypeUnknown
}

// rootErr marks os.Root's refusals (a symlink or path escaping the root, seen
// at use time) as confinement errors.
func rootErr(err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes") {
		return fmt.Errorf("%w: %v", ErrOutsideWorkspace, err)
	}
	return err
}

// openLocal opens t below its root without following a final symlink, and
// checks where the opened file really is. Together with os.Root (which
// refuses escapes in every component) this closes the window between the
// check in Build and the use here. With the session's RootCache the root
// stays open, and the real-path check is needed only when the directory at
// the root's path is not verified to be the one held open.
func (t target) openLocal(flag int, perm fs.FileMode) (*os.File, error) {
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
			if _, ok := within(t.root, real); !ok {
				f.Close()
				return nil, fmt.Errorf("%w: %s opened %s, outside the workspace", ErrOutsideWorkspace, t.path, real)
			}
		}
	}
	return f, nil
}

// useRoot returns t's root for one use: the session's held Root when it is
// verified, else the root opened by its path (closed by done).
func (t target) useRoot() (r *os.Root, verified bool, done func(), err error) {
	if r, ok := t.roots.heldRoot(t.root); ok {
		return r, true, func() {}, nil
	}
	// The root's path must still lead to itself: a root swapped for a
	// symlink would have an open or mkdir below it act elsewhere before
	// the real-path check could refuse it.
	if now, err := filepath.EvalSymlinks(t.root); err == nil && now != t.root {
		return nil, false, nil, fmt.Errorf("%w: the workspace root %s now resolves to %s", ErrOutsideWorkspace, t.root, now)
	}
	if r, err = t.openRoot(); err != nil {
		return nil, false, nil, err
	}
	return r, false, func() { r.Close() }, nil
}

// readLocal reads the whole file at t (at most maxReadBytes).
func (t target) readLocal() ([]byte, error) {
	f, err := t.openLocal(os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory: %w", t.path, syscall.EISDIR)
	}
	if fi.Size() > maxReadBytes {
		return nil, &tooLargeError{path: t.path, size: fi.Size()}
	}
	return io.ReadAll(io.LimitReader(f, maxReadBytes+1))
}

type tooLargeError struct {
	path string
	size int64
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("file %s is %d bytes, more than the %d bytes tools read", e.path, e.size, maxReadBytes)
}

// mkdirParents creates t's missing parent folders below its root, confined
// to the root like every local write.
func (t target) mkdirParents() error {
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

// writeLocal replaces the file at t with content, creating parent
// directories. The file is truncated only after the open was verified.
func (t target) writeLocal(content string) error {
	if err := t.mkdirParents(); err != nil {
		return err
	}
	f, err := t.openLocal(os.O_WRONLY|os.O_CREATE, 0o644)
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

// isDirLocal reports whether t is an existing directory (false on any error).
func (t target) isDirLocal() bool {
	fi, err := os.Stat(t.real)
	return err == nil && fi.IsDir()
}

// readWhole returns the full current text of t: from the editor's buffer
// when the client offers fs reads, from disk otherwise.
func readWhole(ctx context.Context, env *Env, t target) (string, error) {
	if t.isDirLocal() {
		return "", fmt.Errorf("%s is a directory: %w", t.path, syscall.EISDIR)
	}
	if clientReads(env) {
		resp, err := clientRead(ctx, env, t, &acp.ReadTextFileRequest{SessionID: env.SessionID, Path: t.path})
		if err != nil {
			return "", err
		}
		return resp.Content, nil
	}
	b, err := t.readLocal()
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// writeWhole writes content to t, through the editor when it offers fs
// writes. A file with other hard links first gets a copy of its own
// (ownCopy), so a name outside the workspace keeps its content.
func writeWhole(ctx context.Context, env *Env, t target, content string) error {
	if err := t.ownCopy(); err != nil {
		return err
	}
	if clientWrites(env) {
		return clientWrite(ctx, env, t, content)
	}
	return t.writeLocal(content)
}

// truncateHead keeps the first max bytes of s (on a rune boundary) and
// appends a note saying how much was cut.
func truncateHead(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n\n[output truncated: %d of %d bytes omitted]", len(s)-cut, len(s))
}

// looksBinary reports a NUL byte in the first 8 KiB, as git and grep do.
func looksBinary(b []byte) bool {
	if len(b) > 8192 {
		b = b[:8192]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// TruncateOutput cuts s to the session's output limit (tools.maxOutputBytes)
// with a note saying how much was cut, as the built-in tools cut theirs.
func TruncateOutput(env *Env, s string) string { return truncateHead(s, maxOutput(env)) }
