package agentguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/proxy"
)

// DefaultShutdownGrace is [guard] shutdownGrace's default: how long the agent
// has to exit after its stdin closes, and again after SIGTERM, before the
// next step (SIGTERM, then SIGKILL).
const DefaultShutdownGrace = 3 * time.Second

// Exit statuses of the guard itself; otherwise it exits with the agent's.
const (
	ExitUsage = 2 // the agent could not be started
)

// RunOptions are a guarded run: the engine's options and the process.
type RunOptions struct {
	Options
	// Command is the agent's command line.
	Command []string
	// ShutdownGrace: see DefaultShutdownGrace (0: the default).
	ShutdownGrace time.Duration
	// AgentStderr receives the agent's stderr (nil: discarded).
	AgentStderr io.Writer
	// Stderr receives the guard's own messages that must reach a person
	// (the agent would not start).
	Stderr io.Writer
	// Signals delivers SIGINT and SIGTERM sent to the guard: they end the
	// run as the editor closing stdin does.
	Signals <-chan os.Signal
	// Start, when set, starts the agent instead of a plain exec of
	// Command (acpd guard --confine starts it in acpd's sandbox): stdio
	// are its stdin, stdout and stderr, which Start may close once the
	// agent holds them. The agent must lead a process group of its own.
	Start func(stdio [3]*os.File) (Process, error)
}

// Process is a started agent.
type Process interface {
	// Pid is the agent's pid, which is also its process group.
	Pid() int
	// Wait waits for the agent to exit: its exit code (128 + N for
	// signal N) and a description.
	Wait() (code int, status string)
}

// execProcess is an agent started with os/exec.
type execProcess struct{ cmd *exec.Cmd }

func (p execProcess) Pid() int { return p.cmd.Process.Pid }

func (p execProcess) Wait() (int, string) { return exitStatus(p.cmd, p.cmd.Wait()) }

// WaitStatusExit is ExitStatus's reading of a raw wait status, for a
// Process that has one.
func WaitStatusExit(ws syscall.WaitStatus) (int, string) {
	if ws.Signaled() {
		return 128 + int(ws.Signal()), "signal " + ws.Signal().String()
	}
	return ws.ExitStatus(), fmt.Sprintf("exit status %d", ws.ExitStatus())
}

// Run starts the agent and relays between the editor (stdin, stdout) and
// it until the agent exits; it returns the exit status: the agent's (128 +
// the signal when a signal ended it), or ExitUsage when it could not start.
//
// The agent runs in its own process group, so what it starts goes with it.
// When the editor closes stdin (or the guard gets SIGINT or SIGTERM), the
// agent gets EOF on its stdin, then SIGTERM after ShutdownGrace, then
// SIGKILL after another; once it exits, whatever is left of its process
// group is ended the same way. If the agent exits while the editor is still
// there, the editor's unanswered requests get an error naming the exit.
func Run(ctx context.Context, o RunOptions, stdin io.Reader, stdout io.Writer) int {
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = DefaultShutdownGrace
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// Plain pipes, not StdinPipe/StdoutPipe: Wait then returns when the
	// agent exits, even while a process it started still holds its stdout.
	inR, inW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(o.Stderr, "acpd guard: %v\n", err)
		return ExitUsage
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		fmt.Fprintf(o.Stderr, "acpd guard: %v\n", err)
		return ExitUsage
	}
	var proc Process
	if o.Start != nil {
		proc, err = o.startWith(inR, outW)
	} else {
		proc, err = o.startExec(inR, outW)
	}
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		fmt.Fprintf(o.Stderr, "acpd guard: cannot start %q: %v\n", o.Command[0], err)
		return ExitUsage
	}
	defer outR.Close()
	return relay(ctx, o, proc, inW, outR, stdin, stdout)
}

func (o RunOptions) startExec(stdin, stdout *os.File) (Process, error) {
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Stderr = o.AgentStderr
	// A stderr that is not a file is copied by a goroutine Wait waits for;
	// a child of the agent holding it open must not hold Wait.
	cmd.WaitDelay = o.ShutdownGrace
	cmd.SysProcAttr = agentProcAttr()
	cmd.Stdin, cmd.Stdout = stdin, stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return execProcess{cmd}, nil
}

// startWith starts the agent through o.Start, which takes files only: a
// stderr that is not one is fed through a pipe.
func (o RunOptions) startWith(stdin, stdout *os.File) (Process, error) {
	var stderr *os.File
	switch w := o.AgentStderr.(type) {
	case *os.File:
		stderr = w
	case nil:
		f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		stderr = f
	default:
		r, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer pw.Close()
		go func() {
			_, _ = io.Copy(w, r)
			r.Close()
		}()
		stderr = pw
	}
	return o.Start([3]*os.File{stdin, stdout, stderr})
}

