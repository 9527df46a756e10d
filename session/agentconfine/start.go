package agentconfine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	sbx "github.com/acpd/acpd/session/tools/sandbox"
)

// Agent is a confined agent: the sandbox session it runs in, for its
// whole life. Close it once the agent and what it left are gone.
type Agent struct {
	sess *sbx.Session
	done func()
	pid  int
	wait func() (syscall.WaitStatus, error)
	// Warning is set when the agent runs unconfined (mode auto on a
	// kernel that cannot confine), or confined with less than asked (no
	// network instead of the proxy), and says why.
	Warning string
}

// Options start one agent.
type Options struct {
	// Policy is the sandbox, from the configuration widened by the
	// agent's Needs (Needs.Apply).
	Policy *sbx.Policy
	// Argv is the agent's command line, Dir its working directory and
	// workspace (the folder it may write besides its own state), Environ
	// its environment before the sandbox filters it.
	Argv    []string
	Dir     string
	Environ []string
	// Refused hears of each connection the proxy refused (host:port and
	// why), for the guard's log: the guard asks nobody about hosts.
	Refused func(target, why string)
}

// Start starts the agent confined, with stdio as its stdin, stdout and
// stderr (the caller closes its copies). Through the sandbox's spawn
// server when it can (the only way to the proxy), else through a helper of
// its own (no network in proxy mode, as for a command). In mode required
// on a kernel that cannot confine it returns an error and starts nothing;
// in mode auto there the agent runs unconfined and Warning says so.
func Start(ctx context.Context, o Options, stdio [3]*os.File) (*Agent, error) {
	sess := o.Policy.NewSession([]string{o.Dir})
	a := &Agent{sess: sess}
	a.done = sess.Running(&sbx.NetworkAsker{
		Ask: func(context.Context, string) (bool, error) {
			return false, errors.New("acpd guard asks nobody about a confined agent's hosts; add the host to tools.sandboxAllowedDomains")
		},
		Refused: o.Refused,
	})
	// statusFD 3: the helper's status pipe when the spawn server cannot
	// be used (startHelper); with the server it names nothing.
	plan, err := sess.Wrap(o.Argv, 3)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Warning = plan.Warning
	if plan.NetNote != "" {
		a.Warning = plan.NetNote
	}
	environ := agentEnv(sess.CommandEnv(o.Environ), plan.Env)
	if !plan.Confined {
		err = a.startPlain(plan.Argv, environ, o.Dir, stdio)
	} else {
		var proc *sbx.Process
		proc, err = sess.Spawn(ctx, plan, environ, o.Dir, stdio)
		switch {
		case err == nil:
			a.pid = proc.Pid
			a.wait = func() (syscall.WaitStatus, error) { return proc.Wait(context.Background()) }
		case sbx.NothingStarted(err):
			if plan.Proxy {
				a.Warning = "the sandbox's spawn server, which hosts the proxy, could not start (" + err.Error() + "), so the agent has no network"
			}
			err = a.startHelper(plan, environ, o.Dir, stdio)
		}
	}
	if err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// agentEnv is environ with the sandbox's additions (TMPDIR, the tool
// caches) but npm's: the agent keeps its own npm cache (see For).
func agentEnv(environ, add []string) []string {
	add = slices.DeleteFunc(slices.Clone(add), func(kv string) bool { return strings.HasPrefix(kv, "npm_config_cache=") })
	names := make([]string, 0, len(add))
	for _, kv := range add {
		n, _, _ := strings.Cut(kv, "=")
		names = append(names, n)
	}
	out := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		n, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, n)
	})
	return append(out, add...)
}

// startPlain runs argv unconfined (mode auto on a kernel that cannot
// confine), in a process group of its own.
func (a *Agent) startPlain(argv, environ []string, dir string, stdio [3]*os.File) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = environ, dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio[0], stdio[1], stdio[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	setpgid(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return err
	}
	a.pid = cmd.Process.Pid
	a.wait = waitCmd(cmd)
	return nil
}

// startHelper runs the plan's per-command helper, which confines itself
// and execs the agent (in a session of its own, so a process group too),
// and reads its status pipe: EOF once the agent runs, or why it does not.
func (a *Agent) startHelper(plan sbx.Plan, environ []string, dir string, stdio [3]*os.File) error {
	sr, sw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer sr.Close()
	cmd := exec.Command(plan.Argv[0], plan.Argv[1:]...)
	cmd.Env, cmd.Dir = environ, dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio[0], stdio[1], stdio[2]
	cmd.ExtraFiles = []*os.File{sw} // fd 3
	plan.Prepare(cmd)
	err = cmd.Start()
	sw.Close()
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(sr)
	if len(msg) > 0 {
		_ = cmd.Wait()
		return sbx.SetupError(string(msg))
	}
	a.pid = cmd.Process.Pid
	a.wait = waitCmd(cmd)
	return nil
}

func waitCmd(cmd *exec.Cmd) func() (syscall.WaitStatus, error) {
	return func() (syscall.WaitStatus, error) {
		err := cmd.Wait()
		if cmd.ProcessState != nil {
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
				return ws, nil
			}
		}
		var ws syscall.WaitStatus
		return ws, err
	}
}

// Pid is the agent's pid, which leads its process group.
func (a *Agent) Pid() int { return a.pid }

// Wait waits for the agent's exit: its raw wait status.
func (a *Agent) Wait() (syscall.WaitStatus, error) {
	ws, err := a.wait()
	if err != nil {
		return ws, fmt.Errorf("waiting for the confined agent: %w", err)
	}
	return ws, nil
}

// Close ends the sandbox session: its spawn server (and whatever of the
// agent it still runs), its proxy and its temp folder.
func (a *Agent) Close() {
	if a.done != nil {
		a.done()
	}
	_ = a.sess.Close()
}
