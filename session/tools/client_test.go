package tools

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func editorEnv(w *workspace, c *fakeClient, fs, terminal bool) *Env {
	env := *w.env
	env.Client = c
	env.Caps = acp.ClientCapabilities{FS: acp.FileSystemCapabilities{ReadTextFile: fs, WriteTextFile: fs}, Terminal: terminal}
	return &env
}

func TestEditorFS_ReadsGoThroughClient(t *testing.T) {
	w := newWorkspace(t)
	p := w.write(t, "unsaved.go", "saved text\n") // the editor's buffer differs
	var got []*acp.ReadTextFileRequest
	fc := &fakeClient{t: t, ReadTextFileFunc: func(_ context.Context, req *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
		got = append(got, req)
		if req.Line != nil {
			return &acp.ReadTextFileResponse{Content: "line 11\nline 12\n"}, nil
		}
		return &acp.ReadTextFileResponse{Content: "buffer text\n"}, nil
	}}
	env := editorEnv(w, fc, true, false)

	_, res := run(t, t.Context(), env, NameReadFile, map[string]any{"file_path": p})
	require.NoError(t, res.Err)
	assert.Equal(t, "buffer text\n", res.LLMContent)

	_, res = run(t, t.Context(), env, NameReadFile, map[string]any{"file_path": p, "offset": 10, "limit": 2})
	require.NoError(t, res.Err)
	assert.Equal(t, "line 11\nline 12\n", res.LLMContent)

	require.Len(t, got, 2)
	assert.Equal(t, &acp.ReadTextFileRequest{SessionID: "s1", Path: p}, got[0])
	assert.Equal(t, &acp.ReadTextFileRequest{SessionID: "s1", Path: p, Line: ptr(11), Limit: ptr(2)}, got[1])

	fc.ReadTextFileFunc = func(context.Context, *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
		return nil, acp.ErrResourceNotFound("file://" + p)
	}
	_, res = run(t, t.Context(), env, NameReadFile, map[string]any{"file_path": p})
	assert.Equal(t, ErrTypeFileNotFound, res.ErrType, "-32002 from the editor is not found")
	assert.Equal(t, "Error: File not found: "+p, res.LLMContent)
	require.Len(t, fc.Calls(), 3)
}

// TestEditorFS_MissingFileIsNotFound: Zed answers a read of a missing file
// inside the project with empty content; acpd checks the disk first and
// never asks.
func TestEditorFS_MissingFileIsNotFound(t *testing.T) {
	w := newWorkspace(t)
	fc := &fakeClient{t: t, ReadTextFileFunc: func(context.Context, *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
		return &acp.ReadTextFileResponse{Content: ""}, nil // Zed's answer for a missing file
	}}
	env := editorEnv(w, fc, true, false)
	missing := w.path("missing.go")
	_, res := run(t, t.Context(), env, NameReadFile, map[string]any{"file_path": missing})
	assert.Equal(t, ErrTypeFileNotFound, res.ErrType)
	assert.Equal(t, "Error: File not found: "+missing, res.LLMContent)
	_, res = run(t, t.Context(), env, NameEdit, map[string]any{"file_path": missing, "old_string": "a", "new_string": "b"})
	require.Error(t, res.Err, "an edit of a missing file is not an edit of an empty one")
	assert.Empty(t, fc.Calls())
}

// TestEditorFS_WriteCreatesFolders: before fs/write_text_file into a folder
// that does not exist, acpd creates it (confined like a local write); the
// file itself is left to the editor.
func TestEditorFS_WriteCreatesFolders(t *testing.T) {
	w := newWorkspace(t)
	fc := &fakeClient{t: t, WriteTextFileFunc: func(_ context.Context, req *acp.WriteTextFileRequest) error {
		fi, err := os.Stat(filepath.Dir(req.Path))
		if err != nil || !fi.IsDir() {
			return acp.ErrInternal("invalid path") // a client that creates no folders
		}
		return os.WriteFile(req.Path, []byte(req.Content), 0o644)
	}}
	env := editorEnv(w, fc, true, false)
	p := w.path("a/b/c/new.txt")
	_, res := run(t, t.Context(), env, NameWriteFile, map[string]any{"file_path": p, "content": "x\n"})
	require.NoError(t, res.Err, res.LLMContent)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "x\n", string(b))
	assert.Equal(t, []string{acp.MethodFSWriteTextFile}, fc.Calls(), "a missing file is not read through the editor")

	// A folder path leading out of the workspace through a symlink is
	// refused before anything is created.
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, w.path("link")))
	_, err = tool(t, NameWriteFile).Build(env, args(t, map[string]any{"file_path": w.path("link/d/new.txt"), "content": "x"}))
	require.ErrorIs(t, err, ErrOutsideWorkspace)
	assert.NoDirExists(t, filepath.Join(outside, "d"))
}

