package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
)

// demoArgs are the arguments of the README's first set-up command after
// `./acpd`: a real turn offline with the scripted model kept in testdata.
var demoArgs = []string{"run", "--provider", "script", "--model-script", "cmd/acpd/testdata/demo.jsonl",
	"--model", "demo", "--max-tool-calls-per-turn", "4", "Show me where the loop guard lives"}

// TestReadmeFirstCommand keeps the README's first command honest: it is the
// first line of the first fenced block, it runs demoArgs from the
// repository root, and that turn runs real tools and is stopped by loop
// protection (exit 3), as the README says.
func TestReadmeFirstCommand(t *testing.T) {
	bin := acpdBinary(t)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(readme), "```sh\n")
	require.True(t, ok, "README has no sh block")
	first, _, _ := strings.Cut(after, "\n")
	quoted := make([]string, len(demoArgs))
	for i, a := range demoArgs {
		quoted[i] = a
		if strings.Contains(a, " ") {
			quoted[i] = `"` + a + `"`
		}
	}
	assert.Contains(t, first, "go build -o acpd ./cmd/acpd && ./acpd "+strings.Join(quoted, " "))
	assert.Contains(t, first, "test $? -eq 3")

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, demoArgs...)
	cmd.Dir = root
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state")}
	var stdout, stderr acptest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "want exit status 3, got %v; stderr:\n%s", err, stderr.String())
	assert.Equal(t, 3, ee.ExitCode(), stderr.String())

	assert.Contains(t, stdout.String(), "Let me look around this repository.")
	assert.NotContains(t, stdout.String(), "never reached")
	want := "[tool] Glob '**/README.md' in . … completed\n" +
		strings.Repeat("[tool] grep 'func ShouldHaltOnTurnToolCallCap' in . … completed\n", 3) +
		strings.Repeat("[tool] grep_search … failed\n", 2)
	assert.Contains(t, stderr.String(), want)
	assert.Contains(t, stderr.String(), "loop protection stopped the turn (turn_tool_call_cap; explicit cap, 6 tool calls)")
}
