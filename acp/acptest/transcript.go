package acptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/acpd/acpd/acp"
)

// Transcript validates a whole connection: every agent line against the
// schema (Validator.CheckAgentLine) plus the stateful checks of
// acp-agent.md §7.4:
//
//   - capability gating: no fs/* or terminal/* request (nor elicitation),
//     no notice and no compaction_update or compaction_summary_chunk
//     unless the client's initialize advertised it, no boolean config option
//     without session.configOptions.boolean, no terminal auth method without
//     auth.terminal, and no successful answer to a method the agent did not
//     advertise (load, list, resume, close, delete, logout);
//   - ordering: turn updates (chunks, tool calls, plans) only while a
//     session/prompt or session/load of that session is unanswered; no
//     update for a session before the client learned its id; no history
//     replayed during session/resume; a session/close answered only after
//     that session's running prompts;
//   - tool calls: a tool_call_update follows a tool_call with the same id;
//     ids are unique among the tool calls of a session's turns; a finished
//     call (completed, failed) never changes status again; every call a turn
//     opened is completed or failed when the prompt answers, unless it
//     answers `cancelled`;
//   - permissions: session/request_permission only during a prompt of its
//     session, for a tool call already reported (or with a title);
//   - modes: the modes API and a "mode" config option agree at session
//     setup and whenever a prompt answers;
//   - terminals: every terminal/create result is released (terminal/release)
//     before the prompt that created it answers, is embedded in a tool call
//     before its release, and is not used after it;
//   - cancellation: a prompt answers stopReason `cancelled`, not error
//     -32800, after session/cancel (unless the client also sent
//     $/cancel_request for that request);
//   - plans: a plan update is the complete list, not a delta;
//   - side questions: a session/prompt holding acpd's /btw runs beside the
//     session's turn; its answer settles none of the turn's tool calls;
//   - subagents (unstable schema): subagent_update only when the client
//     advertised clientCapabilities.subagents, during a prompt of the
//     parent; no update, permission or other request naming a child before
//     its announcement nor after its state went idle; every child announced
//     during a prompt has gone idle when that prompt answers;
//   - steering (the _session/steering extension): the outcome is one of
//     injected, startedNewTurn and promptRequired, the last only when the
//     request asked for it; a turn a steering message started may send
//     turn updates without a prompt until the session's next prompt;
//   - config: every configOptions list (new, load, resume, set, update) has
//     unique ids and each select's currentValue among its options; the
//     set_config_option result holds every option known for the session and
//     the value just set; modes' currentModeId is one of availableModes.
//
// Record client lines with ClientLine before they are written. End reports
// what must be settled by the end of a connection.
type Transcript struct {
	v *Validator

	mu         sync.Mutex
	clientCaps acp.ClientCapabilities
	agentCaps  *acp.AgentCapabilities // nil until initialize is answered
	sent       map[string]*clientReq  // client request id -> request
	agentReqs  map[string]*agentReq   // agent request id -> request
	sessions   map[string]*sessState
	terminals  map[string]*termState // terminalId -> state
	// children are the child sessions announced with subagent_update, by
	// child id: their traffic counts as their parent's.
	children map[string]*childState
}

type childState struct {
	parent string
	ended  bool // its state went idle: nothing more may come for it
}

type clientReq struct {
	method, session string
	modeID          string
	configID        string
	value           json.RawMessage
	cancelRequested bool // the client sent $/cancel_request for it
	promptRequired  bool // a _session/steering request asking for promptRequired
	// aside: a session/prompt holding acpd's side question (/btw), which
	// runs beside the session's turn and owns none of its tool calls.
	aside bool
}

// isSideQuestion reports whether a prompt is acpd's /btw command.
func isSideQuestion(prompt []acp.ContentBlock) bool {
	if len(prompt) == 0 || prompt[0].Type != "text" {
		return false
	}
	t := strings.TrimSpace(prompt[0].Text)
	return t == "/btw" || strings.HasPrefix(t, "/btw ") || strings.HasPrefix(t, "/btw\n")
}

type agentReq struct {
	method, session string
	cancelled       bool // the agent sent $/cancel_request for it
}

