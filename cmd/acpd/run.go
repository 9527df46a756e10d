package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
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
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
)

var _ = addCommand(newRunCommand)

// runFlags are acpd run's own flags.
type runFlags struct {
	cwd, session, rewind string
	mcpConfig            string
	yolo, btw            bool
	format               outputFormat
	input                outputFormat
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
	f.BoolVar(&o.btw, "btw", false, "ask PROMPT as a side question (/btw): answered from the conversation (with --session, the stored one) without tools, and not kept in it")
	outputFormatFlags(f, &o.format)
	o.input = outputFormat{v: headless.InputText, valid: []string{headless.InputText, headless.InputStreamJSON}}
	f.Var(&o.input, "input-format", "input format: text (stdin is the prompt) or stream-json (one JSON user message a line: the first is the prompt unless PROMPT is given, each later one steers the running turn)")
	_ = f.SetAnnotation("input-format", annotValues, o.input.valid)
	f.StringVar(&o.mcpConfig, "mcp-config", "", "MCP servers for the session from a JSON `file`: {\"mcpServers\": {NAME: {\"command\", \"args\", \"env\"} or {\"type\": \"http\", \"url\", \"headers\"}}}, as other agents take it")
	_ = cmd.MarkFlagFilename("mcp-config", "json")
	f.StringArrayVar(&o.answers, "answer", nil, "answer to a question the model asks (ask_user_question), repeatable, used in order: an option's label or number, several separated by commas, or free `text`")
	_ = cmd.MarkFlagDirname("cwd")
	addConfigFlags(f, groupAgent...)
	cmd.PreRun = func(*cobra.Command, []string) { a.noModel = o.rewind != "" }
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
question fails and the model is told acpd run cannot ask. Questions from the
MCP servers of --mcp-config are declined, with a line on stderr.

With --input-format stream-json, stdin (a pipe, a file or a FIFO given as
stdin) is read as JSON lines, each a user message in the form Claude Code's
stream-json input takes:
  {"type":"user","message":{"role":"user","content":"use the v2 API"}}
or {"type":"user","content":…}; content is a string or an array of ACP
content blocks. The first line is the prompt unless PROMPT is given. Every
later line steers the running turn (_session/steering, idleBehavior
promptRequired): the model reads it after the running tool calls, in the
same turn. A line the turn can no longer take (it ended, was cancelled, or
never took it) starts no new turn: it is listed as undelivered (json:
"undelivered", with its content; text: a line on stderr); send it with
--session ID as the next prompt. The end of stdin does not end the turn;
the run ends with the turn. A malformed line is an error on stderr naming
its line number and field, and is skipped.

With --btw, PROMPT is a side question: one model request on the
conversation (with --session, the stored one) plus the question, tool use
off; the answer is printed and the session is left as it was.

Output (--output-format):
  text         the assistant's text on stdout as it streams; one line per
               tool call with its final status on stderr
  json         one JSON object at the end: sessionId, stopReason or error
               {code,message,data}, text, toolCalls, usage (the last
               usage_update: used, size, cost), turnUsage (the turn's
               requests, inputTokens, cachedInputTokens,
               cacheWriteInputTokens when the provider reports cache writes,
               outputTokens, reasoningTokens, summaries, subagents, cost),
               budget; with stream-json input, steers (each steering
               line: line, outcome, messageId, delivered) and
               undelivered (line, reason, prompt)
  stream-json  each session/update notification's params as one JSON line as
               it happens (notices of retries among them), a line
               {"event":"waiting",...} when the agent has said nothing for 5,
               15, 30, 60 s and each minute after, a line
               {"event":"steering","line":N,"outcome":…} for each steering
               line's answer, then the json result object as the last
               line

On a terminal, stderr also says what the turn waits for (the model, a tool)
when it is silent, each retry of a model request, and compaction. Text
output ends with the session's id and the command that continues it.

Exit status:
  0    the turn ended normally (stopReason end_turn)
  1    model or internal error
  2    usage or configuration error (also: no model configured)
  3    loop protection stopped the turn (error data code LOOP_DETECTED)
  4    the model stopped early (stopReason max_tokens, refusal or
       max_turn_requests)
  5    the turn reached its token budget (model.maxTokensPerTurn)
  6    the request was larger than model.sessionTokenLimit
  7    the turn ended, but tool calls it needed a person's yes for were
       refused (nobody can answer in a headless run)
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
	if rf.mcpConfig != "" {
		servers, err := mcp.LoadConfig(rf.mcpConfig)
		if err != nil {
			return o, fmt.Errorf("--mcp-config: %v", err)
		}
		o.MCPServers = servers
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
		o.Rewind, _ = strconv.Atoi(n)
	}
	switch len(a.args) {
	case 0:
	case 1:
		o.Prompt = a.args[0]
	default:
		return o, &usageError{msg: fmt.Sprintf("unexpected argument %q: give the prompt as one argument (quote it)", a.args[1])}
	}
	if rf.input.v == headless.InputStreamJSON {
		if rf.btw || rf.rewind != "" {
			return o, &usageError{msg: "--input-format stream-json steers a turn: it conflicts with --btw and --rewind"}
		}
		in := headless.NewInput(a.stdin)
		o.Input = in
		if len(a.args) == 0 || o.Prompt == "-" {
			if isTerminal(a.stdin) {
				fmt.Fprintln(a.stderr, "acpd run: reading JSON lines from stdin, the prompt first; end with Ctrl-D")
			}
			_, blocks, err := in.Next()
			switch {
			case errors.Is(err, io.EOF):
				return o, &usageError{msg: "empty prompt: stdin ended before its first line (--input-format stream-json)"}
			case err != nil:
				return o, &usageError{msg: fmt.Sprintf("--input-format stream-json: the prompt: %v", err)}
			}
			o.PromptBlocks, o.Prompt = blocks, headless.BlocksText(blocks)
		}
	} else if len(a.args) == 0 || o.Prompt == "-" {
		if isTerminal(a.stdin) {
			fmt.Fprintln(a.stderr, "acpd run: reading the prompt from stdin; end it with Ctrl-D")
		}
		b, err := io.ReadAll(a.stdin)
		if err != nil {
			return o, &usageError{msg: fmt.Sprintf("read prompt from stdin: %v", err)}
		}
		o.Prompt = string(b)
	}
	if strings.TrimSpace(o.Prompt) == "" && o.PromptBlocks == nil {
		return o, &usageError{msg: "empty prompt: give it as an argument or on stdin"}
	}
	if rf.btw {
		if rf.rewind != "" {
			return o, &usageError{msg: "--btw conflicts with --rewind"}
		}
		o.Prompt = "/btw " + strings.TrimSpace(o.Prompt)
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

	logger, closeLog, ok := openLog(cfg.Log, a.stderr, "acpd run")
	if !ok {
		return exitUsage
	}
	defer closeLog()
	if a.src["log.level"].Kind == config.SourceDefault && !cfg.Log.Trace && cfg.Log.File == "" {
		// What acpd run has to say is on stderr already, once: the turn's
		// outcome or error, refusals, and the agent's notices (retries,
		// budgets, an unconfined sandbox). A log line would say it twice;
		// --log-level or --log-file asks for the log.
		logger = slog.New(slog.DiscardHandler)
	}

	opts, err := sessionOptions(cfg, logger)
	if err != nil && o.Rewind > 0 {
		// A rewind asks no model anything: a model that cannot be set up
		// (no script for provider script, no model at all) is no reason
		// to refuse it.
		nm := cfg
		nm.Model.Provider, nm.Providers = config.ProviderOpenAI, nil
		opts, err = sessionOptions(nm, logger)
		opts.Provider = noModel{}
	}
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
			case !errors.Is(err, store.ErrNotFound):
				return a.badUsage(fmt.Sprintf("--session %s: not a session id (%v); acpd sessions lists them", o.SessionID, err))
			default:
				return a.badUsage(fmt.Sprintf("--session %s: no such session in %s; acpd sessions lists them", o.SessionID, cfg.Session.DataDir))
			}
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

	o.Continue = "acpd run --session %s"
	if rf.cwd != "" {
		o.Continue += " --cwd " + shellQuote(o.Cwd)
	}
	if a.src.Of("session.dataDir").Kind == config.SourceFlag {
		o.Continue += " --data-dir " + shellQuote(cfg.Session.DataDir)
	}
	o.Continue += " PROMPT"
	env := headless.Env{Stdout: a.stdout, Stderr: a.stderr, Logger: logger, Trace: cfg.Log.Trace, Signals: sigs,
		Live: isTerminal(a.stderr)}
	return headless.Run(ctx, env, o, func(c acp.Client) headless.Agent { return session.NewManager(c, opts) })
}

// noModel is the model of a run that only rewinds: never asked.
type noModel struct{}

func (noModel) Stream(context.Context, model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		yield(model.Event{}, errors.New("acpd run --rewind has no model to ask"))
	}
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
