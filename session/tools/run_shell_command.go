package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/shellline"
	"github.com/acpd/acpd/session/tools/confine"
	"github.com/acpd/acpd/session/tools/lifeline"
	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/netproxy"
)

const (
	// DefaultShellTimeout bounds a command when neither the call nor Env gives a timeout.
	DefaultShellTimeout = 2 * time.Minute
	// releaseTimeout bounds terminal/kill and terminal/release, which must run
	// even after the turn was cancelled.
	releaseTimeout = 5 * time.Second
	// pipeDrainTimeout is how long the local runner waits for output from a
	// process that escaped the killed group (setsid) before giving up on it.
	pipeDrainTimeout = time.Second
	// helperStartTimeout bounds the per-command helper's set-up: it execs
	// the shell or reports why not within milliseconds.
	helperStartTimeout = 10 * time.Second
)

var runShellCommandSpec = mustSpec("run_shell_command", acp.KindExecute,
	"Executes a given shell command as `sh -c <command>`. Command can start background processes using `&`; they are "+
		"killed when the command finishes. The following information is returned: Command, Directory, Output (stdout "+
		"and stderr interleaved), Exit Code, Signal.",
	`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "Exact shell command to execute as sh -c <command>"},
    "description": {"type": "string", "description": "Brief description of the command for the user. Be specific and concise. Ideally a single sentence."},
    "directory": {"type": "string", "description": "(OPTIONAL) The absolute path of the directory to run the command in. If not provided, the project root directory is used. Must be a directory within the workspace and must already exist."},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 600000, "description": "Optional timeout in milliseconds (max 600000)."}
  },
  "required": ["command"]
}`)

type runShellCommandTool struct{ toolSpec }

type runShellCommandArgs struct {
	Command     string   `json:"command"`
	Description string   `json:"description"`
	Directory   string   `json:"directory"`
	Timeout     *float64 `json:"timeout"`
}

func (t *runShellCommandTool) Build(env *Env, args json.RawMessage) (Call, error) {
	var a runShellCommandArgs
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	switch {
	case strings.TrimSpace(a.Command) == "":
		return nil, errors.New("invalid parameters for run_shell_command: params/command: must not be empty")
	case strings.ContainsRune(a.Command, 0):
		return nil, errors.New("invalid parameters for run_shell_command: params/command: contains a NUL byte")
	}
	var (
		dir confine.Target
		err error
	)
	if a.Directory != "" {
		dir, err = env.confine("directory", a.Directory)
	} else {
		dir, err = env.confineDir("")
	}
	if err != nil {
		return nil, err
	}
	if !dir.IsDir() {
		return nil, fmt.Errorf("invalid parameters for run_shell_command: params/directory: %s is not an existing directory", dir.Path())
	}
	c := &runShellCommandCall{command: a.Command, description: a.Description, dir: dir, explicitDir: a.Directory != ""}
	if a.Timeout != nil {
		c.timeout = time.Duration(*a.Timeout * float64(time.Millisecond))
	}
	return c, nil
}

type runShellCommandCall struct {
	command     string
	description string
	dir         confine.Target
	explicitDir bool
	timeout     time.Duration // 0: Env.ShellTimeout or DefaultShellTimeout
}

func (c *runShellCommandCall) Title() string {
	if c.explicitDir {
		return c.command + " [in " + c.dir.Path() + "]"
	}
	return c.command
}

func (c *runShellCommandCall) Locations() []acp.ToolCallLocation { return nil }

func (c *runShellCommandCall) Confirmation() Confirmation {
	content := c.command
	if c.description != "" {
		content += "\n\n" + c.description
	}
	line := shellline.Parse(c.command)
	label, ok := line.AlwaysLabel()
	return Confirmation{
		Kind:     ConfirmExec,
		Label:    label,
		NoAlways: !ok,
		Content:  []acp.ToolCallContent{acp.TextContent(content)},
		Shell:    line.Class(),
		Command:  &line,
		Paths:    []string{c.dir.Real()},
	}
}