type sessState struct {
	prompts   int // unanswered session/prompt requests
	loads     int
	resumes   int
	cancelled bool // session/cancel sent while a prompt ran
	// detached: a _session/steering answer started a turn no prompt owns;
	// its updates may come until the session's next prompt.
	detached  bool
	toolCalls map[string]*toolState
	plan      []acp.PlanEntry
	hasPlan   bool
	configIDs map[string]bool // nil until the agent sent options
	modes     map[string]bool // nil until the agent sent modes
	// mode is the current mode of the modes API; modeOption the id of the
	// select config option of category "mode" and modeValue its value.
	// When both exist they must agree once a turn has answered.
	mode, modeOption, modeValue string
}

type toolState struct {
	status string
	live   bool // opened by a prompt turn that has not answered yet
	turn   bool // opened during a prompt (not replayed by a load)
}

type termState struct {
	session            string
	embedded, released bool
}

// NewTranscript returns an empty transcript checked by v.
func NewTranscript(v *Validator) *Transcript {
	return &Transcript{
		v: v, sent: map[string]*clientReq{}, agentReqs: map[string]*agentReq{},
		sessions: map[string]*sessState{}, terminals: map[string]*termState{},
		children: map[string]*childState{},
	}
}

func (t *Transcript) session(id string) *sessState {
	s := t.sessions[id]
	if s == nil {
		s = &sessState{toolCalls: map[string]*toolState{}}
		t.sessions[id] = s
	}
	return s
}

