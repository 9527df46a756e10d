package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/store"
)

// Exit statuses of `acpd run` beyond exitOK, exitError and exitUsage.
const (
	exitLoop        = 3   // loop protection stopped the turn
	exitIncomplete  = 4   // the model stopped early: max_tokens, refusal, max_turn_requests
	exitInterrupted = 130 // SIGINT (128+2); SIGTERM gives 143
)

// Output formats of `acpd run`.
const (
	formatText       = "text"
	formatJSON       = "json"
	formatStreamJSON = "stream-json"
)

// cancelGrace bounds the wait for the `cancelled` answer after a signal. The
// agent answers at once in practice; the bound only keeps a wedged tool from
// making Ctrl-C useless.
const cancelGrace = 10 * time.Second

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
		return formatText
	}
	return f.v
}

func (f *outputFormat) Set(s string) error {
	switch s {
	case formatText, formatJSON, formatStreamJSON:
		f.v = s
		return nil
	}
	return fmt.Errorf("must be text, json or stream-json, got %q", s)
}

func runFlags(fs *flag.FlagSet) {
	fs.String("cwd", "", "workspace directory of the session (default: the working directory)")
	fs.String("session", "", "continue the stored session with this id (the sessionId of an earlier run) instead of starting a new one")
	fs.Bool("yolo", false, "run every tool without asking (same as --approval-mode yolo)")
	fs.Var(&outputFormat{}, "output-format", "output format: text, json or stream-json")
}

const runHelp = `Usage: acpd run [flags] [PROMPT]

Runs one prompt turn headless: the agent runs in-process and is driven over
ACP exactly as an editor drives it. PROMPT is read from stdin when it is
absent or "-".

Tools that would ask for permission are refused in approval mode "default"
(the model is told the user declined); use --approval-mode auto-edit to allow
edits, or --yolo to allow everything.

Output (--output-format):
  text         the assistant's text on stdout as it streams; one line per
               tool call with its final status on stderr
  json         one JSON object at the end: sessionId, stopReason or error
               {code,message,data}, text, toolCalls, usage
  stream-json  each session/update notification's params as one JSON line as
               it happens, then the json result object as the last line

Exit status:
  0    the turn ended normally (stopReason end_turn)
  1    model or internal error
  2    usage or configuration error (also: no model configured)
  3    loop protection stopped the turn (error data code LOOP_DETECTED)
  4    the model stopped early (stopReason max_tokens, refusal or
       max_turn_requests)
  130  interrupted: SIGINT cancels the turn, waits for it to answer
       "cancelled", then exits (SIGTERM likewise, exit 143)

Flags (global flags are accepted too):
`

func runUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, runHelp)
	fs.VisitAll(func(f *flag.Flag) {
		arg := " VALUE"
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			arg = ""
		}
		fmt.Fprintf(w, "  --%s%s\n        %s\n", f.Name, arg, f.Usage)
	})
}

