package session

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/stats"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/toolcall"
)

// denyShell is a decider as the permission rules will be one: it refuses
// every shell command and says which rule did.
type denyShell struct{}

func (denyShell) Name() string { return "test-rules" }

func (denyShell) Decide(_ context.Context, c *toolcall.Call) toolcall.Decision {
	if c.Name != "run_shell_command" {
		return toolcall.Decision{}
	}
	return toolcall.Decision{Verdict: toolcall.Deny, Reason: `Denied by the rule "Bash(*)" of the test.`}
}

// A decider is added by registering it in one list: the call it denies is
// refused without a permission request, in yolo mode too, with its reason
// in the editor's update, the transcript and acpd stats; the other calls of
// the batch run.
func TestDecider_DeniesOneTool(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, Options{Deciders: []toolcall.Decider{denyShell{}}},
		callsResp(call{name: "run_shell_command", args: map[string]any{"command": "curl example.com"}, id: "sh1"}, read("/w/a.txt")),
		textResp("done"))
	sid := n.newSession(t, t.TempDir())
	resp, err := n.prompt(t, sid, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	const reason = `Denied by the rule "Bash(*)" of the test.`

	// The editor: the call failed with the reason, the trail in _meta.
	var final *acp.ToolCallUpdate
	completed := 0
	for _, u := range n.cc.Updates() {
		if tu := u.Update.ToolCallUpdate; u.Update.Kind == acp.UpdateToolCallUpdate {
			if tu.ToolCallID == "sh1" {
				final = tu
			} else if tu.Status == acp.StatusCompleted {
				completed++
			}
		}
	}
	require.NotNil(t, final)
	assert.Equal(t, acp.StatusFailed, final.Status)
	assert.Equal(t, reason, final.Content[0].Content.Text)
	assert.Equal(t, []any{map[string]any{"by": "test-rules", "verdict": "deny", "reason": reason}}, final.Meta[acp.MetaDecisions])
	assert.Equal(t, 1, completed, "the read in the same batch ran")

	// The model read the reason as the call's result.
	last := n.prov.requests[len(n.prov.requests)-1].Messages
	var results []string
	for _, m := range last {
		if m.ToolCallID == "sh1" {
			results = append(results, m.Content)
		}
	}
	assert.Equal(t, []string{reason}, results)

	// The transcript.
	n.m.Close()
	tr, err := n.st.Load(sid)
	require.NoError(t, err)
	var rec *store.ToolCallRecord
	for _, r := range tr.Records {
		if r.Kind == store.KindToolResult && r.Tool.ToolCallID == "sh1" {
			rec = r.Tool
		}
	}
	require.NotNil(t, rec)
	assert.Equal(t, reason, rec.ModelText)
	assert.Equal(t, []store.Decision{{By: "test-rules", Verdict: "deny", Reason: reason}}, rec.Decisions)

	// acpd stats.
	rep, err := stats.Collect(stats.Options{DataDir: dir})
	require.NoError(t, err)
	require.Len(t, rep.Turns, 1)
	assert.Equal(t, []stats.Decided{{ToolCallID: "sh1", Tool: "run_shell_command", By: "test-rules", Verdict: "deny", Reason: reason}}, rep.Turns[0].Decided)
	var table bytes.Buffer
	require.NoError(t, rep.Write(&table, stats.FormatTable))
	assert.Contains(t, table.String(), "decided calls (decider verdict: calls): test-rules deny: 1\n")
	assert.Contains(t, table.String(), "run_shell_command refused by test-rules: "+reason)
}

// seen records which calls a decider was asked about, and for whom.
type seen struct {
	mu    sync.Mutex
	calls []string
}

func (*seen) Name() string { return "seen" }

func (s *seen) Decide(_ context.Context, c *toolcall.Call) toolcall.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c.Name+"@"+c.Agent)
	return toolcall.Decision{}
}

// A subagent's calls go through the same deciders, each naming the agent
// whose run made it; the agent call itself is the session's.
func TestDecider_SeesSubagentCalls(t *testing.T) {
	s := &seen{}
	h := newHarness(t, Options{Deciders: []toolcall.Decider{s}},
		callsResp(agentCall("call_a", "Find the config", "Where is the port set?", agents.Explore)),
		callsResp(read("/w/config.go")),
		textResp("In /w/config.go."),
		textResp("It is in config.go."),
	)
	_, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, []string{"agent@", "read_file@" + agents.Explore}, s.calls)
}
