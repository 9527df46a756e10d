package session

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

// TestIdleSessions_ShareAndSleep: sessions open in one workspace share its
// command set, instruction files and environment block, hold no goroutine
// while idle, and each is told when a command file appears.
func TestIdleSessions_ShareAndSleep(t *testing.T) {
	ws := idleWorkspace(t)
	m := idleManager(t)
	defer m.Close()
	openIdle(t, m, ws, 1) // the process-wide watcher's goroutine starts here
	time.Sleep(100 * time.Millisecond)
	goroutines := runtime.NumGoroutine()
	ss := openIdle(t, m, ws, 20)
	time.Sleep(100 * time.Millisecond)
	assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines+2, "idle sessions hold no goroutines")

	first := ss[0]
	system := first.systemPrompt()
	for _, s := range ss[1:] {
		assert.Same(t, first.commandSet(), s.commandSet())
		assert.Same(t, first.prep.instr, s.prep.instr)
		assert.Equal(t, unsafe.StringData(first.prep.env.Value()), unsafe.StringData(s.prep.env.Value()), "one environment block")
		assert.Equal(t, unsafe.StringData(system), unsafe.StringData(s.systemPrompt()), "one system prompt")
	}
	require.NotEmpty(t, first.prep.instr.Files)

	writeCommand(t, filepath.Join(ws, ".acpd", "commands", "later.md"))
	for _, s := range ss {
		require.Eventually(t, func() bool {
			_, ok := s.commandSet().Lookup("later")
			return ok
		}, 5*time.Second, 5*time.Millisecond, "announced to %s", s.id)
	}
	assert.Same(t, first.commandSet(), ss[len(ss)-1].commandSet())
}

// TestIdleSessions_ChangeDuringTurn: a command file that appears while a
// turn runs is announced after the turn, not inside it.
func TestIdleSessions_ChangeDuringTurn(t *testing.T) {
	ws := idleWorkspace(t)
	m := idleManager(t)
	defer m.Close()
	s := openIdle(t, m, ws, 1)[0]
	require.NoError(t, s.acquire(context.Background())) // a turn runs
	writeCommand(t, filepath.Join(ws, ".acpd", "commands", "during.md"))
	time.Sleep(300 * time.Millisecond)
	_, ok := s.commandSet().Lookup("during")
	assert.False(t, ok, "not announced inside the turn")
	s.release()
	require.Eventually(t, func() bool {
		_, ok := s.commandSet().Lookup("during")
		return ok
	}, 5*time.Second, 5*time.Millisecond)
}

// TestIdleSessions_ClosedForgotten: once a workspace's sessions are closed
// (one of them before its commands were even announced), nothing of it is
// kept or watched.
func TestIdleSessions_ClosedForgotten(t *testing.T) {
	ws := idleWorkspace(t)
	m := idleManager(t)
	defer m.Close()
	ss := openIdle(t, m, ws, 3)
	ctx := context.Background()
	r, err := m.NewSession(ctx, &acp.NewSessionRequest{Cwd: ws, MCPServers: []acp.MCPServer{}})
	require.NoError(t, err)
	_, err = m.CloseSession(ctx, &acp.SessionIDRequest{SessionID: r.SessionID})
	require.NoError(t, err)
	for _, s := range ss {
		_, err = m.CloseSession(ctx, &acp.SessionIDRequest{SessionID: s.id})
		require.NoError(t, err)
	}
	require.Eventually(t, m.hub.Idle, 5*time.Second, 5*time.Millisecond)
}

func writeCommand(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("Do it."), 0o644))
}
