// Package agentguard is `acpd guard`: acpd's loop protection, transcripts
// for `acpd stats` and telemetry in front of another ACP agent. The editor
// starts `acpd guard -- AGENT…` instead of the agent; the guard starts the
// agent and relays ACP between the two (package acp/proxy), unchanged but
// for what it must do to stop a runaway turn. It watches each prompt turn's
// tool calls (turnguard.Observer), decides with the daemon's own guard
// (turnguard.Guard), and when a call crosses a limit it refuses the turn's
// permission requests, cancels the turn at the agent and answers the
// editor's prompt with acpd's loop error, without waiting on an agent that
// answers the cancel late, wrongly or never (guard.md §3).
package agentguard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/proxy"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/policy"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/telemetry"
	"github.com/acpd/acpd/session/turnguard"
)

// DefaultCancelGrace is [guard] cancelGrace's default: how long a stopped
// turn waits for the agent's own answer to the cancel before the guard
// answers the editor. Agents that honour session/cancel answer within
// milliseconds; the wait only lets their last updates reach the editor
// before the prompt's answer.
const DefaultCancelGrace = 2 * time.Second

// failedErrorType is the error type of a failed call in the repeated-failure
// guard. Decision: ACP reports only that a call failed, not why, so every
// failure of one tool is the same failure; the reducer still resets on any
// success and on a failure the user caused by refusing permission.
const failedErrorType = "tool_call_failed"

// Options configure the guard.
type Options struct {
	Cap               loopdetect.Cap
	SkipLoopDetection bool
	FailureGuard      loopdetect.FailureMode
	// CancelGrace bounds the wait for the agent's answer after the guard
	// cancels a turn (0: DefaultCancelGrace).
	CancelGrace time.Duration
	// Store receives one transcript per agent session (nil: none).
	Store *store.Store
	// Telemetry exports the turns (nil: off).
	Telemetry *telemetry.Telemetry
	// AgentName names the agent until its initialize answer does (the
	// command's base name).
	AgentName string
	// Cwd stands in for a session's folder the guard did not see created.
	Cwd string
	// Policy answers the agent's permission requests from acpd's rules and
	// hooks (nil: every request goes to the editor).
	Policy *policy.Engine
	Logger *slog.Logger
}

// Engine holds the state of one guarded connection. Its hooks run on the
// proxy's two relay goroutines and on timers; mu guards everything.
type Engine struct {
	opts Options
	log  *slog.Logger
	p    *proxy.Proxy

	mu        sync.Mutex
	agentName string
	// reqs are the editor's requests the guard follows, by proxy.IDKey.
	reqs     map[string]editorReq
	sessions map[string]*guardedSession
	turns    map[string]*turn // by the prompt request's IDKey
	// perms are the agent's permission requests forwarded to the editor
	// and not answered yet, by IDKey of the agent's id.
	perms map[string]*permission
	// withdrawn are permission requests the guard answered itself after
	// forwarding them; the editor's late answer is dropped.
	withdrawn map[string]bool
	closed    bool // the agent is gone: no more timers
	// saidNoResults: the fallback from "results" to "calls" was logged.
	saidNoResults bool
	// agentSteers: the agent's initialize answer advertised
	// _session/steering (_meta.steering.supported).
	agentSteers bool
}

type editorReq struct {
	method    string
	sessionID string
	cwd       string
	prompt    []byte // a steering request's prompt, for the turn it may start
}

// guardedSession is one agent session.
type guardedSession struct {
	id      string
	cwd     string
	loading int   // session/load or resume requests not answered: replayed history, not a turn
	turn    *turn // the running prompt turn, nil between turns
	w       *store.Writer
	noStore bool // recording failed once; not retried
	// pol is the session's rules and hooks (nil until the first request
	// the policy judges).
	pol *policy.Session
}