func (c *runShellCommandCall) effectiveTimeout(env *Env) time.Duration {
	switch {
	case c.timeout > 0:
		return c.timeout
	case env.ShellTimeout > 0:
		return env.ShellTimeout
	}
	return DefaultShellTimeout
}

func (c *runShellCommandCall) Execute(ctx context.Context, env *Env) Result {
	if err := env.roots().Recheck(c.dir, "directory"); err != nil {
		return failure(ErrTypePathNotInWorkspace, err)
	}
	if env.Client != nil && env.Caps.Terminal && !env.Sandbox.Proxied() {
		// The editor spawned acpd on its own machine, so its terminal can
		// run acpd's helper too: the command is confined the same way.
		// Not in proxy mode: the proxy's namespace needs a command acpd
		// starts itself.
		return c.sandboxed(ctx, env, []string{"sh", "-c", c.command}, -1, func(p sandbox.Plan) (Result, string) {
			return c.runTerminal(ctx, env, p)
		})
	}
	return c.sandboxed(ctx, env, []string{"/bin/sh", "-c", c.command}, helperStatusFD, func(p sandbox.Plan) (Result, string) {
		return c.runLocal(ctx, env, p)
	})
}

// helperStatusFD is where the local runner's helper reports a failed set-up:
// the first of cmd.ExtraFiles.
const helperStatusFD = 3

// sandboxed runs argv through run as env.Sandbox decides: confined by the
// helper, or unconfined (mode off; mode auto on a kernel that cannot
// confine, with one warning), or not at all (mode required, with the
// reason). run returns the helper's set-up failure report, if any, instead
// of a result: the command did not run, and it is not run unconfined
// instead — whether commands may run unconfined was decided from the
// kernel before any ran (Wrap), never from how one ran.
func (c *runShellCommandCall) sandboxed(ctx context.Context, env *Env, argv []string, statusFD int, run func(sandbox.Plan) (Result, string)) Result {
	plan, err := env.Sandbox.Wrap(argv, statusFD)
	if err != nil {
		if errors.Is(err, sandbox.ErrRefused) {
			env.notify(notice.SandboxFailed, err.Error())
		}
		return c.refused(err)
	}
	var questions *proxyQuestions
	if plan.Proxy {
		questions = &proxyQuestions{ctx: ctx, env: env, command: c.command}
		defer env.Sandbox.Running(questions.asker())()
	}
	res, setupErr := run(plan)
	if setupErr != "" {
		err := sandbox.SetupError(setupErr)
		env.notify(notice.SandboxFailed, err.Error())
		return c.refused(err)
	}
	if plan.Warning != "" {
		env.notify(notice.SandboxUnconfined, strings.Trim(plan.Warning, "[]"))
		res.LLMContent = plan.Warning + "\n" + res.LLMContent
		res.Content = append([]acp.ToolCallContent{acp.TextContent(plan.Warning)}, res.Content...)
	}
	if plan.Confined && ran(res) && sandbox.LooksRefused(outputOf(res.LLMContent)) {
		// Whatever the exit status: `cmd; true` or a background job hides
		// the failure from it, not from the output.
		note := plan.Explain()
		res.LLMContent += note + "\n"
		res.Content = append(res.Content, acp.TextContent(note))
	}
	if note := questions.note(); note != "" {
		// A client's error ("CONNECT tunnel failed, response 403") does
		// not say why; this does, and what the model can do.
		res.LLMContent += note + "\n"
		res.Content = append(res.Content, acp.TextContent(note))
	}
	return res
}

// proxyQuestions is a proxied command's part in the proxy's decisions: it
// asks the user, through the call, about a host nothing allowed, and keeps
// what was refused for the result.
type proxyQuestions struct {
	ctx     context.Context // the call's: a question ends with it
	env     *Env
	command string

	mu      sync.Mutex
	refused []string
}

func (q *proxyQuestions) asker() *sandbox.NetworkAsker {
	return &sandbox.NetworkAsker{Ask: q.ask, Refused: q.refuse}
}

