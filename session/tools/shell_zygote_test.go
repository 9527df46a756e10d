package tools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// The session's spawn server (sandbox.Session.Spawn) runs confined local
// commands; these tests check that it is really used, that commands behave
// exactly as through the per-command helper (output, exit status, signal,
// timeout, cancel, background children) and that losing it only costs
// speed.

// parentOf reads a process's parent pid from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ppid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return ppid
}

// shellPPID runs `echo $PPID` confined and returns the shell's parent.
func shellPPID(t *testing.T, w *workspace) int {
	t.Helper()
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo $PPID"})
	require.NoError(t, res.Err)
	out := outputOf(res.LLMContent)
	line, _, _ := strings.Cut(out, "\n")
	ppid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, res.LLMContent)
	return ppid
}

func TestRunShellCommand_SpawnServer(t *testing.T) {
	sandboxtest.Require(t)
	w := sandboxedWorkspace(t, sandbox.ModeRequired, "")
	assert.Zero(t, w.env.Sandbox.ServerPid(), "started lazily")

	// Confined as before: the refused write, its note, the write inside.
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo in > in.txt; echo out > " + w.outside + "/out.txt"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "Permission denied")
	assert.Contains(t, res.LLMContent, "Exit Code: 2")
	assert.Contains(t, res.LLMContent, "[sandbox: this command ran confined")
	assert.FileExists(t, w.path("in.txt"))
	assert.NoFileExists(t, filepath.Join(w.outside, "out.txt"))

	server := w.env.Sandbox.ServerPid()
	require.NotZero(t, server, "the first confined command started the server")
	assert.Equal(t, os.Getpid(), parentOf(t, server))
	assert.Equal(t, server, shellPPID(t, w), "the shell was started by the server, not by the daemon")
	assert.Equal(t, server, w.env.Sandbox.ServerPid(), "one server for the session")

	// Same results as the per-command helper.
	tests := []struct {
		command string
		max     int
		want    []string
		shown   string
	}{
		{command: "echo out; echo err >&2; exit 3", want: []string{"out\nerr", "Exit Code: 3"}, shown: "out\nerr\n\n[exit code 3]"},
		{command: "kill -TERM $$", want: []string{"Signal: terminated"}},
		{command: "seq 1 20000", max: 64, want: []string{"[output truncated: first", "20000"}},
		{command: "pwd; echo $TMPDIR; cat", want: []string{"Output: " + w.root, "acpd-sandbox-", "Exit Code: 0"}},
		// Cross-folder renames and links (Landlock's REFER) through both
		// of the command's layers: the server's and its own.
		{command: "mkdir -p d1 d2 && echo x > d1/f && mv d1/f d2/f && ln d2/f d1/h && mv d2 d3 && echo refer-ok", want: []string{"refer-ok", "Exit Code: 0"}},
	}
	for _, tt := range tests {
		env := *w.env
		env.MaxOutputBytes = tt.max
		_, res := run(t, t.Context(), &env, NameRunShellCommand, map[string]any{"command": tt.command})
		require.NoError(t, res.Err, tt.command)
		for _, s := range tt.want {
			assert.Contains(t, res.LLMContent, s, tt.command)
		}
		if tt.shown != "" {
			assert.Equal(t, tt.shown, text(res.Content[0]))
		}
	}

	require.NoError(t, w.env.Sandbox.Close())
	assert.Zero(t, w.env.Sandbox.ServerPid())
	require.Eventually(t, func() bool { return syscall.Kill(server, 0) != nil }, 5*time.Second, 10*time.Millisecond,
		"the server exits when the session closes")
}

func TestRunShellCommand_SpawnServerNoNetwork(t *testing.T) {
	sandboxtest.Require(t)
	w := newWorkspace(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	p := &sandbox.Policy{Mode: sandbox.ModeRequired, Helper: exe, TempRoot: t.TempDir(), DenyNetwork: true}
	w.env.Sandbox = p.NewSession(w.env.Roots)
	t.Cleanup(func() { w.env.Sandbox.Close() })
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo ok > ok.txt; echo x > " + w.outside + "/x"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "Network access is denied")
	assert.FileExists(t, w.path("ok.txt"))
	assert.NotZero(t, w.env.Sandbox.ServerPid())
	// The seccomp filter, synchronized onto all the server's threads,
	// holds in its children: no IP socket (the end-to-end tests check TCP
	// and UDP to a loopback listener through the built binary).
	if _, err := os.Stat("/bin/bash"); err == nil {
		_, res = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "bash -c 'exec 3<>/dev/udp/127.0.0.1/9' && echo opened"})
		require.NoError(t, res.Err)
		assert.NotContains(t, outputOf(res.LLMContent), "opened")
		assert.Contains(t, res.LLMContent, "Permission denied")
	}
}