func TestEditorFS_WritesAndEditsGoThroughClient(t *testing.T) {
	w := newWorkspace(t)
	w.write(t, "a.go", "on disk\n")
	files := map[string]string{w.path("a.go"): "a foo b\n"}
	var mu sync.Mutex
	fc := &fakeClient{t: t,
		ReadTextFileFunc: func(_ context.Context, req *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			s, ok := files[req.Path]
			if !ok {
				return nil, acp.ErrResourceNotFound("file://" + req.Path)
			}
			return &acp.ReadTextFileResponse{Content: s}, nil
		},
		WriteTextFileFunc: func(_ context.Context, req *acp.WriteTextFileRequest) error {
			mu.Lock()
			defer mu.Unlock()
			files[req.Path] = req.Content
			return nil
		},
	}
	env := editorEnv(w, fc, true, false)

	_, res := run(t, t.Context(), env, NameEdit, map[string]any{"file_path": w.path("a.go"), "old_string": "foo", "new_string": "bar"})
	require.NoError(t, res.Err)
	assert.Equal(t, "a bar b\n", files[w.path("a.go")])
	assert.Equal(t, []acp.ToolCallContent{acp.DiffContent(w.path("a.go"), ptr("a foo b\n"), "a bar b\n")}, res.Content)

	newFile := w.path("sub/new.txt")
	c, err := tool(t, NameWriteFile).Build(env, args(t, map[string]any{"file_path": newFile, "content": "hi\n"}))
	require.NoError(t, err)
	require.NoError(t, c.(Preparer).Prepare(t.Context(), env))
	assert.Equal(t, []acp.ToolCallContent{acp.DiffContent(newFile, nil, "hi\n")}, c.Confirmation().Content)
	res = c.Execute(t.Context(), env)
	require.NoError(t, res.Err)
	assert.Equal(t, "hi\n", files[newFile])
	assert.Equal(t, []acp.ToolCallContent{acp.DiffContent(newFile, nil, "hi\n")}, res.Content)

	assert.Equal(t, []string{
		acp.MethodFSReadTextFile, acp.MethodFSWriteTextFile, // edit
		acp.MethodFSWriteTextFile, // write_file: the new file is not read
	}, fc.Calls())
	b, err := os.ReadFile(w.path("a.go"))
	require.NoError(t, err)
	assert.Equal(t, "on disk\n", string(b), "nothing written locally")
	_, err = os.Stat(newFile)
	assert.True(t, os.IsNotExist(err), "nothing written locally")
	assert.DirExists(t, w.path("sub"), "the new file's folder was created for the editor")
}

func TestEditorFS_WithoutCapabilitiesUsesLocal(t *testing.T) {
	w := newWorkspace(t)
	fc := &fakeClient{t: t} // any call fails the test
	env := editorEnv(w, fc, false, false)
	p := w.write(t, "a.txt", "local\n")
	_, res := run(t, t.Context(), env, NameReadFile, map[string]any{"file_path": p})
	require.NoError(t, res.Err)
	assert.Equal(t, "local\n", res.LLMContent)
	_, res = run(t, t.Context(), env, NameEdit, map[string]any{"file_path": p, "old_string": "local", "new_string": "edited"})
	require.NoError(t, res.Err)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "edited\n", string(b))
	_, res = run(t, t.Context(), env, NameRunShellCommand, map[string]any{"command": "echo local-shell"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "local-shell")
	assert.Empty(t, fc.Calls())
}

// terminalFake scripts a client terminal and records the context each
// call got.
type terminalFake struct {
	*fakeClient
	created        chan *acp.CreateTerminalRequest
	waiting        chan struct{}
	releaseCtxErr  chan error
	updates        chan acp.ToolCallUpdate
	exitCode       int
	blockUntilDone bool
}

