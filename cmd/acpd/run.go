package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/headless"
	"github.com/acpd/acpd/session/store"
)

var _ = addCommand(newRunCommand)

// runFlags are acpd run's own flags.
type runFlags struct {
	cwd, session, rewind string
	yolo                 bool
	format               outputFormat
	answers              []string
}

func newRunCommand(a *app) *cobra.Command {
	o := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [flags] [PROMPT]",
		Short: "run one prompt turn without an editor (scripts, CI) and exit with its outcome",
		Long:  runHelp,
		Args:  cobra.ArbitraryArgs,
	}
	f := cmd.Flags()
	f.StringVar(&o.cwd, "cwd", "", "workspace `folder` of the session (default: the working directory)")
	f.StringVar(&o.session, "session", "", "continue the stored session with this `id` (a unique prefix works; acpd sessions lists them) instead of starting a new one")
	f.StringVar(&o.rewind, "rewind", "", "with --session and no prompt: undo turn `N` and the turns after it, files and conversation (/rewind N); files changed since are kept")
	f.BoolVar(&o.yolo, "yolo", false, "run every tool without asking (same as --approval-mode yolo)")
	outputFormatFlags(f, &o.format)
	f.StringArrayVar(&o.answers, "answer", nil, "answer to a question the model asks (ask_user_question), repeatable, used in order: an option's label or number, several separated by commas, or free `text`")
	_ = cmd.MarkFlagDirname("cwd")
	addConfigFlags(f, groupAgent...)
	cmd.RunE = a.action(func(ctx context.Context, a *app) int { return cmdRun(ctx, a, o) })
	return cmd
}

// outputFormat is --output-format; bad values fail flag parsing, so they
// get the usage exit status like any other bad flag.
type outputFormat struct {
	v     string
	valid []string
}

func (f *outputFormat) String() string { return f.v }
func (f *outputFormat) Type() string   { return "format" }

func (f *outputFormat) Set(s string) error {
	if slices.Contains(f.valid, s) {
		f.v = s
		return nil
	}
	return fmt.Errorf("must be %s", orList(f.valid))
}

// outputFormatFlags registers -o/--output-format, one name for every
// command that prints in several formats, and its old name --format,
// hidden. The first valid format is the default.
func outputFormatFlags(fs *pflag.FlagSet, f *outputFormat, valid ...string) {
	if len(valid) == 0 {
		valid = []string{headless.FormatText, headless.FormatJSON, headless.FormatStreamJSON}
	}
	f.v, f.valid = valid[0], valid
	fs.VarP(f, "output-format", "o", "output format: "+orList(valid))
	_ = fs.SetAnnotation("output-format", annotValues, valid)
	fs.Var(f, "format", "old name of --output-format")
	_ = fs.MarkHidden("format")
}

// orList is "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

const runHelp = `Runs one prompt turn headless: the agent runs in-process and is driven over
ACP exactly as an editor drives it. PROMPT is read from stdin when it is
absent or "-".

Tools that would ask for permission are refused in approval mode "default"
(the model is told the user declined); use --approval-mode auto-edit to allow
edits, or --yolo to allow everything. Questions the model asks the user are
answered from --answer flags, one per question in order; without one left the
question fails and the model is told acpd run cannot ask.

Output (--output-format):
  text         the assistant's text on stdout as it streams; one line per
               tool call with its final status on stderr
  json         one JSON object at the end: sessionId, stopReason or error
               {code,message,data}, text, toolCalls, usage (the last
               usage_update: used, size, cost), turnUsage (the turn's
               requests, inputTokens, cachedInputTokens,
               cacheWriteInputTokens when the provider reports cache writes,
               outputTokens, reasoningTokens, summaries, subagents, cost),
               budget
  stream-json  each session/update notification's params as one JSON line as
               it happens, then the json result object as the last line

Exit status:
  0    the turn ended normally (stopReason end_turn)
  1    model or internal error
  2    usage or configuration error (also: no model configured)
  3    loop protection stopped the turn (error data code LOOP_DETECTED)
  4    the model stopped early (stopReason max_tokens, refusal or
       max_turn_requests)
  5    the turn reached its token budget (model.maxTokensPerTurn)
  6    the request was larger than model.sessionTokenLimit
  130  interrupted: SIGINT cancels the turn, waits for it to answer
       "cancelled", then exits (SIGTERM likewise, exit 143)`

