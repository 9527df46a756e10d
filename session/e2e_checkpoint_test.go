package session_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/instructions/gittest"
	"github.com/acpd/acpd/session/model/modeltest"
)

func argsJSON(v map[string]string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// mutatingTurn is the scripted response of a turn that edits three files,
// creates one, and runs a command that deletes one and writes a fourth.
func mutatingTurn(ws string) []modeltest.Response {
	edit := func(id, name, from, to string) modeltest.ToolCall {
		return modeltest.ToolCall{ID: id, Name: "edit", Arguments: argsJSON(map[string]string{
			"file_path": filepath.Join(ws, name), "old_string": from, "new_string": to})}
	}
	return []modeltest.Response{
		{ToolCalls: []modeltest.ToolCall{
			edit("c1", "one.txt", "first", "FIRST"),
			edit("c2", "src/two.go", "second", "2nd"),
			edit("c3", "three.md", "line 3", "line three"),
			{ID: "c4", Name: "write_file", Arguments: argsJSON(map[string]string{"file_path": filepath.Join(ws, "src/new.txt"), "content": "created by the model\n"})},
			{ID: "c5", Name: "run_shell_command", Arguments: argsJSON(map[string]string{"command": "rm doomed.txt && mkdir -p out && printf 'shell output\\n' > out/shell.txt"})},
		}},
		{Text: "all done"},
	}
}

func seedWorkspace(t *testing.T, ws string) {
	t.Helper()
	files := map[string]string{
		"one.txt":    "first line\nsecond line\n",
		"src/two.go": "package two\n\n// the second file\n",
		"three.md":   "line 1\nline 2\nline 3\n",
		"doomed.txt": "delete me\n",
		"script.sh":  "#!/bin/sh\necho hi\n",
	}
	for name, body := range files {
		p := filepath.Join(ws, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	require.NoError(t, os.Chmod(filepath.Join(ws, "script.sh"), 0o755))
}

// readTree reads every file below root (.git aside) with its mode.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		require.NoError(t, err)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[rel] = fi.Mode().String() + " " + string(b)
		return nil
	}))
	return out
}

func promptText(t *testing.T, cc *acptest.ClientConn, sid, text string) string {
	t.Helper()
	before := len(cc.Updates())
	resp, err := cc.Prompt(t.Context(), sid, text)
	require.NoError(t, err)
	require.Equal(t, acp.StopEndTurn, resp.StopReason)
	return acptest.AgentText(cc.Updates()[before:], sid)
}

// A turn that edits three files, creates one and runs a command that
// deletes one and writes a fourth is undone by /rewind N, byte for byte
// and mode for mode, in a git repository (whose git is never run) and in
// a plain folder; the model's next request no longer holds the turn, and
// session/load shows the conversation without it.
func TestCheckpoint_RewindRestoresTurn(t *testing.T) {
	for _, repo := range []bool{true, false} {
		name := "plain folder"
		if repo {
			name = "git repository"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dataDir := t.TempDir()
			var ws, markers string
			if repo {
				gittest.Require(t)
				h := gittest.NewHostile(t)
				ws, markers = h.Repo, h.Markers
				seedWorkspace(t, ws)
			} else {
				ws = t.TempDir()
				seedWorkspace(t, ws)
			}
			before := readTree(t, ws)
			script := append([]modeltest.Response{{Text: "hello back"}}, mutatingTurn(ws)...)
			script = append(script, modeltest.Response{Text: "after the rewind"})
			d := startCrashDaemon(t, nil, dataDir, script...)
			d.initialize(t)
			sid, err := d.cc.NewSession(t.Context(), ws)
			require.NoError(t, err)
			promptText(t, d.cc, sid, "say hello")
			assert.Equal(t, "all done", promptText(t, d.cc, sid, "change the files"))
			changed := readTree(t, ws)
			require.NotEqual(t, before, changed)
			require.Contains(t, changed, "out/shell.txt")
			require.NotContains(t, changed, "doomed.txt")

			list := promptText(t, d.cc, sid, "/rewind")
			assert.Contains(t, list, "1. ")
			assert.Contains(t, list, "say hello")
			assert.Contains(t, list, "2. ")
			for _, f := range []string{"one.txt", "src/two.go", "three.md"} {
				assert.Contains(t, list, filepath.Join(ws, f)+"  +1 −1")
			}
			assert.Contains(t, list, filepath.Join(ws, "src/new.txt")+"  +1 −0 (created)")
			assert.Contains(t, list, filepath.Join(ws, "doomed.txt")+"  +0 −1 (deleted)")
			assert.Contains(t, list, filepath.Join(ws, "out/shell.txt")+"  +1 −0 (created)")

			out := promptText(t, d.cc, sid, "/rewind 2")
			assert.Contains(t, out, "Restored the workspace to before turn 2")
			assert.Equal(t, before, readTree(t, ws), "every file back, the created ones gone")
			_, err = os.Stat(filepath.Join(ws, "out"))
			assert.ErrorIs(t, err, os.ErrNotExist, "the folder the command made is gone")

			promptText(t, d.cc, sid, "next question")
			reqs := d.model.Requests()
			last := reqs[len(reqs)-1]
			var msgs []string
			for _, m := range last.Messages {
				if m.Role != "system" {
					msgs = append(msgs, m.Role+":"+m.Text())
				}
			}
			assert.Equal(t, []string{"user:say hello", "assistant:hello back", "user:next question"}, msgs)

			// session/load on a new connection shows the rewound conversation.
			d2 := startCrashDaemon(t, nil, dataDir)
			d2.initialize(t)
			// The first daemon still holds the transcript: close it.
			require.NoError(t, d.cc.Call(t.Context(), acp.MethodSessionClose, acp.SessionIDRequest{SessionID: sid}, nil))
			require.NoError(t, d2.cc.Call(t.Context(), acp.MethodSessionLoad,
				acp.LoadSessionRequest{SessionID: sid, Cwd: ws, MCPServers: []acp.MCPServer{}}, nil))
			var users []string
			for _, n := range d2.cc.Updates() {
				if n.Update.Kind == acp.UpdateUserMessageChunk {
					users = append(users, n.Update.Content.Text)
				}
			}
			assert.Equal(t, []string{"say hello", "next question"}, users)
			if markers != "" {
				ents, err := os.ReadDir(markers)
				require.NoError(t, err)
				assert.Empty(t, ents, "no program of the repository ran")
			}
		})
	}
}