func newTerminalFake(t *testing.T) *terminalFake {
	tf := &terminalFake{
		fakeClient:    &fakeClient{t: t},
		created:       make(chan *acp.CreateTerminalRequest, 1),
		waiting:       make(chan struct{}, 1),
		releaseCtxErr: make(chan error, 1),
		updates:       make(chan acp.ToolCallUpdate, 4),
	}
	tf.CreateTerminalFunc = func(_ context.Context, req *acp.CreateTerminalRequest) (*acp.CreateTerminalResponse, error) {
		tf.created <- req
		return &acp.CreateTerminalResponse{TerminalID: "term-1"}, nil
	}
	tf.WaitForTerminalExitFunc = func(ctx context.Context, req *acp.TerminalRequest) (*acp.TerminalExitStatus, error) {
		assert.Equal(t, "term-1", req.TerminalID)
		tf.waiting <- struct{}{}
		if tf.blockUntilDone {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &acp.TerminalExitStatus{ExitCode: &tf.exitCode}, nil
	}
	tf.TerminalOutputFunc = func(ctx context.Context, req *acp.TerminalRequest) (*acp.TerminalOutputResponse, error) {
		return &acp.TerminalOutputResponse{Output: "terminal says hi\n"}, nil
	}
	tf.KillTerminalFunc = func(ctx context.Context, req *acp.TerminalRequest) error {
		assert.NoError(t, ctx.Err())
		return nil
	}
	tf.ReleaseTerminalFunc = func(ctx context.Context, req *acp.TerminalRequest) error {
		assert.Equal(t, "term-1", req.TerminalID)
		tf.releaseCtxErr <- ctx.Err()
		return nil
	}
	return tf
}

func (tf *terminalFake) env(w *workspace) *Env {
	env := editorEnv(w, tf.fakeClient, false, true)
	env.Update = func(_ context.Context, u acp.ToolCallUpdate) error {
		tf.updates <- u
		return nil
	}
	return env
}

func TestTerminal_RunsInEditorTerminal(t *testing.T) {
	w := newWorkspace(t)
	tf := newTerminalFake(t)
	tf.exitCode = 2
	env := tf.env(w)
	env.MaxOutputBytes = 4096
	_, res := run(t, t.Context(), env, NameRunShellCommand, map[string]any{"command": "make test"})
	require.NoError(t, res.Err)

	req := <-tf.created
	// What this process's environment holds that commands must not get
	// is sent empty (none in CI; a developer's machine may differ).
	var blanks []acp.EnvVariable
	for _, n := range env.Sandbox.DroppedEnv(os.Environ()) {
		blanks = append(blanks, acp.EnvVariable{Name: n})
	}
	assert.Equal(t, &acp.CreateTerminalRequest{SessionID: "s1", Command: "sh", Args: []string{"-c", "make test"}, Env: blanks, Cwd: w.root, OutputByteLimit: ptr(uint64(4096))}, req)
	u := <-tf.updates
	assert.Equal(t, []acp.ToolCallContent{acp.TerminalContent("term-1")}, u.Content)
	assert.NoError(t, <-tf.releaseCtxErr)
	assert.Equal(t, []string{acp.MethodTerminalCreate, acp.MethodTerminalWaitForExit, acp.MethodTerminalOutput, acp.MethodTerminalRelease}, tf.Calls())
	assert.Equal(t, []acp.ToolCallContent{acp.TerminalContent("term-1")}, res.Content)
	assert.Contains(t, res.LLMContent, "terminal says hi")
	assert.Contains(t, res.LLMContent, "Exit Code: 2")
}

func TestTerminal_TimeoutKillsThenReleases(t *testing.T) {
	w := newWorkspace(t)
	tf := newTerminalFake(t)
	tf.blockUntilDone = true
	_, res := run(t, t.Context(), tf.env(w), NameRunShellCommand, map[string]any{"command": "sleep 30", "timeout": 50})
	require.Error(t, res.Err)
	assert.Equal(t, ErrTypeTimeout, res.ErrType)
	assert.Contains(t, res.LLMContent, "timed out")
	assert.Contains(t, res.LLMContent, "terminal says hi")
	assert.NoError(t, <-tf.releaseCtxErr)
	assert.Equal(t, []string{acp.MethodTerminalCreate, acp.MethodTerminalWaitForExit, acp.MethodTerminalKill, acp.MethodTerminalOutput, acp.MethodTerminalRelease}, tf.Calls())
}

func TestTerminal_CancelReleases(t *testing.T) {
	w := newWorkspace(t)
	tf := newTerminalFake(t)
	tf.blockUntilDone = true
	env := tf.env(w)
	c, err := tool(t, NameRunShellCommand).Build(env, args(t, map[string]any{"command": "sleep 30"}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan Result, 1)
	go func() { done <- c.Execute(ctx, env) }()
	select {
	case <-tf.waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("terminal/wait_for_exit never called")
	}
	cancel()
	select {
	case res := <-done:
		assert.Equal(t, ErrTypeCancelled, res.ErrType)
		assert.ErrorIs(t, res.Err, context.Canceled)
	case <-time.After(time.Second):
		t.Fatal("Execute did not return within 1s of cancel")
	}
	select {
	case err := <-tf.releaseCtxErr:
		assert.NoError(t, err, "release must use a live context")
	default:
		t.Fatal("terminal not released")
	}
	assert.Equal(t, []string{acp.MethodTerminalCreate, acp.MethodTerminalWaitForExit, acp.MethodTerminalRelease}, tf.Calls())
}

// A cancel that arrives while terminal/create is in flight must not leak
// the terminal the editor makes anyway: creation is not cancelled, and the
// terminal is released right after it.
func TestTerminal_CancelDuringCreateStillReleases(t *testing.T) {
	w := newWorkspace(t)
	tf := newTerminalFake(t)
	ctx, cancel := context.WithCancel(t.Context())
	tf.CreateTerminalFunc = func(cctx context.Context, req *acp.CreateTerminalRequest) (*acp.CreateTerminalResponse, error) {
		cancel() // the turn is cancelled while the editor is creating the terminal
		assert.NoError(t, cctx.Err(), "creation is not cancelled with the turn")
		return &acp.CreateTerminalResponse{TerminalID: "term-1"}, nil
	}
	tf.blockUntilDone = true
	_, res := run(t, ctx, tf.env(w), NameRunShellCommand, map[string]any{"command": "sleep 30"})
	require.Error(t, res.Err)
	assert.NoError(t, <-tf.releaseCtxErr)
	calls := tf.Calls()
	assert.Equal(t, acp.MethodTerminalRelease, calls[len(calls)-1], "%v", calls)
}
