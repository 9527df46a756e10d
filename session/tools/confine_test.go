package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpd/acpd/acp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfinement_EscapesRefusedInBuild tries to reach outside the workspace
// in every way we know; each attempt must fail in Build (before any I/O of
// the target), and the sentinel outside must stay untouched.
func TestConfinement_EscapesRefusedInBuild(t *testing.T) {
	w := newWorkspace(t)
	w.write(t, "inside.txt", "inside\n")
	require.NoError(t, os.Symlink(w.sentinel, w.path("link-out")))                        // file symlink out
	require.NoError(t, os.Symlink(w.outside, w.path("dirlink-out")))                      // dir symlink out
	require.NoError(t, os.Symlink(filepath.Join(w.outside, "new.txt"), w.path("dangle"))) // dangling, target outside
	require.NoError(t, os.Symlink(w.path("link-out"), w.path("chain")))                   // link → link → out
	require.NoError(t, os.Symlink("../outside/secret.txt", w.path("rel-link-out")))       // relative target out
	evil := w.root + "-evil"
	require.NoError(t, os.Mkdir(evil, 0o755)) // sibling sharing the root's prefix
	evilFile := filepath.Join(evil, "f.txt")
	require.NoError(t, os.WriteFile(evilFile, []byte("evil"), 0o644))

	// A fake client that fails the test on any call: nothing refused may
	// reach the editor either.
	client := &fakeClient{t: t}
	envs := map[string]*Env{
		"local":  w.env,
		"editor": {SessionID: "s1", Roots: w.env.Roots, Client: client, Caps: acp.ClientCapabilities{FS: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true}},
	}

	type attempt struct {
		name string
		tool string
		args map[string]any
	}
	var attempts []attempt
	add := func(name string, paths ...string) {
		for _, p := range paths {
			attempts = append(attempts,
				attempt{name + "/read_file", NameReadFile, map[string]any{"file_path": p}},
				attempt{name + "/write_file", NameWriteFile, map[string]any{"file_path": p, "content": "pwned"}},
				attempt{name + "/edit", NameEdit, map[string]any{"file_path": p, "old_string": "SENTINEL", "new_string": "pwned"}},
			)
		}
	}
	add("relative path", "secret.txt", "ws/inside.txt", "./inside.txt")
	add("relative dotdot", "../outside/secret.txt")
	add("absolute outside", w.sentinel)
	add("dotdot from root", w.root+"/../outside/secret.txt")
	add("dotdot via subdir", w.root+"/sub/../../outside/secret.txt")
	add("dotdot that stays inside", w.root+"/sub/../inside.txt")
	add("symlink to outside file", w.path("link-out"))
	add("symlink chain", w.path("chain"))
	add("relative symlink out", w.path("rel-link-out"))
	add("through symlinked dir", w.path("dirlink-out/secret.txt"), w.path("dirlink-out/new.txt"))
	add("dangling symlink out", w.path("dangle"))
	add("proc", "/proc/self/environ", "/proc/self/root"+w.sentinel, "/proc/self/cwd/x")
	add("sys and dev", "/sys/kernel/notes", "/dev/zero")
	add("NUL byte", w.root+"/inside.txt\x00"+w.sentinel)
	add("windows drive", `C:\Windows\win.ini`, "c:/x")
	add("UNC path", `\\server\share\secret.txt`)
	add("backslash dotdot", w.root+`\..\outside\secret.txt`)
	add("empty path", "")
	add("prefix sibling", evilFile)
	add("filesystem root", "/etc/passwd", "/")

	dirAttempts := []struct{ name, path string }{
		{"outside dir", w.outside},
		{"symlinked dir out", w.path("dirlink-out")},
		{"dotdot dir", w.root + "/.."},
		{"proc dir", "/proc/self"},
		{"relative dir", "."},
		{"prefix sibling dir", evil},
	}
	for _, d := range dirAttempts {
		attempts = append(attempts,
			attempt{d.name + "/list_directory", NameListDirectory, map[string]any{"path": d.path}},
			attempt{d.name + "/glob", NameGlob, map[string]any{"pattern": "*", "path": d.path}},
			attempt{d.name + "/grep_search", NameGrepSearch, map[string]any{"pattern": "SENTINEL", "path": d.path}},
			attempt{d.name + "/run_shell_command", NameRunShellCommand, map[string]any{"command": "cat secret.txt", "directory": d.path}},
		)
	}
	attempts = append(attempts,
		attempt{"glob pattern dotdot", NameGlob, map[string]any{"pattern": "../outside/*"}},
		attempt{"glob absolute pattern", NameGlob, map[string]any{"pattern": w.outside + "/*"}},
		attempt{"grep glob dotdot", NameGrepSearch, map[string]any{"pattern": "SENTINEL", "glob": "../**"}},
	)
	require.GreaterOrEqual(t, len(attempts), 15)

	for envName, env := range envs {
		for _, a := range attempts {
			t.Run(envName+"/"+a.name, func(t *testing.T) {
				c, err := tool(t, a.tool).Build(env, args(t, a.args))
				require.Error(t, err, "escape accepted")
				assert.Nil(t, c)
				assert.NotContains(t, err.Error(), sentinelText)
			})
		}
	}
	assert.Empty(t, client.Calls())
	w.checkSentinel(t)
	b, err := os.ReadFile(evilFile)
	require.NoError(t, err)
	assert.Equal(t, "evil", string(b))
}