// ask asks about target (host:port) while the command runs; the answer's
// "always" covers the host for the session.
func (q *proxyQuestions) ask(ctx context.Context, target string) (bool, error) {
	if q.env.Permit == nil {
		return false, errors.New("nobody can be asked")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(q.ctx, cancel)
	defer stop()
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	text := fmt.Sprintf("The command `%s` wants to reach %s through acpd's proxy; it is not in tools.sandboxAllowedDomains.", display.Line(q.command), target)
	return q.env.Permit(ctx, Confirmation{Kind: ConfirmNetwork, Label: host, Content: []acp.ToolCallContent{acp.TextContent(text)}})
}

func (q *proxyQuestions) refuse(target, why string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	line := target + ": " + why
	if len(q.refused) < 20 && !slices.Contains(q.refused, line) {
		q.refused = append(q.refused, line)
	}
}

// note is what the model reads about the refusals ("" for none).
func (q *proxyQuestions) note() string {
	if q == nil {
		return ""
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.refused) == 0 {
		return ""
	}
	return "[sandbox: acpd's proxy refused network access: " + strings.Join(q.refused, "; ") + ". " + netproxy.Advice + "]"
}

// refused is the result of a command the sandbox policy did not let run.
func (c *runShellCommandCall) refused(err error) Result {
	r := failure(ErrTypeSandboxUnavailable, err)
	r.LLMContent = fmt.Sprintf("Command: %s\nDirectory: %s\nError: %v\n", c.command, c.dir.Path(), err)
	return r
}

// ran reports whether the command ran to an exit status or a signal.
func ran(r Result) bool {
	m, ok := r.RawOutput.(map[string]any)
	if !ok {
		return false
	}
	code, _ := m["exitCode"].(*int)
	sig, _ := m["signal"].(string)
	return code != nil || sig != ""
}

// outputOf is the command's output part of a result text, so a command
// that merely mentions "Permission denied" is not taken for a refusal.
func outputOf(llm string) string {
	if _, out, ok := strings.Cut(llm, "\nOutput: "); ok {
		return out
	}
	return ""
}

// shellOutcome is what either runner observed.
type shellOutcome struct {
	output    string
	cut       int // bytes of output dropped (oldest first)
	exitCode  *int
	signal    string
	timedOut  bool
	cancelled bool
}

func (c *runShellCommandCall) result(env *Env, o shellOutcome, content []acp.ToolCallContent) Result {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: %s\nDirectory: %s\n", c.command, c.dir.Path())
	out := o.output
	if o.cut > 0 {
		out = fmt.Sprintf("[output truncated: first %d bytes omitted]\n", o.cut) + out
	}
	if strings.TrimSpace(out) == "" {
		out = "(empty)"
	}
	fmt.Fprintf(&b, "Output: %s\n", strings.TrimRight(out, "\n"))
	if o.exitCode != nil {
		fmt.Fprintf(&b, "Exit Code: %d\n", *o.exitCode)
	}
	if o.signal != "" {
		fmt.Fprintf(&b, "Signal: %s\n", o.signal)
	}
	r := Result{LLMContent: b.String(), Content: content, RawOutput: map[string]any{"exitCode": o.exitCode, "signal": o.signal}}
	switch {
	case o.cancelled:
		r.Err = fmt.Errorf("command was cancelled before it completed: %w", context.Canceled)
		r.ErrType = ErrTypeCancelled
		r.LLMContent = "Command was cancelled by the user before it could complete.\n" + r.LLMContent
	case o.timedOut:
		r.Err = fmt.Errorf("command timed out after %s", c.effectiveTimeout(env))
		r.ErrType = ErrTypeTimeout
		r.LLMContent = fmt.Sprintf("Command timed out after %s and was killed.\n", c.effectiveTimeout(env)) + r.LLMContent
	}
	return r
}

// runLocal runs the command in its own process group; on cancel or timeout
// the whole group is killed, and so is whatever is left of it afterwards.
// A confined command is started by the session's spawn server when it has
// one (see sandbox.Session.Spawn), otherwise as the sandbox helper, which
// execs the shell in place (same pid and group); the helper's set-up
// failure, read from the status pipe, is returned instead of a result.
func (c *runShellCommandCall) runLocal(ctx context.Context, env *Env, plan sandbox.Plan) (Result, string) {
	rctx, cancel := context.WithTimeout(ctx, c.effectiveTimeout(env))
	defer cancel()
	environ := append(absolutePATH(env.Sandbox.CommandEnv(os.Environ())), "PAGER=cat", "GIT_PAGER=cat")
	environ = append(environ, plan.Env...)
	if env.Unasked {
		environ = append(withoutGitConfig(environ), readOnlyGitEnv()...)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return failure(ErrTypeExecutionFailed, fmt.Errorf("creating output pipe: %w", err)), ""
	}
	defer pr.Close()
	if plan.Confined {
		if res, ok := c.runSpawned(ctx, rctx, env, plan, environ, pr, pw); ok {
			return res, ""
		}
	}
	cmd := exec.CommandContext(rctx, plan.Argv[0], plan.Argv[1:]...)
	cmd.Dir = c.dir.Real()
	cmd.Env = environ
	ownGroup(cmd)
	plan.Prepare(cmd)
	// The child writes straight into the pipe, so Wait returns when the
	// shell exits and does not wait for background children holding it.
	cmd.Stdout, cmd.Stderr = pw, pw
	var sr, sw *os.File
	if plan.Confined {
		if sr, sw, err = os.Pipe(); err != nil {
			pw.Close()
			return failure(ErrTypeExecutionFailed, fmt.Errorf("creating status pipe: %w", err)), ""
		}
		defer sr.Close()
		cmd.ExtraFiles = []*os.File{sw} // helperStatusFD
	}
	if err := cmd.Start(); err != nil {
		pw.Close()
		if sw != nil {
			sw.Close()
			// The helper itself did not start (acpd's binary replaced or
			// removed): a set-up failure, for the fallback to decide.
			return Result{}, fmt.Sprintf("starting the sandbox helper %s: %v", plan.Argv[0], err)
		}
		return failure(ErrTypeExecutionFailed, fmt.Errorf("starting %q: %w", c.command, err)), ""
	}
	pw.Close()
	pgid := cmd.Process.Pid
	// Killed with acpd, should acpd be killed before it kills the group;
	// taken off the watcher's list after finishLocal killed what was left.
	defer lifeline.Watch(pgid)()
	if sw != nil {
		sw.Close()
		// EOF with nothing read: the helper exec'd the shell, confined.
		// Anything else is why it did not. A helper that neither execs
		// nor fails (stopped before it got there) is killed at the
		// deadline, or with the command's context, which also ends it.
		_ = sr.SetReadDeadline(time.Now().Add(helperStartTimeout))
		msg, rerr := io.ReadAll(io.LimitReader(sr, 4096))
		if len(msg) == 0 && errors.Is(rerr, os.ErrDeadlineExceeded) {
			msg = []byte(fmt.Sprintf("the sandbox helper neither started the command nor reported a failure within %s", helperStartTimeout))
		}
		if len(msg) > 0 {
			killGroup(pgid)
			_ = cmd.Wait()
			return Result{}, string(msg)
		}
	}
	out, drained := drain(env, pr)
	werr := cmd.Wait()
	var ws *syscall.WaitStatus
	if cmd.ProcessState != nil {
		if s, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			ws = &s
		}
	}
	if werr != nil && ws != nil {
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			werr = nil // the status says it
		}
	}
	return c.finishLocal(ctx, rctx, env, pgid, pr, out, drained, ws, werr), ""
}

