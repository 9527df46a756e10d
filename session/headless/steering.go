package headless

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpd/acpd/acp"
)

// Steering a headless turn (--input-format stream-json): every input line
// after the prompt is sent to the running turn as _session/steering with
// idleBehavior "promptRequired", so a line never starts a turn nobody owns.
// Decisions where the extension is silent:
//   - A run is one turn. A line that finds the turn ended is not made a
//     follow-up turn: the run's exit status and result are the turn's, and
//     a script that wants another turn runs `acpd run --session ID`. Such a
//     line is reported undelivered, with its content, so the script can
//     send it there.
//   - Lines are sent once the turn has shown it runs (its first update):
//     the agent takes steers from the moment its turn starts, and a line
//     sent before would find no turn. Until then they wait, in order.
//   - The end of the input ends the input, nothing else: the turn goes on.
//     The run ends with the turn; input not yet read then is not read.
//   - A malformed line is an error on stderr naming the line and the
//     field; the lines after it are read as usual.

// Why a steering line did not reach the model (UndeliveredSteer.Reason).
const (
	// UndeliveredNotSent: the turn ended (or was being cancelled) before
	// the line could be sent.
	UndeliveredNotSent = "notSent"
	// UndeliveredNoRunningTurn: the agent found no running turn
	// (promptRequired): the line raced the end of the turn.
	UndeliveredNoRunningTurn = "noRunningTurn"
	// UndeliveredTurnEnded: the turn took the line (injected) but ended —
	// cancelled, stopped or failed — before its next safe point.
	UndeliveredTurnEnded = "turnEnded"
	// UndeliveredRefused: the agent answered the line with an error.
	UndeliveredRefused = "refused"
	// UndeliveredNoAnswer: the agent had not answered when the run ended;
	// whether the turn took it is unknown.
	UndeliveredNoAnswer = "noAnswer"
)

// SteerSummary is one steering line in the json result.
type SteerSummary struct {
	Line int `json:"line"`
	// Outcome is the agent's answer (injected, promptRequired); empty
	// when the line was never sent or was refused.
	Outcome   string `json:"outcome,omitempty"`
	MessageID string `json:"messageId,omitempty"`
	// Delivered: the model read it (the agent echoed it where it landed).
	Delivered bool         `json:"delivered"`
	Error     *ResultError `json:"error,omitempty"`
}

// UndeliveredSteer is a steering line that never reached the model, with
// its content to send again.
type UndeliveredSteer struct {
	Line      int                `json:"line"`
	MessageID string             `json:"messageId,omitempty"`
	Reason    string             `json:"reason"`
	Prompt    []acp.ContentBlock `json:"prompt"`
}

// steerEvent is stream-json's line for a steering line's answer.
type steerEvent struct {
	Event     string       `json:"event"` // "steering"
	Line      int          `json:"line"`
	Outcome   string       `json:"outcome,omitempty"`
	MessageID string       `json:"messageId,omitempty"`
	Error     *ResultError `json:"error,omitempty"`
}

// steerLine is one steering line read, and what became of it.
type steerLine struct {
	SteerSummary
	prompt []acp.ContentBlock
	reason string // set when it was not delivered for sure
}

// steerInput reads the input lines and sends them to the running turn, one
// at a time, in order.
type steerInput struct {
	in  *Input
	out *Output
	c   *runClient

	mu      sync.Mutex
	queue   []*steerLine // read, not yet sent
	stopped bool
	wake    chan struct{} // a line was queued, or stop
	stopCh  chan struct{}
	sent    chan struct{} // closed when send returns
}

func newSteerInput(in *Input, out *Output, c *runClient) *steerInput {
	return &steerInput{in: in, out: out, c: c, wake: make(chan struct{}, 1), stopCh: make(chan struct{}), sent: make(chan struct{})}
}

// start starts reading and sending. The reader may stay blocked in a read
// after the run: input unread when the turn ends is never read.
func (s *steerInput) start(ctx context.Context) {
	go s.read()
	go func() {
		defer close(s.sent)
		s.send(ctx)
	}()
}

func (s *steerInput) read() {
	for {
		n, blocks, err := s.in.Next()
		var le *LineError
		switch {
		case errors.As(err, &le):
			s.out.badLine(le)
			continue
		case errors.Is(err, io.EOF):
			return
		case err != nil:
			s.out.inputFailed(err)
			return
		}
		l := &steerLine{SteerSummary: SteerSummary{Line: n}, prompt: blocks}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return
		}
		s.queue = append(s.queue, l)
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// send sends the queued lines once the turn runs, until stop.
func (s *steerInput) send(ctx context.Context) {
	select {
	case <-s.out.running:
	case <-s.stopCh:
		return
	}
	for {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return
		}
		var l *steerLine
		if len(s.queue) > 0 {
			l, s.queue = s.queue[0], s.queue[1:]
		}
		s.mu.Unlock()
		if l == nil {
			select {
			case <-s.wake:
			case <-s.stopCh:
				return
			}
			continue
		}
		resp, err := s.c.conn.Steer(ctx, &acp.SteeringRequest{
			SessionID: s.c.getSessionID(), Prompt: l.prompt,
			Meta: acp.Meta{"steering": map[string]any{"idleBehavior": acp.SteerIdlePromptRequired}},
		})
		s.out.steerAnswered(l, resp, err)
	}
}

// stop ends sending: lines still queued are not sent. It returns the
// channel closed once the line being sent, if any, has its answer.
func (s *steerInput) stop() <-chan struct{} {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.stopCh)
	}
	s.mu.Unlock()
	return s.sent
}