func TestRunShellCommand_SpawnServerConcurrent(t *testing.T) {
	sandboxtest.Require(t)
	w := sandboxedWorkspace(t, sandbox.ModeRequired, "")
	const n = 8
	var wg sync.WaitGroup
	results := make([]Result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{
				"command": fmt.Sprintf("sleep 0.2; echo %d > f%d; echo %d > %s/f%d; echo done %d; exit %d", i, i, i, w.outside, i, i, i)})
		}()
	}
	wg.Wait()
	for i, res := range results {
		require.NoError(t, res.Err)
		assert.Contains(t, res.LLMContent, fmt.Sprintf("\ndone %d\n", i))
		assert.Contains(t, res.LLMContent, fmt.Sprintf("Exit Code: %d", i))
		assert.FileExists(t, w.path(fmt.Sprintf("f%d", i)))
		// Whichever of the server's threads forked it, it is confined.
		assert.Contains(t, res.LLMContent, "Permission denied")
		assert.NoFileExists(t, filepath.Join(w.outside, fmt.Sprintf("f%d", i)))
	}
}

func TestRunShellCommand_SpawnServerTimeoutCancelBackground(t *testing.T) {
	sandboxtest.Require(t)
	w := sandboxedWorkspace(t, sandbox.ModeRequired, "")

	start := time.Now()
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo started; sleep 30", "timeout": 100})
	assert.Equal(t, ErrTypeTimeout, res.ErrType)
	assert.Contains(t, res.LLMContent, "timed out after 100ms")
	assert.Contains(t, res.LLMContent, "started")
	assert.Less(t, time.Since(start), 5*time.Second)
	require.NotZero(t, w.env.Sandbox.ServerPid())

	// Cancel kills the whole group, background child included.
	c, err := tool(t, NameRunShellCommand).Build(w.env, args(t, map[string]any{"command": "echo $$ > pid; sleep 30 & sleep 30; wait"}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan Result, 1)
	go func() { done <- c.Execute(ctx, w.env) }()
	pgid := readPid(t, w.path("pid"))
	require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) >= 3 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	select {
	case res := <-done:
		assert.Equal(t, ErrTypeCancelled, res.ErrType)
		assert.ErrorIs(t, res.Err, context.Canceled)
	case <-time.After(time.Second):
		t.Fatal("Execute did not return within 1s of cancel")
	}
	require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) == 0 }, time.Second, 5*time.Millisecond)

	// Background leftovers of a finished command are killed.
	require.NoError(t, os.Remove(w.path("pid")))
	_, res = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo $$ > pid; sleep 30 & echo started"})
	require.NoError(t, res.Err)
	pgid = readPid(t, w.path("pid"))
	require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) == 0 }, time.Second, 5*time.Millisecond)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 5*time.Millisecond)
	return pid
}

// TestRunShellCommand_SpawnServerDies: a server killed between commands is
// replaced; one killed under a running command fails that command (its
// group is killed) and the next one still runs confined.
func TestRunShellCommand_SpawnServerDies(t *testing.T) {
	sandboxtest.Require(t)
	w := sandboxedWorkspace(t, sandbox.ModeRequired, "")
	first := shellPPID(t, w)
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	require.Eventually(t, func() bool { return w.env.Sandbox.ServerPid() != first }, 5*time.Second, 10*time.Millisecond)

	second := shellPPID(t, w)
	assert.NotEqual(t, first, second)

	done := make(chan Result, 1)
	go func() {
		_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo $$ > pid; sleep 30"})
		done <- res
	}()
	pgid := readPid(t, w.path("pid"))
	require.NoError(t, syscall.Kill(w.env.Sandbox.ServerPid(), syscall.SIGKILL))
	select {
	case res := <-done:
		require.Error(t, res.Err)
		assert.Equal(t, ErrTypeExecutionFailed, res.ErrType)
		assert.Contains(t, res.Err.Error(), "spawn server died")
	case <-time.After(5 * time.Second):
		t.Fatal("the command outlived its server by 5s")
	}
	require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) == 0 }, time.Second, 5*time.Millisecond)

	// Still confined afterwards, by a new server or the per-command helper.
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo in > in.txt; echo out > " + w.outside + "/out.txt"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "Permission denied")
	assert.FileExists(t, w.path("in.txt"))
	assert.NoFileExists(t, filepath.Join(w.outside, "out.txt"))
}

