package session

import (
	"context"
	"strings"
	"sync"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/agents"
)

// Visible subagents: a client that advertises clientCapabilities.subagents
// (unstable schema) sees each agent call's run as a child session. Decisions
// where the schema and the RFD are silent:
//   - The child's id is the parent's id, "~", and the agent call's
//     toolCallId: unique, stable across a reload, and the agent call it
//     runs for can be read from it.
//   - subagent_update announces the child on the parent's session before
//     any update of the child (title: the call's description; description:
//     the agent's name; cancel permitted; state running), and ends it with
//     state idle and the run's stop reason (end_turn, max_tokens, refusal,
//     cancelled, or error with the failure) after the child's last update
//     and before the agent call's result: every child has ended before the
//     parent's prompt answers.
//   - The child's updates carry its id, all of them: its text, thoughts,
//     tool calls, usage. Mode changes stay the parent's (the mode is the
//     session's). Its permission requests, file and terminal requests carry
//     its id too, under the parent's capabilities, mode and grants.
//   - session/cancel with the child's id stops that run only: its model
//     request and tool calls end as a cancel ends them, the agent call
//     fails telling the parent's model the user stopped it, and the
//     parent's turn goes on. Cancelling the parent cancels its children.
//   - Other methods with a child's id (prompt, load, set_mode, …) answer
//     as for an unknown session: a child is not a session of its own.
//   - Without the capability, runs are shown as before: their tool calls
//     in the parent's session under the agent call.

// childSep separates the parent's id from the agent call's in a child's id.
const childSep = "~"

// RootID is the id of the session that id belongs to: for a visible run's
// child id the parent's at its root (a nested run's id holds one "~" a
// level), for any other id the id itself. Whoever may use that session
// may cancel its children.
func RootID(id string) string {
	root, _, _ := strings.Cut(id, childSep)
	return root
}

// subagentsVisible reports whether the client shows subagent runs as
// child sessions.
func (m *Manager) subagentsVisible() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clientCaps.Subagents != nil
}

// children are a session's visible subagent runs, by child id: each one's
// cancel. Safe for concurrent use (the agent calls of a response run side
// by side).
type children struct {
	mu   sync.Mutex
	runs map[string]context.CancelFunc
}

func (c *children) add(id string, cancel context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]context.CancelFunc{}
	}
	c.runs[id] = cancel
}

func (c *children) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.runs, id)
}

// cancel cancels the run id; false when there is none.
func (c *children) cancel(id string) bool {
	c.mu.Lock()
	cancel := c.runs[id]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return cancel != nil
}

// cancelChild cancels the subagent run whose child id is id; false when
// id names none.
func (m *Manager) cancelChild(id string) bool {
	parent, _, ok := strings.Cut(id, childSep)
	if !ok {
		return false
	}
	s := m.session(parent)
	return s != nil && s.children.cancel(id)
}

// wire is the session id of s's updates and requests: a visible run's
// child id, otherwise the session's.
func (s *Session) wire() string {
	if s.childID != "" {
		return s.childID
	}
	return s.id
}

// announceChild starts a visible run: the child session c of the agent
// call, announced on s. It returns the run's context, which session/cancel
// with the child's id cancels, and the function that ends the run.
func (s *Session) announceChild(ctx context.Context, c *Session, a *agents.Agent, call *agents.Call) (context.Context, func(*acp.SubagentState)) {
	c.childID = s.wire() + childSep + c.runID
	ctx, cancel := context.WithCancel(ctx)
	base := s.base()
	base.children.add(c.childID, cancel)
	title, desc := call.Description, a.Name
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateSubagent, Subagent: &acp.SubagentUpdate{
		SessionID: c.childID, Title: &title, Description: &desc, Cwd: s.cwd,
		Capabilities: &acp.SubagentSessionCapabilities{Cancel: &acp.Capability{}},
		State:        &acp.SubagentState{State: acp.SubagentRunning},
	}})
	return ctx, func(st *acp.SubagentState) {
		base.children.remove(c.childID)
		cancel()
		s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateSubagent, Subagent: &acp.SubagentUpdate{SessionID: c.childID, State: st}})
	}
}

// childState is how a visible run ended, for its last subagent_update.
func childState(ctx context.Context, resp *acp.PromptResponse, res subagentResult) *acp.SubagentState {
	st := &acp.SubagentState{State: acp.SubagentIdle}
	switch {
	case ctx.Err() != nil:
		st.StopReason = acp.StopCancelled
	case resp != nil && resp.StopReason != acp.StopEndTurn:
		st.StopReason = resp.StopReason
	case res.failed:
		st.StopReason = acp.StopError
		st.Error = &acp.Error{Code: acp.CodeInternalError, Message: firstLine(res.text)}
	case resp != nil:
		st.StopReason = resp.StopReason
	default:
		st.StopReason = acp.StopEndTurn
	}
	return st
}
