package session_test

import (
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
)

// TestE2E_Robustness runs the wire-level robustness suite (malformed,
// truncated, oversized and batch lines, odd ids, unknown methods, wrong
// param types, 10,000 unread requests) against the built binary over its
// real stdin/stdout; after each case a following initialize must succeed.
func TestE2E_Robustness(t *testing.T) {
	acptest.RunRobustness(t, func(t *testing.T) (io.WriteCloser, io.Reader) {
		cmd := exec.Command(acpdBin, "--config", os.DevNull, "--provider", "openai",
			"--base-url", "http://127.0.0.1:9/v1", "--model", "none", "--data-dir", t.TempDir(), "--log-level", "error")
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = &testLog{t: t}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = stdin.Close()
			_ = cmd.Wait()
		})
		return stdin, stdout
	})
}
