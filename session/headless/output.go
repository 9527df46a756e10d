package headless

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/compactwire"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/policy"
)

// ToolCallSummary is one tool call in the json result.
type ToolCallSummary struct {
	ToolCallID string             `json:"toolCallId"`
	Title      string             `json:"title"`
	Kind       acp.ToolKind       `json:"kind"`
	Status     acp.ToolCallStatus `json:"status"`
	// ParentToolCallID is the agent call whose subagent made this call.
	ParentToolCallID string `json:"parentToolCallId,omitempty"`
}

// UsageSummary is the last usage_update of the turn.
type UsageSummary struct {
	Used uint64    `json:"used"`
	Size uint64    `json:"size"`
	Cost *acp.Cost `json:"cost,omitempty"`
}

// ResultError is a JSON-RPC error in the json result.
type ResultError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Result is the json output and the last stream-json line.
type Result struct {
	SessionID  string            `json:"sessionId,omitempty"`
	StopReason acp.StopReason    `json:"stopReason,omitempty"`
	Error      *ResultError      `json:"error,omitempty"`
	Text       string            `json:"text"`
	ToolCalls  []ToolCallSummary `json:"toolCalls"`
	Usage      *UsageSummary     `json:"usage,omitempty"`
	// TurnUsage is the tokens of the turn's model requests (summaries and
	// subagents included, and apart), and its cost with prices set.
	TurnUsage *session.TurnUsage `json:"turnUsage,omitempty"`
	// Budget names the token budget the turn stopped at, if any
	// (maxTokensPerTurn or sessionTokenLimit).
	Budget string `json:"budget,omitempty"`
	// Steers are the steering lines of stream-json input, in input
	// order; Undelivered those of them that never reached the model.
	Steers      []SteerSummary     `json:"steers,omitempty"`
	Undelivered []UndeliveredSteer `json:"undelivered,omitempty"`
}

// Output collects the turn and prints it in the chosen format. It is the
// client connection's Handler: its methods run serially on the read loop,
// so updates are printed in wire order.
type Output struct {
	format         string
	mode           string
	stdout, stderr io.Writer
	// answers answer the model's questions (answers.go).
	answers answers

	// mu guards everything below: the read loop writes it and Finish reads
	// it on the main goroutine.
	mu       sync.Mutex
	inTurn   bool
	text     strings.Builder
	calls    []*ToolCallSummary
	byID     map[string]*ToolCallSummary
	reported map[string]bool // tool calls whose final line text mode has printed
	// lastParent is the agent call whose subagent's line text mode printed
	// last: a line of another run is put under its own agent call's title.
	lastParent string
	usage      *UsageSummary
	lastNL     bool // the last text printed to stdout ended with a newline
	writeFail  error

	// live: stderr is a terminal, where progress is shown as it happens.
	live bool
	// continueCmd continues the session (%s: its id); rewind is the turn
	// a rewind-only run undoes.
	continueCmd string
	rewind      int
	sessionID   string
	// refused counts what the turn needed a person's yes for and did not
	// get: it makes a turn that ended normally exit ExitRefused.
	refused int
	// lastActivity is when the agent last said something during the turn;
	// waitedFor is how long the silence since has been reported for.
	lastActivity time.Time
	waitedFor    time.Duration
	// steers are the steering lines sent or left unsent (steering.go),
	// steerByID those the turn took, by messageId.
	steers    []*steerLine
	steerByID map[string]*steerLine
	// running is closed at the turn's first update of its own: it runs
	// and takes steering messages.
	running     chan struct{}
	runningOnce sync.Once
}

func NewOutput(stdout, stderr io.Writer, format, mode string) *Output {
	// Text output is read on a terminal, and what it prints — the model's
	// answer, tool titles, error messages quoting them — is the model's
	// or the workspace's: its control and bidi characters are shown
	// escaped, never acted on. JSON output is left exact (its encoding
	// escapes control characters already).
	stderr = display.Writer(stderr)
	if format == FormatText {
		stdout = display.Writer(stdout)
	}
	return &Output{
		format: format, mode: mode, stdout: stdout, stderr: stderr,
		byID: map[string]*ToolCallSummary{}, reported: map[string]bool{}, lastNL: true,
		steerByID: map[string]*steerLine{}, running: make(chan struct{}),
	}
}