// runSpawned runs a confined command through the session's spawn server;
// ok is false when the server could not start it, and then nothing ran.
func (c *runShellCommandCall) runSpawned(ctx, rctx context.Context, env *Env, plan sandbox.Plan, environ []string, pr, pw *os.File) (Result, bool) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return Result{}, false
	}
	proc, err := env.Sandbox.Spawn(rctx, plan, environ, c.dir.Real(), [3]*os.File{devnull, pw, pw})
	devnull.Close()
	if sandbox.NothingStarted(err) {
		slog.Debug("spawn server not used", "session_id", env.SessionID, "err", err)
		return Result{}, false
	}
	pw.Close()
	out, drained := drain(env, pr)
	if err != nil {
		// Sent to a server that then died or stopped answering before it
		// told the pid (Spawn killed what it had started), or cancelled:
		// the command is not run again, and what it printed is kept.
		return c.finishLocal(ctx, rctx, env, 0, pr, out, drained, nil, err), true
	}
	pgid := proc.Pid
	stop := context.AfterFunc(rctx, func() { killGroup(pgid) })
	defer stop()
	s, werr := proc.Wait(rctx)
	var ws *syscall.WaitStatus
	if werr == nil {
		ws = &s
	}
	return c.finishLocal(ctx, rctx, env, pgid, pr, out, drained, ws, werr), true
}

