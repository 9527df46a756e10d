package session

import (
	"context"
	"fmt"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/hooks"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/policy"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/toolcall"
)

// Where the session meets its policy (package policy): the rules and
// PreToolUse/PostToolUse hooks as deciders of every tool call, the trust
// question, and the hooks of the session's other events.

// policyDeciders are the hooks and the rules as deciders of a turn's tool
// calls, at their place after plan mode (none without a policy).
func (t *turn) policyDeciders() []toolcall.Decider {
	p := t.s.base().pol
	if p == nil {
		return nil
	}
	return []toolcall.Decider{policy.Hooks{S: p, Host: t}, policy.Rules{S: p}}
}

// maxStopContinues bounds how often Stop hooks may keep one turn going, as
// Claude Code does: a hook that always blocks cannot make a turn endless.
const maxStopContinues = 8

// heldRecords is a turn as policy.Host whose records wait: the hooks that
// run before a prompt is recorded are kept after it, in its turn (and
// with nothing of a prompt a hook dropped).
type heldRecords struct {
	t    *turn
	recs []store.Record
}

func (h *heldRecords) Update(ctx context.Context, u acp.SessionUpdate) { h.t.s.update(ctx, u) }
func (h *heldRecords) Record(r store.Record)                           { h.recs = append(h.recs, r) }

func (h *heldRecords) flush() {
	for _, r := range h.recs {
		h.t.rec(r)
	}
	h.recs = nil
}

// beforePrompt runs what comes before a prompt reaches the model: the
// trust question when the workspace's settings need one, the SessionStart
// hooks at the session's first prompt, and the UserPromptSubmit hooks. It
// returns the context the hooks give the model, and blocked when a hook
// dropped the prompt (its reason shown to the user).
func (t *turn) beforePrompt(ctx context.Context, h *heldRecords, text string) (extra string, blocked bool) {
	s := t.s
	p := s.pol
	if proj, ok := p.PendingTrust(); ok {
		yes, answered := policy.AskTrust(ctx, s.id, trustAsker{asker{s}}, proj)
		if err := p.AnswerTrust(proj, yes, !answered); err != nil {
			s.log.Warn("keeping the workspace's trust", "err", err)
		}
		if yes && len(proj.MCP.Servers) > 0 {
			// Its MCP servers start now, for this very prompt.
			s.m.trustedMCP(ctx, s)
		}
	}
	mode := hooks.PermissionMode(s.getMode())
	var parts []string
	if !s.hooksStarted {
		s.hooksStarted = true
		v := p.Fire(ctx, h, policy.Event{Name: hooks.SessionStart, Match: []string{s.startSource()},
			Input: hooks.Input{PermissionMode: mode, Source: s.startSource(), Model: s.getModel()}})
		if v.Context != "" {
			parts = append(parts, v.Context)
		}
	}
	v := p.Fire(ctx, h, policy.Event{Name: hooks.UserPromptSubmit, Input: hooks.Input{PermissionMode: mode, Prompt: text}})
	if v.Block || v.Stop {
		who := "a UserPromptSubmit hook"
		if v.By != nil {
			who = fmt.Sprintf("the UserPromptSubmit hook %q", v.By.Command)
		}
		reason := v.Reason
		if v.Stop && !v.Block {
			reason = v.StopReason
		}
		b := acp.TextBlock(fmt.Sprintf("This prompt was blocked by %s: %s", who, reason))
		s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b, MessageID: newMessageID()})
		return "", true
	}
	if v.Context != "" {
		parts = append(parts, v.Context)
	}
	for _, m := range v.Messages {
		b := acp.TextBlock(m + "\n\n")
		s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b, MessageID: newMessageID()})
	}
	for i, x := range parts {
		if i > 0 {
			extra += "\n\n"
		}
		extra += x
	}
	return extra, false
}

// hookContext adds what the hooks gave the model after the prompt, as a
// reminder the transcript keeps (a reloaded session has it too, and the
// hooks are not run again for it).
func (t *turn) hookContext(text string) {
	if text == "" {
		return
	}
	text = "Context from the session's hooks:\n" + text
	t.s.history = append(t.s.history, model.Message{Role: model.RoleUser, Content: text})
	t.rec(store.Record{Kind: store.KindReminder, Text: text})
}

