package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/confine"
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

// readLocal reads the whole file at t (at most maxReadBytes).
func readLocal(t confine.Target) ([]byte, error) {
	f, err := t.Open(os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory: %w", t.Path(), syscall.EISDIR)
	}
	if fi.Size() > maxReadBytes {
		return nil, &tooLargeError{path: t.Path(), size: fi.Size()}
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

// readWhole returns the full current text of t: from the editor's buffer
// when the client offers fs reads, from disk otherwise.
func readWhole(ctx context.Context, env *Env, t confine.Target) (string, error) {
	if t.IsDir() {
		return "", fmt.Errorf("%s is a directory: %w", t.Path(), syscall.EISDIR)
	}
	if clientReads(env) {
		resp, err := clientRead(ctx, env, t, &acp.ReadTextFileRequest{SessionID: env.SessionID, Path: t.Path()})
		if err != nil {
			return "", err
		}
		return resp.Content, nil
	}
	b, err := readLocal(t)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// writeWhole writes content to t, through the editor when it offers fs
// writes. A file with other hard links first gets a copy of its own
// (OwnCopy), so a name outside the workspace keeps its content.
func writeWhole(ctx context.Context, env *Env, t confine.Target, content string) error {
	if err := t.OwnCopy(); err != nil {
		return err
	}
	if clientWrites(env) {
		return clientWrite(ctx, env, t, content)
	}
	return t.WriteFile(content)
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