// unsent are the lines never sent (after stop).
func (s *steerInput) unsent() []*steerLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.queue
	s.queue = nil
	return out
}

// markRunning notes that the turn runs: steering lines may be sent.
// Callers hold mu.
func (o *Output) markRunning(kind string) {
	switch kind {
	case acp.UpdateAgentMessageChunk, acp.UpdateAgentThoughtChunk, acp.UpdateToolCall, acp.UpdateToolCallUpdate,
		acp.UpdatePlan, acp.UpdateSessionInfo, acp.UpdateUserMessageChunk:
		o.runningOnce.Do(func() { close(o.running) })
	}
}

// badLine reports a malformed input line on stderr.
func (o *Output) badLine(e *LineError) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.breakLine()
	o.write(o.stderr, "acpd run: "+e.Error()+"; the line is skipped\n")
}

// inputFailed reports a failed read of the input on stderr.
func (o *Output) inputFailed(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.breakLine()
	o.write(o.stderr, fmt.Sprintf("acpd run: reading the input: %v; no more steering lines are read\n", err))
}

// steerAnswered records and reports the agent's answer to a steering line.
func (o *Output) steerAnswered(l *steerLine, resp *acp.SteeringResponse, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.steers = append(o.steers, l)
	ev := steerEvent{Event: "steering", Line: l.Line}
	var re *jsonrpc2.Error
	switch {
	case errors.As(err, &re):
		l.Error = &ResultError{Code: re.Code, Message: re.Message}
		if re.Data != nil {
			l.Error.Data = *re.Data
		}
		l.reason, ev.Error = UndeliveredRefused, l.Error
	case err != nil:
		l.reason = UndeliveredNoAnswer
		ev.Error = &ResultError{Code: acp.CodeInternalError, Message: err.Error()}
	default:
		l.Outcome, ev.Outcome = resp.Outcome, resp.Outcome
		if id, _ := resp.Meta["messageId"].(string); id != "" {
			l.MessageID, ev.MessageID = id, id
			o.steerByID[id] = l
		}
		if resp.Outcome != acp.SteerInjected {
			l.reason = UndeliveredNoRunningTurn
		}
	}
	switch o.format {
	case FormatStreamJSON:
		if b, err := json.Marshal(ev); err == nil {
			o.write(o.stdout, string(b)+"\n")
		}
	case FormatText:
		o.breakLine()
		switch {
		case l.Error != nil:
			o.write(o.stderr, fmt.Sprintf("acpd run: input line %d: steering message refused: %s\n", l.Line, describeError(l.Error)))
		case l.Outcome == acp.SteerInjected:
			o.write(o.stderr, fmt.Sprintf("acpd run: input line %d: steering message taken by the running turn\n", l.Line))
		}
	}
}

// steerDelivered notes the echo of a delivered steering message. Callers
// hold mu.
func (o *Output) steerDelivered(messageID string) {
	l := o.steerByID[messageID]
	if l == nil || l.Delivered {
		return
	}
	l.Delivered = true
	if o.format == FormatText {
		o.breakLine()
		o.write(o.stderr, fmt.Sprintf("acpd run: input line %d: steering message delivered to the model\n", l.Line))
	}
}

// undeliveredIDs are the messageIds the turn's answer lists as taken and
// never delivered (_meta.steering.undelivered, or an error's
// data.steering.undelivered).
func undeliveredIDs(t Outcome) []string {
	var raw any
	switch {
	case t.Resp != nil:
		raw = t.Resp.Meta["steering"]
	case t.RPCErr != nil && t.RPCErr.Data != nil:
		var d map[string]any
		if json.Unmarshal(*t.RPCErr.Data, &d) == nil {
			raw = d["steering"]
		}
	}
	st, _ := raw.(map[string]any)
	list, _ := st["undelivered"].([]any)
	var ids []string
	for _, e := range list {
		m, _ := e.(map[string]any)
		if id, _ := m["messageId"].(string); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// steerUnsent records lines the run never sent.
func (o *Output) steerUnsent(ls []*steerLine) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range ls {
		l.reason = UndeliveredNotSent
		o.steers = append(o.steers, l)
	}
}

// steeringResult fills the result's steering lists. Callers hold mu.
func (o *Output) steeringResult(t Outcome, r *Result) {
	slices.SortFunc(o.steers, func(a, b *steerLine) int { return a.Line - b.Line })
	for _, id := range undeliveredIDs(t) {
		if l := o.steerByID[id]; l != nil && !l.Delivered {
			l.reason = UndeliveredTurnEnded
		}
	}
	for _, l := range o.steers {
		if l.Outcome == acp.SteerInjected && !l.Delivered && l.reason == "" {
			// Taken, neither echoed nor listed: the answer was lost with
			// the connection; say so rather than guess.
			l.reason = UndeliveredNoAnswer
		}
		r.Steers = append(r.Steers, l.SteerSummary)
		if l.reason != "" {
			r.Undelivered = append(r.Undelivered, UndeliveredSteer{Line: l.Line, MessageID: l.MessageID, Reason: l.reason, Prompt: l.prompt})
		}
	}
}

// undeliveredWhy is a reason in words, for stderr.
func undeliveredWhy(reason string, stop acp.StopReason) string {
	switch reason {
	case UndeliveredNotSent:
		return "the turn ended before it could be sent"
	case UndeliveredNoRunningTurn:
		return "the turn had ended when it arrived"
	case UndeliveredTurnEnded:
		if stop != "" {
			return fmt.Sprintf("the turn ended (%s) before it reached the model", stop)
		}
		return "the turn ended before it reached the model"
	case UndeliveredRefused:
		return "the agent refused it"
	}
	return "the agent did not answer it before the run ended"
}
