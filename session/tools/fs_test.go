package tools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpd/acpd/acp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

func numberedLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestReadFile_Local(t *testing.T) {
	w := newWorkspace(t)
	small := w.write(t, "src/main.go", "package main\n\nfunc main() {}\n")
	big := w.write(t, "big.txt", numberedLines(2500))
	long := w.write(t, "long.txt", strings.Repeat("x", 3000)+"\nshort\n")

	t.Run("whole file", func(t *testing.T) {
		c, res := run(t, t.Context(), w.env, NameReadFile, map[string]any{"file_path": small})
		require.NoError(t, res.Err)
		assert.Equal(t, "Read src/main.go", c.Title())
		assert.Equal(t, []acp.ToolCallLocation{{Path: small}}, c.Locations())
		assert.Equal(t, ConfirmNone, c.Confirmation().Kind)
		assert.Equal(t, "package main\n\nfunc main() {}\n", res.LLMContent)
		require.Len(t, res.Content, 1)
		assert.Equal(t, res.LLMContent, text(res.Content[0]))
	})
	t.Run("default limit notes truncation", func(t *testing.T) {
		_, res := run(t, t.Context(), w.env, NameReadFile, map[string]any{"file_path": big})
		require.NoError(t, res.Err)
		assert.Contains(t, res.LLMContent, "Showing lines 1-2000 of 2500 total lines")
		assert.Contains(t, res.LLMContent, "use offset: 2000")
		assert.Contains(t, res.LLMContent, "line 2000\n")
		assert.NotContains(t, res.LLMContent, "line 2001\n")
	})
	t.Run("offset and limit", func(t *testing.T) {
		c, res := run(t, t.Context(), w.env, NameReadFile, map[string]any{"file_path": big, "offset": 10, "limit": 3})
		require.NoError(t, res.Err)
		line := 11
		assert.Equal(t, []acp.ToolCallLocation{{Path: big, Line: &line}}, c.Locations())
		assert.Contains(t, res.LLMContent, "Showing lines 11-13 of 2500 total lines")
		assert.True(t, strings.HasSuffix(res.LLMContent, "line 11\nline 12\nline 13\n"), res.LLMContent)
	})
	t.Run("long lines are shortened", func(t *testing.T) {
		_, res := run(t, t.Context(), w.env, NameReadFile, map[string]any{"file_path": long})
		require.NoError(t, res.Err)
		assert.Contains(t, res.LLMContent, "... [truncated]")
		assert.Contains(t, res.LLMContent, "short\n")
	})
	t.Run("output capped by MaxOutputBytes", func(t *testing.T) {
		env := *w.env
		env.MaxOutputBytes = 100
		_, res := run(t, t.Context(), &env, NameReadFile, map[string]any{"file_path": big})
		require.NoError(t, res.Err)
		assert.Contains(t, res.LLMContent, "[output truncated:")
		assert.Less(t, len(res.LLMContent), 200)
	})
}

func TestReadFile_Errors(t *testing.T) {
	w := newWorkspace(t)
	w.write(t, "dir/a.txt", "a")
	bin := w.write(t, "bin.dat", "ab\x00cd")
	short := w.write(t, "short.txt", "one\ntwo\n")
	huge := w.path("huge.txt")
	f, err := os.Create(huge)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxReadBytes+1)) // sparse: no disk used
	require.NoError(t, f.Close())

	tests := []struct {
		name    string
		args    map[string]any
		errType string
		msg     string
	}{
		{"missing", map[string]any{"file_path": w.path("nope.txt")}, ErrTypeFileNotFound, "nope.txt"},
		{"directory", map[string]any{"file_path": w.path("dir")}, ErrTypeTargetIsDirectory, "directory"},
		{"binary", map[string]any{"file_path": bin}, ErrTypeReadContentFailure, "binary"},
		{"too large", map[string]any{"file_path": huge}, ErrTypeFileTooLarge, "bytes"},
		{"offset past end", map[string]any{"file_path": short, "offset": 5, "limit": 1}, ErrTypeReadContentFailure, "beyond the end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, res := run(t, t.Context(), w.env, NameReadFile, tt.args)
			require.Error(t, res.Err)
			assert.Equal(t, tt.errType, res.ErrType)
			assert.Contains(t, res.LLMContent, tt.msg)
		})
	}
}

