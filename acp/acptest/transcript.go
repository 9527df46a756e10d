package acptest

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/acpd/acpd/acp"
)

// Transcript validates a whole connection: every agent line against the
// schema (Validator.CheckAgentLine) plus the stateful checks of
// acp-agent.md §7.4 that are cheap: a tool_call_update must follow a
// tool_call with the same id in the same session, and turn updates (chunks,
// tool calls, plans) must arrive while a session/prompt or session/load for
// that session is unanswered. Record client lines with ClientLine before
// they are written.
type Transcript struct {
	v *Validator

	mu        sync.Mutex
	sent      map[string]sentReq         // raw request id -> request
	active    map[string]int             // sessionId -> unanswered prompt/load
	toolCalls map[string]map[string]bool // sessionId -> toolCallIds seen
}

type sentReq struct {
	method, session string
}

// NewTranscript returns an empty transcript checked by v.
func NewTranscript(v *Validator) *Transcript {
	return &Transcript{v: v, sent: map[string]sentReq{}, active: map[string]int{}, toolCalls: map[string]map[string]bool{}}
}

// ClientLine records a line the client is about to send.
func (t *Transcript) ClientLine(line []byte) {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &env) != nil || env.Method == "" || env.ID == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent[string(env.ID)] = sentReq{env.Method, env.Params.SessionID}
	if env.Method == acp.MethodSessionPrompt || env.Method == acp.MethodSessionLoad {
		t.active[env.Params.SessionID]++
	}
}

var turnUpdates = map[string]bool{
	acp.UpdateUserMessageChunk:  true,
	acp.UpdateAgentMessageChunk: true,
	acp.UpdateAgentThoughtChunk: true,
	acp.UpdateToolCall:          true,
	acp.UpdateToolCallUpdate:    true,
	acp.UpdatePlan:              true,
}

// AgentLine checks one line the agent wrote.
func (t *Transcript) AgentLine(line []byte) error {
	m, err := t.v.checkAgentLine(line, func(id string) string {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.sent[id].method
	})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case m.Method == acp.MethodSessionUpdate:
		var p struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				Kind       string `json:"sessionUpdate"`
				ToolCallID string `json:"toolCallId"`
			} `json:"update"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return err
		}
		kind := p.Update.Kind
		if turnUpdates[kind] && t.active[p.SessionID] == 0 {
			return fmt.Errorf("%s for session %q outside a prompt or load (after its response?)", kind, p.SessionID)
		}
		switch kind {
		case acp.UpdateToolCall:
			if t.toolCalls[p.SessionID] == nil {
				t.toolCalls[p.SessionID] = map[string]bool{}
			}
			t.toolCalls[p.SessionID][p.Update.ToolCallID] = true
		case acp.UpdateToolCallUpdate:
			if !t.toolCalls[p.SessionID][p.Update.ToolCallID] {
				return fmt.Errorf("tool_call_update for %q without an earlier tool_call", p.Update.ToolCallID)
			}
		}
	case m.Method == "" && m.ID != "":
		req, ok := t.sent[m.ID]
		if !ok {
			break
		}
		delete(t.sent, m.ID)
		if req.method == acp.MethodSessionPrompt || req.method == acp.MethodSessionLoad {
			t.active[req.session]--
		}
	}
	return nil
}