// turn is one prompt turn.
type turn struct {
	s        *guardedSession
	rawID    []byte
	g        *turnguard.Guard
	obs      *turnguard.Observer
	stopped  bool // the guard stopped it
	answered bool // the editor has its answer
	ended    bool // the transcript and telemetry have its end
	timer    *time.Timer
	// pending is a call whose first frame crossed a limit before its input
	// was complete; the stop waits for the agent's next message (see
	// observe).
	pending      *turnguard.Call
	pendingTimer *time.Timer

	ctx   context.Context
	span  *telemetry.Turn
	tools map[string]*telemetry.Tool
	// decisions are who decided about a call other than the editor (a
	// rule, a hook), by its id, for its transcript record.
	decisions map[string][]store.Decision
}

// permission is an agent's permission request forwarded to the editor.
type permission struct {
	rawID   []byte
	t       *turn
	callID  string
	options map[string]string // optionId -> kind
	// foreign and pol: the call as the policy read it, for an "always"
	// answer (pol nil without a policy).
	foreign policy.Foreign
	pol     *policy.Session
}

// NewEngine returns an engine; Bind gives it its proxy.
func NewEngine(opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CancelGrace <= 0 {
		opts.CancelGrace = DefaultCancelGrace
	}
	if opts.AgentName == "" {
		opts.AgentName = "agent"
	}
	if opts.Cwd == "" {
		opts.Cwd, _ = os.Getwd()
	}
	return &Engine{
		opts: opts, log: opts.Logger, agentName: opts.AgentName,
		reqs: map[string]editorReq{}, sessions: map[string]*guardedSession{}, turns: map[string]*turn{},
		perms: map[string]*permission{}, withdrawn: map[string]bool{},
	}
}

// Bind sets the proxy the engine sends its own lines through.
func (e *Engine) Bind(p *proxy.Proxy) { e.p = p }

// AgentName is the agent's name: its initialize answer's agentInfo.name once
// seen, else Options.AgentName.
func (e *Engine) AgentName() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.agentName
}