// rawID canonicalises a JSON id so `1`, ` 1` and `"a"` compare as written.
func rawID(b json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// ClientLine records a line the client is about to send.
func (t *Transcript) ClientLine(line []byte) {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(line, &env) != nil {
		return
	}
	var p struct {
		SessionID          string                 `json:"sessionId"`
		ModeID             string                 `json:"modeId"`
		ConfigID           string                 `json:"configId"`
		Value              json.RawMessage        `json:"value"`
		RequestID          json.RawMessage        `json:"requestId"`
		ClientCapabilities acp.ClientCapabilities `json:"clientCapabilities"`
		Prompt             []acp.ContentBlock     `json:"prompt"`
		Meta               struct {
			Steering struct {
				IdleBehavior string `json:"idleBehavior"`
			} `json:"steering"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(env.Params, &p)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case env.Method != "" && env.ID != nil: // request
		t.sent[rawID(env.ID)] = &clientReq{method: env.Method, session: p.SessionID, modeID: p.ModeID, configID: p.ConfigID, value: p.Value,
			promptRequired: p.Meta.Steering.IdleBehavior == acp.SteerIdlePromptRequired,
			aside:          env.Method == acp.MethodSessionPrompt && isSideQuestion(p.Prompt)}
		switch env.Method {
		case acp.MethodInitialize:
			t.clientCaps = p.ClientCapabilities
		case acp.MethodSessionPrompt:
			s := t.session(p.SessionID)
			s.prompts++
			s.detached = false
		case acp.MethodSessionLoad:
			t.session(p.SessionID).loads++
		case acp.MethodSessionResume:
			t.session(p.SessionID).resumes++
		default:
			if p.SessionID != "" {
				t.session(p.SessionID)
			}
		}
	case env.Method != "": // notification
		switch env.Method {
		case acp.MethodSessionCancel:
			if s := t.sessions[p.SessionID]; s != nil && s.prompts > 0 {
				s.cancelled = true
			}
		case acp.MethodCancelRequest:
			if r := t.sent[rawID(p.RequestID)]; r != nil {
				r.cancelRequested = true
			}
		}
	case env.ID != nil: // response to an agent request
		id := rawID(env.ID)
		ar := t.agentReqs[id]
		delete(t.agentReqs, id)
		if ar == nil || ar.method != acp.MethodTerminalCreate || ar.cancelled {
			return
		}
		var res acp.CreateTerminalResponse
		if json.Unmarshal(env.Result, &res) == nil && res.TerminalID != "" {
			t.terminals[res.TerminalID] = &termState{session: ar.session}
		}
	}
}

var turnUpdates = map[string]bool{
	acp.UpdateUserMessageChunk:  true,
	acp.UpdateAgentMessageChunk: true,
	acp.UpdateAgentThoughtChunk: true,
	acp.UpdateToolCall:          true,
	acp.UpdateToolCallUpdate:    true,
	acp.UpdatePlan:              true,
	acp.UpdateCompaction:        true,
	acp.UpdateCompactionChunk:   true,
}

// AgentLine checks one line the agent wrote.
func (t *Transcript) AgentLine(line []byte) error {
	m, err := t.v.checkAgentLine(line, func(id string) string {
		t.mu.Lock()
		defer t.mu.Unlock()
		if r := t.sent[rawID(json.RawMessage(id))]; r != nil {
			return r.method
		}
		return ""
	})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case m.Method == acp.MethodSessionUpdate:
		return t.update(m.Params)
	case m.Method == acp.MethodCancelRequest:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			if r := t.agentReqs[rawID(p.RequestID)]; r != nil {
				r.cancelled = true
			}
		}
	case m.Method != "" && m.ID != "":
		return t.agentRequest(m)
	case m.Method == "" && m.ID != "":
		id := rawID(json.RawMessage(m.ID))
		req, ok := t.sent[id]
		if !ok {
			break
		}
		delete(t.sent, id)
		return t.response(req, m)
	}
	return nil
}

// sessionUpdate is the part of a session/update the checks read.
type sessionUpdate struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		Kind          string            `json:"sessionUpdate"`
		ToolCallID    string            `json:"toolCallId"`
		Status        *string           `json:"status"`
		Content       json.RawMessage   `json:"content"`
		Entries       []acp.PlanEntry   `json:"entries"`
		ConfigOptions []json.RawMessage `json:"configOptions"`
		CurrentModeID string            `json:"currentModeId"`
		Subagent
	} `json:"update"`
}

// Subagent is the part of a subagent_update the checks read.
type Subagent struct {
	ChildID string `json:"sessionId"`
	State   *struct {
		State string `json:"state"`
	} `json:"state"`
}

// subagent checks a subagent_update on session parent.
func (t *Transcript) subagent(parent string, u Subagent) error {
	if t.clientCaps.Subagents == nil {
		return fmt.Errorf("subagent_update without the client capability subagents")
	}
	s := t.sessions[parent]
	if s == nil || s.prompts == 0 {
		return fmt.Errorf("subagent_update for session %q outside a prompt turn", parent)
	}
	c := t.children[u.ChildID]
	if c == nil {
		c = &childState{parent: parent}
		t.children[u.ChildID] = c
	} else if c.parent != parent {
		return fmt.Errorf("subagent_update for child %q on session %q, announced on %q", u.ChildID, parent, c.parent)
	}
	if u.State != nil && u.State.State == acp.SubagentIdle {
		c.ended = true
	}
	return nil
}

// sessionOf is the session whose turn the traffic of id belongs to: a
// child's parent, or id itself; an error for a child that ended.
func (t *Transcript) sessionOf(id, what string) (string, error) {
	c := t.children[id]
	if c == nil {
		return id, nil
	}
	if c.ended {
		return c.parent, fmt.Errorf("%s for child session %q after its state went idle", what, id)
	}
	return c.parent, nil
}

func isFinal(status string) bool {
	return status == string(acp.StatusCompleted) || status == string(acp.StatusFailed)
}

func (t *Transcript) update(params json.RawMessage) error {
	var p sessionUpdate
	if err := json.Unmarshal(params, &p); err != nil {
		return err
	}
	kind := p.Update.Kind
	if c := t.children[p.SessionID]; c != nil {
		if c.ended {
			return fmt.Errorf("%s for child session %q after its state went idle", kind, p.SessionID)
		}
		p.SessionID = c.parent
	}
	if kind == acp.UpdateSubagent {
		return t.subagent(p.SessionID, p.Update.Subagent)
	}
	s, known := t.sessions[p.SessionID]
	if !known {
		return fmt.Errorf("%s for session %q before the client learned its id (e.g. before the session/new response)", kind, p.SessionID)
	}
	replaying := kind != acp.UpdatePlan && turnUpdates[kind]
	if replaying && s.resumes > 0 && s.prompts == 0 && s.loads == 0 {
		return fmt.Errorf("%s for session %q during session/resume: resume must not replay history", kind, p.SessionID)
	}
	if turnUpdates[kind] && s.prompts == 0 && s.loads == 0 && !s.detached {
		return fmt.Errorf("%s for session %q outside a prompt or load (after its response?)", kind, p.SessionID)
	}
	id := p.Update.ToolCallID
	switch kind {
	case acp.UpdateNotice:
		if !t.clientCaps.Notices() {
			return fmt.Errorf("notice without the client capability session.notices")
		}
	case acp.UpdateCompaction, acp.UpdateCompactionChunk:
		if !t.clientCaps.Compaction() {
			return fmt.Errorf("%s without the client capability session.compaction", kind)
		}
	case acp.UpdateToolCall:
		inTurn := s.prompts > 0
		if prev := s.toolCalls[id]; prev != nil && prev.turn && inTurn {
			return fmt.Errorf("tool_call %q reuses the id of an earlier tool call of session %q", id, p.SessionID)
		}
		status := string(acp.StatusPending)
		if p.Update.Status != nil {
			status = *p.Update.Status
		}
		s.toolCalls[id] = &toolState{status: status, live: inTurn, turn: inTurn}
		return t.embed(p.SessionID, id, p.Update.Content)
	case acp.UpdateToolCallUpdate:
		tc := s.toolCalls[id]
		if tc == nil {
			return fmt.Errorf("tool_call_update for %q without an earlier tool_call", id)
		}
		if st := p.Update.Status; st != nil {
			if isFinal(tc.status) && *st != tc.status {
				return fmt.Errorf("tool call %q changed status from %s to %s after finishing", id, tc.status, *st)
			}
			tc.status = *st
		}
		return t.embed(p.SessionID, id, p.Update.Content)
	case acp.UpdatePlan:
		defer func() { s.plan, s.hasPlan = p.Update.Entries, true }()
		if s.hasPlan {
			return checkPlan(s.plan, p.Update.Entries)
		}
	case acp.UpdateConfigOption:
		return t.configOptions(s, p.Update.ConfigOptions)
	case acp.UpdateCurrentMode:
		if s.modes != nil && !s.modes[p.Update.CurrentModeID] {
			return fmt.Errorf("current_mode_update to %q, which is not among the session's availableModes", p.Update.CurrentModeID)
		}
		s.mode = p.Update.CurrentModeID
	}
	return nil
}

// embed marks the terminals a tool call's content shows.
func (t *Transcript) embed(session, toolCallID string, content json.RawMessage) error {
	if len(content) == 0 || string(content) == "null" {
		return nil
	}
	var items []struct {
		Type       string `json:"type"`
		TerminalID string `json:"terminalId"`
	}
	if json.Unmarshal(content, &items) != nil {
		return nil
	}
	for _, it := range items {
		if it.Type != "terminal" {
			continue
		}
		term := t.terminals[it.TerminalID]
		if term == nil {
			return fmt.Errorf("tool call %q embeds terminal %q, which no terminal/create returned", toolCallID, it.TerminalID)
		}
		if term.session != session {
			return fmt.Errorf("tool call %q of session %q embeds terminal %q of session %q", toolCallID, session, it.TerminalID, term.session)
		}
		term.embedded = true
	}
	return nil
}

// checkPlan flags a plan that looks like a delta of the previous one: fewer
// entries, all of them already planned, with unfinished entries dropped and
// a kept entry's status changed. A complete list that replaces the plan may
// drop finished or abandoned entries, but not while only updating others.
func checkPlan(prev, next []acp.PlanEntry) error {
	if len(next) == 0 || len(next) >= len(prev) {
		return nil
	}
	old := map[string]acp.PlanEntry{}
	for _, e := range prev {
		old[e.Content] = e
	}
	kept := map[string]bool{}
	changed := false
	for _, e := range next {
		o, ok := old[e.Content]
		if !ok {
			return nil // a new entry: a replanned list
		}
		kept[e.Content] = true
		changed = changed || o.Status != e.Status
	}
	var dropped []string
	for _, e := range prev {
		if !kept[e.Content] && e.Status != "completed" {
			dropped = append(dropped, e.Content)
		}
	}
	if changed && len(dropped) > 0 {
		return fmt.Errorf("plan update looks partial: it changes %d of %d entries and drops unfinished %q; every plan update must be the complete list", len(next), len(prev), dropped)
	}
	return nil
}

// configOptions checks one complete configOptions list and records its ids.
func (t *Transcript) configOptions(s *sessState, list []json.RawMessage) error {
	ids := map[string]bool{}
	for i, raw := range list {
		var o struct {
			ID           string          `json:"id"`
			Type         string          `json:"type"`
			Category     string          `json:"category"`
			CurrentValue json.RawMessage `json:"currentValue"`
			Options      []struct {
				Value   *string `json:"value"`
				Options []struct {
					Value string `json:"value"`
				} `json:"options"`
			} `json:"options"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("configOptions[%d]: %w", i, err)
		}
		if ids[o.ID] {
			return fmt.Errorf("configOptions: duplicate id %q", o.ID)
		}
		ids[o.ID] = true
		switch o.Type {
		case "boolean":
			if c := t.clientCaps.Session; c == nil || c.ConfigOptions == nil || c.ConfigOptions.Boolean == nil {
				return fmt.Errorf("configOptions: boolean option %q without the client capability session.configOptions.boolean", o.ID)
			}
		case "select":
			var cur string
			if json.Unmarshal(o.CurrentValue, &cur) != nil {
				return fmt.Errorf("configOptions: select %q has a non-string currentValue %s", o.ID, o.CurrentValue)
			}
			var values []string
			for _, opt := range o.Options {
				if opt.Value != nil {
					values = append(values, *opt.Value)
				}
				for _, g := range opt.Options {
					values = append(values, g.Value)
				}
			}
			if !slices.Contains(values, cur) {
				return fmt.Errorf("configOptions: select %q has currentValue %q, which is not among its options %q", o.ID, cur, values)
			}
			if o.Category == "mode" {
				s.modeOption, s.modeValue = o.ID, cur
			}
		}
	}
	s.configIDs = ids
	return nil
}

func (t *Transcript) modes(s *sessState, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m acp.SessionModeState
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("modes: %w", err)
	}
	ids := map[string]bool{}
	for _, am := range m.AvailableModes {
		ids[am.ID] = true
	}
	if !ids[m.CurrentModeID] {
		return fmt.Errorf("modes: currentModeId %q is not among availableModes", m.CurrentModeID)
	}
	s.modes = ids
	s.mode = m.CurrentModeID
	return nil
}