// drain copies the command's output pipe into a tail buffer until EOF.
func drain(env *Env, pr *os.File) (*tailBuffer, chan struct{}) {
	out := newTailBuffer(maxOutput(env))
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(out, pr)
	}()
	return out, drained
}

// finishLocal kills what is left of the command's group (pgid; 0: not
// known), collects its output and makes the result from its wait status ws
// (nil: werr says why there is none).
func (c *runShellCommandCall) finishLocal(ctx, rctx context.Context, env *Env, pgid int, pr *os.File, out *tailBuffer, drained chan struct{}, ws *syscall.WaitStatus, werr error) Result {
	if pgid > 0 { // 0 would be the daemon's own group
		killGroup(pgid)
	}
	timer := time.NewTimer(pipeDrainTimeout)
	select {
	case <-drained:
		timer.Stop()
	case <-timer.C:
		pr.Close() // a process outside the group still holds the pipe
		<-drained
	}
	o := shellOutcome{output: out.String(), cut: out.dropped()}
	switch {
	case ctx.Err() != nil:
		o.cancelled = true
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		o.timedOut = true
	case errors.Is(werr, sandbox.ErrServerFrozen):
		// The output so far still reaches the model, with what happened.
		r := c.result(env, o, []acp.ToolCallContent{acp.TextContent(o.output)})
		r.Err, r.ErrType = fmt.Errorf("running %q: %w", c.command, werr), ErrTypeExecutionFailed
		r.LLMContent += "Error: " + werr.Error() + "\n"
		return r
	case werr != nil || ws == nil:
		return failure(ErrTypeExecutionFailed, fmt.Errorf("running %q: %w", c.command, werr))
	case ws.Signaled():
		o.signal = ws.Signal().String()
	default:
		code := ws.ExitStatus()
		o.exitCode = &code
	}
	text := o.output
	if o.cut > 0 {
		text = fmt.Sprintf("[… %d earlier bytes omitted]\n", o.cut) + text
	}
	if o.exitCode != nil && *o.exitCode != 0 {
		text += fmt.Sprintf("\n[exit code %d]", *o.exitCode)
	}
	return c.result(env, o, []acp.ToolCallContent{acp.TextContent(text)})
}

// runTerminal runs plan in the editor's terminal. There is no status pipe
// there: the helper writes a set-up failure to the plan's status file, in a
// folder the confined command cannot write, and that report is returned
// instead of the result. What the command prints and its exit status are
// only ever its own result.
func (c *runShellCommandCall) runTerminal(ctx context.Context, env *Env, plan sandbox.Plan) (Result, string) {
	res := c.runInTerminal(ctx, env, plan)
	if msg, ok := plan.SetupFailure(); ok {
		return res, msg
	}
	return res, ""
}

