//go:build unix

package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func hook(event, matcher, command string, timeout time.Duration) *Hook {
	m, err := compileMatcher(matcher)
	if err != nil {
		panic(err)
	}
	return &Hook{Event: event, Matcher: matcher, Handler: Handler{Command: command, Timeout: timeout}, match: m}
}

func TestDecode_TOMLAndJSON(t *testing.T) {
	const tomlSrc = `
[[hooks.PreToolUse]]
matcher = "Bash"
hooks = [{ type = "command", command = "./check.sh", timeout = 30 }]

[[hooks.SessionStart]]
hooks = [{ type = "command", command = "echo hi" }]
`
	var raw map[string]any
	_, err := toml.Decode(tomlSrc, &raw)
	require.NoError(t, err)
	c, errs := Decode(raw["hooks"], Source{File: "a.toml"})
	require.Empty(t, errs)
	require.Len(t, c, 2)
	pre := c.Of(PreToolUse, "Bash", "run_shell_command")
	require.Len(t, pre, 1)
	assert.Equal(t, 30*time.Second, pre[0].Timeout)
	assert.Empty(t, c.Of(PreToolUse, "Read", "read_file"))
	assert.Len(t, c.Of(SessionStart, "startup"), 1)

	var js map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"hooks":{"PostToolUse":[{"matcher":"Edit|Write","hooks":[{"type":"command","command":"fmt","timeout":5}]}],
		"Nope":[], "PreToolUse":[{"matcher":"mcp__.*","hooks":[{"type":"command","command":"x"}]},{"matcher":"(","hooks":[]}]}}`), &js))
	c, errs = Decode(js["hooks"], Source{File: "s.json", Project: true})
	assert.Len(t, errs, 2, "an unknown event, a bad regular expression")
	assert.Len(t, c.Of(PostToolUse, "Write"), 1)
	assert.Len(t, c.Of(PreToolUse, "mcp__github__x"), 1)
	assert.Empty(t, c.Of(PreToolUse, "Bash"))

	_, err = DecodeEvent(PreToolUse, []any{map[string]any{"hooks": []any{map[string]any{"type": "http", "url": "x"}}}}, Source{})
	assert.ErrorContains(t, err, `type "command"`)
}

func TestRun_ExitCodesAndJSON(t *testing.T) {
	dir := t.TempDir()
	run := func(event, cmd string) Verdict {
		return Combine(event, Run(context.Background(), []*Hook{hook(event, "", cmd, 0)}, []byte(`{"tool_name":"Bash"}`), Env{Dir: dir}))
	}
	v := run(PreToolUse, `echo "no curl here" >&2; exit 2`)
	assert.True(t, v.Block)
	assert.Equal(t, "deny", v.Permission)
	assert.Equal(t, "no curl here", v.Reason)

	v = run(PreToolUse, `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"fine","updatedInput":{"command":"ls"}}}'`)
	assert.Equal(t, "allow", v.Permission)
	assert.JSONEq(t, `{"command":"ls"}`, string(v.UpdatedInput))
	assert.False(t, v.Block)

	v = run(PreToolUse, `exit 1`)
	assert.Empty(t, v.Permission)
	require.Len(t, v.Notes, 1)
	assert.Contains(t, v.Notes[0], "exit status 1")

	v = run(PreToolUse, `cat > in.json`)
	assert.Empty(t, v.Permission)
	in, err := os.ReadFile(filepath.Join(dir, "in.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"tool_name":"Bash"}`, string(in), "the input reached stdin, the command ran in Dir")

	v = run(UserPromptSubmit, `echo "the date is today"`)
	assert.Equal(t, "the date is today", v.Context)
	v = run(UserPromptSubmit, `echo '{"decision":"block","reason":"not that"}'`)
	assert.True(t, v.Block)
	assert.Equal(t, "not that", v.Reason)
	v = run(PostToolUse, `echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"lint: 2 warnings"},"systemMessage":"linted"}'`)
	assert.Equal(t, "lint: 2 warnings", v.Context)
	assert.Equal(t, []string{"linted"}, v.Messages)
	v = run(Stop, `echo '{"continue":false,"stopReason":"enough"}'`)
	assert.True(t, v.Stop)
	assert.Equal(t, "enough", v.StopReason)
}

// A hook that hangs is killed at its timeout with everything it started,
// and the others' answers stand.
func TestRun_TimeoutKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	hang := hook(PreToolUse, "", "sleep 300 & echo $! > child.pid; wait", 300*time.Millisecond)
	ok := hook(PreToolUse, "", `echo '{"hookSpecificOutput":{"permissionDecision":"allow"}}'`, 0)
	rs := Run(context.Background(), []*Hook{hang, ok}, nil, Env{Dir: dir})
	assert.True(t, rs[0].TimedOut)
	v := Combine(PreToolUse, rs)
	assert.Equal(t, "allow", v.Permission)
	require.Len(t, v.Notes, 1)
	assert.Contains(t, v.Notes[0], "timed out")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	var pid int
	_, err = fmt.Sscan(strings.TrimSpace(string(data)), &pid)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 5*time.Second, 20*time.Millisecond,
		"the hook's child is gone with it")
}

// The hooks of one event run at once: each of these waits for the other
// to have started, which hooks run one after the other never would.
func TestRun_Parallel(t *testing.T) {
	dir := t.TempDir()
	a := hook(Stop, "", "touch a; while [ ! -e b ]; do sleep 0.01; done; echo A", 10*time.Second)
	b := hook(Stop, "", "touch b; while [ ! -e a ]; do sleep 0.01; done; echo B", 10*time.Second)
	rs := Run(context.Background(), []*Hook{a, b}, nil, Env{Dir: dir})
	assert.Equal(t, "A\n", rs[0].Stdout)
	assert.Equal(t, "B\n", rs[1].Stdout)
	assert.False(t, rs[0].TimedOut || rs[1].TimedOut)
}

func TestOf_Dedupes(t *testing.T) {
	c := Config{hook(PreToolUse, "Bash", "x", 0), hook(PreToolUse, "*", "x", 0), hook(PreToolUse, "", "y", 0)}
	assert.Len(t, c.Of(PreToolUse, "Bash"), 2)
	assert.Len(t, c.Of(PreToolUse, "Read"), 2)
}

func TestBound(t *testing.T) {
	long := strings.Repeat("é", MaxContext)
	b := Bound(long)
	assert.Less(t, len(b), len(long))
	assert.True(t, strings.HasSuffix(b, "cut at 10000 characters]"))
}