func TestConfinement_ErrorsAreClear(t *testing.T) {
	w := newWorkspace(t)
	require.NoError(t, os.Symlink(w.sentinel, w.path("link-out")))
	tests := []struct{ path, want string }{
		{"rel/x", "must be an absolute path"},
		{w.root + "/../x", "must not contain '..'"},
		{w.sentinel, "outside the workspace"},
		{w.path("link-out"), "resolves to"},
		{"/proc/self/environ", "system directory"},
		{w.root + "/a\x00b", "NUL"},
		{`C:\x`, "Windows"},
	}
	for _, tt := range tests {
		_, err := w.env.confine("file_path", tt.path)
		require.Error(t, err, tt.path)
		assert.True(t, errors.Is(err, ErrOutsideWorkspace))
		assert.Contains(t, err.Error(), "file_path")
		assert.Contains(t, err.Error(), tt.want)
	}
	_, err := (&Env{}).confine("file_path", w.path("x"))
	assert.ErrorContains(t, err, "no workspace directories")
}

// TestConfinement_AdditionalDirectories accepts paths in any root and
// through symlinks that stay inside.
func TestConfinement_AdditionalDirectories(t *testing.T) {
	w := newWorkspace(t)
	extra := filepath.Join(filepath.Dir(w.root), "extra")
	require.NoError(t, os.Mkdir(extra, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(extra, "e.txt"), []byte("extra"), 0o644))
	env := &Env{Roots: []string{w.root, extra}}
	_, res := run(t, t.Context(), env, NameReadFile, map[string]any{"file_path": filepath.Join(extra, "e.txt")})
	require.NoError(t, res.Err)
	assert.Equal(t, "extra", res.LLMContent)

	// A link in the workspace to the other root is fine: it resolves inside.
	require.NoError(t, os.Symlink(filepath.Join(extra, "e.txt"), w.path("to-extra")))
	_, res = run(t, t.Context(), env, NameReadFile, map[string]any{"file_path": w.path("to-extra")})
	require.NoError(t, res.Err)
	assert.Equal(t, "extra", res.LLMContent)
}