// TestRunShellCommand_SpawnServerFallback: without the server (disabled,
// or failing to start after the session's budget) the per-command helper
// confines the command, started by the daemon itself.
func TestRunShellCommand_SpawnServerFallback(t *testing.T) {
	sandboxtest.Require(t)
	w := newWorkspace(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	p := &sandbox.Policy{Mode: sandbox.ModeRequired, Helper: exe, TempRoot: t.TempDir(), NoSpawnServer: true}
	w.env.Sandbox = p.NewSession(w.env.Roots)
	t.Cleanup(func() { w.env.Sandbox.Close() })
	assert.Equal(t, os.Getpid(), shellPPID(t, w), "the helper exec'd the shell in place")
	assert.Zero(t, w.env.Sandbox.ServerPid())
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo out > " + w.outside + "/out.txt"})
	assert.Contains(t, res.LLMContent, "Permission denied")
	assert.NoFileExists(t, filepath.Join(w.outside, "out.txt"))
}

// stateOf is a process's state letter from /proc (S, R, T, Z…).
func stateOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))[0]
}

// TestRunShellCommand_SpawnServerSignals: with signal scoping (Landlock ABI
// ≥ 6) a command cannot signal the spawn server that forked it, nor
// another command, nor the daemon; it still signals its own children.
func TestRunShellCommand_SpawnServerSignals(t *testing.T) {
	st := sandboxtest.Require(t)
	if !st.SignalScoping() {
		t.Skipf("Landlock ABI %d: signal scoping needs 6", st.ABI)
	}
	w := sandboxedWorkspace(t, sandbox.ModeRequired, "")
	first := shellPPID(t, w)

	// A running command, then another that tries to stop it.
	done := make(chan Result, 1)
	go func() {
		_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo $$ > a.pid; sleep 30", "timeout": 20000})
		done <- res
	}()
	other := readPid(t, w.path("a.pid"))
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": fmt.Sprintf(
		"kill -STOP $PPID || echo server-denied; kill -STOP %d || echo sibling-denied; kill -STOP %d || echo daemon-denied; "+
			"sleep 30 & kill $! && echo own-child-killed", other, os.Getpid())})
	require.NoError(t, res.Err)
	for _, want := range []string{"server-denied", "sibling-denied", "daemon-denied", "own-child-killed"} {
		assert.Contains(t, res.LLMContent, want)
	}
	assert.NotContains(t, []string{"T", "t", "gone", "Z"}, stateOf(t, first), "the server runs on")
	assert.NotContains(t, []string{"T", "t", "gone", "Z"}, stateOf(t, other), "the other command runs on")
	assert.Equal(t, first, w.env.Sandbox.ServerPid(), "the same server")
	require.NoError(t, syscall.Kill(-other, syscall.SIGKILL))
	<-done
}

