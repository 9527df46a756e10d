package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// maxOutput bounds what is kept of a hook's stdout and of its stderr; the
// rest is read and dropped, so a chatty hook never blocks on its pipe.
const maxOutput = 1 << 20

// MaxContext bounds the text a hook adds for the model or shows the user
// (additionalContext, systemMessage, plain stdout), as Claude Code does.
const MaxContext = 10000

// Result is one hook's run.
type Result struct {
	Hook *Hook
	// Exit is the command's exit status; -1 when it could not start or
	// was killed.
	Exit           int
	Stdout, Stderr string
	// TimedOut: the hook ran past its timeout and was killed; its output
	// is dropped, as Claude Code does.
	TimedOut bool
	// Err says why the command could not run.
	Err      error
	Duration time.Duration
	// Output is stdout read as JSON, when it is a JSON object.
	Output *Output
}

// Output is a hook's JSON answer (Claude Code's fields).
type Output struct {
	// Continue false stops the session's processing (the turn ends with
	// StopReason shown to the user).
	Continue       *bool  `json:"continue,omitempty"`
	StopReason     string `json:"stopReason,omitempty"`
	SuppressOutput bool   `json:"suppressOutput,omitempty"`
	SystemMessage  string `json:"systemMessage,omitempty"`
	// Decision "block" (with Reason) blocks a prompt, a stop, a
	// compaction, or feeds a tool's result back; for PreToolUse the old
	// "approve" and "block" are allow and deny.
	Decision           string    `json:"decision,omitempty"`
	Reason             string    `json:"reason,omitempty"`
	HookSpecificOutput *Specific `json:"hookSpecificOutput,omitempty"`
}

// Specific is hookSpecificOutput.
type Specific struct {
	HookEventName            string          `json:"hookEventName,omitempty"`
	PermissionDecision       string          `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
	AdditionalContext        string          `json:"additionalContext,omitempty"`
}

// Env is what a hook's command runs with.
type Env struct {
	// Dir is the command's folder (the project's root).
	Dir string
	// Vars are added to acpd's environment (CLAUDE_PROJECT_DIR, …).
	Vars []string
}

// Run runs hooks with input on their stdin, all at once, each bounded by
// its timeout and by ctx; the results are in the order of hooks.
func Run(ctx context.Context, hooks []*Hook, input []byte, env Env) []Result {
	out := make([]Result, len(hooks))
	if len(hooks) == 1 {
		out[0] = runOne(ctx, hooks[0], input, env)
		return out
	}
	var wg sync.WaitGroup
	for i, h := range hooks {
		wg.Go(func() { out[i] = runOne(ctx, h, input, env) })
	}
	wg.Wait()
	return out
}

func runOne(ctx context.Context, h *Hook, input []byte, env Env) Result {
	r := Result{Hook: h, Exit: -1}
	ctx, cancel := context.WithTimeout(ctx, h.timeout())
	defer cancel()
	var cmd *exec.Cmd
	if runtime.GOOS == "windows" {
		cmd = exec.CommandContext(ctx, "cmd", "/C", h.Command)
	} else {
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", h.Command)
	}
	cmd.Dir = env.Dir
	cmd.Env = append(os.Environ(), env.Vars...)
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ownGroup(cmd)
	// A hook that leaves a child holding its output open still ends
	// here: its pipes are closed this long after it exits or is killed.
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	r.Duration = time.Since(start)
	if ctx.Err() == context.DeadlineExceeded {
		r.TimedOut = true
		return r
	}
	r.Stdout, r.Stderr = stdout.String(), stderr.String()
	var ee *exec.ExitError
	switch {
	case err == nil:
		r.Exit = 0
	case errors.As(err, &ee) && ee.Exited():
		r.Exit = ee.ExitCode()
	default:
		r.Err = err
	}
	if s := strings.TrimSpace(r.Stdout); strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		var o Output
		if json.Unmarshal([]byte(s), &o) == nil {
			r.Output = &o
		}
	}
	return r
}

// Text is a hook's plain stdout (not JSON), bounded: what SessionStart
// and UserPromptSubmit hooks add for the model.
func (r Result) Text() string {
	if r.Output != nil || r.Exit != 0 {
		return ""
	}
	return Bound(strings.TrimSpace(r.Stdout))
}

// Bound cuts text a hook gives to MaxContext characters.
func Bound(s string) string {
	if len(s) <= MaxContext {
		return s
	}
	cut := MaxContext
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "\n[… cut at 10000 characters]"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// capped keeps the first maxOutput bytes written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