// runInTerminal runs the command in the editor's terminal: create, embed,
// wait (kill on timeout), output, and always release.
func (c *runShellCommandCall) runInTerminal(ctx context.Context, env *Env, plan sandbox.Plan) Result {
	limit := uint64(maxOutput(env))
	if ctx.Err() != nil {
		return c.result(env, shellOutcome{cancelled: true}, nil)
	}
	// terminal/create is not cancelled with the turn: an editor that has
	// already made the terminal would answer after we gave up, and we would
	// never learn its id to release it. Creation is quick; a cancel that
	// arrives meanwhile is honoured right after it, with a release.
	detached := context.WithoutCancel(ctx)
	cctx, ccancel := context.WithTimeout(detached, releaseTimeout)
	created, err := env.Client.CreateTerminal(cctx, &acp.CreateTerminalRequest{
		SessionID:       env.SessionID,
		Command:         plan.Argv[0],
		Args:            plan.Argv[1:],
		Env:             envVars(terminalEnv(plan, env.Sandbox.DroppedEnv(os.Environ()), env.Unasked)),
		Cwd:             c.dir.Path(),
		OutputByteLimit: &limit,
	})
	ccancel()
	if err != nil {
		if ctx.Err() != nil {
			return c.result(env, shellOutcome{cancelled: true}, nil)
		}
		return failure(ErrTypeExecutionFailed, fmt.Errorf("terminal/create: %w", err))
	}
	req := &acp.TerminalRequest{SessionID: env.SessionID, TerminalID: created.TerminalID}
	var releaseOnce sync.Once
	release := func() {
		releaseOnce.Do(func() {
			rctx, cancel := context.WithTimeout(detached, releaseTimeout)
			defer cancel()
			if err := env.Client.ReleaseTerminal(rctx, req); err != nil {
				slog.Warn("terminal release failed", "session_id", env.SessionID, "terminal_id", req.TerminalID, "err", err)
			}
		})
	}
	defer release()
	content := []acp.ToolCallContent{acp.TerminalContent(created.TerminalID)}
	if env.Update != nil {
		if err := env.Update(ctx, acp.ToolCallUpdate{Status: acp.StatusInProgress, Content: content}); err != nil {
			slog.Debug("embedding terminal failed", "session_id", env.SessionID, "err", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, c.effectiveTimeout(env))
	status, werr := env.Client.WaitForTerminalExit(wctx, req)
	cancel()
	var o shellOutcome
	switch {
	case ctx.Err() != nil:
		o.cancelled = true
		release()
		return c.result(env, o, content)
	case werr != nil && errors.Is(wctx.Err(), context.DeadlineExceeded):
		o.timedOut = true
		kctx, kcancel := context.WithTimeout(detached, releaseTimeout)
		if err := env.Client.KillTerminal(kctx, req); err != nil {
			slog.Warn("terminal kill failed", "session_id", env.SessionID, "terminal_id", req.TerminalID, "err", err)
		}
		kcancel()
	case werr != nil:
		return failure(ErrTypeExecutionFailed, fmt.Errorf("terminal/wait_for_exit: %w", werr))
	default:
		o.exitCode = status.ExitCode
		if status.Signal != nil {
			o.signal = *status.Signal
		}
	}
	octx, ocancel := context.WithTimeout(ctx, releaseTimeout)
	outResp, err := env.Client.TerminalOutput(octx, req)
	ocancel()
	if err != nil {
		if ctx.Err() != nil {
			o.cancelled = true
			return c.result(env, o, content)
		}
		return failure(ErrTypeExecutionFailed, fmt.Errorf("terminal/output: %w", err))
	}
	o.output = outResp.Output
	if len(o.output) > int(limit) {
		o.cut = len(o.output) - int(limit)
		o.output = o.output[o.cut:]
	}
	if outResp.Truncated && o.cut == 0 {
		o.output = "[earlier output was dropped by the terminal]\n" + o.output
	}
	if o.exitCode == nil && o.signal == "" && outResp.ExitStatus != nil {
		o.exitCode = outResp.ExitStatus.ExitCode
		if outResp.ExitStatus.Signal != nil {
			o.signal = *outResp.ExitStatus.Signal
		}
	}
	return c.result(env, o, content)
}

// absolutePATH is environ with the relative and empty entries of its PATH
// dropped. They name the command's working folder (an empty entry and "."
// are the folder itself): with "." or "node_modules/.bin" on acpd's PATH,
// `ls` would run a program the workspace planted as ./ls, whatever the
// command line — and the "always allow" or plan-mode decision — says.
func absolutePATH(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + onlyAbsolute(v)
		}
		out = append(out, kv)
	}
	return out
}

