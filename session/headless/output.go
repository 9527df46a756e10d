package headless

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/display"
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
	}
}

func (o *Output) startTurn() {
	o.mu.Lock()
	o.inTurn = true
	o.mu.Unlock()
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
	o.breakLine()
	switch {
	case req.ToolCall.Kind == acp.KindSwitchMode:
		// exit_plan_mode: a headless run keeps the approval mode it was
		// started with, so a plan-mode run stays a plan.
		fmt.Fprintf(o.stderr, "acpd run: kept plan mode for %q: a headless run stays in its approval mode %q; run again with --approval-mode default, auto-edit or --yolo to carry the plan out\n", title, o.mode)
	case req.Meta[acp.MetaPermission] == acp.PermissionRewindConflict:
		// Asked in every approval mode: a rewind never overwrites
		// someone's later work unless a person says so.
		fmt.Fprintf(o.stderr, "acpd run: kept the files changed since the rewound turns (%s): replacing them needs a person's answer; rewind from an editor to replace them\n", title)
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
	switch u.Kind {
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
	}
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

	if o.format == FormatText {
		o.breakLine()
		// Tool calls a cancelled or stopped turn left unfinished.
		for _, c := range o.calls {
			if !o.reported[c.ToolCallID] {
				o.reported[c.ToolCallID] = true
				o.printTool(c)
			}
		}
		switch {
		case r.Error != nil:
			o.write(o.stderr, "acpd run: "+prefix(t.During)+describeError(r.Error)+"\n")
		case r.StopReason != acp.StopEndTurn:
			o.write(o.stderr, fmt.Sprintf("acpd run: the turn stopped: %s\n", r.StopReason))
		}
		return o.writeFail
	}
	if r.Error != nil {
		o.write(o.stderr, "acpd run: "+prefix(t.During)+describeError(r.Error)+"\n")
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
func describeError(e *ResultError) string {
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