// A file the user changed after the turn is not overwritten silently: the
// rewind asks, and rejecting keeps the user's version while the rest is
// restored.
func TestCheckpoint_RewindAsksBeforeReplacingUserChange(t *testing.T) {
	t.Parallel()
	dataDir, ws := t.TempDir(), t.TempDir()
	seedWorkspace(t, ws)
	before := readTree(t, ws)
	var asked []*acp.RequestPermissionRequest
	fc := &acptest.FakeClient{RequestPermissionFunc: func(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		asked = append(asked, r)
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: "cancel"}}, nil
	}}
	d := startCrashDaemon(t, fc, dataDir, mutatingTurn(ws)...)
	d.initialize(t)
	sid, err := d.cc.NewSession(t.Context(), ws)
	require.NoError(t, err)
	promptText(t, d.cc, sid, "change the files")
	mine := []byte("the user's own edit\n")
	require.NoError(t, os.WriteFile(filepath.Join(ws, "one.txt"), mine, 0o644))

	out := promptText(t, d.cc, sid, "/rewind 1 code")
	require.Len(t, asked, 1)
	require.Len(t, asked[0].ToolCall.Locations, 1)
	assert.Equal(t, filepath.Join(ws, "one.txt"), asked[0].ToolCall.Locations[0].Path)
	assert.Contains(t, out, "kept your version of "+filepath.Join(ws, "one.txt"))
	got := readTree(t, ws)
	assert.Equal(t, "-rw-r--r-- "+string(mine), got["one.txt"])
	delete(got, "one.txt")
	delete(before, "one.txt")
	assert.Equal(t, before, got)
	assert.NotContains(t, out, "conversation is back")
}

// The daemon killed during a mutating turn (its shell command still
// running): a new daemon rewinds the turn and every file is back.
func TestCheckpoint_RewindAfterKill(t *testing.T) {
	t.Parallel()
	dataDir, ws := t.TempDir(), t.TempDir()
	seedWorkspace(t, ws)
	before := readTree(t, ws)
	hit := make(chan struct{}, 1)
	fc := &acptest.FakeClient{OnSessionUpdate: func(n acp.SessionNotification) {
		u := n.Update
		if u.Kind == acp.UpdateToolCall && u.ToolCall.Status == acp.StatusInProgress && u.ToolCall.Kind == acp.KindExecute {
			select {
			case hit <- struct{}{}:
			default:
			}
		}
	}}
	script := []modeltest.Response{{ToolCalls: []modeltest.ToolCall{
		{ID: "w1", Name: "write_file", Arguments: argsJSON(map[string]string{"file_path": filepath.Join(ws, "one.txt"), "content": "rewritten\n"})},
		{ID: "s1", Name: "run_shell_command", Arguments: argsJSON(map[string]string{"command": "rm doomed.txt; echo made > made.txt; sleep 30"})},
	}}}
	d1 := startCrashDaemon(t, fc, dataDir, script...)
	d1.initialize(t)
	sid, err := d1.cc.NewSession(t.Context(), ws)
	require.NoError(t, err)
	go func() { _, _ = d1.cc.Prompt(context.WithoutCancel(t.Context()), sid, "break things") }()
	select {
	case <-hit:
	case <-time.After(30 * time.Second):
		t.Fatal("the shell command never started")
	}
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(ws, "made.txt"))
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)
	d1.kill(t)

	d2 := startCrashDaemon(t, nil, dataDir)
	d2.initialize(t)
	require.NoError(t, d2.cc.Call(t.Context(), acp.MethodSessionLoad,
		acp.LoadSessionRequest{SessionID: sid, Cwd: ws, MCPServers: []acp.MCPServer{}}, nil))
	list := promptText(t, d2.cc, sid, "/rewind")
	assert.Contains(t, list, "interrupted")
	out := promptText(t, d2.cc, sid, "/rewind 1")
	assert.True(t, strings.Contains(out, "Restored the workspace"), out)
	assert.Equal(t, before, readTree(t, ws))
}