// runOptions are the resolved inputs of one `acpd run`.
type runOptions struct {
	prompt    string
	cwd       string
	sessionID string
	format    string
	mode      string // approval mode, for the refusal message
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
func parseRunOptions(a *app, cfg *config.Config) (runOptions, error) {
	o := runOptions{
		sessionID: flagString(a.flags, "session"),
		format:    flagString(a.flags, "output-format"),
	}
	if o.format == "" {
		o.format = formatText
	}
	if flagString(a.flags, "yolo") == "true" {
		if s := a.src["tools.approvalMode"]; s.Kind == config.SourceFlag && cfg.Tools.ApprovalMode != config.ApprovalYolo {
			return o, &usageError{fmt.Sprintf("--yolo conflicts with --approval-mode %s", cfg.Tools.ApprovalMode)}
		}
		cfg.Tools.ApprovalMode = config.ApprovalYolo
	}
	o.mode = string(cfg.Tools.ApprovalMode)

	switch len(a.args) {
	case 0:
	case 1:
		o.prompt = a.args[0]
	default:
		return o, &usageError{fmt.Sprintf("unexpected argument %q: give the prompt as one argument (quote it) and the flags before it", a.args[1])}
	}
	if len(a.args) == 0 || o.prompt == "-" {
		if f, ok := a.stdin.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprintln(a.stderr, "acpd run: reading the prompt from stdin; end it with Ctrl-D")
			}
		}
		b, err := io.ReadAll(a.stdin)
		if err != nil {
			return o, &usageError{fmt.Sprintf("read prompt from stdin: %v", err)}
		}
		o.prompt = string(b)
	}
	if strings.TrimSpace(o.prompt) == "" {
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
	o.cwd = abs
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
	logger, closeLog, err := newLogger(logCfg, a.stderr)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd run: %v\n", err)
		return exitUsage
	}
	defer func() {
		if err := closeLog(); err != nil {
			fmt.Fprintf(a.stderr, "acpd run: close log file: %v\n", err)
		}
	}()

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

	newAgent := func(c acp.Client) runAgent { return session.NewManager(c, opts) }
	return runTurn(ctx, a, o, newAgent, cfg.Log.Trace, logger, sigs)
}

// pipeEnd joins the read side of one io.Pipe and the write side of another
// into the duplex stream a connection needs.
type pipeEnd struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p pipeEnd) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeEnd) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeEnd) Close() error {
	return errors.Join(p.w.Close(), p.r.Close())
}

// runAgent is the agent acpd run drives: session.Manager, or a fake in tests.
type runAgent interface {
	acp.Agent
	Close()
}

// runTurn starts the agent, drives one turn and reports it. It returns the
// exit status.
func runTurn(ctx context.Context, a *app, o runOptions, newAgent func(acp.Client) runAgent, trace bool, logger *slog.Logger, sigs <-chan os.Signal) int {
	toAgentR, toAgentW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	agentEnd := pipeEnd{r: toAgentR, w: toClientW}
	clientEnd := pipeEnd{r: toClientR, w: toAgentW}

	agentConn := acp.NewConn(agentEnd, agentEnd, acp.Options{Logger: logger, Trace: trace})
	agent := newAgent(agentConn)
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- agentConn.Serve(serveCtx, agent) }()

	out := newRunOutput(a.stdout, a.stderr, o.format, o.mode)
	rpcLog := slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	rpc := jsonrpc2.NewConn(context.WithoutCancel(ctx), jsonrpc2.NewPlainObjectStream(clientEnd), out,
		jsonrpc2.SetLogger(rpcLog))

	turnCtx, cancelTurn := context.WithCancel(ctx)
	defer cancelTurn()
	c := &runClient{rpc: rpc, out: out, opts: o}
	done := make(chan turnOutcome, 1)
	go func() { done <- c.run(turnCtx) }()

	var (
		res     turnOutcome
		signo   int
		expired <-chan time.Time
	)
wait:
	for {
		select {
		case res = <-done:
			break wait
		case sig := <-sigs:
			if signo != 0 {
				fmt.Fprintf(a.stderr, "acpd run: %v again, exiting without waiting\n", sig)
				cancelTurn()
				break wait
			}
			signo = 2
			if sig == syscall.SIGTERM {
				signo = 15
			}
			fmt.Fprintf(a.stderr, "acpd run: %v: cancelling the turn\n", sig)
			if !c.cancel(ctx) {
				// No prompt is running yet: abandon the handshake.
				cancelTurn()
			}
			t := time.NewTimer(cancelGrace)
			defer t.Stop()
			expired = t.C
		case <-expired:
			fmt.Fprintf(a.stderr, "acpd run: the turn did not answer the cancellation within %v\n", cancelGrace)
			cancelTurn()
			break wait
		}
	}

	// Closing our end makes the agent's Serve see EOF; it then cancels
	// whatever still runs (only after a second signal) and returns.
	_ = rpc.Close()
	_ = clientEnd.Close()
	shutdown := time.NewTimer(2 * time.Second)
	select {
	case err := <-served:
		if err != nil {
			logger.Debug("agent connection ended", "err", err)
		}
	case <-shutdown.C:
		stopServe()
		<-served
	}
	shutdown.Stop()
	stopServe()
	agent.Close()
	_ = agentEnd.Close()

	code := res.exitCode()
	if signo != 0 {
		if res.resp == nil && res.rpcErr == nil {
			// Interrupted before the prompt answered (or before it was sent).
			res = turnOutcome{sessionID: c.getSessionID(), resp: &acp.PromptResponse{StopReason: acp.StopCancelled}}
		}
		code = 128 + signo
	}
	if err := out.finish(res); err != nil {
		fmt.Fprintf(a.stderr, "acpd run: write output: %v\n", err)
		if code == exitOK {
			code = exitError
		}
	}
	return code
}