// modeSync checks that the modes API and the mode config option agree.
func modeSync(s *sessState) error {
	if s.mode == "" || s.modeOption == "" || s.mode == s.modeValue {
		return nil
	}
	return fmt.Errorf("the current mode is %q but config option %q says %q: modes and the mode config option must be kept in sync (send config_option_update with current_mode_update)", s.mode, s.modeOption, s.modeValue)
}

func (t *Transcript) agentRequest(m *agentMsg) error {
	var p struct {
		SessionID  string `json:"sessionId"`
		TerminalID string `json:"terminalId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	caps := t.clientCaps
	switch m.Method {
	case acp.MethodFSReadTextFile:
		if !caps.FS.ReadTextFile {
			return fmt.Errorf("%s without the client capability fs.readTextFile", m.Method)
		}
	case acp.MethodFSWriteTextFile:
		if !caps.FS.WriteTextFile {
			return fmt.Errorf("%s without the client capability fs.writeTextFile", m.Method)
		}
	case acp.MethodTerminalCreate, acp.MethodTerminalOutput, acp.MethodTerminalWaitForExit, acp.MethodTerminalKill, acp.MethodTerminalRelease:
		if !caps.Terminal {
			return fmt.Errorf("%s without the client capability terminal", m.Method)
		}
	case acp.MethodElicitationCreate:
		var e struct {
			Mode string `json:"mode"`
		}
		_ = json.Unmarshal(m.Params, &e)
		switch {
		case e.Mode == "url" && !caps.ElicitURL():
			return fmt.Errorf("%s in url mode without the client capability elicitation.url", m.Method)
		case e.Mode != "url" && !caps.ElicitForm():
			return fmt.Errorf("%s in %s mode without the client capability elicitation.form", m.Method, e.Mode)
		}
	}
	session, err := t.sessionOf(p.SessionID, m.Method)
	if err != nil {
		return err
	}
	p.SessionID = session
	t.agentReqs[rawID(json.RawMessage(m.ID))] = &agentReq{method: m.Method, session: p.SessionID}
	if m.Method == acp.MethodSessionRequestPermission {
		return t.permission(p.SessionID, m.Params)
	}
	switch m.Method {
	case acp.MethodTerminalOutput, acp.MethodTerminalWaitForExit, acp.MethodTerminalKill, acp.MethodTerminalRelease:
		term := t.terminals[p.TerminalID]
		switch {
		case term == nil:
			return fmt.Errorf("%s for terminal %q, which no terminal/create returned", m.Method, p.TerminalID)
		case term.released:
			return fmt.Errorf("%s for terminal %q after its terminal/release", m.Method, p.TerminalID)
		case m.Method == acp.MethodTerminalRelease:
			term.released = true
			if !term.embedded {
				return fmt.Errorf("terminal %q released before it was embedded in a tool call's content", p.TerminalID)
			}
		}
	}
	return nil
}

// permission checks a session/request_permission: it belongs to a running
// prompt of its session and names a tool call the client knows (or carries
// a title to show one).
func (t *Transcript) permission(session string, params json.RawMessage) error {
	s := t.sessions[session]
	if s == nil || s.prompts == 0 {
		return fmt.Errorf("session/request_permission for session %q outside a prompt turn", session)
	}
	var p struct {
		ToolCall struct {
			ToolCallID string  `json:"toolCallId"`
			Title      *string `json:"title"`
		} `json:"toolCall"`
	}
	_ = json.Unmarshal(params, &p)
	if s.toolCalls[p.ToolCall.ToolCallID] == nil && p.ToolCall.Title == nil {
		return fmt.Errorf("session/request_permission for tool call %q, which was never reported (send its tool_call first, or at least a title)", p.ToolCall.ToolCallID)
	}
	return nil
}

// advertised maps methods gated by an agent capability to that capability.
var advertised = map[string]func(c *acp.AgentCapabilities) bool{
	acp.MethodSessionLoad:   func(c *acp.AgentCapabilities) bool { return c.LoadSession },
	acp.MethodSessionList:   func(c *acp.AgentCapabilities) bool { return c.SessionCapabilities.List != nil },
	acp.MethodSessionResume: func(c *acp.AgentCapabilities) bool { return c.SessionCapabilities.Resume != nil },
	acp.MethodSessionClose:  func(c *acp.AgentCapabilities) bool { return c.SessionCapabilities.Close != nil },
	acp.MethodSessionDelete: func(c *acp.AgentCapabilities) bool { return c.SessionCapabilities.Delete != nil },
	acp.MethodLogout:        func(c *acp.AgentCapabilities) bool { return c.Auth != nil && c.Auth.Logout != nil },
}

// response checks the agent's answer to a client request.
func (t *Transcript) response(req *clientReq, m *agentMsg) error {
	ok := m.Error == nil
	var errs []error
	if gate := advertised[req.method]; ok && gate != nil && t.agentCaps != nil && !gate(t.agentCaps) {
		errs = append(errs, fmt.Errorf("%s answered with a result although the agent did not advertise it (want -32601)", req.method))
	}
	var res struct {
		Outcome           string                `json:"outcome"`
		SessionID         string                `json:"sessionId"`
		Modes             json.RawMessage       `json:"modes"`
		ConfigOptions     []json.RawMessage     `json:"configOptions"`
		StopReason        string                `json:"stopReason"`
		AgentCapabilities acp.AgentCapabilities `json:"agentCapabilities"`
		AuthMethods       []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"authMethods"`
	}
	if ok {
		_ = json.Unmarshal(m.Result, &res)
	}
	var rpcErr struct {
		Code int `json:"code"`
	}
	if !ok {
		_ = json.Unmarshal(m.Error, &rpcErr)
	}
	s := t.sessions[req.session]
	switch req.method {
	case acp.MethodInitialize:
		if !ok {
			break
		}
		caps := res.AgentCapabilities
		t.agentCaps = &caps
		for _, am := range res.AuthMethods {
			if am.Type == "terminal" && !t.clientCaps.Auth.Terminal {
				errs = append(errs, fmt.Errorf("initialize: terminal auth method %q without the client capability auth.terminal", am.ID))
			}
		}
	case acp.MethodSessionNew, acp.MethodSessionFork:
		if !ok {
			break
		}
		s = t.session(res.SessionID)
		errs = append(errs, t.modes(s, res.Modes))
		if res.ConfigOptions != nil {
			errs = append(errs, t.configOptions(s, res.ConfigOptions))
		}
		errs = append(errs, modeSync(s))
	case acp.MethodSessionLoad, acp.MethodSessionResume:
		if s == nil {
			break
		}
		if req.method == acp.MethodSessionLoad {
			s.loads--
		} else {
			s.resumes--
		}
		if !ok {
			break
		}
		errs = append(errs, t.modes(s, res.Modes))
		if res.ConfigOptions != nil {
			errs = append(errs, t.configOptions(s, res.ConfigOptions))
		}
		errs = append(errs, modeSync(s))
	case acp.MethodSessionSetMode:
		if ok && s != nil {
			// The client made the change, so it knows both views changed.
			s.mode = req.modeID
			if s.modeOption != "" {
				s.modeValue = req.modeID
			}
		}
	case acp.MethodSessionSetConfigOption:
		if !ok || s == nil {
			break
		}
		prev := s.configIDs
		if err := t.configOptions(s, res.ConfigOptions); err != nil {
			errs = append(errs, fmt.Errorf("set_config_option: %w", err))
			break
		}
		var missing []string
		for id := range prev {
			if !s.configIDs[id] {
				missing = append(missing, id)
			}
		}
		if !s.configIDs[req.configID] {
			missing = append(missing, req.configID)
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("set_config_option must return the complete configOptions list; missing %q", missing))
		}
		errs = append(errs, checkValueSet(res.ConfigOptions, req.configID, req.value))
		if req.configID == s.modeOption && s.mode != "" {
			s.mode = s.modeValue
		}
	case acp.MethodSessionSteering:
		if !ok {
			break
		}
		switch res.Outcome {
		case acp.SteerInjected:
		case acp.SteerStartedNewTurn:
			if s != nil {
				s.detached = true
			}
		case acp.SteerPromptRequired:
			if !req.promptRequired {
				errs = append(errs, fmt.Errorf("_session/steering answered promptRequired although the request did not ask for it"))
			}
		default:
			errs = append(errs, fmt.Errorf("_session/steering answered outcome %q (want injected, startedNewTurn or promptRequired)", res.Outcome))
		}
	case acp.MethodSessionClose:
		if ok && s != nil && s.prompts > 0 {
			errs = append(errs, fmt.Errorf("session/close for %q answered while %d of its prompts are unanswered: the running prompt must answer `cancelled` first", req.session, s.prompts))
		}
	case acp.MethodSessionPrompt:
		if s == nil {
			break
		}
		s.prompts--
		if !ok && rpcErr.Code == acp.CodeRequestCancelled && s.cancelled && !req.cancelRequested {
			errs = append(errs, fmt.Errorf("session/prompt answered error -32800 after session/cancel; it must answer stopReason `cancelled`"))
		}
		if !req.aside {
			errs = append(errs, t.settleTurn(req.session, s, ok && res.StopReason == string(acp.StopCancelled)))
			var open []string
			for id, c := range t.children {
				if c.parent == req.session && !c.ended {
					open = append(open, id)
					c.ended = true // reported once
				}
			}
			sort.Strings(open)
			if len(open) > 0 {
				errs = append(errs, fmt.Errorf("child sessions of %q still running when its prompt answered: %s", req.session, open))
			}
		}
		errs = append(errs, modeSync(s))
		if s.prompts == 0 {
			s.cancelled = false
		}
	}
	return errors.Join(errs...)
}

