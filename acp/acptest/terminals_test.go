//go:build unix

package acptest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

func TestTerminals_Lifecycle(t *testing.T) {
	ts := NewTerminals()
	t.Cleanup(ts.Close)
	fc := &FakeClient{}
	ts.Install(fc)
	ctx := t.Context()
	limit := uint64(4)
	created, err := fc.CreateTerminalFunc(ctx, &acp.CreateTerminalRequest{SessionID: "s", Command: "sh", Args: []string{"-c", "printf hello; exit 3"}, Cwd: t.TempDir(), OutputByteLimit: &limit})
	require.NoError(t, err)
	req := &acp.TerminalRequest{SessionID: "s", TerminalID: created.TerminalID}
	st, err := fc.WaitForTerminalExitFunc(ctx, req)
	require.NoError(t, err)
	require.NotNil(t, st.ExitCode)
	assert.Equal(t, 3, *st.ExitCode)
	out, err := fc.TerminalOutputFunc(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "ello", out.Output, "the oldest bytes are dropped")
	assert.True(t, out.Truncated)
	require.NotNil(t, out.ExitStatus)
	require.NoError(t, fc.ReleaseTerminalFunc(ctx, req))
	_, err = fc.TerminalOutputFunc(ctx, req)
	assert.Error(t, err, "a released terminal is gone")

	// Release kills a running command.
	created, err = fc.CreateTerminalFunc(ctx, &acp.CreateTerminalRequest{SessionID: "s", Command: "sleep", Args: []string{"30"}})
	require.NoError(t, err)
	assert.False(t, ts.Exited(created.TerminalID))
	require.NoError(t, fc.ReleaseTerminalFunc(ctx, &acp.TerminalRequest{SessionID: "s", TerminalID: created.TerminalID}))
	assert.True(t, ts.Exited(created.TerminalID))

	var methods []string
	for _, c := range ts.Calls() {
		methods = append(methods, c.Method)
	}
	assert.Equal(t, []string{"terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release", "terminal/output", "terminal/create", "terminal/release"}, methods)
}