func relay(ctx context.Context, o RunOptions, proc Process, agentIn io.WriteCloser, agentOut io.Reader, stdin io.Reader, stdout io.Writer) int {
	log := o.Logger
	pgid := proc.Pid()
	log.Info("guarding agent", "command", o.Command, "pid", pgid)
	e := NewEngine(o.Options)
	p := proxy.New(stdin, stdout, agentOut, agentIn, e, proxy.Options{Logger: log})
	e.Bind(p)
	defer e.Close()

	editorDone := make(chan error, 1)
	go func() { editorDone <- p.Pump(ctx, proxy.Editor) }()
	agentDone := make(chan error, 1)
	go func() { agentDone <- p.Pump(ctx, proxy.Agent) }()
	type exit struct {
		code   int
		status string
	}
	exited := make(chan exit, 1)
	go func() {
		code, status := proc.Wait()
		exited <- exit{code, status}
	}()

	var (
		editorGone bool
		escalate   <-chan time.Time
		step       int
		ex         exit
	)
	closeAgent := func(why string) {
		if editorGone {
			return
		}
		editorGone = true
		log.Info("closing the agent's stdin", "why", why)
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownGrace)
		_ = p.Flush(fctx, proxy.Agent)
		cancel()
		_ = agentIn.Close()
		escalate = time.After(o.ShutdownGrace)
	}
wait:
	for {
		select {
		case err := <-editorDone:
			why := "the editor closed the connection"
			if err != nil {
				why = err.Error()
			}
			closeAgent(why)
		case sig := <-o.Signals:
			closeAgent(sig.String())
		case <-escalate:
			step++
			switch step {
			case 1:
				log.Warn("the agent did not exit after its stdin closed; sending SIGTERM", "pid", pgid)
				_ = signalGroup(pgid, syscall.SIGTERM)
				escalate = time.After(o.ShutdownGrace)
			default:
				log.Warn("the agent did not exit after SIGTERM; sending SIGKILL", "pid", pgid)
				_ = signalGroup(pgid, syscall.SIGKILL)
				escalate = nil
			}
		case ex = <-exited:
			break wait
		}
	}
	code, status := ex.code, ex.status
	log.Info("the agent exited", "status", status)
	reapGroup(pgid, o.ShutdownGrace, log)
	// Everything the agent wrote before it exited reaches the editor before
	// the errors below; with its process group gone, its stdout ends.
	select {
	case err := <-agentDone:
		if err != nil {
			log.Debug("relay from the agent ended", "err", err)
		}
	case <-time.After(o.ShutdownGrace):
		log.Warn("the agent's stdout stayed open after it exited")
	}
	_ = agentIn.Close()

	if !editorGone {
		msg := fmt.Sprintf("The agent exited (%s) before answering.", status)
		e.AgentExited(msg)
		for _, id := range p.Pending() {
			p.Send(proxy.Editor, errorLine(id, &acp.Error{Code: acp.CodeInternalError, Message: msg,
				Data: map[string]any{"errorKind": "agent_exited", "agentExitStatus": status, "exitCode": code}}))
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownGrace)
		_ = p.Flush(fctx, proxy.Editor)
		cancel()
		if code != 0 {
			fmt.Fprintf(o.Stderr, "acpd guard: the agent exited (%s)\n", status)
		}
	}
	return code
}

// exitStatus is the agent's exit code (128 + signal for a signal) and its
// description.
func exitStatus(cmd *exec.Cmd, err error) (int, string) {
	ps := cmd.ProcessState
	if ps == nil {
		return 1, fmt.Sprintf("wait: %v", err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), "signal " + ws.Signal().String()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 1, err.Error()
	}
	return ps.ExitCode(), fmt.Sprintf("exit status %d", ps.ExitCode())
}

// reapGroup ends what is left of the agent's process group: SIGTERM, then
// SIGKILL if anything is still there after grace.
func reapGroup(pgid int, grace time.Duration, log *slog.Logger) {
	if signalGroup(pgid, 0) != nil {
		return // nothing left
	}
	log.Debug("ending the processes the agent left behind", "pgid", pgid)
	_ = signalGroup(pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if signalGroup(pgid, 0) != nil {
			return
		}
	}
	log.Warn("processes the agent started outlived it; sending SIGKILL", "pgid", pgid)
	_ = signalGroup(pgid, syscall.SIGKILL)
}

// LineLogger is an io.Writer that logs each line written to it as one
// record: the agent's stderr, when the guard logs to a file.
type LineLogger struct {
	Logger *slog.Logger
	mu     sync.Mutex
	buf    []byte
}

// Write logs every complete line of p; a partial line waits for its end.
func (l *LineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.Logger.Info("agent stderr", "line", string(bytes.TrimRight(l.buf[:i], "\r")))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 { // a runaway line without an end
		l.Logger.Info("agent stderr", "line", string(l.buf))
		l.buf = l.buf[:0]
	}
	return len(p), nil
}