// TestReadFile_PermissionDenied: an unreadable file (for root too).
func TestReadFile_PermissionDenied(t *testing.T) {
	w := newWorkspace(t)
	p := w.write(t, "locked.txt", "x")
	c, err := tool(t, NameReadFile).Build(w.env, args(t, map[string]any{"file_path": p}))
	require.NoError(t, err)
	var res Result
	sandboxtest.Deny(t, sandboxtest.Denial{Read: []string{p}}, func() { res = c.Execute(t.Context(), w.env) })
	require.Error(t, res.Err)
	assert.Equal(t, ErrTypePermissionDenied, res.ErrType)
}

func TestWriteFile_Local(t *testing.T) {
	w := newWorkspace(t)
	existing := w.write(t, "a.txt", "old\n")

	t.Run("new file in new directory", func(t *testing.T) {
		p := w.path("new/deeper/b.txt")
		c, err := tool(t, NameWriteFile).Build(w.env, args(t, map[string]any{"file_path": p, "content": "hello\n"}))
		require.NoError(t, err)
		assert.Equal(t, "Write new/deeper/b.txt", c.Title())
		conf := c.Confirmation()
		assert.Equal(t, ConfirmEdit, conf.Kind)
		require.Len(t, conf.Content, 1)
		assert.Equal(t, "diff", conf.Content[0].Type)
		assert.Nil(t, conf.Content[0].OldText)
		res := c.Execute(t.Context(), w.env)
		require.NoError(t, res.Err)
		assert.Contains(t, res.LLMContent, "created")
		assert.Equal(t, []acp.ToolCallContent{acp.DiffContent(p, nil, "hello\n")}, res.Content)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, "hello\n", string(b))
	})
	t.Run("overwrite shows old text", func(t *testing.T) {
		c, err := tool(t, NameWriteFile).Build(w.env, args(t, map[string]any{"file_path": existing, "content": "new\n"}))
		require.NoError(t, err)
		require.NoError(t, c.(Preparer).Prepare(t.Context(), w.env))
		old := "old\n"
		assert.Equal(t, []acp.ToolCallContent{acp.DiffContent(existing, &old, "new\n")}, c.Confirmation().Content)
		res := c.Execute(t.Context(), w.env)
		require.NoError(t, res.Err)
		assert.Contains(t, res.LLMContent, "overwrote")
		assert.Equal(t, []acp.ToolCallContent{acp.DiffContent(existing, &old, "new\n")}, res.Content)
		b, err := os.ReadFile(existing)
		require.NoError(t, err)
		assert.Equal(t, "new\n", string(b))
	})
	t.Run("directory target", func(t *testing.T) {
		_, err := tool(t, NameWriteFile).Build(w.env, args(t, map[string]any{"file_path": w.path("new"), "content": "x"}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "params/file_path")
	})
	t.Run("permission denied", func(t *testing.T) {
		// A folder that refuses writes, for root too.
		ro := w.path("ro")
		require.NoError(t, os.Mkdir(ro, 0o755))
		c, err := tool(t, NameWriteFile).Build(w.env, args(t, map[string]any{"file_path": filepath.Join(ro, "x"), "content": "x"}))
		require.NoError(t, err)
		var res Result
		sandboxtest.Deny(t, sandboxtest.Denial{Write: []string{ro}}, func() { res = c.Execute(t.Context(), w.env) })
		require.Error(t, res.Err)
		assert.Equal(t, ErrTypePermissionDenied, res.ErrType)
		assert.NoFileExists(t, filepath.Join(ro, "x"))
	})
	w.checkSentinel(t)
}

