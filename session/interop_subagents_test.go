package session_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// subEvent is one event of a scenario as subagents.mjs saw it.
type subEvent struct {
	Ev           string          `json:"ev"`
	Session      string          `json:"session"`
	Kind         string          `json:"kind"`
	ToolCallID   string          `json:"toolCallId"`
	Status       string          `json:"status"`
	Text         string          `json:"text"`
	Child        string          `json:"child"`
	Title        string          `json:"title"`
	State        json.RawMessage `json:"state"`
	Capabilities json.RawMessage `json:"capabilities"`
	StopReason   string          `json:"stopReason"`
}

// TestInterop_Subagents drives the built acpd with the official TypeScript
// SDK as an editor advertising clientCapabilities.subagents: each agent
// call's run is a child session, announced with subagent_update before its
// first update, its permission request sent under its id and answered, a
// session/cancel with its id stopping it alone, and its end reported
// before the parent's prompt answers. The wire is checked against the
// unstable schema and the transcript rules for children.
func TestInterop_Subagents(t *testing.T) {
	node, npm := acptest.NodeAndNPM(t, "the subagents interop test")
	clientDir := acptest.InteropClient(t, npm, interopDir)
	call := func(name, args string) []modeltest.ToolCall {
		return []modeltest.ToolCall{{Name: name, Arguments: args}}
	}
	agentCall := func(task string) []modeltest.ToolCall {
		return call("agent", `{"description":"Delegated `+task+`","prompt":"`+task+`: do it","subagent_type":"general-purpose"}`)
	}
	srv := modeltest.NewServer(t,
		modeltest.Response{Match: "SUB-perm", ToolCalls: agentCall("TASK-perm")},
		modeltest.Response{Match: "TASK-perm", ToolCalls: call("run_shell_command", `{"command":"echo child-ran"}`)},
		modeltest.Response{Match: "TASK-perm", Text: "child done"},
		modeltest.Response{Match: "SUB-perm", Text: "parent done"},
		modeltest.Response{Match: "SUB-cancel", ToolCalls: agentCall("TASK-cancel")},
		modeltest.Response{Match: "TASK-cancel", ToolCalls: call("run_shell_command", `{"command":"sleep 30"}`)},
		modeltest.Response{Match: "SUB-cancel", Text: "parent went on"},
	)
	v, err := acptest.UnstableValidator()
	require.NoError(t, err)
	out, _ := acptest.RunInteropScriptWith(t, v, node, clientDir, "subagents.mjs", t.TempDir(),
		[]string{"XDG_CONFIG_HOME=" + t.TempDir(), "OPENAI_API_KEY=test-key"},
		acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--data-dir", t.TempDir(), "--log-level", "warn")
	var sum struct {
		Scenarios map[string]struct {
			SessionID string     `json:"sessionId"`
			Events    []subEvent `json:"events"`
		} `json:"scenarios"`
		Unknown   int      `json:"unknown"`
		SDKErrors []string `json:"sdkErrors"`
	}
	require.NoError(t, json.Unmarshal(out, &sum))
	assert.Empty(t, sum.SDKErrors)
	assert.Zero(t, sum.Unknown, "no update for a session the client was not told about")

	find := func(evs []subEvent, from int, f func(subEvent) bool) int {
		for i := max(from, 0); i < len(evs); i++ {
			if f(evs[i]) {
				return i
			}
		}
		return -1
	}
	// announce and end are the child's first and last subagent_update.
	childOf := func(evs []subEvent) (child string, announce, end int) {
		announce, end = -1, -1
		for i, e := range evs {
			if e.Kind == "subagent_update" {
				if announce < 0 {
					announce, child = i, e.Child
				}
				end = i
			}
		}
		return child, announce, end
	}

	t.Run("the child is announced, asks permission under its id, and ends before the parent's prompt", func(t *testing.T) {
		sc := sum.Scenarios["perm"]
		evs := sc.Events
		child, announce, end := childOf(evs)
		require.GreaterOrEqual(t, announce, 0, "no subagent_update: %+v", evs)
		assert.True(t, strings.HasPrefix(child, sc.SessionID+"~"), "child id %q", child)
		assert.Equal(t, sc.SessionID, evs[announce].Session, "announced on the parent's session")
		assert.JSONEq(t, `{"state":"running"}`, string(evs[announce].State))
		assert.JSONEq(t, `{"cancel":{}}`, string(evs[announce].Capabilities))
		assert.Equal(t, "Delegated TASK-perm", evs[announce].Title)
		first := find(evs, 0, func(e subEvent) bool { return e.Session == child })
		assert.Greater(t, first, announce, "the announcement precedes the child's first update")

		perm := find(evs, 0, func(e subEvent) bool { return e.Ev == "permission" })
		require.GreaterOrEqual(t, perm, 0, "the child's permission request reached the client: %+v", evs)
		assert.Equal(t, child, evs[perm].Session, "under the child's id")
		done := find(evs, perm, func(e subEvent) bool {
			return e.Session == child && e.Kind == "tool_call_update" && e.Status == "completed"
		})
		assert.Greater(t, done, perm, "the answer reached the child: its command ran")
		text := find(evs, 0, func(e subEvent) bool { return e.Session == child && strings.Contains(e.Text, "child") })
		assert.Greater(t, text, announce, "the child's text shows under its id")

		assert.Greater(t, end, done)
		assert.JSONEq(t, `{"state":"idle","stopReason":"end_turn"}`, string(evs[end].State))
		assert.Negative(t, find(evs, end+1, func(e subEvent) bool { return e.Session == child }), "nothing of the child after its end")
		answered := find(evs, 0, func(e subEvent) bool { return e.Ev == "prompt" })
		require.Greater(t, answered, end, "the parent's prompt answers after the child's end")
		assert.Equal(t, "end_turn", evs[answered].StopReason)
	})

	t.Run("cancelling the child leaves the parent running", func(t *testing.T) {
		sc := sum.Scenarios["cancel"]
		evs := sc.Events
		child, _, end := childOf(evs)
		cancel := find(evs, 0, func(e subEvent) bool { return e.Ev == "cancel" })
		require.GreaterOrEqual(t, cancel, 0, "%+v", evs)
		assert.Equal(t, child, evs[cancel].Session)
		require.Greater(t, end, cancel)
		assert.JSONEq(t, `{"state":"idle","stopReason":"cancelled"}`, string(evs[end].State))
		went := find(evs, end, func(e subEvent) bool {
			return e.Session == sc.SessionID && e.Kind == "agent_message_chunk" && strings.Contains(e.Text, "parent")
		})
		answered := find(evs, 0, func(e subEvent) bool { return e.Ev == "prompt" })
		require.True(t, went > end && answered > went, "the parent went on after the child's end: %+v", evs)
		assert.Equal(t, "end_turn", evs[answered].StopReason)

		reqs := requestsOf(srv, "SUB-cancel")
		require.Len(t, reqs, 2)
		last := reqs[1].Messages[len(reqs[1].Messages)-1]
		assert.Equal(t, "tool", last.Role)
		assert.Contains(t, last.Text(), "The user stopped the subagent")
	})
}
