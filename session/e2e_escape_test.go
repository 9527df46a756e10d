package session_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/instructions/gittest"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// Ways out of the sandbox that an attack on acpd found, end to end: the
// built binary in yolo mode, driven as an editor would, a model that does
// what a hostile repository tells it, and the file system checked after.

// toolTurn sends one prompt in a new session whose model answers with
// each of steps in turn (tool calls) and then "done"; it returns the tool
// results as the model saw them, one per step (the last result message of
// the next request).
func toolTurn(t *testing.T, d *daemon, caps acp.ClientCapabilities, steps ...modeltest.Response) []string {
	t.Helper()
	first := len(d.model.Requests())
	d.model.Add(append(steps, modeltest.Response{Text: "done"})...)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := d.cc.InitializeWith(ctx, caps)
	require.NoError(t, err)
	sid, err := d.cc.NewSession(ctx, d.cwd)
	require.NoError(t, err)
	resp, err := d.cc.Prompt(ctx, sid, "go")
	require.NoError(t, err)
	require.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs := d.model.Requests()
	require.Len(t, reqs, first+len(steps)+1)
	var results []string
	for i := range steps {
		msgs := reqs[first+i+1].Messages
		results = append(results, msgs[len(msgs)-1].Text())
	}
	return results
}

func shell(cmd string) modeltest.Response {
	return calls(call("run_shell_command", map[string]any{"command": cmd}))
}

func writeFileCall(path, content string) modeltest.Response {
	return calls(call("write_file", map[string]any{"file_path": path, "content": content}))
}

// TestE2E_Escape_GitFile: a .git file planted in the workspace does not
// widen the sandbox — not with a forged worktree folder whose commondir
// is "/", not naming another folder directly, not when planted by
// write_file, not for the command after it in the same session and not
// for a new session that finds it there at its start.
func TestE2E_Escape_GitFile(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	l := newSbxLayout(t)
	forged := filepath.Join(l.ws, ".gitreal")
	plant := strings.Join([]string{
		"mkdir -p " + forged + "/objects",
		"echo / > " + forged + "/commondir",
		"echo " + l.ws + "/.git > " + forged + "/gitdir",
		"echo 'ref: refs/heads/main' > " + forged + "/HEAD",
		"echo 'gitdir: .gitreal' > .git",
		"echo planted",
	}, " && ")
	d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil)
	before := snapshot(t, l.sibling)
	results := toolTurn(t, d, localCaps,
		shell(plant),
		shell("echo x > "+l.sibling+"/via-root.txt"),
		writeFileCall(filepath.Join(l.ws, ".git"), "gitdir: "+l.sibling+"\n"),
		shell("echo x > "+l.sibling+"/via-gitdir.txt"),
	)
	assert.Contains(t, results[0], "Output: planted")
	assert.Contains(t, results[1], "Permission denied", results[1])
	assert.Contains(t, results[3], "Permission denied", results[3])
	// A new session opens with the planted .git file (and the forged folder)
	// in place.
	writeFile(t, filepath.Join(l.ws, ".git"), "gitdir: .gitreal\n")
	results = toolTurn(t, d, localCaps, shell("echo x > "+l.sibling+"/next-session.txt"))
	assert.Contains(t, results[0], "Permission denied", results[0])
	writeFile(t, filepath.Join(l.ws, ".git"), "gitdir: "+l.sibling+"\n")
	results = toolTurn(t, d, localCaps, shell("echo x > "+l.sibling+"/next-session2.txt"))
	assert.Contains(t, results[0], "Permission denied", results[0])
	assert.Equal(t, before, snapshot(t, l.sibling), "nothing written outside")
}

// TestE2E_Escape_GitFileLeak: a workspace whose .git file names another
// repository does not bring that repository's branch or commit subjects
// into the system prompt; the block says the .git was not read.
func TestE2E_Escape_GitFileLeak(t *testing.T) {
	gittest.Require(t)
	t.Parallel()
	base := t.TempDir()
	private, ws := filepath.Join(base, "private"), filepath.Join(base, "ws")
	writeFile(t, filepath.Join(private, "p.txt"), "p\n")
	gittest.Git(t, private, "init", "-q", "-b", "secret-branch")
	gittest.Git(t, private, "add", "-A")
	gittest.Git(t, private, "commit", "-qm", "SECRET-SUBJECT of another repository")
	writeFile(t, filepath.Join(ws, ".git"), "gitdir: ../private/.git\n")
	writeFile(t, filepath.Join(ws, "mine.txt"), "m\n")
	d := startDaemonEnv(t, ws, t.TempDir(), nil, nil, []modeltest.Response{{Text: "hello"}})
	sid := d.session(t)
	_, err := d.cc.Prompt(ctxFor(t), sid, "hi")
	require.NoError(t, err)
	sys := d.model.Requests()[0].Messages[0].Text()
	assert.NotContains(t, sys, "SECRET-SUBJECT")
	assert.NotContains(t, sys, "secret-branch")
	assert.NotContains(t, sys, "p.txt")
	assert.Contains(t, sys, "(not read: not a linked worktree or submodule of this folder")
	assert.Contains(t, sys, "mine.txt", "the listing is still there")
}