// TestConfinement_SwapAfterBuild replaces a checked file or directory with a
// symlink pointing out between Build and Execute: the use must be refused.
func TestConfinement_SwapAfterBuild(t *testing.T) {
	tests := []struct {
		name string
		tool string
		args func(w *workspace) map[string]any
		swap func(t *testing.T, w *workspace)
	}{
		{
			name: "read_file target becomes symlink",
			tool: NameReadFile,
			args: func(w *workspace) map[string]any { return map[string]any{"file_path": w.path("f.txt")} },
			swap: func(t *testing.T, w *workspace) { swapForLink(t, w.path("f.txt"), w.sentinel) },
		},
		{
			name: "write_file target becomes symlink",
			tool: NameWriteFile,
			args: func(w *workspace) map[string]any {
				return map[string]any{"file_path": w.path("f.txt"), "content": "pwned"}
			},
			swap: func(t *testing.T, w *workspace) { swapForLink(t, w.path("f.txt"), w.sentinel) },
		},
		{
			name: "write_file new file, parent dir becomes symlink",
			tool: NameWriteFile,
			args: func(w *workspace) map[string]any {
				return map[string]any{"file_path": w.path("d/new.txt"), "content": "pwned"}
			},
			swap: func(t *testing.T, w *workspace) { swapForLink(t, w.path("d"), w.outside) },
		},
		{
			name: "edit target becomes symlink",
			tool: NameEdit,
			args: func(w *workspace) map[string]any {
				return map[string]any{"file_path": w.path("f.txt"), "old_string": "SENTINEL", "new_string": "pwned"}
			},
			swap: func(t *testing.T, w *workspace) { swapForLink(t, w.path("f.txt"), w.sentinel) },
		},
		{
			name: "list_directory dir becomes symlink",
			tool: NameListDirectory,
			args: func(w *workspace) map[string]any { return map[string]any{"path": w.path("d")} },
			swap: func(t *testing.T, w *workspace) { swapForLink(t, w.path("d"), w.outside) },
		},
		{
			name: "grep_search dir becomes symlink",
			tool: NameGrepSearch,
			args: func(w *workspace) map[string]any { return map[string]any{"pattern": "SENTINEL", "path": w.path("d")} },
			swap: func(t *testing.T, w *workspace) { swapForLink(t, w.path("d"), w.outside) },
		},
		{
			name: "run_shell_command directory becomes symlink",
			tool: NameRunShellCommand,
			args: func(w *workspace) map[string]any {
				return map[string]any{"command": "cat secret.txt; echo pwned > new.txt", "directory": w.path("d")}
			},
			swap: func(t *testing.T, w *workspace) { swapForLink(t, w.path("d"), w.outside) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t)
			w.write(t, "f.txt", "inside SENTINEL\n")
			w.write(t, "d/inside.txt", "inside\n")
			c, err := tool(t, tt.tool).Build(w.env, args(t, tt.args(w)))
			require.NoError(t, err)
			tt.swap(t, w)
			res := c.Execute(t.Context(), w.env)
			require.Error(t, res.Err)
			assert.Equal(t, ErrTypePathNotInWorkspace, res.ErrType, res.LLMContent)
			assert.NotContains(t, res.LLMContent, sentinelText)
			w.checkSentinel(t)
		})
	}
}

func swapForLink(t *testing.T, p, to string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(p))
	require.NoError(t, os.Symlink(to, p))
}