// stopHook runs the Stop hooks (SubagentStop for a subagent's run) when
// the model ends its turn: a hook that blocks makes it go on, with the
// reason as the model's next message; true then.
func (t *turn) stopHook(ctx context.Context, last string) bool {
	s := t.s
	p := s.base().pol
	if p == nil || t.stopContinues >= maxStopContinues {
		return false
	}
	ev := hooks.Stop
	in := hooks.Input{PermissionMode: hooks.PermissionMode(s.getMode()), LastAssistantMessage: last}
	active := t.stopContinues > 0
	in.StopHookActive = &active
	var match []string
	if s.parent != nil {
		ev = hooks.SubagentStop
		in.AgentType, in.AgentID = s.agentType(), s.runID
		match = []string{s.agentType()}
	}
	v := p.Fire(ctx, t, policy.Event{Name: ev, Match: match, Input: in})
	if !v.Block || v.Stop || ctx.Err() != nil {
		return false
	}
	t.stopContinues++
	text := fmt.Sprintf("A %s hook does not let the turn end yet: %s", ev, v.Reason)
	s.history = append(s.history, model.Message{Role: model.RoleUser, Content: text})
	t.rec(store.Record{Kind: store.KindReminder, Text: text})
	return true
}

// preCompact runs the PreCompact hooks; true when one blocks a manual
// compaction. An automatic one goes on whatever they say: the request it
// makes room for would not fit otherwise.
func (t *turn) preCompact(ctx context.Context, trigger, focus string) (string, bool) {
	p := t.s.base().pol
	if p == nil {
		return "", false
	}
	if trigger == "overflow" {
		trigger = "auto"
	}
	v := p.Fire(ctx, t, policy.Event{Name: hooks.PreCompact, Match: []string{trigger},
		Input: hooks.Input{PermissionMode: hooks.PermissionMode(t.s.getMode()), Trigger: trigger, CustomInstructions: focus}})
	return v.Reason, v.Block && trigger == "manual"
}

// sessionEnd runs the SessionEnd hooks of a session being freed; their
// runs are recorded, not shown (the editor is done with the session).
func (s *Session) sessionEnd() {
	if s.pol == nil || s.parent != nil || !s.hooksStarted {
		return
	}
	s.pol.Fire(context.Background(), recordOnly{s}, policy.Event{Name: hooks.SessionEnd, Match: []string{"other"},
		Input: hooks.Input{PermissionMode: hooks.PermissionMode(s.getMode()), Reason: "other"}})
}

// recordOnly is a session as policy.Host that records and shows nothing.
type recordOnly struct{ s *Session }

func (recordOnly) Update(context.Context, acp.SessionUpdate) {}
func (r recordOnly) Record(rec store.Record) {
	if err := r.s.record(rec); err != nil {
		r.s.log.Warn("recording a hook's run", "err", err)
	}
}

// notifyHook runs the Notification hooks when the user is asked for
// permission, in the background: a desktop notifier must not hold the
// question back.
func (t *turn) notifyHook(ctx context.Context, title string) {
	p := t.s.base().pol
	if p == nil {
		return
	}
	go p.Fire(context.WithoutCancel(ctx), t, policy.Event{Name: hooks.Notification, Match: []string{"permission_prompt"},
		Input: hooks.Input{PermissionMode: hooks.PermissionMode(t.s.getMode()), NotificationType: "permission_prompt",
			Title: "Permission needed", Message: "acpd needs your permission: " + title}})
}

// trustAsker is a session as the trust question asks through it: as a
// rewind's question, and by a form when the editor offers one.
type trustAsker struct{ asker }

func (a trustAsker) Elicit() func(context.Context, *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
	el, ok := a.s.m.client.(acp.Elicitor)
	if !ok || !a.s.clientCaps().ElicitForm() {
		return nil
	}
	return el.CreateElicitation
}