func onlyAbsolute(list string) string {
	var keep []string
	for _, d := range filepath.SplitList(list) {
		if filepath.IsAbs(d) {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// terminalEnv is what a command in the editor's terminal gets on top of
// the terminal's environment: the plan's variables, and acpd's PATH
// without its relative entries when it has any (the editor started acpd,
// so its terminals usually share that PATH). ACP can only add variables
// to a terminal's environment, so each one acpd's environment holds and
// commands must not inherit (dropped) is set empty: the editor started
// acpd, so its terminals usually hold the same ones. A confined command's
// helper also removes them, by name and pattern, from whatever the editor
// gave it.
func terminalEnv(plan sandbox.Plan, dropped []string, unasked bool) []string {
	out := slices.Clone(plan.Env)
	var helperEnv []string
	if plan.Confined {
		helperEnv = plan.HelperEnv
	}
	for _, n := range dropped {
		if !slices.ContainsFunc(helperEnv, func(kv string) bool { return strings.HasPrefix(kv, n+"=") }) {
			out = append(out, n+"=")
		}
	}
	out = append(out, helperEnv...)
	if p, ok := os.LookupEnv("PATH"); ok && onlyAbsolute(p) != p {
		out = append([]string{"PATH=" + onlyAbsolute(p)}, out...)
	}
	if unasked {
		out = append(slices.Clone(out), readOnlyGitEnv()...)
	}
	return out
}

// readOnlyGitSettings switch off what a repository's configuration can
// make git run during a read-only command: the fsmonitor hook, hooks, the
// pager, an external diff, transports (ssh, ext::), credential helpers,
// signature checks. Plan mode runs a classified read-only git command
// without asking; its command line shows none of these, so they are set
// above every configuration file (GIT_CONFIG_COUNT). The environment
// block's git uses the same settings. Filter and textconv drivers, named
// freely by the configuration and chosen by .gitattributes, are not
// covered: see docs/security.md.
var readOnlyGitSettings = [][2]string{
	{"core.fsmonitor", "false"},
	{"core.hooksPath", "/dev/null"},
	{"core.pager", "cat"},
	{"core.alternateRefsCommand", ""},
	{"diff.external", ""},
	{"log.showSignature", "false"},
	{"protocol.allow", "never"},
	{"credential.helper", ""},
	{"core.askPass", ""},
	{"core.sshCommand", "false"},
}

func readOnlyGitEnv() []string {
	out := []string{fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(readOnlyGitSettings))}
	for i, kv := range readOnlyGitSettings {
		out = append(out, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return append(out, "GIT_PAGER=cat")
}

// withoutGitConfig drops the GIT_CONFIG_* variables of environ (the
// settings above take their place) and GIT_EXTERNAL_DIFF.
func withoutGitConfig(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "GIT_CONFIG_") && !strings.HasPrefix(kv, "GIT_EXTERNAL_DIFF=") {
			out = append(out, kv)
		}
	}
	return out
}

func envVars(env []string) []acp.EnvVariable {
	var out []acp.EnvVariable
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, acp.EnvVariable{Name: k, Value: v})
	}
	return out
}

// tailBuffer keeps the last max bytes written to it: the end of a command's
// output (errors, summaries) matters most.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += len(p)
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	// Start on a rune boundary.
	for i := 0; i < len(b) && i < 4 && b[0]&0xC0 == 0x80; i++ {
		b = b[1:]
	}
	return string(b)
}

func (t *tailBuffer) dropped() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total - min(len(t.buf), t.max)
}