// turnOutcome is how the prompt ended: a response, an error from the agent,
// or a failure before or around the prompt.
type turnOutcome struct {
	sessionID string
	resp      *acp.PromptResponse
	rpcErr    *jsonrpc2.Error
	// status, when non-zero, overrides the exit status derived from the
	// other fields (usage errors before the prompt).
	status int
	err    error  // a local failure without an agent error
	during string // what failed, for the stderr line, e.g. "--session ID"
}

func (t turnOutcome) exitCode() int {
	switch {
	case t.status != 0:
		return t.status
	case t.rpcErr != nil:
		if loopCode(t.rpcErr) {
			return exitLoop
		}
		if errorKind(t.rpcErr) == session.ErrorKindModelNotConfigured {
			return exitUsage // a configuration error: no model to run
		}
		return exitError
	case t.err != nil || t.resp == nil:
		return exitError
	}
	switch t.resp.StopReason {
	case acp.StopEndTurn:
		return exitOK
	case acp.StopMaxTokens, acp.StopRefusal, acp.StopMaxTurnRequests:
		return exitIncomplete
	case acp.StopCancelled:
		return exitInterrupted
	}
	return exitError
}

// loopCode reports whether an error carries the loop guard's data code.
func loopCode(e *jsonrpc2.Error) bool {
	if e.Data == nil {
		return false
	}
	var d struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(*e.Data, &d) == nil && d.Code == "LOOP_DETECTED"
}

// errorKind is the data.errorKind of an agent error, "" when absent.
func errorKind(e *jsonrpc2.Error) string {
	if e.Data == nil {
		return ""
	}
	var d struct {
		ErrorKind string `json:"errorKind"`
	}
	_ = json.Unmarshal(*e.Data, &d)
	return d.ErrorKind
}

// runClient is the editor side of the in-memory connection.
type runClient struct {
	rpc  *jsonrpc2.Conn
	out  *runOutput
	opts runOptions

	// mu guards sessionID, which the signal path reads.
	mu        sync.Mutex
	sessionID string

	// sendMu orders the prompt request before any cancel of it: it is held
	// while the request is written and prompting set, and while a cancel
	// reads prompting and writes its notifications.
	sendMu    sync.Mutex
	prompting bool
}

func (c *runClient) getSessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// promptRequestID is the JSON-RPC id of the one session/prompt request,
// chosen so $/cancel_request can name it.
var promptRequestID = jsonrpc2.ID{Str: "acpd-run-prompt", IsString: true}

// cancel sends session/cancel for the running prompt, and $/cancel_request
// for the prompt request: the agent registers a request before it runs it,
// but the turn only once its goroutine starts, so a session/cancel sent
// right after the prompt could find no turn to cancel. Either way the
// prompt answers `cancelled`. cancel reports false when no prompt has been
// sent yet.
func (c *runClient) cancel(ctx context.Context) bool {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if !c.prompting {
		return false
	}
	id := c.getSessionID()
	if err := c.rpc.Notify(ctx, acp.MethodSessionCancel, &acp.SessionIDRequest{SessionID: id}); err != nil {
		return false
	}
	rid, _ := json.Marshal(promptRequestID)
	if err := c.rpc.Notify(ctx, acp.MethodCancelRequest, &acp.CancelRequestNotification{RequestID: rid}); err != nil {
		return false
	}
	return true
}

