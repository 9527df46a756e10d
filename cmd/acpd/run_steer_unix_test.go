//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/headless"
)

// TestRunCmd_StreamJSONSteerCancelled: a steer the turn took but had not
// delivered when SIGINT cancelled it is never delivered, and the json
// result lists it with its content. The input is a FIFO given as stdin.
func TestRunCmd_StreamJSONSteerCancelled(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"id":"w1","name":"run_shell_command","arguments":`+waitForFile+`}]}
{"text":"never reached"}`)
	fifo := filepath.Join(e.dir, "steer.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// O_RDWR: opening the read end does not wait for a writer, and the
	// child's stdin never sees EOF before the test's writer is open.
	rd, err := os.OpenFile(fifo, os.O_RDWR, 0)
	require.NoError(t, err)
	defer rd.Close()
	r := startSteerRun(t, e, rd, e.scripted(script, "--yolo", "--input-format", "stream-json", "--output-format", "stream-json")...)
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer w.Close()
	r.stdin = w
	r.write(t, `{"type":"user","content":"wait for go"}`)
	r.waitOut(t, `"sessionUpdate":"tool_call"`)
	r.write(t, `{"type":"user","content":"never read by the model"}`)
	r.waitOut(t, `"outcome":"injected"`)
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 130, r.wait(t), "stderr:\n%s", r.stderr.String())
	res := decodeSteerResult(t, r.got[len(r.got)-1])
	assert.Equal(t, "cancelled", res.StopReason)
	require.Len(t, res.Undelivered, 1)
	u := res.Undelivered[0]
	assert.Equal(t, 2, u.Line)
	assert.Equal(t, headless.UndeliveredTurnEnded, u.Reason)
	assert.NotEmpty(t, u.MessageID)
	require.Len(t, u.Prompt, 1)
	assert.Equal(t, "never read by the model", u.Prompt[0].Text)
	for _, l := range r.got {
		assert.NotContains(t, l, `"user_message_chunk"`, "the steer was never delivered")
	}
}
