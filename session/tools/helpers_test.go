package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools/confine"
	"github.com/stretchr/testify/require"
)

// fakeClient is an acp.Client whose methods are func fields; calling one
// that is nil fails the test. Calls are recorded by method name.
type fakeClient struct {
	t testing.TB

	SessionUpdateFunc       func(ctx context.Context, n *acp.SessionNotification) error
	RequestPermissionFunc   func(ctx context.Context, req *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error)
	ReadTextFileFunc        func(ctx context.Context, req *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error)
	WriteTextFileFunc       func(ctx context.Context, req *acp.WriteTextFileRequest) error
	CreateTerminalFunc      func(ctx context.Context, req *acp.CreateTerminalRequest) (*acp.CreateTerminalResponse, error)
	TerminalOutputFunc      func(ctx context.Context, req *acp.TerminalRequest) (*acp.TerminalOutputResponse, error)
	WaitForTerminalExitFunc func(ctx context.Context, req *acp.TerminalRequest) (*acp.TerminalExitStatus, error)
	KillTerminalFunc        func(ctx context.Context, req *acp.TerminalRequest) error
	ReleaseTerminalFunc     func(ctx context.Context, req *acp.TerminalRequest) error

	mu    sync.Mutex
	calls []string
}

var _ acp.Client = (*fakeClient)(nil)

func (f *fakeClient) record(m string) {
	f.mu.Lock()
	f.calls = append(f.calls, m)
	f.mu.Unlock()
}

func (f *fakeClient) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeClient) missing(m string) error {
	f.t.Errorf("unexpected client call %s", m)
	return &acp.Error{Code: acp.CodeMethodNotFound, Message: "not faked: " + m}
}

func (f *fakeClient) SessionUpdate(ctx context.Context, n *acp.SessionNotification) error {
	f.record(acp.MethodSessionUpdate)
	if f.SessionUpdateFunc == nil {
		return f.missing(acp.MethodSessionUpdate)
	}
	return f.SessionUpdateFunc(ctx, n)
}

func (f *fakeClient) RequestPermission(ctx context.Context, req *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
	f.record(acp.MethodSessionRequestPermission)
	if f.RequestPermissionFunc == nil {
		return nil, f.missing(acp.MethodSessionRequestPermission)
	}
	return f.RequestPermissionFunc(ctx, req)
}

func (f *fakeClient) ReadTextFile(ctx context.Context, req *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
	f.record(acp.MethodFSReadTextFile)
	if f.ReadTextFileFunc == nil {
		return nil, f.missing(acp.MethodFSReadTextFile)
	}
	return f.ReadTextFileFunc(ctx, req)
}

func (f *fakeClient) WriteTextFile(ctx context.Context, req *acp.WriteTextFileRequest) error {
	f.record(acp.MethodFSWriteTextFile)
	if f.WriteTextFileFunc == nil {
		return f.missing(acp.MethodFSWriteTextFile)
	}
	return f.WriteTextFileFunc(ctx, req)
}

func (f *fakeClient) CreateTerminal(ctx context.Context, req *acp.CreateTerminalRequest) (*acp.CreateTerminalResponse, error) {
	f.record(acp.MethodTerminalCreate)
	if f.CreateTerminalFunc == nil {
		return nil, f.missing(acp.MethodTerminalCreate)
	}
	return f.CreateTerminalFunc(ctx, req)
}

func (f *fakeClient) TerminalOutput(ctx context.Context, req *acp.TerminalRequest) (*acp.TerminalOutputResponse, error) {
	f.record(acp.MethodTerminalOutput)
	if f.TerminalOutputFunc == nil {
		return nil, f.missing(acp.MethodTerminalOutput)
	}
	return f.TerminalOutputFunc(ctx, req)
}

func (f *fakeClient) WaitForTerminalExit(ctx context.Context, req *acp.TerminalRequest) (*acp.TerminalExitStatus, error) {
	f.record(acp.MethodTerminalWaitForExit)
	if f.WaitForTerminalExitFunc == nil {
		return nil, f.missing(acp.MethodTerminalWaitForExit)
	}
	return f.WaitForTerminalExitFunc(ctx, req)
}

func (f *fakeClient) KillTerminal(ctx context.Context, req *acp.TerminalRequest) error {
	f.record(acp.MethodTerminalKill)
	if f.KillTerminalFunc == nil {
		return f.missing(acp.MethodTerminalKill)
	}
	return f.KillTerminalFunc(ctx, req)
}

func (f *fakeClient) ReleaseTerminal(ctx context.Context, req *acp.TerminalRequest) error {
	f.record(acp.MethodTerminalRelease)
	if f.ReleaseTerminalFunc == nil {
		return f.missing(acp.MethodTerminalRelease)
	}
	return f.ReleaseTerminalFunc(ctx, req)
}

// workspace is a session root plus a sibling directory outside it holding a
// sentinel file that no tool may read or write.
type workspace struct {
	root     string // resolved
	outside  string
	sentinel string
	env      *Env
}

const sentinelText = "SENTINEL-OUTSIDE-THE-WORKSPACE"

func newWorkspace(t testing.TB) *workspace {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	require.NoError(t, os.Mkdir(root, 0o755))
	require.NoError(t, os.Mkdir(outside, 0o755))
	sentinel := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(sentinel, []byte(sentinelText), 0o644))
	return &workspace{root: root, outside: outside, sentinel: sentinel, env: &Env{SessionID: "s1", Roots: []string{root}, RootCache: &confine.RootCache{}}}
}

// checkSentinel asserts the file outside the workspace is untouched and
// nothing new appeared next to it.
func (w *workspace) checkSentinel(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(w.sentinel)
	require.NoError(t, err)
	require.Equal(t, sentinelText, string(b), "sentinel outside the workspace was modified")
	entries, err := os.ReadDir(w.outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "a file was created outside the workspace")
}

func (w *workspace) path(rel string) string { return filepath.Join(w.root, rel) }

func (w *workspace) write(t testing.TB, rel, content string) string {
	t.Helper()
	p := w.path(rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func tool(t testing.TB, name string) Tool {
	t.Helper()
	tl, ok := NewBuiltinRegistry(nil).Get(name)
	require.True(t, ok, name)
	return tl
}

func args(t testing.TB, v map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// run builds and executes one call, failing the test if Build fails.
func run(t testing.TB, ctx context.Context, env *Env, name string, a map[string]any) (Call, Result) {
	t.Helper()
	c, err := tool(t, name).Build(env, args(t, a))
	require.NoError(t, err)
	return c, c.Execute(ctx, env)
}

func text(c acp.ToolCallContent) string {
	if c.Content == nil {
		return ""
	}
	return c.Content.Text
}
