//go:build unix

package acptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/acpd/acpd/acp"
)

// Terminals is an editor's terminal backend for a FakeClient: it runs each
// terminal/create command as a local process (in its own process group),
// keeps its output, answers output, wait_for_exit, kill and release like an
// editor would, and records every call.
type Terminals struct {
	// OnWait, when set, is called as terminal/wait_for_exit starts, so a
	// test can synchronise with a command that is running.
	OnWait func(id string)

	mu    sync.Mutex
	seq   int
	terms map[string]*localTerm
	calls []TerminalCall
}

// TerminalCall is one terminal request the agent made.
type TerminalCall struct {
	Method     string
	TerminalID string
	// Command, Args and Cwd are set for terminal/create.
	Command string
	Args    []string
	Cwd     string
}

type localTerm struct {
	cmd      *exec.Cmd
	limit    int
	out      *lockedBuffer
	done     chan struct{} // closed once the process is reaped
	status   acp.TerminalExitStatus
	released bool
}

type lockedBuffer struct {
	mu  sync.Mutex
	b   []byte
	cut bool
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

// tail returns the output, keeping the last limit bytes (0: all).
func (l *lockedBuffer) tail(limit int) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit > 0 && len(l.b) > limit {
		l.b = l.b[len(l.b)-limit:]
		l.cut = true
	}
	return string(l.b), l.cut
}

// NewTerminals returns an empty terminal backend.
func NewTerminals() *Terminals { return &Terminals{terms: map[string]*localTerm{}} }

// Install sets fc's terminal funcs to this backend.
func (ts *Terminals) Install(fc *FakeClient) {
	fc.CreateTerminalFunc = ts.create
	fc.TerminalOutputFunc = ts.output
	fc.WaitForTerminalExitFunc = ts.wait
	fc.KillTerminalFunc = ts.kill
	fc.ReleaseTerminalFunc = ts.release
}

// Calls returns the terminal requests received so far, in order.
func (ts *Terminals) Calls() []TerminalCall {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]TerminalCall(nil), ts.calls...)
}

// Exited reports whether the process of terminal id has been reaped.
func (ts *Terminals) Exited(id string) bool {
	ts.mu.Lock()
	t := ts.terms[id]
	ts.mu.Unlock()
	if t == nil {
		return false
	}
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// Close kills every process still running; use it in t.Cleanup.
func (ts *Terminals) Close() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.terms {
		t.killGroup()
	}
}

func (ts *Terminals) record(c TerminalCall) {
	ts.mu.Lock()
	ts.calls = append(ts.calls, c)
	ts.mu.Unlock()
}

func (ts *Terminals) get(id string) (*localTerm, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.terms[id]
	if t == nil || t.released {
		return nil, acp.ErrInvalidParams("terminalId", "unknown or released terminal: "+id)
	}
	return t, nil
}

func (ts *Terminals) create(_ context.Context, req *acp.CreateTerminalRequest) (*acp.CreateTerminalResponse, error) {
	cmd := exec.Command(req.Command, req.Args...)
	cmd.Dir = req.Cwd
	cmd.Env = os.Environ()
	for _, e := range req.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t := &localTerm{cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	if req.OutputByteLimit != nil {
		t.limit = int(*req.OutputByteLimit)
	}
	cmd.Stdout, cmd.Stderr = t.out, t.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("terminal/create %q: %w", req.Command, err)
	}
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			code := 0
			t.status.ExitCode = &code
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				sig := ws.Signal().String()
				t.status.Signal = &sig
			} else {
				code := ee.ExitCode()
				t.status.ExitCode = &code
			}
		}
		close(t.done)
	}()
	ts.mu.Lock()
	ts.seq++
	id := "term-" + strconv.Itoa(ts.seq)
	ts.terms[id] = t
	ts.calls = append(ts.calls, TerminalCall{Method: acp.MethodTerminalCreate, TerminalID: id, Command: req.Command, Args: req.Args, Cwd: req.Cwd})
	ts.mu.Unlock()
	return &acp.CreateTerminalResponse{TerminalID: id}, nil
}

func (ts *Terminals) output(_ context.Context, req *acp.TerminalRequest) (*acp.TerminalOutputResponse, error) {
	ts.record(TerminalCall{Method: acp.MethodTerminalOutput, TerminalID: req.TerminalID})
	t, err := ts.get(req.TerminalID)
	if err != nil {
		return nil, err
	}
	out, cut := t.out.tail(t.limit)
	r := &acp.TerminalOutputResponse{Output: out, Truncated: cut}
	select {
	case <-t.done:
		st := t.status
		r.ExitStatus = &st
	default:
	}
	return r, nil
}

func (ts *Terminals) wait(ctx context.Context, req *acp.TerminalRequest) (*acp.TerminalExitStatus, error) {
	ts.record(TerminalCall{Method: acp.MethodTerminalWaitForExit, TerminalID: req.TerminalID})
	t, err := ts.get(req.TerminalID)
	if err != nil {
		return nil, err
	}
	if ts.OnWait != nil {
		ts.OnWait(req.TerminalID)
	}
	select {
	case <-t.done:
		st := t.status
		return &st, nil
	case <-ctx.Done(): // the agent sent $/cancel_request
		return nil, ctx.Err()
	}
}

func (ts *Terminals) kill(_ context.Context, req *acp.TerminalRequest) error {
	ts.record(TerminalCall{Method: acp.MethodTerminalKill, TerminalID: req.TerminalID})
	t, err := ts.get(req.TerminalID)
	if err != nil {
		return err
	}
	t.killGroup()
	return nil
}

// release kills the command if it still runs and forgets the terminal, as
// the spec asks; it returns once the process is reaped.
func (ts *Terminals) release(ctx context.Context, req *acp.TerminalRequest) error {
	ts.record(TerminalCall{Method: acp.MethodTerminalRelease, TerminalID: req.TerminalID})
	t, err := ts.get(req.TerminalID)
	if err != nil {
		return err
	}
	ts.mu.Lock()
	t.released = true
	ts.mu.Unlock()
	t.killGroup()
	select {
	case <-t.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
		return fmt.Errorf("terminal %s: process did not exit after SIGKILL", req.TerminalID)
	}
	return nil
}

func (t *localTerm) killGroup() {
	select {
	case <-t.done:
	default:
		_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
	}
}