func TestEdit_Local(t *testing.T) {
	w := newWorkspace(t)
	tests := []struct {
		name     string
		initial  *string // nil: file absent
		old, new string
		all      bool
		want     string
		line     int
		errType  string
	}{
		{name: "single", initial: ptr("a\nfoo\nb\n"), old: "foo", new: "bar", want: "a\nbar\nb\n", line: 2},
		{name: "replace all", initial: ptr("x foo\nfoo\n"), old: "foo", new: "baz", all: true, want: "x baz\nbaz\n", line: 1},
		{name: "create with empty old_string", old: "", new: "fresh\n", want: "fresh\n", line: 1},
		{name: "crlf file, lf old_string", initial: ptr("a\r\nb\r\nc\r\n"), old: "a\nb", new: "a\nB", want: "a\r\nB\r\nc\r\n", line: 1},
		{name: "no occurrence", initial: ptr("abc"), old: "zzz", new: "y", errType: ErrTypeEditNoOccurrence},
		{name: "multiple occurrences", initial: ptr("foo foo"), old: "foo", new: "y", errType: ErrTypeEditMultipleOccurs},
		{name: "no change", initial: ptr("foo"), old: "foo", new: "foo", errType: ErrTypeEditNoChange},
		{name: "create over existing", initial: ptr("foo"), old: "", new: "x", errType: ErrTypeCreateExistingFile},
		{name: "missing file", old: "foo", new: "x", errType: ErrTypeFileNotFound},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := w.path(fmt.Sprintf("edit%d.txt", i))
			if tt.initial != nil {
				w.write(t, filepath.Base(p), *tt.initial)
			}
			c, res := run(t, t.Context(), w.env, NameEdit, map[string]any{"file_path": p, "old_string": tt.old, "new_string": tt.new, "replace_all": tt.all})
			assert.Equal(t, fmt.Sprintf("Edit edit%d.txt", i), c.Title())
			if tt.errType != "" {
				require.Error(t, res.Err)
				assert.Equal(t, tt.errType, res.ErrType)
				b, err := os.ReadFile(p)
				if tt.initial == nil {
					assert.True(t, errors.Is(err, os.ErrNotExist))
				} else {
					assert.Equal(t, *tt.initial, string(b), "file changed by a failed edit")
				}
				return
			}
			require.NoError(t, res.Err)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(b))
			assert.Equal(t, []acp.ToolCallContent{acp.DiffContent(p, tt.initial, tt.want)}, res.Content)
			assert.Equal(t, location(p, tt.line), res.Locations)
		})
	}
}

func TestEdit_Confirmation(t *testing.T) {
	w := newWorkspace(t)
	p := w.write(t, "a.go", "one\ntwo\nthree\n")
	c, err := tool(t, NameEdit).Build(w.env, args(t, map[string]any{"file_path": p, "old_string": "two", "new_string": "TWO"}))
	require.NoError(t, err)
	conf := c.Confirmation()
	assert.Equal(t, ConfirmEdit, conf.Kind)
	old := "two"
	assert.Equal(t, []acp.ToolCallContent{acp.DiffContent(p, &old, "TWO")}, conf.Content, "without Prepare: the replacement itself")

	require.NoError(t, c.(Preparer).Prepare(t.Context(), w.env))
	whole := "one\ntwo\nthree\n"
	assert.Equal(t, []acp.ToolCallContent{acp.DiffContent(p, &whole, "one\nTWO\nthree\n")}, c.Confirmation().Content)
	assert.Equal(t, location(p, 2), c.Locations())
}