// run is initialize → session/new or session/load → session/prompt. It runs
// on its own goroutine: the connection's handler, which answers the agent's
// requests, runs on the read loop and must stay free.
func (c *runClient) run(ctx context.Context) turnOutcome {
	var init acp.InitializeResponse
	err := c.rpc.Call(ctx, acp.MethodInitialize, &acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersion,
		ClientInfo:      &acp.Implementation{Name: "acpd-run", Version: versionString()},
	}, &init)
	if err != nil {
		return failed("", "initialize", err)
	}
	if init.ProtocolVersion != acp.ProtocolVersion {
		return turnOutcome{err: fmt.Errorf("initialize: agent speaks protocol version %d, want %d", init.ProtocolVersion, acp.ProtocolVersion)}
	}

	id := c.opts.sessionID
	if id != "" {
		if !init.AgentCapabilities.LoadSession {
			return turnOutcome{status: exitUsage, err: fmt.Errorf("--session %s: this build cannot continue sessions (the agent does not advertise loadSession)", id)}
		}
		var loaded acp.LoadSessionResponse
		err := c.rpc.Call(ctx, acp.MethodSessionLoad, &acp.LoadSessionRequest{
			SessionID: id, Cwd: c.opts.cwd, MCPServers: []acp.MCPServer{},
		}, &loaded)
		if err != nil {
			o := failed(id, "session/load", err)
			o.during = "--session " + id
			var re *jsonrpc2.Error
			if errors.As(err, &re) && (re.Code == acp.CodeInvalidParams || re.Code == acp.CodeResourceNotFound) {
				o.status = exitUsage // an unknown or unusable session id
			}
			return o
		}
	} else {
		var created acp.NewSessionResponse
		err := c.rpc.Call(ctx, acp.MethodSessionNew, &acp.NewSessionRequest{
			Cwd: c.opts.cwd, MCPServers: []acp.MCPServer{},
		}, &created)
		if err != nil {
			return failed("", "session/new", err)
		}
		id = created.SessionID
	}

	c.mu.Lock()
	c.sessionID = id
	c.mu.Unlock()
	// Updates before this point replay a loaded session's history; only the
	// new turn is reported.
	c.out.startTurn()

	c.sendMu.Lock()
	call, err := c.rpc.DispatchCall(ctx, acp.MethodSessionPrompt, &acp.PromptRequest{
		SessionID: id, Prompt: []acp.ContentBlock{acp.TextBlock(c.opts.prompt)},
	}, jsonrpc2.PickID(promptRequestID))
	c.prompting = err == nil
	c.sendMu.Unlock()
	if err != nil {
		return failed(id, "session/prompt", err)
	}
	var resp acp.PromptResponse
	if err := call.Wait(ctx, &resp); err != nil {
		return failed(id, "session/prompt", err)
	}
	return turnOutcome{sessionID: id, resp: &resp}
}

// failed wraps a failed call: the agent's error as is, anything else (a
// closed connection, a cancelled context) as a local error.
func failed(sessionID, method string, err error) turnOutcome {
	var re *jsonrpc2.Error
	if errors.As(err, &re) {
		return turnOutcome{sessionID: sessionID, rpcErr: re}
	}
	return turnOutcome{sessionID: sessionID, err: fmt.Errorf("%s: %w", method, err)}
}

// toolCallSummary is one tool call in the json result.
type toolCallSummary struct {
	ToolCallID string             `json:"toolCallId"`
	Title      string             `json:"title"`
	Kind       acp.ToolKind       `json:"kind"`
	Status     acp.ToolCallStatus `json:"status"`
}

// usageSummary is the last usage_update of the turn.
type usageSummary struct {
	Used uint64    `json:"used"`
	Size uint64    `json:"size"`
	Cost *acp.Cost `json:"cost,omitempty"`
}