// TestConfinement_WalksDoNotFollowLinksOut: links inside the workspace that
// point out are neither descended nor read by glob, grep and list.
func TestConfinement_WalksDoNotFollowLinksOut(t *testing.T) {
	w := newWorkspace(t)
	w.write(t, "a.txt", "nothing\n")
	require.NoError(t, os.Symlink(w.sentinel, w.path("link-out.txt")))
	require.NoError(t, os.Symlink(w.outside, w.path("dirlink")))

	_, res := run(t, t.Context(), w.env, NameGrepSearch, map[string]any{"pattern": "SENTINEL"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "No matches found")

	_, res = run(t, t.Context(), w.env, NameGlob, map[string]any{"pattern": "**/secret.txt"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "No files found")

	_, res = run(t, t.Context(), w.env, NameListDirectory, map[string]any{"path": w.root})
	require.NoError(t, res.Err)
	assert.NotContains(t, res.LLMContent, "[DIR] dirlink", "a link out is not reported as a workspace directory")
	assert.False(t, strings.Contains(res.LLMContent, sentinelText))
	w.checkSentinel(t)
}

// The session keeps its roots open (RootCache): a root whose directory is
// replaced is opened again, and a root path that now leads outside through
// a symlink is refused before anything is read or created there.
func TestConfinement_HeldRoots(t *testing.T) {
	t.Run("root replaced by another directory", func(t *testing.T) {
		w := newWorkspace(t)
		w.write(t, "a.txt", "first\n")
		_, res := run(t, t.Context(), w.env, NameReadFile, map[string]any{"file_path": w.path("a.txt")})
		require.NoError(t, res.Err)
		require.Contains(t, res.LLMContent, "first")
		require.NoError(t, os.RemoveAll(w.root))
		require.NoError(t, os.Mkdir(w.root, 0o755))
		w.write(t, "a.txt", "second\n")
		_, res = run(t, t.Context(), w.env, NameReadFile, map[string]any{"file_path": w.path("a.txt")})
		require.NoError(t, res.Err)
		require.Contains(t, res.LLMContent, "second")
		_, res = run(t, t.Context(), w.env, NameWriteFile, map[string]any{"file_path": w.path("b.txt"), "content": "new\n"})
		require.NoError(t, res.Err)
		b, err := os.ReadFile(w.path("b.txt"))
		require.NoError(t, err)
		require.Equal(t, "new\n", string(b))
	})
	t.Run("root swapped for a symlink out", func(t *testing.T) {
		w := newWorkspace(t)
		w.write(t, "a.txt", "inside\n")
		_, res := run(t, t.Context(), w.env, NameReadFile, map[string]any{"file_path": w.path("a.txt")})
		require.NoError(t, res.Err)
		require.NoError(t, os.Rename(w.root, w.root+"-old"))
		require.NoError(t, os.Symlink(w.outside, w.root))
		// Through the editor too: confinement refuses before any request
		// (the fake client fails the test on any call).
		editor := &Env{SessionID: "s1", Roots: w.env.Roots, RootCache: w.env.RootCache, Client: &fakeClient{t: t},
			Caps: acp.ClientCapabilities{FS: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}}}
		for _, p := range []string{w.path("secret.txt"), w.path("new.txt")} {
			_, err := editor.confine("file_path", p)
			require.ErrorIs(t, err, ErrOutsideWorkspace, p)
		}
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{NameReadFile, map[string]any{"file_path": w.path("secret.txt")}},
			{NameWriteFile, map[string]any{"file_path": w.path("new.txt"), "content": "pwned"}},
			{NameWriteFile, map[string]any{"file_path": w.path("newdir/new.txt"), "content": "pwned"}},
			{NameWriteFile, map[string]any{"file_path": w.path("secret.txt"), "content": "pwned"}},
			{NameEdit, map[string]any{"file_path": w.path("secret.txt"), "old_string": "SENTINEL", "new_string": "pwned"}},
		} {
			c, err := tool(t, tc.tool).Build(w.env, args(t, tc.args))
			if err != nil {
				require.ErrorIs(t, err, ErrOutsideWorkspace)
				continue
			}
			res := c.Execute(t.Context(), w.env)
			require.Error(t, res.Err, tc.tool)
			assert.Equal(t, ErrTypePathNotInWorkspace, res.ErrType, res.LLMContent)
			assert.NotContains(t, res.LLMContent, sentinelText)
		}
		w.checkSentinel(t)
	})
	t.Run("closed cache still confines", func(t *testing.T) {
		w := newWorkspace(t)
		w.write(t, "a.txt", "inside\n")
		w.env.RootCache.Close()
		_, res := run(t, t.Context(), w.env, NameReadFile, map[string]any{"file_path": w.path("a.txt")})
		require.NoError(t, res.Err)
		require.Contains(t, res.LLMContent, "inside")
	})
}