// TestRunShellCommand_SpawnServerFrozen: a spawn server that stops
// answering — stopped by the command it runs (on a kernel without signal
// scoping, simulated), or from outside — is found within a second, killed
// and replaced; the command's output still reaches the caller and the next
// command runs.
func TestRunShellCommand_SpawnServerFrozen(t *testing.T) {
	sandboxtest.Require(t)
	t.Setenv(sandbox.ABIEnv, "5") // the server: no signal scoping
	w := sandboxedWorkspace(t, sandbox.ModeRequired, "")

	start := time.Now()
	first := shellPPID(t, w)
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo before; kill -STOP $PPID; echo after"})
	assert.Contains(t, res.LLMContent, "Output: before\n", "the output reaches the model")
	assert.Contains(t, res.LLMContent, "\nafter\n")
	if res.Err != nil {
		assert.ErrorIs(t, res.Err, sandbox.ErrServerFrozen)
		assert.Contains(t, res.LLMContent, "stopped answering")
	} else {
		// A stop takes effect when one of the server's threads gets to
		// it: on a busy machine the others may report the exit first.
		// Then the next command finds the server stopped, or stopping,
		// and runs on a new one.
		t.Log("the server reported the exit before it stopped")
	}
	_, res = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo second"})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "Output: second")
	assert.Less(t, time.Since(start), 5*time.Second)
	require.Eventually(t, func() bool { return stateOf(t, first) == "gone" || stateOf(t, first) == "Z" }, 2*time.Second, 10*time.Millisecond,
		"the stopped server was killed")

	// Stopped from outside under a long command: the command is killed
	// with it, within a second, not at its timeout.
	server := w.env.Sandbox.ServerPid()
	require.NotZero(t, server)
	done := make(chan Result, 1)
	go func() {
		_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo $$ > pid; echo started; sleep 30"})
		done <- res
	}()
	pgid := readPid(t, w.path("pid"))
	require.NoError(t, syscall.Kill(server, syscall.SIGSTOP))
	select {
	case res := <-done:
		assert.ErrorIs(t, res.Err, sandbox.ErrServerFrozen)
		assert.Contains(t, res.LLMContent, "started")
	case <-time.After(5 * time.Second):
		t.Fatal("the command waited on a stopped server for 5s")
	}
	require.Eventually(t, func() bool { return len(groupMembers(t, pgid)) == 0 }, time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return stateOf(t, server) == "gone" || stateOf(t, server) == "Z" }, 2*time.Second, 10*time.Millisecond, "killed")

	// Stopped between commands: the next command does not wait on it.
	_, res = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo third"})
	require.NoError(t, res.Err)
	third := w.env.Sandbox.ServerPid()
	require.NotZero(t, third)
	require.NoError(t, syscall.Kill(third, syscall.SIGSTOP))
	require.Eventually(t, func() bool { return stateOf(t, third) == "T" }, time.Second, time.Millisecond)
	start = time.Now()
	_, res = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "echo fourth > f.txt; echo out > " + w.outside + "/out.txt"})
	require.NoError(t, res.Err)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.FileExists(t, w.path("f.txt"))
	assert.Contains(t, res.LLMContent, "Permission denied", "still confined")
	assert.NotEqual(t, third, w.env.Sandbox.ServerPid())
}

// TestRunShellCommand_SpawnServerStoppedBetween: a server stopped after its
// command ended (here by a process that command left behind) is
// replaced for the next command, which runs on a new server as it would
// after the server died.
func TestRunShellCommand_SpawnServerStoppedBetween(t *testing.T) {
	sandboxtest.Require(t)
	t.Setenv(sandbox.ABIEnv, "5") // the server: no signal scoping
	w := sandboxedWorkspace(t, sandbox.ModeRequired, "")
	first := shellPPID(t, w)
	// The stopper leaves the command's group (which is killed when the
	// command ends) before the command ends, and stops the server when
	// the test says so (or just ends, when the test failed and its
	// folder is gone).
	stopper := "s=$PPID; setsid sh -c \"echo \\$\\$ > stopper.pid; while [ -e stopper.pid ] && [ ! -e go ]; do sleep 0.01; done; [ -e go ] && kill -STOP $s\" </dev/null >/dev/null 2>&1 &\n" +
		"while [ ! -s stopper.pid ]; do sleep 0.01; done"
	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": stopper})
	require.NoError(t, res.Err)
	require.NoError(t, os.WriteFile(w.path("go"), nil, 0o644))
	require.Eventually(t, func() bool { return stateOf(t, first) == "T" }, 10*time.Second, 5*time.Millisecond)

	second := shellPPID(t, w)
	assert.NotEqual(t, first, second)
	assert.Equal(t, w.env.Sandbox.ServerPid(), second, "the command ran on a new server")
	require.Eventually(t, func() bool { return stateOf(t, first) == "gone" || stateOf(t, first) == "Z" }, 10*time.Second, 10*time.Millisecond,
		"the stopped server was killed")
}