// resultError is a JSON-RPC error in the json result.
type resultError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// runResult is the json output and the last stream-json line.
type runResult struct {
	SessionID  string            `json:"sessionId,omitempty"`
	StopReason acp.StopReason    `json:"stopReason,omitempty"`
	Error      *resultError      `json:"error,omitempty"`
	Text       string            `json:"text"`
	ToolCalls  []toolCallSummary `json:"toolCalls"`
	Usage      *usageSummary     `json:"usage,omitempty"`
}

// runOutput collects the turn and prints it in the chosen format. It is the
// client connection's jsonrpc2.Handler: Handle runs serially on the read
// loop, so updates are printed in wire order.
type runOutput struct {
	format         string
	mode           string
	stdout, stderr io.Writer

	// mu guards everything below: Handle writes it on the read loop and
	// finish reads it on the main goroutine.
	mu        sync.Mutex
	inTurn    bool
	closed    bool // finish has begun: no new replies, no more output
	text      strings.Builder
	calls     []*toolCallSummary
	byID      map[string]*toolCallSummary
	reported  map[string]bool // tool calls whose final line text mode has printed
	usage     *usageSummary
	lastNL    bool // the last text printed to stdout ended with a newline
	replies   sync.WaitGroup
	writeFail error
}

func newRunOutput(stdout, stderr io.Writer, format, mode string) *runOutput {
	return &runOutput{
		format: format, mode: mode, stdout: stdout, stderr: stderr,
		byID: map[string]*toolCallSummary{}, reported: map[string]bool{}, lastNL: true,
	}
}

func (o *runOutput) startTurn() {
	o.mu.Lock()
	o.inTurn = true
	o.mu.Unlock()
}

// Handle answers the agent's notifications and requests.
func (o *runOutput) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	switch req.Method {
	case acp.MethodSessionUpdate:
		if !req.Notif {
			o.reply(ctx, conn, req.ID, struct{}{})
		}
		o.update(params)
	case acp.MethodSessionRequestPermission:
		if req.Notif {
			return
		}
		o.reply(ctx, conn, req.ID, o.refuse(params))
	default:
		if !req.Notif {
			o.replyError(ctx, conn, req.ID, &jsonrpc2.Error{Code: acp.CodeMethodNotFound, Message: "Method not found: " + req.Method})
		}
	}
}

// reply answers from a goroutine: the pipes are synchronous, and a reply
// written from the read loop could wait on an agent that is itself waiting
// for us to read.
func (o *runOutput) reply(ctx context.Context, conn *jsonrpc2.Conn, id jsonrpc2.ID, result any) {
	o.goReply(func() { _ = conn.Reply(context.WithoutCancel(ctx), id, result) })
}

func (o *runOutput) replyError(ctx context.Context, conn *jsonrpc2.Conn, id jsonrpc2.ID, e *jsonrpc2.Error) {
	o.goReply(func() { _ = conn.ReplyWithError(context.WithoutCancel(ctx), id, e) })
}

// goReply starts a reply unless finish has begun; the check and the Add
// share mu so finish's Wait never races a late Add.
func (o *runOutput) goReply(f func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.replies.Go(f)
}

// refuse answers a permission request: headless runs cannot ask anyone, so
// the call is rejected and the agent tells the model the user declined.
func (o *runOutput) refuse(params json.RawMessage) *acp.RequestPermissionResponse {
	var req acp.RequestPermissionRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}
	}
	title := req.ToolCall.ToolCallID
	if req.ToolCall.Title != nil && *req.ToolCall.Title != "" {
		title = *req.ToolCall.Title
	}
	o.mu.Lock()
	o.breakLine()
	if req.ToolCall.Kind == acp.KindSwitchMode {
		// exit_plan_mode: a headless run keeps the approval mode it was
		// started with, so a plan-mode run stays a plan.
		fmt.Fprintf(o.stderr, "acpd run: kept plan mode for %q: a headless run stays in its approval mode %q; run again with --approval-mode default, auto-edit or --yolo to carry the plan out\n", title, o.mode)
	} else {
		fmt.Fprintf(o.stderr, "acpd run: refused %q: approval mode %q asks permission for it and nobody can answer; allow such calls with --yolo (or --approval-mode auto-edit for file edits)\n", title, o.mode)
	}
	o.mu.Unlock()
	for _, kind := range []acp.PermissionOptionKind{acp.RejectOnce, acp.RejectAlways} {
		for _, opt := range req.Options {
			if opt.Kind == kind {
				return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: opt.OptionID}}
			}
		}
	}
	return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}
}

