package sandbox_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox"
)

// TestScrubEnviron: a process's /proc/PID/environ, which other processes of
// the user can read, loses the values of the variables acpd drops — the
// built-in ones at package initialization, configured ones on request —
// while the process itself still reads them.
func TestScrubEnviron(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	if os.Getenv("ACPD_TEST_SCRUB_CHILD") == "1" {
		// A variable unset in Go's copy is still in the kernel's.
		_ = os.Unsetenv("UNSET_ACCESS")
		sandbox.ScrubEnviron(sandbox.EnvPolicy{Drop: []string{"LLM_ACCESS", "UNSET_ACCESS"}})
		b, err := os.ReadFile("/proc/self/environ")
		if err != nil {
			fmt.Println("read-failed")
		}
		fmt.Printf("environ=%q\ngetenv=%s,%s,%s\n", b, os.Getenv("OPENAI_API_KEY"), os.Getenv("LLM_ACCESS"), os.Getenv("KEEP_ME"))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestScrubEnviron$", "-test.v")
	cmd.Env = append(os.Environ(), "ACPD_TEST_SCRUB_CHILD=1", "OPENAI_API_KEY=sk-scrub-secret", "LLM_ACCESS=llm-scrub-secret", "KEEP_ME=visible", "UNSET_ACCESS=unset-scrub-secret")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	environ, _, _ := bytes.Cut(out[bytes.Index(out, []byte("environ=")):], []byte("\n"))
	assert.NotContains(t, string(environ), "sk-scrub-secret")
	assert.NotContains(t, string(environ), "llm-scrub-secret")
	assert.NotContains(t, string(environ), "unset-scrub-secret")
	assert.Contains(t, string(environ), `OPENAI_API_KEY=\x00`)
	assert.Contains(t, string(environ), "KEEP_ME=visible")
	assert.Contains(t, string(out), "getenv=sk-scrub-secret,llm-scrub-secret,visible", "the process itself still has them")
}
