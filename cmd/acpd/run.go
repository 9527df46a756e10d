package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/headless"
	"github.com/acpd/acpd/session/store"
)

func runCommand() command {
	return command{
		summary: "run one prompt turn without an editor (scripts, CI) and exit with its outcome",
		run:     cmdRun,
		flags:   runFlags,
		help:    runUsage,
		args:    true,
	}
}

// outputFormat is the --output-format flag; bad values fail flag parsing,
// so they get the usage exit status like any other bad flag.
type outputFormat struct{ v string }

func (f *outputFormat) String() string {
	if f == nil || f.v == "" {
		return headless.FormatText
	}
	return f.v
}

func (f *outputFormat) Set(s string) error {
	switch s {
	case headless.FormatText, headless.FormatJSON, headless.FormatStreamJSON:
		f.v = s
		return nil
	}
	return fmt.Errorf("must be text, json or stream-json, got %q", s)
}

func runFlags(fs *flag.FlagSet) {
	fs.String("cwd", "", "workspace directory of the session (default: the working directory)")
	fs.String("session", "", "continue the stored session with this id (the sessionId of an earlier run) instead of starting a new one")
	fs.String("rewind", "", "with --session and no prompt: undo turn N and the turns after it, files and conversation (/rewind N); files changed since are kept")
	fs.Bool("yolo", false, "run every tool without asking (same as --approval-mode yolo)")
	fs.Var(&outputFormat{}, "output-format", "output format: text, json or stream-json")
	fs.Var(&answerList{}, "answer", "answer to a question the model asks (ask_user_question), repeatable, used in order: an option's label or number, several separated by commas, or free text")
}

// answerList collects the repeated --answer flags.
type answerList struct{ v []string }

func (l *answerList) String() string { return strings.Join(l.v, "\x00") }
func (l *answerList) Set(s string) error {
	l.v = append(l.v, s)
	return nil
}

const runHelp = `Usage: acpd run [flags] [PROMPT]

Runs one prompt turn headless: the agent runs in-process and is driven over
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
       "cancelled", then exits (SIGTERM likewise, exit 143)

Flags (global flags are accepted too):
`

func runUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, runHelp)
	writeFlags(w, fs, nil)
}

// flagString is the text of a registered flag, "" when it is absent.
func flagString(fs *flag.FlagSet, name string) string {
	if fs == nil {
		return ""
	}
	if f := fs.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// usageError is a mistake on the command line: exit 2 with the message.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// parseRunOptions resolves the prompt, cwd and flags, and applies --yolo to
// cfg. Every error it returns is a usage error.
func parseRunOptions(a *app, cfg *config.Config) (headless.Options, error) {
	o := headless.Options{
		SessionID:     flagString(a.flags, "session"),
		Format:        flagString(a.flags, "output-format"),
		ClientVersion: versionString(),
	}
	if f := lookupFlag(a.flags, "answer"); f != nil {
		o.Answers = f.Value.(*answerList).v
	}
	if o.Format == "" {
		o.Format = headless.FormatText
	}
	if flagString(a.flags, "yolo") == "true" {
		if s := a.src["tools.approvalMode"]; s.Kind == config.SourceFlag && cfg.Tools.ApprovalMode != config.ApprovalYolo {
			return o, &usageError{fmt.Sprintf("--yolo conflicts with --approval-mode %s", cfg.Tools.ApprovalMode)}
		}
		cfg.Tools.ApprovalMode = config.ApprovalYolo
	}
	o.Mode = string(cfg.Tools.ApprovalMode)

	if n := flagString(a.flags, "rewind"); n != "" {
		if v, err := strconv.Atoi(n); err != nil || v < 1 {
			return o, &usageError{fmt.Sprintf("--rewind must be a turn number (1 or more), got %q", n)}
		}
		if o.SessionID == "" {
			return o, &usageError{"--rewind needs --session ID: the session whose turn to undo"}
		}
		if len(a.args) > 0 {
			return o, &usageError{"--rewind takes no prompt: rewind first, then run the prompt with --session"}
		}
		a.args = []string{"/rewind " + n}
	}
	switch len(a.args) {
	case 0:
	case 1:
		o.Prompt = a.args[0]
	default:
		return o, &usageError{fmt.Sprintf("unexpected argument %q: give the prompt as one argument (quote it) and the flags before it", a.args[1])}
	}
	if len(a.args) == 0 || o.Prompt == "-" {
		if f, ok := a.stdin.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprintln(a.stderr, "acpd run: reading the prompt from stdin; end it with Ctrl-D")
			}
		}
		b, err := io.ReadAll(a.stdin)
		if err != nil {
			return o, &usageError{fmt.Sprintf("read prompt from stdin: %v", err)}
		}
		o.Prompt = string(b)
	}
	if strings.TrimSpace(o.Prompt) == "" {
		return o, &usageError{"empty prompt: give it as an argument or on stdin"}
	}

	cwd := flagString(a.flags, "cwd")
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, &usageError{fmt.Sprintf("--cwd: cannot determine the working directory: %v", err)}
		}
		cwd = wd
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return o, &usageError{fmt.Sprintf("--cwd %s: %v", cwd, err)}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return o, &usageError{fmt.Sprintf("--cwd: %v", err)}
	}
	if !fi.IsDir() {
		return o, &usageError{fmt.Sprintf("--cwd %s: not a directory", abs)}
	}
	o.Cwd = abs
	return o, nil
}

// cmdRun is `acpd run`: one prompt turn, driven over an in-memory ACP
// connection to the same agent `acpd` serves to editors.
func cmdRun(ctx context.Context, a *app) int {
	cfg := a.cfg
	o, err := parseRunOptions(a, &cfg)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd run: %v\n", err)
		return exitUsage
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
				fmt.Fprintf(a.stderr, "acpd run: --session: %v\n", err)
				return exitUsage
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

// lookupFlag is fs.Lookup(name), nil without fs.
func lookupFlag(fs *flag.FlagSet, name string) *flag.Flag {
	if fs == nil {
		return nil
	}
	return fs.Lookup(name)
}
