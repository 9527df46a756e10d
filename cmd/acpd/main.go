// Command acpd is an Agent Client Protocol agent. Started without a command
// it serves ACP on stdio, which is how editors run it; the subcommands (one
// file each) run a turn headless, serve over HTTP, guard another agent and
// read what acpd recorded.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/config"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the daemon failed while running
	exitUsage = 2 // bad flags, arguments or configuration
)

func main() {
	sandboxHelper() // the hidden `acpd __sandbox-exec`: never returns there
	inheritNoFiles()
	// Only the protocol may reach stdout: keep the real file for serve and
	// send anything else printing to os.Stdout to stderr.
	stdout := os.Stdout
	os.Stdout = os.Stderr
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, stdout, os.Stderr))
}

// serveFunc is the signature of serve, replaceable in tests. It calls
// onReady once its first answer is on the wire.
type serveFunc func(ctx context.Context, cfg config.Config, stdin io.Reader, stdout io.Writer, logger *slog.Logger, onReady func()) error

// deps are run's links to the process, injected so tests control them.
type deps struct {
	getenv func(string) string
	serve  serveFunc
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdin, stdout, stderr, deps{getenv: os.Getenv, serve: serve})
}

func runWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, d deps) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, deps: d}
	root := newRoot(a, len(args) > 0)
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		// The shell asks for completions: offer the enum flags' values.
		forEachCommand(root, flagCompletion)
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	return exitCode(cmd, err, stderr)
}

// terminalHint is what acpd says when it is started on a terminal. It goes
// on serving: a person may be pasting ACP messages to try it.
const terminalHint = `acpd is an Agent Client Protocol agent: an editor starts it and speaks JSON-RPC
to it on stdin and stdout, one message a line. It is waiting for such messages now
(Ctrl-D or Ctrl-C ends it).
  Run a prompt from this terminal:  acpd run "your prompt"
  See every command:                acpd --help
`

// cmdServe serves ACP on stdio until the client disconnects or a signal
// arrives.
//
// SIGINT and SIGTERM are caught from the first answer on (serve's
// onReady), not from the start: until then the signals keep their default
// action and end the process at once. Nothing is lost by that, as no
// request has been answered and so no session exists, and it keeps the
// handlers' set-up off the time an editor waits for initialize: Go runs
// them on a thread of their own, which costs a thread start and a hand-over
// or two (0.5 ms of 12 on a VM whose page faults are slow).
func cmdServe(ctx context.Context, a *app) int {
	if isTerminal(a.stdin) {
		// Someone typed acpd in a terminal: an editor never gives it one.
		fmt.Fprint(a.stderr, terminalHint)
	}
	logger, closeLog, ok := openLog(a.cfg.Log, a.stderr, "acpd")
	if !ok {
		return exitUsage
	}
	defer closeLog()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var catching sync.Once
	var stopSignals context.CancelFunc
	catchSignals := func() {
		catching.Do(func() {
			sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			stopSignals = stop
			context.AfterFunc(sigCtx, func() { cancel(context.Cause(sigCtx)) })
		})
	}
	defer func() {
		catching.Do(func() {}) // waits for a catchSignals under way
		if stopSignals != nil {
			stopSignals()
		}
	}()

	logInfo(logger, "acpd starting", "version", versionString(), "pid", os.Getpid(),
		"model", a.cfg.Model.Name, "provider", a.cfg.Model.Provider,
		"max_tool_calls_per_turn", a.cfg.Model.MaxToolCallsPerTurn,
		"max_tool_calls_explicit", a.cfg.Model.MaxToolCallsPerTurnExplicit, "stuck_window", a.cfg.Model.StuckWindow)
	err := a.deps.serve(ctx, a.cfg, a.stdin, a.stdout, logger, catchSignals)
	switch {
	case err == nil, ctx.Err() != nil && errors.Is(err, context.Canceled):
		logger.Info("acpd stopped")
		return exitOK
	default:
		logger.Error("acpd failed", "err", err)
		if a.cfg.Log.File != "" {
			// The log file may not be watched; say it where the user looks.
			fmt.Fprintf(a.stderr, "acpd: %v\n", err)
		}
		return exitError
	}
}
