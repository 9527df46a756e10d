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
// `./acpd run --data-dir "$(mktemp -d)"`: a real turn offline with the
// scripted model kept in testdata.
var demoArgs = []string{"--provider", "script", "--model-script", "cmd/acpd/testdata/demo.jsonl",
	"--model", "demo", "--max-tool-calls-per-turn", "4", "Show me where the loop guard lives"}

// TestReadmeFirstCommand keeps the README's first command honest: it is the
// first line of the first fenced block; its acpd command, run as written by
// bash from the repository root, runs real tools, is stopped by loop
// protection (exit 3) with the message the README shows, and leaves
// nothing in the user's own data folder.
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
	const build = "go build -o acpd ./cmd/acpd && "
	demo := `./acpd run --data-dir "$(mktemp -d)" ` + strings.Join(quoted, " ")
	require.Contains(t, first, build+demo)
	assert.Contains(t, first, "; test $? -eq 3")

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// The README's command as bash runs it, the built binary for ./acpd.
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", `"$ACPD" `+strings.TrimPrefix(demo, "./acpd "))
	cmd.Dir = root
	home, state := filepath.Join(dir, "home"), filepath.Join(dir, "state")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "ACPD=" + bin, "TMPDIR=" + filepath.Join(dir, "tmp"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + state}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tmp"), 0o755))
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
	msg := "acpd run: loop protection stopped the turn (turn_tool_call_cap: explicit cap of 4; 6 tool calls with the stopped batch): Tool-call loop protection stopped this turn."
	assert.Contains(t, stderr.String(), msg)
	assert.Contains(t, string(readme), msg+" …", "the README shows the line")
	assert.Regexp(t, `acpd run: session \w+; continue it with: acpd run --session \w+ --data-dir \S+/tmp/tmp\.\w+ PROMPT\n$`, stderr.String())
	assert.NoDirExists(t, filepath.Join(state, "acpd"), "the demo's session is not in the user's history")
}