// parseRunOptions resolves the prompt, cwd and flags, and applies --yolo to
// cfg. Every error it returns is a usage error.
func parseRunOptions(a *app, rf *runFlags, cfg *config.Config) (headless.Options, error) {
	o := headless.Options{
		SessionID:     rf.session,
		Format:        rf.format.v,
		ClientVersion: versionString(),
		Answers:       rf.answers,
	}
	if rf.yolo {
		if s := a.src["tools.approvalMode"]; s.Kind == config.SourceFlag && cfg.Tools.ApprovalMode != config.ApprovalYolo {
			return o, &usageError{msg: fmt.Sprintf("--yolo conflicts with --approval-mode %s", cfg.Tools.ApprovalMode)}
		}
		cfg.Tools.ApprovalMode = config.ApprovalYolo
	}
	o.Mode = string(cfg.Tools.ApprovalMode)

	if n := rf.rewind; n != "" {
		if v, err := strconv.Atoi(n); err != nil || v < 1 {
			return o, &usageError{msg: fmt.Sprintf("--rewind must be a turn number (1 or more), got %q", n)}
		}
		if o.SessionID == "" {
			return o, &usageError{msg: "--rewind needs --session ID: the session whose turn to undo"}
		}
		if len(a.args) > 0 {
			return o, &usageError{msg: "--rewind takes no prompt: rewind first, then run the prompt with --session"}
		}
		a.args = []string{"/rewind " + n}
	}
	switch len(a.args) {
	case 0:
	case 1:
		o.Prompt = a.args[0]
	default:
		return o, &usageError{msg: fmt.Sprintf("unexpected argument %q: give the prompt as one argument (quote it) and the flags before it", a.args[1])}
	}
	if len(a.args) == 0 || o.Prompt == "-" {
		if f, ok := a.stdin.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprintln(a.stderr, "acpd run: reading the prompt from stdin; end it with Ctrl-D")
			}
		}
		b, err := io.ReadAll(a.stdin)
		if err != nil {
			return o, &usageError{msg: fmt.Sprintf("read prompt from stdin: %v", err)}
		}
		o.Prompt = string(b)
	}
	if strings.TrimSpace(o.Prompt) == "" {
		return o, &usageError{msg: "empty prompt: give it as an argument or on stdin"}
	}

	cwd := rf.cwd
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, &usageError{msg: fmt.Sprintf("--cwd: cannot determine the working directory: %v", err)}
		}
		cwd = wd
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return o, &usageError{msg: fmt.Sprintf("--cwd %s: %v", cwd, err)}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return o, &usageError{msg: fmt.Sprintf("--cwd: %v", err)}
	}
	if !fi.IsDir() {
		return o, &usageError{msg: fmt.Sprintf("--cwd %s: not a directory", abs)}
	}
	o.Cwd = abs
	return o, nil
}

// cmdRun is `acpd run`: one prompt turn, driven over an in-memory ACP
// connection to the same agent `acpd` serves to editors.
func cmdRun(ctx context.Context, a *app, rf *runFlags) int {
	cfg := a.cfg
	o, err := parseRunOptions(a, rf, &cfg)
	if err != nil {
		return a.badUsage(err.Error())
	}

	logCfg := cfg.Log
	if a.src["log.level"].Kind == config.SourceDefault && !logCfg.Trace {
		// The turn's outcome is reported on stderr already; info and warn
		// logs (session created, loop stopped) would only repeat or bury it.
		logCfg.Level = "error"
	}
	logger, closeLog, ok := openLog(logCfg, a.stderr, "acpd run")
	if !ok {
		return exitUsage
	}
	defer closeLog()

	opts, err := sessionOptions(cfg, logger)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd run: configuration error: %v\n", err)
		return exitUsage
	}
	// Headless sessions are durable like served ones, so a later
	// `acpd run --session ID` (or an editor) can continue them.
	st, err := store.Open(cfg.Session.DataDir, store.Options{Logger: logger, IndexInBackground: true})
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd run: configuration error: session.dataDir: %v\n", err)
		return exitUsage
	}
	opts.Store = st
	if o.SessionID != "" {
		// acpd stats and acpd sessions print ids a user copies; a unique
		// prefix (the stats table's 12 characters) names the session too.
		ids, err := store.SessionIDs(cfg.Session.DataDir)
		if err == nil {
			id, err := store.MatchID(ids, o.SessionID)
			switch {
			case err == nil:
				o.SessionID = id
			case errors.Is(err, store.ErrAmbiguousID):
				return a.badUsage("--session: " + err.Error())
			}
			// Not found or invalid: session/load says so, as before.
		}
	}
	tel, stopTel, err := startTelemetry(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd run: configuration error: %v\n", err)
		return exitUsage
	}
	defer stopTel()
	opts.Telemetry = tel

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	env := headless.Env{Stdout: a.stdout, Stderr: a.stderr, Logger: logger, Trace: cfg.Log.Trace, Signals: sigs}
	return headless.Run(ctx, env, o, func(c acp.Client) headless.Agent { return session.NewManager(c, opts) })
}