func (o *Output) startTurn(sessionID string) {
	o.mu.Lock()
	o.inTurn, o.sessionID = true, sessionID
	o.activity()
	o.mu.Unlock()
}

// activity notes that the agent said something. Callers hold mu.
func (o *Output) activity() {
	o.lastActivity, o.waitedFor = time.Now(), 0
}

func (o *Output) refusedCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused
}

// silenceSteps are the silences reported while a turn waits: a line at
// each, then one a minute. A model request may take model.requestTimeout
// (two minutes by default) before it is retried, so a quiet run would
// otherwise look hung.
var silenceSteps = []time.Duration{5 * time.Second, 15 * time.Second, 30 * time.Second, 60 * time.Second}

// nextSilence is the silence at which the next waiting line is due after
// one reported for d (0: none yet).
func nextSilence(d time.Duration) time.Duration {
	for _, s := range silenceSteps {
		if s > d {
			return s
		}
	}
	return d + time.Minute
}

// watchSilence reports, while the turn runs, every long silence of the
// agent: what the turn waits for (the model, or a tool call still
// running) and for how long — on stderr when it is a terminal, as an event
// line in stream-json. It returns the function that stops it.
func (o *Output) watchSilence() (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				o.checkSilence(now)
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

// waitingEvent is stream-json's line for a silence: acpd run's own, told
// apart from the agent's update lines by "event".
type waitingEvent struct {
	Event      string `json:"event"` // "waiting"
	SessionID  string `json:"sessionId"`
	WaitingFor string `json:"waitingFor"` // "model" or "tool"
	ToolCallID string `json:"toolCallId,omitempty"`
	Title      string `json:"title,omitempty"`
	Seconds    int    `json:"seconds"`
}

func (o *Output) checkSilence(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.inTurn || (!o.live && o.format != FormatStreamJSON) {
		return
	}
	silent := now.Sub(o.lastActivity)
	next := nextSilence(o.waitedFor)
	if silent < next {
		return
	}
	o.waitedFor = next
	ev := waitingEvent{Event: "waiting", SessionID: o.sessionID, WaitingFor: "model", Seconds: int(next / time.Second)}
	for _, c := range o.calls {
		if c.Status == acp.StatusInProgress || c.Status == acp.StatusPending {
			ev.WaitingFor, ev.ToolCallID, ev.Title = "tool", c.ToolCallID, c.Title
		}
	}
	if o.format == FormatStreamJSON {
		b, err := json.Marshal(ev)
		if err == nil {
			o.write(o.stdout, string(b)+"\n")
		}
	}
	if o.live {
		what := "the model"
		if ev.WaitingFor == "tool" {
			what = fmt.Sprintf("%q", ev.Title)
		}
		o.breakLine()
		o.write(o.stderr, fmt.Sprintf("acpd run: waiting for %s: nothing for %d s\n", what, ev.Seconds))
	}
}

// Permission answers a permission request: headless runs cannot ask anyone,
// so the call is rejected and the agent tells the model the user declined.
func (o *Output) Permission(params json.RawMessage) *acp.RequestPermissionResponse {
	var req acp.RequestPermissionRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}
	}
	title := req.ToolCall.ToolCallID
	if req.ToolCall.Title != nil && *req.ToolCall.Title != "" {
		title = *req.ToolCall.Title
	}
	o.mu.Lock()
	o.activity()
	o.breakLine()
	if req.ToolCall.Kind != acp.KindSwitchMode {
		// A plan-mode run keeps its plan by design; anything else refused
		// is work the prompt asked for that was not done.
		o.refused++
	}
	switch {
	case req.ToolCall.Kind == acp.KindSwitchMode:
		// exit_plan_mode: a headless run keeps the approval mode it was
		// started with, so a plan-mode run stays a plan.
		fmt.Fprintf(o.stderr, "acpd run: kept plan mode for %q: a headless run stays in its approval mode %q; run again with --approval-mode default, auto-edit or --yolo to carry the plan out\n", title, o.mode)
	case req.Meta[acp.MetaPermission] == acp.PermissionRewindConflict:
		// Asked in every approval mode: a rewind never overwrites
		// someone's later work unless a person says so.
		fmt.Fprintf(o.stderr, "acpd run: kept the files changed since the rewound turns (%s): replacing them needs a person's answer; rewind from an editor to replace them\n", title)
	case req.Meta[acp.MetaPermission] == acp.PermissionSandboxNetwork:
		// A confined command's host: the run's configuration decides.
		fmt.Fprintf(o.stderr, "acpd run: refused network access for %q: the host is not in tools.sandboxAllowedDomains and nobody can answer; add it there in the config file (or ACPD_SANDBOX_ALLOWED_DOMAINS)\n", title)
	case req.Meta[acp.MetaPermission] == policy.PermissionTrust:
		// acpd run never trusts a workspace by itself: its allow rules and
		// hooks stay off until a person trusts them.
		fmt.Fprintf(o.stderr, "acpd run: left the workspace's allow rules, hooks and MCP servers off: acpd run never trusts a workspace by itself; review its settings and run acpd trust DIR to trust them\n")
	case req.Meta[acp.MetaPermission] == acp.PermissionPrivateNetwork:
		// Asked in every approval mode: --yolo would not help.
		fmt.Fprintf(o.stderr, "acpd run: refused %q: it reaches a loopback or private network address, which acpd asks about every time, in every approval mode (--yolo too), and nobody can answer; "+
			"allow such fetches with tools.webFetchAllowPrivate = true in the config file or ACPD_WEB_FETCH_ALLOW_PRIVATE=true\n", title)
	default:
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
func (o *Output) breakLine() {
	if o.format == FormatText && !o.lastNL {
		o.write(o.stdout, "\n")
		o.lastNL = true
	}
}

// write records the first write error (a closed stdout) for the exit status.
func (o *Output) write(w io.Writer, s string) {
	if _, err := io.WriteString(w, s); err != nil && o.writeFail == nil {
		o.writeFail = err
	}
}

// Update records and prints one session/update.
func (o *Output) Update(params json.RawMessage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.inTurn {
		return
	}
	o.activity()
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
	if o.format == FormatStreamJSON {
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
	o.markRunning(u.Kind)
	switch u.Kind {
	case acp.UpdateUserMessageChunk:
		if u.MessageID != "" {
			o.steerDelivered(u.MessageID)
		}
	case acp.UpdateAgentMessageChunk:
		if u.Content == nil || u.Content.Type != "text" {
			return
		}
		o.text.WriteString(u.Content.Text)
		if o.format == FormatText && u.Content.Text != "" {
			o.write(o.stdout, u.Content.Text)
			o.lastNL = strings.HasSuffix(u.Content.Text, "\n")
		}
	case acp.UpdateToolCall:
		tc := u.ToolCall
		s := &ToolCallSummary{ToolCallID: tc.ToolCallID, Title: tc.Title, Kind: tc.Kind, Status: tc.Status,
			ParentToolCallID: parentOf(tc.Meta)}
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
		if tc.Name == compactwire.ToolName && s.Status == acp.StatusInProgress && o.live && o.format != FormatStreamJSON {
			// Compaction holds the turn up for a model request of its
			// own; its line comes when it ends.
			o.breakLine()
			o.write(o.stderr, "acpd run: compacting the conversation to fit the model's window…\n")
		}
		o.toolLine(s)
	case acp.UpdateToolCallUpdate:
		tu := u.ToolCallUpdate
		s := o.byID[tu.ToolCallID]
		if s == nil {
			s = &ToolCallSummary{ToolCallID: tu.ToolCallID, Title: tu.ToolCallID, Kind: acp.KindOther, Status: acp.StatusPending}
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
		if p := parentOf(tu.Meta); p != "" {
			s.ParentToolCallID = p
		}
		o.toolLine(s)
	case acp.UpdateUsage:
		o.usage = &UsageSummary{Used: u.Used, Size: u.Size, Cost: u.Cost}
	case acp.UpdateNotice:
		o.notice(u.Notice)
	}
}

// notice prints a notice on stderr in text and json output (stream-json
// has it as an update line): warnings and errors always, progress (info:
// a retry) when stderr is a terminal. Callers hold mu.
func (o *Output) notice(n *acp.Notice) {
	if n == nil || o.format == FormatStreamJSON || (n.Severity == acp.SeverityInfo && !o.live) {
		return
	}
	line := "acpd run: " + n.Title
	if n.Description != "" {
		line += ": " + n.Description
	}
	o.breakLine()
	o.write(o.stderr, line+"\n")
}

// toolLine prints a tool call's line in text mode once its status is final.
// Callers hold mu.
func (o *Output) toolLine(s *ToolCallSummary) {
	if o.format != FormatText || o.reported[s.ToolCallID] {
		return
	}
	if s.Status != acp.StatusCompleted && s.Status != acp.StatusFailed {
		return
	}
	o.reported[s.ToolCallID] = true
	o.breakLine()
	o.printTool(s)
}

// printTool prints a tool call's line: a subagent's calls indented under
// their agent call's title, which is repeated when the lines of concurrent
// runs alternate. Callers hold mu.
func (o *Output) printTool(s *ToolCallSummary) {
	p := s.ParentToolCallID
	if p == "" {
		o.lastParent = ""
		o.write(o.stderr, fmt.Sprintf("[tool] %s … %s\n", s.Title, s.Status))
		return
	}
	if p != o.lastParent {
		title := p
		if ps := o.byID[p]; ps != nil {
			title = ps.Title
		}
		o.write(o.stderr, fmt.Sprintf("[agent] %s\n", title))
		o.lastParent = p
	}
	o.write(o.stderr, fmt.Sprintf("  [tool] %s … %s\n", s.Title, s.Status))
}

// parentOf reads the agent call's id off a subagent's tool-call frame.
func parentOf(m acp.Meta) string {
	p, _ := m[acp.MetaParentToolCallID].(string)
	return p
}

// Finish prints the end of the run: the result object for json formats, the
// outcome on stderr for text.
// It returns the first error writing the output.
func (o *Output) Finish(t Outcome) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inTurn = false
	r := Result{SessionID: t.SessionID, Text: o.text.String(), ToolCalls: []ToolCallSummary{}, Usage: o.usage}
	for _, c := range o.calls {
		r.ToolCalls = append(r.ToolCalls, *c)
	}
	switch {
	case t.RPCErr != nil:
		r.Error = &ResultError{Code: t.RPCErr.Code, Message: t.RPCErr.Message}
		if t.RPCErr.Data != nil {
			r.Error.Data = *t.RPCErr.Data
		}
	case t.Err != nil:
		r.Error = &ResultError{Code: acp.CodeInternalError, Message: t.Err.Error()}
	case t.Resp != nil:
		r.StopReason = t.Resp.StopReason
		r.TurnUsage, r.Budget = session.TurnMeta(t.Resp.Meta)
	}
	o.steeringResult(t, &r)

	if o.format == FormatText {
		o.breakLine()
		// Tool calls a cancelled or stopped turn left unfinished.
		for _, c := range o.calls {
			if !o.reported[c.ToolCallID] {
				o.reported[c.ToolCallID] = true
				o.printTool(c)
			}
		}
		for _, u := range r.Undelivered {
			o.write(o.stderr, fmt.Sprintf("acpd run: input line %d: steering message not delivered: %s\n", u.Line, undeliveredWhy(u.Reason, r.StopReason)))
		}
		switch {
		case r.Error != nil:
			o.write(o.stderr, "acpd run: "+prefix(t.During)+o.describeError(r.Error)+"\n")
		case r.StopReason != acp.StopEndTurn:
			o.write(o.stderr, fmt.Sprintf("acpd run: the turn stopped: %s\n", r.StopReason))
		case o.refused > 0:
			o.write(o.stderr, fmt.Sprintf("acpd run: the turn ended with %d tool call(s) refused (see above): exit status %d\n", o.refused, ExitRefused))
		}
		if r.SessionID != "" && o.continueCmd != "" {
			o.write(o.stderr, fmt.Sprintf("acpd run: session %s; continue it with: %s\n", r.SessionID, fmt.Sprintf(o.continueCmd, r.SessionID)))
		}
		return o.writeFail
	}
	if r.Error != nil {
		o.write(o.stderr, "acpd run: "+prefix(t.During)+o.describeError(r.Error)+"\n")
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

// describeError is the one-line stderr form of an error: for a loop stop
// the rule that fired in plain words, for a failed rewind what to run to
// see the turns.
func (o *Output) describeError(e *ResultError) string {
	if msg, ok := strings.CutPrefix(e.Message, "/rewind: "); ok && o.rewind > 0 {
		return fmt.Sprintf("--rewind %d: %s; acpd checkpoints --session %s lists the turns and what each changed", o.rewind, msg, o.sessionID)
	}
	return describeError(e)
}

// loopData are the facts of a loop stop's error data.
type loopData struct {
	Code         string `json:"code"`
	LoopType     string `json:"loopType"`
	CapReason    string `json:"capReason"`
	ToolCalls    *int   `json:"toolCalls"`
	Max          int    `json:"maxToolCallsPerTurn"`
	RepeatedTool string `json:"repeatedTool"`
	RepeatCount  int    `json:"repeatCount"`
}

// why says which rule stopped the turn: the cap's rule with the cap in
// force (the turn's count includes the batch that would have crossed it,
// so it is more than an explicit cap), or the repeated call.
func (d loopData) why() string {
	calls := ""
	if d.ToolCalls != nil {
		calls = fmt.Sprintf("%d tool calls with the stopped batch", *d.ToolCalls)
	}
	repeated := ""
	if d.RepeatedTool != "" {
		repeated = fmt.Sprintf("%s repeated %d times", d.RepeatedTool, d.RepeatCount)
	}
	var parts []string
	switch d.CapReason {
	case "explicit":
		parts = append(parts, fmt.Sprintf("explicit cap of %d", d.Max), calls)
	case "stuck", "stuck_after_warning":
		parts = append(parts, fmt.Sprintf("past the adaptive cap of %d with %s", d.Max, repeated), calls)
		repeated = ""
		if d.CapReason == "stuck_after_warning" {
			parts = append(parts, "after a warning")
		}
	case "backstop":
		parts = append(parts, fmt.Sprintf("backstop of %d tool calls", d.Max*10), calls)
	case "":
		parts = append(parts, repeated)
		repeated = ""
	default:
		parts = append(parts, d.CapReason+" cap", calls)
	}
	if repeated != "" && d.CapReason != "explicit" && d.CapReason != "backstop" {
		parts = append(parts, repeated)
	}
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// describeError is the one-line stderr form of an error, naming the loop
// type, the cap rule that fired and the turn's tool calls when loop
// protection stopped the turn.
func describeError(e *ResultError) string {
	var d loopData
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil && d.Code == "LOOP_DETECTED" {
		if d.LoopType == "" {
			return "loop protection stopped the turn: " + e.Message
		}
		if why := d.why(); why != "" {
			return fmt.Sprintf("loop protection stopped the turn (%s: %s): %s", d.LoopType, why, e.Message)
		}
		return fmt.Sprintf("loop protection stopped the turn (%s): %s", d.LoopType, e.Message)
	}
	if e.Code == acp.CodeInternalError {
		return "error: " + e.Message
	}
	return fmt.Sprintf("error %d: %s", e.Code, e.Message)
}