// breakLine ends a partial line of streamed text so stderr lines do not
// land in its middle on a terminal. Callers hold mu.
func (o *runOutput) breakLine() {
	if o.format == formatText && !o.lastNL {
		o.write(o.stdout, "\n")
		o.lastNL = true
	}
}

// write records the first write error (a closed stdout) for the exit status.
func (o *runOutput) write(w io.Writer, s string) {
	if _, err := io.WriteString(w, s); err != nil && o.writeFail == nil {
		o.writeFail = err
	}
}

func (o *runOutput) update(params json.RawMessage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.inTurn {
		return
	}
	var kind struct {
		Update struct {
			Kind string `json:"sessionUpdate"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &kind) == nil && kind.Update.Kind == acp.UpdateAvailableCommands {
		// The command list is the session's, announced after session/new
		// or load, not part of the turn: headless output leaves it out.
		return
	}
	if o.format == formatStreamJSON {
		var buf bytes.Buffer
		if err := json.Compact(&buf, params); err == nil {
			buf.WriteByte('\n')
			o.write(o.stdout, buf.String())
		}
	}
	var n acp.SessionNotification
	if err := json.Unmarshal(params, &n); err != nil {
		return // an update kind this client does not know; nothing to track
	}
	u := n.Update
	switch u.Kind {
	case acp.UpdateAgentMessageChunk:
		if u.Content == nil || u.Content.Type != "text" {
			return
		}
		o.text.WriteString(u.Content.Text)
		if o.format == formatText && u.Content.Text != "" {
			o.write(o.stdout, u.Content.Text)
			o.lastNL = strings.HasSuffix(u.Content.Text, "\n")
		}
	case acp.UpdateToolCall:
		tc := u.ToolCall
		s := &toolCallSummary{ToolCallID: tc.ToolCallID, Title: tc.Title, Kind: tc.Kind, Status: tc.Status}
		if s.Kind == "" {
			s.Kind = acp.KindOther
		}
		if s.Status == "" {
			s.Status = acp.StatusPending
		}
		if _, seen := o.byID[tc.ToolCallID]; !seen {
			o.calls = append(o.calls, s)
		} else {
			for i, c := range o.calls {
				if c.ToolCallID == tc.ToolCallID {
					o.calls[i] = s
				}
			}
		}
		o.byID[tc.ToolCallID] = s
		o.toolLine(s)
	case acp.UpdateToolCallUpdate:
		tu := u.ToolCallUpdate
		s := o.byID[tu.ToolCallID]
		if s == nil {
			s = &toolCallSummary{ToolCallID: tu.ToolCallID, Title: tu.ToolCallID, Kind: acp.KindOther, Status: acp.StatusPending}
			o.calls = append(o.calls, s)
			o.byID[tu.ToolCallID] = s
		}
		if tu.Title != nil {
			s.Title = *tu.Title
		}
		if tu.Kind != "" {
			s.Kind = tu.Kind
		}
		if tu.Status != "" {
			s.Status = tu.Status
		}
		o.toolLine(s)
	case acp.UpdateUsage:
		o.usage = &usageSummary{Used: u.Used, Size: u.Size, Cost: u.Cost}
	}
}

// toolLine prints a tool call's line in text mode once its status is final.
// Callers hold mu.
func (o *runOutput) toolLine(s *toolCallSummary) {
	if o.format != formatText || o.reported[s.ToolCallID] {
		return
	}
	if s.Status != acp.StatusCompleted && s.Status != acp.StatusFailed {
		return
	}
	o.reported[s.ToolCallID] = true
	o.breakLine()
	o.write(o.stderr, fmt.Sprintf("[tool] %s … %s\n", s.Title, s.Status))
}

// finish prints the end of the run: the result object for json formats, the
// outcome on stderr for text.
// It returns the first error writing the output.
func (o *runOutput) finish(t turnOutcome) error {
	o.mu.Lock()
	o.closed, o.inTurn = true, false
	o.mu.Unlock()
	o.replies.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	r := runResult{SessionID: t.sessionID, Text: o.text.String(), ToolCalls: []toolCallSummary{}, Usage: o.usage}
	for _, c := range o.calls {
		r.ToolCalls = append(r.ToolCalls, *c)
	}
	switch {
	case t.rpcErr != nil:
		r.Error = &resultError{Code: t.rpcErr.Code, Message: t.rpcErr.Message}
		if t.rpcErr.Data != nil {
			r.Error.Data = *t.rpcErr.Data
		}
	case t.err != nil:
		r.Error = &resultError{Code: acp.CodeInternalError, Message: t.err.Error()}
	case t.resp != nil:
		r.StopReason = t.resp.StopReason
	}

	if o.format == formatText {
		o.breakLine()
		// Tool calls a cancelled or stopped turn left unfinished.
		for _, c := range o.calls {
			if !o.reported[c.ToolCallID] {
				o.reported[c.ToolCallID] = true
				o.write(o.stderr, fmt.Sprintf("[tool] %s … %s\n", c.Title, c.Status))
			}
		}
		switch {
		case r.Error != nil:
			o.write(o.stderr, "acpd run: "+prefix(t.during)+describeError(r.Error)+"\n")
		case r.StopReason != acp.StopEndTurn:
			o.write(o.stderr, fmt.Sprintf("acpd run: the turn stopped: %s\n", r.StopReason))
		}
		return o.writeFail
	}
	if r.Error != nil {
		o.write(o.stderr, "acpd run: "+prefix(t.during)+describeError(r.Error)+"\n")
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	o.write(o.stdout, string(b)+"\n")
	return o.writeFail
}

func prefix(s string) string {
	if s == "" {
		return ""
	}
	return s + ": "
}

// describeError is the one-line stderr form of an error, naming the loop
// type, the cap rule that fired and the turn's tool calls when loop
// protection stopped the turn.
func describeError(e *resultError) string {
	var d struct {
		Code         string `json:"code"`
		LoopType     string `json:"loopType"`
		CapReason    string `json:"capReason"`
		ToolCalls    *int   `json:"toolCalls"`
		RepeatedTool string `json:"repeatedTool"`
		RepeatCount  int    `json:"repeatCount"`
	}
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil && d.Code == "LOOP_DETECTED" {
		if d.LoopType != "" {
			var why []string
			if d.CapReason != "" {
				why = append(why, d.CapReason+" cap")
			}
			if d.ToolCalls != nil {
				why = append(why, fmt.Sprintf("%d tool calls", *d.ToolCalls))
			}
			if d.RepeatedTool != "" {
				why = append(why, fmt.Sprintf("%s repeated %d times", d.RepeatedTool, d.RepeatCount))
			}
			if len(why) > 0 {
				return fmt.Sprintf("loop protection stopped the turn (%s; %s): %s", d.LoopType, strings.Join(why, ", "), e.Message)
			}
			return fmt.Sprintf("loop protection stopped the turn (%s): %s", d.LoopType, e.Message)
		}
		return "loop protection stopped the turn: " + e.Message
	}
	if e.Code == acp.CodeInternalError {
		return "error: " + e.Message
	}
	return fmt.Sprintf("error %d: %s", e.Code, e.Message)
}