// FromEditor follows the editor's requests and its answers to the agent's
// permission requests.
func (e *Engine) FromEditor(m *proxy.Message) proxy.Verdict {
	switch m.Kind {
	case proxy.Request:
		switch m.Method {
		case acp.MethodInitialize, acp.MethodSessionNew, acp.MethodSessionLoad, acp.MethodSessionResume, acp.MethodSessionPrompt,
			acp.MethodSessionSteering:
		default:
			return proxy.Verdict{}
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		key := proxy.IDKey(m.ID)
		if key == "" {
			return proxy.Verdict{}
		}
		r := editorReq{method: m.Method}
		switch m.Method {
		case acp.MethodSessionSteering:
			if !e.agentSteers {
				// The extension is the agent's: one that does not advertise
				// it does not have it, whatever it would answer.
				e.p.Send(proxy.Editor, errorLine(m.ID, &acp.Error{Code: acp.CodeMethodNotFound,
					Message: "Method not found: the agent does not support _session/steering (its initialize answer does not advertise _meta.steering.supported)",
					Data:    map[string]any{"method": m.Method}}))
				return proxy.Verdict{Action: proxy.Drop}
			}
			r.sessionID = proxy.String(proxy.Field(m.Params, "sessionId"))
			r.prompt = bytes.Clone(proxy.Field(m.Params, "prompt"))
		case acp.MethodSessionNew:
			r.cwd = proxy.String(proxy.Field(m.Params, "cwd"))
		case acp.MethodSessionLoad, acp.MethodSessionResume:
			r.sessionID = proxy.String(proxy.Field(m.Params, "sessionId"))
			r.cwd = proxy.String(proxy.Field(m.Params, "cwd"))
			s := e.session(r.sessionID, r.cwd)
			s.loading++
		case acp.MethodSessionPrompt:
			r.sessionID = proxy.String(proxy.Field(m.Params, "sessionId"))
			e.startTurn(r.sessionID, key, m.ID, proxy.Field(m.Params, "prompt"))
		}
		e.reqs[key] = r
	case proxy.Response:
		key := proxy.IDKey(m.ID)
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.withdrawn[key] {
			delete(e.withdrawn, key)
			return proxy.Verdict{Action: proxy.Drop}
		}
		if p := e.perms[key]; p != nil {
			delete(e.perms, key)
			if refused(m, p.options) {
				if c := p.t.obs.Get(p.callID); c != nil {
					c.Rejected = true
				}
			} else {
				e.granted(m, p)
			}
		}
	}
	return proxy.Verdict{}
}

// refused reports whether the editor's answer to a permission request
// refused the call: an error, a cancelled outcome or a reject option.
func refused(m *proxy.Message, options map[string]string) bool {
	if m.Error != nil {
		return true
	}
	o := proxy.Field(m.Result, "outcome")
	switch proxy.String(proxy.Field(o, "outcome")) {
	case "cancelled":
		return true
	case "selected":
		k := options[proxy.String(proxy.Field(o, "optionId"))]
		return strings.HasPrefix(k, "reject")
	}
	return false
}

// FromAgent follows the agent's answers, tool calls and permission
// requests, and stops turns.
func (e *Engine) FromAgent(m *proxy.Message) proxy.Verdict {
	switch m.Kind {
	case proxy.Response:
		return e.agentResponse(m)
	case proxy.Request:
		if m.Method == acp.MethodSessionRequestPermission {
			return e.permissionRequest(m)
		}
		e.resolveAll()
	case proxy.Notification:
		if m.Method == acp.MethodSessionUpdate {
			e.update(m.Params)
		}
	}
	return proxy.Verdict{}
}

func (e *Engine) agentResponse(m *proxy.Message) proxy.Verdict {
	key := proxy.IDKey(m.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resolveAllLocked()
	r, ok := e.reqs[key]
	if !ok {
		return proxy.Verdict{}
	}
	delete(e.reqs, key)
	switch r.method {
	case acp.MethodInitialize:
		if n := proxy.String(proxy.Field(proxy.Field(m.Result, "agentInfo"), "name")); n != "" {
			e.agentName = n
		}
		e.agentSteers = string(proxy.Field(proxy.Field(proxy.Field(m.Result, "_meta"), "steering"), "supported")) == "true"
	case acp.MethodSessionSteering:
		// A steer the running turn took is part of that turn: its calls
		// count there. One that started a turn of its own starts a turn
		// the guard counts like a prompt's, though no prompt owns it.
		if proxy.String(proxy.Field(m.Result, "outcome")) == acp.SteerStartedNewTurn {
			e.startTurn(r.sessionID, "", nil, r.prompt)
		}
	case acp.MethodSessionNew:
		if id := proxy.String(proxy.Field(m.Result, "sessionId")); id != "" {
			e.session(id, r.cwd)
		}
	case acp.MethodSessionLoad, acp.MethodSessionResume:
		if s := e.sessions[r.sessionID]; s != nil && s.loading > 0 {
			s.loading--
		}
	case acp.MethodSessionPrompt:
		t := e.turns[key]
		if t == nil {
			return proxy.Verdict{}
		}
		delete(e.turns, key)
		if t.s.turn == t {
			t.s.turn = nil
		}
		if t.stopped {
			if t.answered {
				return proxy.Verdict{Action: proxy.Drop} // the late answer to a stopped turn
			}
			t.answered = true
			t.timer.Stop()
			e.endTurn(t, "", "")
			return proxy.Verdict{Action: proxy.Replace, Line: e.loopErrorLine(t)}
		}
		t.answered = true
		stop := proxy.String(proxy.Field(m.Result, "stopReason"))
		errMsg := ""
		if m.Error != nil {
			errMsg = proxy.String(proxy.Field(m.Error, "message"))
			if errMsg == "" {
				errMsg = "error"
			}
		}
		e.endTurn(t, acp.StopReason(stop), errMsg)
	}
	return proxy.Verdict{}
}

// session returns the session with id, creating it.
func (e *Engine) session(id, cwd string) *guardedSession {
	s := e.sessions[id]
	if s == nil {
		s = &guardedSession{id: id}
		e.sessions[id] = s
	}
	if cwd != "" {
		s.cwd = cwd
	}
	return s
}

// startTurn begins a prompt turn.
func (e *Engine) startTurn(sessionID, key string, rawID, prompt []byte) {
	s := e.session(sessionID, "")
	t := &turn{
		s: s, rawID: append([]byte(nil), rawID...),
		g:     turnguard.New(e.opts.Cap, e.opts.SkipLoopDetection, e.opts.FailureGuard, e.log.With("session", sessionID)),
		obs:   turnguard.NewObserver(),
		tools: map[string]*telemetry.Tool{},
	}
	if old := s.turn; old != nil && !old.ended && !old.stopped {
		if old.rawID == nil {
			// A turn a steer started has no answer to end it: the next
			// turn of its session does (the agent runs one at a time).
			old.answered = true
			e.endTurn(old, acp.StopEndTurn, "")
		} else {
			// A prompt while one is running: the agent cancels the old one;
			// its answer, when it comes, ends it.
			e.log.Debug("a new prompt while the previous one runs", "session", sessionID)
		}
	}
	s.turn = t
	if key != "" {
		e.turns[key] = t
	}
	blocks := promptBlocks(prompt)
	t.ctx, t.span = e.opts.Telemetry.StartAgentTurn(context.Background(), e.agentName, sessionID, "", promptText(blocks))
	e.record(s, store.Record{Kind: store.KindUser, Prompt: blocks})
}

// promptBlocks decodes a prompt for the transcript; a prompt that does not
// decode is recorded as empty (the turn still counts).
func promptBlocks(raw []byte) []acp.ContentBlock {
	var blocks []acp.ContentBlock
	if json.Unmarshal(raw, &blocks) != nil || blocks == nil {
		return []acp.ContentBlock{}
	}
	return blocks
}

func promptText(blocks []acp.ContentBlock) string {
	var b strings.Builder
	for _, c := range blocks {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// update follows a session/update: tool calls of a running turn. Decision:
// every call the agent reports during the turn counts, those of its
// subagents too (marked in _meta with a parent call): from outside, a
// runaway subagent is a runaway turn, and the agent's own budgets are not
// visible. It reads
// the params in one pass and the update object in another, which for the
// frequent updates that are not tool calls ends at sessionUpdate.
func (e *Engine) update(params []byte) {
	var sid string
	var u []byte
	proxy.Members(params, func(k, v []byte) bool {
		switch string(k) {
		case "sessionId":
			sid = proxy.String(v)
		case "update":
			u = v
		}
		return true
	})
	f, ok := frame(u, false, true)
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.activeTurn(sid)
	switch {
	case t == nil:
	case ok:
		e.observe(t, f)
	case t.pending != nil:
		e.resolvePending(t) // not a frame of the held call
	}
}

// activeTurn is the session's running, unstopped turn, nil during a load's
// replay or between turns.
func (e *Engine) activeTurn(sessionID string) *turn {
	s := e.sessions[sessionID]
	if s == nil || s.loading > 0 || s.turn == nil || s.turn.stopped || s.turn.answered {
		return nil
	}
	return s.turn
}

// frame reads a tool call frame out of an update or a permission request's
// toolCall in one pass. With update set, obj is a session/update's update
// and ok is false as soon as its sessionUpdate says it is not a tool call.
func frame(obj []byte, permission, update bool) (f turnguard.Frame, ok bool) {
	f.Permission = permission
	ok = !update
	proxy.Members(obj, func(k, v []byte) bool {
		switch string(k) {
		case "sessionUpdate":
			switch proxy.String(v) {
			case acp.UpdateToolCall, acp.UpdateToolCallUpdate:
				ok = true
			default:
				ok = false
				return false
			}
		case "toolCallId":
			f.ToolCallID = proxy.String(v)
		case "name":
			f.Name = proxy.String(v)
		case "title":
			f.Title = proxy.String(v)
		case "kind":
			f.Kind = proxy.String(v)
		case "status":
			f.Status = proxy.String(v)
		case "rawInput":
			f.RawInput = v
		case "locations":
			f.Locations = v
		case "_meta":
			f.Meta = v
		case "content":
			f.Content = v
		case "rawOutput":
			f.RawOutput = v
		}
		return true
	})
	return f, ok
}

// pendingWait bounds how long a stop waits for the full input of the call
// that crossed a limit when the agent sends nothing more; normally the
// agent's next message ends the wait.
const pendingWait = 500 * time.Millisecond

// observe counts one frame and stops the turn when a limit is crossed.
// Callers hold mu.
//
// Decision on a call that crosses a limit with its first frame while its
// input is still a placeholder (claude-agent-acp sends rawInput {} first and
// the full input in a status-less tool_call_update right after): the stop
// is decided at once but carried out at the agent's next message. If that
// message is a frame of the same call with its input (or one that makes
// its key final, such as its permission request), the call is keyed on
// that input; any other message, or pendingWait without one, keys it on
// what it has. The agent cannot run the call unseen meanwhile: running it
// takes a frame or a permission request, and either ends the wait.
func (e *Engine) observe(t *turn, f turnguard.Frame) {
	if t.pending != nil && f.ToolCallID != t.pending.ID {
		e.resolvePending(t)
		return // the turn is stopped; this frame counts no more
	}
	ev := t.obs.Observe(f)
	c := ev.Call
	if c == nil {
		return
	}
	if t.pending != nil {
		if ev.Final || c.HasInput() {
			e.resolvePending(t)
		}
		return
	}
	stop := false
	if ev.New && e.opts.Telemetry != nil {
		_, t.tools[c.ID] = e.opts.Telemetry.StartTool(t.ctx, c.ToolName(), c.ID, f.RawInput)
	}
	switch {
	case ev.New && ev.Final:
		// A call whose first frame already carries its final key is counted
		// with its key in one step, as the daemon counts a batch: the check
		// then sees this call's repeat too, so a stop's maxKeyRepeat is the
		// same figure acpd stats reports for the turn.
		stop = t.g.RecordBatch([]string{c.Key}, []string{c.Name})
	case ev.New:
		if t.g.RecordOpenCall() {
			t.pending = c
			t.pendingTimer = time.AfterFunc(pendingWait, func() {
				e.mu.Lock()
				defer e.mu.Unlock()
				if t.pending == c && !e.closed {
					e.resolvePending(t)
				}
			})
			return
		}
	case ev.Final:
		stop = t.g.RecordKey(c.Key, c.Name)
	}
	resultHash := ""
	if ev.Ended != "" && !stop {
		if span := t.tools[c.ID]; span != nil {
			errType := ""
			if ev.Ended == "failed" {
				errType = failedErrorType
			}
			span.End(errType)
			delete(t.tools, c.ID)
		}
		if ev.Ended == "completed" && e.opts.Policy != nil {
			e.postToolUse(t, c)
		}
		resultHash = e.result(t, c, ev.Ended == "failed")
		stop = e.failure(t, c, ev.Ended)
	}
	e.recordReady(t)
	ds := t.decisions[c.ID]
	if ev.Ended != "" {
		delete(t.decisions, c.ID)
	}
	if resultHash != "" || (ev.Ended != "" && len(ds) > 0) {
		e.record(t.s, store.Record{Kind: store.KindToolResult, Tool: &store.ToolCallRecord{
			ToolCallID: c.ID, Name: c.Name, Status: acp.ToolCallStatus(ev.Ended), ResultHash: resultHash, Decisions: ds}})
	}
	if w := t.g.TakeWarning(); w != "" && !stop {
		// model.loopRecovery = "warn": the guard cannot speak to the
		// agent's model, so the warning is the editor's; the next firing
		// stops the turn.
		e.p.Send(proxy.Editor, messageLine(t.s.id, w))
	}
	if stop {
		e.stop(t)
	}
}

// result gives an ended call's result to the result signal and returns its
// digest for the transcript ("" when the agent reported no result). The
// first call without one makes a "results" turn count calls instead, and
// the guard says so once.
func (e *Engine) result(t *turn, c *turnguard.Call, failed bool) string {
	h, ok := t.obs.Result(c, failed)
	if !ok {
		if e.opts.Cap.Results() {
			t.g.FallBackToCalls()
			if !e.saidNoResults {
				e.saidNoResults = true
				e.log.Warn("the agent reports no tool results: model.stuckSignal \"results\" falls back to \"calls\" for its turns",
					"agent", e.agentName, "tool", c.Name)
			}
		}
		return ""
	}
	t.g.ObserveResult(c.Key, h)
	return loopdetect.FormatResultHash(h)
}

// resolvePending carries out the stop held for t's pending call: the call
// is keyed on the input it has now and the turn stops. Callers hold mu.
func (e *Engine) resolvePending(t *turn) {
	c := t.pending
	t.pending = nil
	t.pendingTimer.Stop()
	t.obs.Finalize(c)
	t.g.RecordKey(c.Key, c.Name)
	e.recordReady(t)
	e.stop(t)
}

// resolveAll carries out every held stop: the agent sent something other
// than a frame of the held call.
func (e *Engine) resolveAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resolveAllLocked()
}

func (e *Engine) resolveAllLocked() {
	for _, t := range e.turns {
		if t.pending != nil {
			e.resolvePending(t)
		}
	}
}

// failure feeds a finished call to the repeated-failure guard; true when
// it stops the turn. The proxy cannot remind the model as the daemon does
// (it only sees the agent's frames), so a warning is only logged.
func (e *Engine) failure(t *turn, c *turnguard.Call, status string) bool {
	o := loopdetect.FailureObservation{PolicyToolName: c.Name, ErrorType: failedErrorType}
	switch {
	case status == "completed":
		o.Terminal, o.Execution = loopdetect.TerminalSuccess, loopdetect.ExecutionSuccess
	case c.Rejected:
		o.Terminal, o.Execution = loopdetect.TerminalCancelled, loopdetect.ExecutionCancelled
	default:
		o.Terminal, o.Execution = loopdetect.TerminalError, loopdetect.ExecutionError
	}
	kind, _ := t.g.FailureVerdict([]loopdetect.FailureObservation{o})
	return kind == loopdetect.FailureStop
}

// permissionRequest counts the call a permission request asks about, and
// refuses it when the turn is or gets stopped.
func (e *Engine) permissionRequest(m *proxy.Message) proxy.Verdict {
	e.mu.Lock()
	defer e.mu.Unlock()
	sid := proxy.String(proxy.Field(m.Params, "sessionId"))
	s := e.sessions[sid]
	if s == nil || s.loading > 0 || s.turn == nil {
		return proxy.Verdict{}
	}
	t := s.turn
	if t.stopped || t.answered {
		if t.stopped {
			e.p.Send(proxy.Agent, cancelledAnswer(m.ID))
			return proxy.Verdict{Action: proxy.Drop}
		}
		return proxy.Verdict{}
	}
	f, _ := frame(proxy.Field(m.Params, "toolCall"), true, false)
	e.observe(t, f)
	if t.stopped {
		e.p.Send(proxy.Agent, cancelledAnswer(m.ID))
		return proxy.Verdict{Action: proxy.Drop}
	}
	p := &permission{rawID: append([]byte(nil), m.ID...), t: t, callID: f.ToolCallID, options: map[string]string{}}
	var opts []struct {
		OptionID string `json:"optionId"`
		Kind     string `json:"kind"`
	}
	if json.Unmarshal(proxy.Field(m.Params, "options"), &opts) == nil {
		for _, o := range opts {
			p.options[o.OptionID] = o.Kind
		}
	}
	if e.opts.Policy != nil && e.checkPermission(m, t, p, f) {
		return proxy.Verdict{Action: proxy.Drop}
	}
	e.perms[proxy.IDKey(m.ID)] = p
	return proxy.Verdict{}
}

// stop ends a turn that crossed a limit: its forwarded permission requests
// are answered cancelled and withdrawn from the editor, the agent is told
// session/cancel, and the editor gets the loop error when the agent answers
// or the grace period ends, whichever comes first. Callers hold mu.
func (e *Engine) stop(t *turn) {
	if t.stopped {
		return
	}
	t.stopped = true
	t.obs.FinalizeAll() // keys decide nothing more; they are recorded
	e.recordReady(t)
	e.record(t.s, store.Record{Kind: store.KindLoopStop, Loop: t.g.Facts().Record(t.g.LoopType())})
	for key, p := range e.perms {
		if p.t != t {
			continue
		}
		delete(e.perms, key)
		e.withdrawn[key] = true
		e.p.Send(proxy.Agent, cancelledAnswer(p.rawID))
		e.p.Send(proxy.Editor, cancelRequestLine(p.rawID))
	}
	e.p.Send(proxy.Agent, sessionCancelLine(t.s.id))
	if t.rawID == nil {
		// A turn a steer started: no prompt to answer with the loop
		// error, so the editor reads it in the session instead.
		t.answered = true
		if t.s.turn == t {
			t.s.turn = nil
		}
		e.endTurn(t, "", "")
		e.p.Send(proxy.Editor, messageLine(t.s.id, t.g.Err().Message))
		return
	}
	t.timer = time.AfterFunc(e.opts.CancelGrace, func() { e.graceExpired(t) })
}

// graceExpired answers the editor for an agent that did not answer the
// cancel in time; its answer, if it ever comes, is dropped.
func (e *Engine) graceExpired(t *turn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t.answered || e.closed {
		return
	}
	t.answered = true
	e.log.Warn("the agent did not answer the cancelled turn in time; answering the editor", "session", t.s.id,
		"grace", e.opts.CancelGrace.String())
	if t.s.turn == t {
		t.s.turn = nil
	}
	e.endTurn(t, "", "")
	e.p.Send(proxy.Editor, e.loopErrorLine(t))
}

// loopErrorLine is acpd's loop error in answer to the turn's prompt.
func (e *Engine) loopErrorLine(t *turn) []byte {
	return errorLine(t.rawID, t.g.Err())
}

// endTurn records a turn's end (stopReason, or errMsg; a stopped turn's
// error is the loop error) and ends its telemetry. Callers hold mu.
func (e *Engine) endTurn(t *turn, stop acp.StopReason, msg string) {
	if t.ended {
		return
	}
	t.ended = true
	t.obs.FinalizeAll()
	e.recordReady(t)
	end := telemetry.TurnEnd{ToolCalls: t.g.Total(), StopReason: string(stop)}
	if t.stopped {
		le := t.g.Err()
		msg, stop = le.Message, ""
		end.StopReason = ""
		end.Err = le
		end.LoopType, end.CapReason = string(t.g.LoopType()), string(t.g.Facts().CapReason)
	} else if msg != "" {
		end.Err = &acp.Error{Code: acp.CodeInternalError, Message: msg}
	}
	for id, span := range t.tools {
		span.End("cancelled")
		delete(t.tools, id)
	}
	t.span.End(end)
	if stop == "" && msg == "" {
		msg = "the turn ended without a stop reason"
	}
	if w := e.writer(t.s); w != nil {
		if err := w.EndTurn(stop, msg); err != nil {
			e.storeFailed(t.s, err)
		}
	}
}

// recordReady records the turn's calls whose keys are final, in the order
// they were counted; each is a batch of one (calls are counted one by one).
func (e *Engine) recordReady(t *turn) {
	for _, c := range t.obs.Ready() {
		e.record(t.s, store.Record{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{{ID: c.ID, Name: c.Name, Arguments: c.Input}}})
	}
}

// record appends to the session's transcript. Callers hold mu.
func (e *Engine) record(s *guardedSession, r store.Record) {
	w := e.writer(s)
	if w == nil {
		return
	}
	if err := w.Append(r); err != nil {
		e.storeFailed(s, err)
	}
}

// writer opens the session's transcript on first use: a new one, or the one
// an earlier guard run kept for the same agent session.
func (e *Engine) writer(s *guardedSession) *store.Writer {
	if s.w != nil || s.noStore || e.opts.Store == nil {
		return s.w
	}
	id := StoreID(e.agentName, s.id)
	cwd := s.cwd
	if cwd == "" {
		cwd = e.opts.Cwd
	}
	var err error
	if e.opts.Store.Exists(id) {
		s.w, err = e.opts.Store.OpenWriter(id)
	} else {
		s.w, err = e.opts.Store.Create(store.SessionMeta{ID: id, Cwd: cwd, Agent: e.agentName, AgentSessionID: s.id})
	}
	if err != nil {
		e.storeFailed(s, err)
		return nil
	}
	return s.w
}

func (e *Engine) storeFailed(s *guardedSession, err error) {
	e.log.Warn("cannot record the guarded session for acpd stats", "session", s.id, "err", err)
	s.noStore = true
	if s.w != nil {
		_ = s.w.Close()
		s.w = nil
	}
}

// StoreID is the transcript id of an agent's session: derived from the
// agent's name and its session id, so a later guard run continuing the
// session appends to the same transcript, and two agents that happen to
// use the same session id never share one.
func StoreID(agent, sessionID string) string {
	sum := sha256.Sum256([]byte(agent + "\x00" + sessionID))
	return "g" + base32Lower(sum[:15])
}

// base32Lower is RFC 4648 base32 of b (a multiple of 5 bytes, so no
// padding) in lower case. Written out because encoding/base32, used for
// nothing else, builds its encodings' decode maps in package
// initialization on every start of acpd.
func base32Lower(b []byte) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	out := make([]byte, 0, len(b)/5*8)
	for ; len(b) >= 5; b = b[5:] {
		v := uint64(b[0])<<32 | uint64(b[1])<<24 | uint64(b[2])<<16 | uint64(b[3])<<8 | uint64(b[4])
		for shift := 35; shift >= 0; shift -= 5 {
			out = append(out, alphabet[v>>shift&31])
		}
	}
	return string(out)
}

// AgentExited ends everything once the agent is gone: open turns are
// recorded as failed with msg, and transcripts are closed. The proxy
// answers the editor's pending requests.
func (e *Engine) AgentExited(msg string) { e.shutdown(msg) }

// Close stops the timers and closes the transcripts (idempotent).
func (e *Engine) Close() { e.shutdown("") }

// shutdown ends the engine; with msg, the turns still open end with it.
func (e *Engine) shutdown(msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for _, t := range e.turns {
		if t.timer != nil {
			t.timer.Stop()
		}
		if t.pendingTimer != nil {
			t.pendingTimer.Stop()
		}
		if msg != "" {
			t.answered = true
			e.endTurn(t, "", msg)
		}
	}
	e.closeWriters()
}

func (e *Engine) closeWriters() {
	for _, s := range e.sessions {
		if s.w != nil {
			if err := s.w.Close(); err != nil {
				e.log.Warn("close the guarded session's transcript", "session", s.id, "err", err)
			}
			s.w = nil
		}
		s.noStore = true
	}
}

// ---- lines the guard writes ----

func cancelledAnswer(id []byte) []byte {
	return concat(`{"jsonrpc":"2.0","id":`, id, `,"result":{"outcome":{"outcome":"cancelled"}}}`)
}

func cancelRequestLine(id []byte) []byte {
	return concat(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":`, id, `}}`)
}

// messageLine is an agent_message_chunk update holding text, to the
// editor.
func messageLine(sessionID, text string) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": acp.MethodSessionUpdate, "params": map[string]any{
		"sessionId": sessionID, "update": map[string]any{"sessionUpdate": acp.UpdateAgentMessageChunk,
			"content": map[string]any{"type": "text", "text": "\n\n" + text + "\n\n"}}}})
	if err != nil {
		return nil
	}
	return b
}

func sessionCancelLine(sessionID string) []byte {
	sid, _ := json.Marshal(sessionID)
	return concat(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":`, sid, `}}`)
}

// errorLine is a JSON-RPC error response to id.
func errorLine(id []byte, e *acp.Error) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		b = []byte(`{"code":-32603,"message":"internal error"}`)
	}
	return concat(`{"jsonrpc":"2.0","id":`, id, `,"error":`+string(b)+`}`)
}

func concat(head string, raw []byte, tail string) []byte {
	b := make([]byte, 0, len(head)+len(raw)+len(tail))
	b = append(b, head...)
	b = append(b, raw...)
	return append(b, tail...)
}