func TestListDirectory(t *testing.T) {
	w := newWorkspace(t)
	w.write(t, "b.txt", "")
	w.write(t, "a.go", "")
	w.write(t, "zdir/x", "")
	w.write(t, "adir/x", "")
	w.write(t, "skip.log", "")
	require.NoError(t, os.Mkdir(w.path("empty"), 0o755))

	c, res := run(t, t.Context(), w.env, NameListDirectory, map[string]any{"path": w.root, "ignore": []string{"*.log"}})
	require.NoError(t, res.Err)
	assert.Equal(t, "List .", c.Title())
	assert.Equal(t, fmt.Sprintf("Directory listing for %s:\n[DIR] adir\n[DIR] empty\n[DIR] zdir\na.go\nb.txt\n\n(1 ignored)", w.root), res.LLMContent)

	_, res = run(t, t.Context(), w.env, NameListDirectory, map[string]any{"path": w.path("empty")})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "is empty")

	_, res = run(t, t.Context(), w.env, NameListDirectory, map[string]any{"path": w.path("missing")})
	assert.Equal(t, ErrTypeSearchPathNotFound, res.ErrType)

	_, res = run(t, t.Context(), w.env, NameListDirectory, map[string]any{"path": w.path("a.go")})
	assert.Equal(t, ErrTypePathIsNotADirectory, res.ErrType)
}

func TestGlob(t *testing.T) {
	w := newWorkspace(t)
	w.write(t, "src/a.go", "")
	w.write(t, "src/sub/B.GO", "")
	w.write(t, "src/c.txt", "")
	w.write(t, "node_modules/m.go", "")
	w.write(t, ".git/x.go", "")

	c, res := run(t, t.Context(), w.env, NameGlob, map[string]any{"pattern": "**/*.go"})
	require.NoError(t, res.Err)
	assert.Equal(t, "Glob '**/*.go' in .", c.Title())
	assert.Contains(t, res.LLMContent, "Found 2 file(s)")
	assert.Contains(t, res.LLMContent, w.path("src/a.go")+"\n")
	assert.Contains(t, res.LLMContent, w.path("src/sub/B.GO")+"\n", "matching is case-insensitive")
	assert.NotContains(t, res.LLMContent, "node_modules")
	assert.NotContains(t, res.LLMContent, ".git")

	_, res = run(t, t.Context(), w.env, NameGlob, map[string]any{"pattern": "*.txt", "path": w.path("src")})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, w.path("src/c.txt"))

	_, res = run(t, t.Context(), w.env, NameGlob, map[string]any{"pattern": "*.rs"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "No files found")

	_, res = run(t, t.Context(), w.env, NameGlob, map[string]any{"pattern": "*", "path": w.path("missing")})
	assert.Equal(t, ErrTypeSearchPathNotFound, res.ErrType)
}

func TestGrepSearch(t *testing.T) {
	w := newWorkspace(t)
	w.write(t, "src/a.go", "package a\n// TODO: fix\nfunc A() {}\n")
	w.write(t, "src/b.txt", "todo in text\n")
	w.write(t, "src/c.bin", "todo\x00binary")
	w.write(t, "node_modules/x.go", "TODO hidden\n")

	c, res := run(t, t.Context(), w.env, NameGrepSearch, map[string]any{"pattern": "todo", "path": w.path("src"), "glob": "*.go"})
	require.NoError(t, res.Err)
	assert.Equal(t, "grep 'todo' in src (*.go)", c.Title())
	assert.Equal(t, fmt.Sprintf("Found 1 match for pattern \"todo\" in path %q (filter: \"*.go\"):\n---\nFile: a.go\nL2: // TODO: fix\n---\n", w.path("src")), res.LLMContent)

	_, res = run(t, t.Context(), w.env, NameGrepSearch, map[string]any{"pattern": "todo"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "Found 2 matches")
	assert.Contains(t, res.LLMContent, "File: src/b.txt\nL1: todo in text")
	assert.NotContains(t, res.LLMContent, "c.bin")
	assert.NotContains(t, res.LLMContent, "node_modules")

	_, res = run(t, t.Context(), w.env, NameGrepSearch, map[string]any{"pattern": "nothing-here"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "No matches found")

	_, res = run(t, t.Context(), w.env, NameGrepSearch, map[string]any{"pattern": "x", "path": w.path("src/a.go")})
	assert.Equal(t, ErrTypePathIsNotADirectory, res.ErrType)
}

func ptr[T any](v T) *T { return &v }
