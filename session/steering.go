package session

import (
	"context"
	"maps"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/steer"
)

// Steering: the user adds a message to the running turn (_session/steering,
// package steer). Decisions where the shared extension and the drafts are
// silent or disagree:
//   - A steer is a message to the session's own turn: a subagent run's
//     turn takes none (its model reads the result of its task only).
//   - It is accepted ("injected") as soon as a model turn runs, and
//     delivered at the turn's next safe point; the answer does not wait
//     for the delivery (hosts treat a slow answer as a refusal and send
//     the text again).
//   - Cancel: a steer accepted and not yet delivered when the turn is
//     cancelled (or stops, or fails) is never delivered, not in this turn
//     and not in a later one: the user cancelled the work it was about.
//     The prompt's answer lists it under _meta.steering.undelivered (its
//     messageId and prompt), so the client can give the text back. A steer
//     sent after session/cancel finds no running turn.
//   - A steer that reaches a turn whose model has just answered without
//     calling tools is still delivered in that turn: the model reads it
//     and answers again, and the prompt answers once, at the end.
//   - No turn running: the message starts a turn of its own
//     ("startedNewTurn"), queued behind any prompt already waiting, unless
//     the request asked for "promptRequired".

// Prompt queueing. A session/prompt for a session whose turn runs is
// undefined in ACP v1; acpd's default cancels the running turn. A client
// that opts in with clientCapabilities._meta.promptQueueing: true (the
// name claude-agent-acp advertises, agentCapabilities._meta.claudeCode.
// promptQueueing, and the capability of the prompt-queueing RFD) gets its
// prompts queued: each waits for the turns before it to answer, in the
// order they came, and runs as if sent then — its slash command expanded
// at that point, not sent as text. session/cancel cancels the running turn
// and the queued prompts alike (each answers `cancelled`): nothing is left
// stuck behind a turn the user stopped. acpd advertises the opt-in as
// agentCapabilities._meta.promptQueueing: true.
const metaPromptQueueing = "promptQueueing"

// queueing reports whether the client opted in to prompt queueing.
func (m *Manager) queueing() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clientCaps.Meta[metaPromptQueueing] == true
}

// steeringMeta is the initialize answer's top-level _meta advertising
// _session/steering.
func (m *Manager) steeringMeta() acp.Meta {
	return acp.Meta{steer.MetaKey: acp.SteeringAdvertisement()}
}

// Steer serves _session/steering.
func (m *Manager) Steer(ctx context.Context, req *acp.SteeringRequest) (*acp.SteeringResponse, error) {
	s := m.session(req.SessionID)
	if s == nil {
		return nil, errUnknownSession(req.SessionID)
	}
	if s.getModel() == "" {
		return nil, errModelNotConfigured()
	}
	blocks, cmdErr := s.steerBlocks(req.Prompt)
	if cmdErr != nil && s.steers.Running() {
		return nil, cmdErr
	}
	msg, err := s.userMessage(blocks)
	if err != nil {
		return nil, err
	}
	st := steer.Steer{ID: newMessageID(), Prompt: blocks, Message: msg}
	if cmdErr == nil && s.steers.Offer(st) {
		s.log.Info("steering message accepted", "message_id", st.ID)
		return &acp.SteeringResponse{Outcome: acp.SteerInjected, Meta: acp.Meta{"messageId": st.ID}}, nil
	}
	if req.PromptRequired() {
		return &acp.SteeringResponse{Outcome: acp.SteerPromptRequired, Reason: acp.SteerReasonNoRunningTurn}, nil
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errSessionClosing()
	}
	// The turn starts once this answer is on the wire, so its updates
	// follow it; no session/prompt owns it, and session/cancel cancels it
	// as any other.
	detached := context.WithoutCancel(ctx)
	start := func() {
		go func() {
			if _, err := s.prompt(detached, req.Prompt, true); err != nil {
				s.log.Warn("the turn a steering message started failed", "err", err)
			}
		}()
	}
	if !acp.AfterReply(ctx, start) {
		start()
	}
	s.log.Info("steering message started a turn")
	return &acp.SteeringResponse{Outcome: acp.SteerStartedNewTurn}, nil
}

// steerBlocks is a steering message as the running turn takes it: a file
// command (a prompt template) expanded as a prompt's is, so the model never
// reads "/name args" as text; a built-in command cannot run inside a turn
// and is refused (it runs as a prompt, or, with no turn running, as the
// turn the message starts).
func (s *Session) steerBlocks(blocks []acp.ContentBlock) ([]acp.ContentBlock, error) {
	if blocks[0].Type != "text" {
		return blocks, nil
	}
	name, args, ok := commands.Parse(blocks[0].Text)
	if !ok {
		return blocks, nil
	}
	cmd, ok := s.commandSet().Lookup(name)
	switch {
	case !ok:
		return blocks, nil
	case cmd.Run != nil:
		return nil, acp.ErrInvalidParams("prompt[0].text", "/"+name+" is a command and cannot run inside a turn: send it with session/prompt")
	}
	return append([]acp.ContentBlock{acp.TextBlock(commands.Expand(cmd.Template, args))}, blocks[1:]...), nil
}

// echoSteer shows a delivered steer where it landed.
func (s *Session) echoSteer(ctx context.Context, st steer.Steer) {
	for _, u := range st.Updates() {
		s.update(ctx, u)
	}
}

// deliverSteers adds steers to the history after the model's last answer,
// records and shows them: the turn goes on with them.
func (t *turn) deliverSteers(ctx context.Context, ss []steer.Steer) {
	for _, st := range ss {
		t.s.history = append(t.s.history, st.Message)
		t.rec(st.Record())
		t.s.echoSteer(ctx, st)
	}
}

// withUndelivered adds the steers a turn ended without delivering to its
// answer: the response's _meta.steering, or an error's data.
func withUndelivered(resp *acp.PromptResponse, err error, ss []steer.Steer) (*acp.PromptResponse, error) {
	report := steer.Report(ss)
	if report == nil {
		return resp, err
	}
	if resp != nil {
		out := *resp
		out.Meta = maps.Clone(resp.Meta)
		if out.Meta == nil {
			out.Meta = acp.Meta{}
		}
		out.Meta[steer.MetaKey] = report
		return &out, err
	}
	if ae, ok := err.(*acp.Error); ok {
		data, _ := ae.Data.(map[string]any)
		if data == nil && ae.Data != nil {
			return resp, err // data of another shape: left as it is
		}
		out := *ae
		out.Data = maps.Clone(data)
		if out.Data == nil {
			out.Data = map[string]any{}
		}
		out.Data.(map[string]any)[steer.MetaKey] = report
		return resp, &out
	}
	return resp, err
}

// steers delivers, where the model answered without calling tools, the
// steers that arrived meanwhile: true when there were some and the turn
// goes on; false closes the turn to steering in the same step (later ones
// find no running turn).
func (t *turn) steers(ctx context.Context) bool {
	if t.s.parent != nil {
		return false
	}
	ss := t.s.steers.TakeOrClose()
	t.deliverSteers(ctx, ss)
	return len(ss) > 0
}