// checkValueSet checks that the option just set shows the requested value.
func checkValueSet(list []json.RawMessage, id string, value json.RawMessage) error {
	for _, raw := range list {
		var o struct {
			ID           string          `json:"id"`
			CurrentValue json.RawMessage `json:"currentValue"`
		}
		if json.Unmarshal(raw, &o) == nil && o.ID == id && len(value) > 0 && rawID(o.CurrentValue) != rawID(value) {
			return fmt.Errorf("set_config_option %q to %s answered currentValue %s", id, value, o.CurrentValue)
		}
	}
	return nil
}

// settleTurn checks what a prompt's answer must leave behind: its
// terminals released and, unless cancelled, its tool calls finished.
func (t *Transcript) settleTurn(session string, s *sessState, cancelled bool) error {
	var errs []error
	var ids []string
	for id, term := range t.terminals {
		if term.session == session && !term.released {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		errs = append(errs, fmt.Errorf("terminal %q of session %q not released before the prompt answered", id, session))
		t.terminals[id].released = true // reported once
	}
	ids = ids[:0]
	for id, tc := range s.toolCalls {
		if tc.live {
			tc.live = false
			if !isFinal(tc.status) && !cancelled {
				ids = append(ids, id+" ("+tc.status+")")
			}
		}
	}
	sort.Strings(ids)
	if len(ids) > 0 {
		errs = append(errs, fmt.Errorf("tool calls of session %q not completed or failed when the prompt answered: %s", session, ids))
	}
	return errors.Join(errs...)
}

// End reports what a finished connection must have settled: every terminal
// the client created released. Call it once the agent is done writing.
func (t *Transcript) End() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id, term := range t.terminals {
		if !term.released {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) > 0 {
		return fmt.Errorf("terminals never released: %q", ids)
	}
	return nil
}