// TestE2E_Escape_SharedToolCache: what a confined command of one
// workspace leaves in its tool caches (a cargo config naming a
// rustc-wrapper) is not there for a command of another workspace, and it
// cannot write beside its own cache folder either.
func TestE2E_Escape_SharedToolCache(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	l := newSbxLayout(t)
	other := filepath.Join(l.root, "other-ws")
	writeFile(t, filepath.Join(other, "README"), "another project\n")
	a := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil)
	results := toolTurn(t, a, localCaps,
		shell(`mkdir -p "$CARGO_HOME" && printf '[build]\nrustc-wrapper = "/tmp/evil"\n' > "$CARGO_HOME/config.toml" && echo "planted in $CARGO_HOME"`),
		shell(`touch "$(dirname "$CARGO_HOME")/../planted-beside" && echo beside`),
	)
	assert.Contains(t, results[0], "Output: planted in "+filepath.Join(l.cache, "acpd", "sandbox", "ws-"), results[0])
	assert.Contains(t, results[1], "Permission denied", results[1])
	b := startDaemonEnv(t, other, t.TempDir(), l.env(), nil, nil)
	results = toolTurn(t, b, localCaps, shell(`echo "cargo home $CARGO_HOME"; cat "$CARGO_HOME/config.toml"`))
	assert.Contains(t, results[0], "cargo home "+filepath.Join(l.cache, "acpd", "sandbox", "other-ws-"), results[0])
	assert.NotContains(t, results[0], "rustc-wrapper")
	assert.Contains(t, results[0], "No such file or directory")
}

// TestE2E_Escape_HardLinks: write_file and edit on a workspace file that
// is a hard link to a file outside (a package store linked into
// node_modules) change the workspace's file only: it gets a copy of its
// own first, and the outside file keeps its content — also when the
// editor does the writing.
func TestE2E_Escape_HardLinks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		caps acp.ClientCapabilities
	}{
		{"local", localCaps},
		{"editor writes", acp.ClientCapabilities{FS: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newSbxLayout(t)
			store := filepath.Join(l.sibling, "store")
			writeFile(t, filepath.Join(store, "a.js"), "store a\n")
			writeFile(t, filepath.Join(store, "b.js"), "store b\n")
			mods := filepath.Join(l.ws, "node_modules", "pkg")
			require.NoError(t, os.MkdirAll(mods, 0o755))
			for _, n := range []string{"a.js", "b.js"} {
				require.NoError(t, os.Link(filepath.Join(store, n), filepath.Join(mods, n)))
			}
			require.NoError(t, os.Chmod(filepath.Join(mods, "b.js"), 0o751))
			d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil)
			results := toolTurn(t, d, tc.caps,
				writeFileCall(filepath.Join(mods, "a.js"), "patched a\n"),
				calls(call("edit", map[string]any{"file_path": filepath.Join(mods, "b.js"), "old_string": "store b", "new_string": "patched b"})),
			)
			for _, r := range results {
				assert.NotContains(t, r, "Error", r)
			}
			for n, want := range map[string]string{"a.js": "patched a\n", "b.js": "patched b\n"} {
				b, err := os.ReadFile(filepath.Join(mods, n))
				require.NoError(t, err)
				assert.Equal(t, want, string(b), "the workspace's file is written")
			}
			assert.Equal(t, []string{
				store, filepath.Join(store, "a.js") + ` "store a\n"`, filepath.Join(store, "b.js") + ` "store b\n"`,
			}, snapshot(t, store), "the store outside is unchanged")
			fi, err := os.Stat(filepath.Join(mods, "b.js"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o751), fi.Mode().Perm(), "the copy keeps the mode")
			leftovers, err := filepath.Glob(filepath.Join(mods, ".*"))
			require.NoError(t, err)
			assert.Empty(t, leftovers, "no temporary file left")
		})
	}
}
