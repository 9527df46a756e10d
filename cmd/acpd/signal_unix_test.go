//go:build unix

package main

import (
	"bufio"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
)

// TestServe_SignalsAfterFirstAnswer drives the built binary as an editor
// would. Once initialize is answered, SIGTERM and SIGINT shut acpd down
// cleanly (exit 0, "acpd stopped", the signal logged as the reason).
// Before any answer they keep their default action: the process ends by
// the signal, with no session to lose.
func TestServe_SignalsAfterFirstAnswer(t *testing.T) {
	t.Parallel()
	bin := acpdBinary(t)
	start := func(t *testing.T) (*exec.Cmd, io.WriteCloser, *bufio.Reader, *acptest.SyncBuffer) {
		sb := newSandbox(t)
		cmd := exec.CommandContext(t.Context(), bin)
		for k, v := range sb.env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		stderr := &acptest.SyncBuffer{}
		cmd.Stderr = stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, stdin, bufio.NewReader(stdout), stderr
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run("answered/"+sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd, stdin, stdout, stderr := start(t)
			_, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
			require.NoError(t, err)
			line, err := stdout.ReadString('\n')
			require.NoError(t, err)
			require.Contains(t, line, `"protocolVersion":1`)
			// The handlers are installed right after that answer is
			// written, on the goroutine that reads stdin (the first
			// initialize is answered there), so the next request is read
			// only once they are: its answer says they are in place.
			_, err = io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"no/such/method","params":{}}`+"\n")
			require.NoError(t, err)
			line, err = stdout.ReadString('\n')
			require.NoError(t, err)
			require.Contains(t, line, `"id":2`)
			require.NoError(t, cmd.Process.Signal(sig))
			var state error
			waited := make(chan struct{})
			go func() { state = cmd.Wait(); close(waited) }()
			select {
			case <-waited:
			case <-time.After(20 * time.Second):
				t.Fatalf("acpd did not stop on %v; stderr:\n%s", sig, stderr.String())
			}
			require.NoError(t, state, "stderr:\n%s", stderr.String())
			assert.Contains(t, stderr.String(), `"acpd stopped"`)
			assert.Contains(t, stderr.String(), "signal received")
		})
	}
	t.Run("before any answer", func(t *testing.T) {
		t.Parallel()
		cmd, _, _, stderr := start(t)
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(stderr.String(), "serving ACP on stdio") {
			require.True(t, time.Now().Before(deadline), "acpd did not start; stderr:\n%s", stderr.String())
			time.Sleep(10 * time.Millisecond)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		err := cmd.Wait()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "want an exit by the signal, got %v; stderr:\n%s", err, stderr.String())
		ws, ok := exit.Sys().(syscall.WaitStatus)
		require.True(t, ok)
		assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGTERM, "wait status %v", ws)
		assert.NotContains(t, stderr.String(), `"acpd stopped"`)
	})
}
