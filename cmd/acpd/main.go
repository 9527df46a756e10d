// Command acpd is an Agent Client Protocol agent. Started without a command
// it serves ACP on stdio, which is how editors run it; `acpd config` prints
// the effective configuration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/acpd/acpd/config"
	_ "github.com/acpd/acpd/internal/prefault" // maps start-up's memory in bulk: see its doc
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the daemon failed while running
	exitUsage = 2 // bad flags, arguments or configuration
)

func main() {
	if startupFloor() {
		return
	}
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

// boolText is a bool flag that keeps its raw text, so config.Load parses it
// with the same rules and messages as the environment.
type boolText struct{ s string }

func (b *boolText) String() string {
	if b == nil {
		return ""
	}
	return b.s
}
func (b *boolText) Set(s string) error { b.s = s; return nil }
func (b *boolText) IsBoolFlag() bool   { return true }

// command is a subcommand; it runs after configuration is loaded.
type command struct {
	summary string
	run     func(ctx context.Context, a *app) int
	// flags registers the command's own flags; they are parsed with the
	// global ones after the command name and reach run in app.flags.
	flags func(fs *flag.FlagSet)
	// help replaces the global usage text for `acpd CMD --help`.
	help func(w io.Writer, fs *flag.FlagSet)
	// args lets positional arguments through to run in app.args.
	args bool
	// configErrOK runs the command even when the configuration fails to
	// load; the error is in app.cfgErr (doctor reports it as a check).
	configErrOK bool
}

// commands lists the subcommands; `acpd run` (headless mode) plugs in here.
// No command means serving ACP on stdio.
func commands() map[string]command {
	return map[string]command{
		"checkpoints": checkpointsCommand(),
		"config":      {summary: "print the effective configuration with each value's source", run: cmdConfig},
		"doctor":      doctorCommand(),
		"guard":       guardCommand(),
		"run":         runCommand(),
		"serve":       serveCommand(),
		"sessions":    sessionsCommand(),
		"stats":       statsCommand(),
	}
}

// app is what a command gets: the process's streams and the configuration.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	deps           deps
	cfg            config.Config
	src            config.Sources
	cfgErr         error         // the configuration error, for commands with configErrOK
	flags          *flag.FlagSet // every parsed flag, global and the command's
	args           []string      // positional arguments, for commands that take them
}

func runWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, d deps) int {
	fs := flag.NewFlagSet("acpd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(stderr, fs) }
	configPath := fs.String("config", "", "config file read after the user file (overrides $ACPD_CONFIG)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	isConfigFlag := map[string]bool{}
	for _, f := range config.Flags() {
		isConfigFlag[f.Name] = true
	}
	configFlags(fs, "")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage // the flag package has printed the error and usage
	}
	var name string
	rest := fs.Args()
	if len(rest) > 0 {
		// Global flags may also follow the command: `acpd config --config x`.
		name = rest[0]
		if c, ok := commands()[name]; ok {
			if c.flags != nil {
				c.flags(fs)
			}
			if c.help != nil {
				fs.Usage = func() { c.help(stderr, fs) }
			}
		}
		if err := fs.Parse(rest[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		rest = fs.Args()
	}
	if *showVersion {
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	}
	cmd, known := commands()[name]
	if name != "" && !known {
		fmt.Fprintf(stderr, "acpd: unknown command %q\n", name)
		usage(stderr, fs)
		return exitUsage
	}
	if len(rest) > 0 && !cmd.args {
		fmt.Fprintf(stderr, "acpd: unexpected argument %q\n", rest[0])
		usage(stderr, fs)
		return exitUsage
	}

	setFlags := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		if isConfigFlag[f.Name] {
			setFlags[f.Name] = f.Value.String()
		}
	})
	cfg, src, err := config.Load(config.LoadOptions{ConfigPath: *configPath, Flags: setFlags, Getenv: d.getenv})
	if err != nil && known && cmd.configErrOK {
		return cmd.run(ctx, &app{stdin: stdin, stdout: stdout, stderr: stderr, deps: d, flags: fs, args: rest, cfgErr: err})
	}
	if err != nil {
		fmt.Fprintf(stderr, "acpd: configuration error:\n%s\n", indent(err.Error()))
		var ce *config.Error
		if errors.As(err, &ce) {
			return exitUsage
		}
		return exitError
	}

	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, deps: d, cfg: cfg, src: src, flags: fs, args: rest}
	if name != "" {
		return cmd.run(ctx, a)
	}
	return cmdServe(ctx, a)
}

// configFlags registers the flags that set configuration keys and belong
// to command ("" for the global ones).
func configFlags(fs *flag.FlagSet, command string) {
	for _, f := range config.Flags() {
		if f.Command != command {
			continue
		}
		if f.Bool {
			fs.Var(&boolText{}, f.Name, f.Usage)
		} else {
			fs.String(f.Name, "", f.Usage)
		}
	}
}

func cmdConfig(_ context.Context, a *app) int {
	fmt.Fprint(a.stdout, config.FormatTOML(a.cfg, a.src))
	return exitOK
}

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

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: acpd [flags] [command]\n\n")
	fmt.Fprintf(w, "Without a command, acpd serves the Agent Client Protocol on stdin/stdout.\n\nCommands:\n")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintf(w, "\nFlags (before or after the command):\n")
	writeFlags(w, fs, nil)
}

// writeFlags lists every flag of fs with its usage, as the help texts do.
// writeFlags lists the flags that keep passes (all of them when keep is nil).
func writeFlags(w io.Writer, fs *flag.FlagSet, keep func(*flag.Flag) bool) {
	fs.VisitAll(func(f *flag.Flag) {
		if keep != nil && !keep(f) {
			return
		}
		arg := " VALUE"
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			arg = ""
		}
		fmt.Fprintf(w, "  --%s%s\n        %s\n", f.Name, arg, f.Usage)
	})
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
