package agentguard

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/stats"
)

// In front of an agent that does not advertise _session/steering, the
// guard answers it "method not found" itself: the agent never sees it.
func TestSteering_NotAdvertised(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	sid := h.session()
	line := h.call("_session/steering", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"STEER"}]}`, sid))
	var r struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &r))
	require.NotNil(t, r.Error, line)
	assert.Equal(t, -32601, r.Error.Code)
	assert.Contains(t, r.Error.Message, "_session/steering")
	for _, l := range h.agent.seenLines() {
		assert.NotContains(t, l, "STEER", "the agent saw the steer")
	}
}

// In front of one that advertises it, a steer passes through unchanged and
// joins the running turn: the guard counts one turn, whose calls before
// and after the steer count together (an explicit cap of 3 stops the
// fourth call although only two came after the steer).
func TestSteering_PassesThroughAndCountsTheTurnOnce(t *testing.T) {
	steered := make(chan struct{})
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 3, Explicit: true}, CancelGrace: 300 * time.Millisecond}, func(a *fakeAgent) {
		a.onSteer = func(a *fakeAgent, _ string, p *prompt, _ json.RawMessage) string {
			if p == nil {
				return "startedNewTurn"
			}
			close(steered)
			return "injected"
		}
		a.onPrompt = func(a *fakeAgent, p *prompt) {
			for i := range 2 {
				a.toolCall(p.sessionID, fmt.Sprintf("b%d", i), fmt.Sprintf(`,"title":"ls","kind":"execute","status":"completed","rawInput":{"command":"ls %d"}`, i))
			}
			<-steered
			for i := range 2 {
				a.toolCall(p.sessionID, fmt.Sprintf("a%d", i), fmt.Sprintf(`,"title":"ls","kind":"execute","status":"completed","rawInput":{"command":"cat %d"}`, i))
			}
			select {
			case <-p.cancelled:
				a.answer(p, "cancelled")
			case <-time.After(10 * time.Second):
				a.answer(p, "end_turn")
			}
		}
	})
	init := h.call("initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
	assert.Contains(t, init, `"steering":{"supported":true}`, "the advertisement reaches the editor")
	var created struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(h.call("session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, t.TempDir()))), &created))
	sid := created.Result.SessionID
	_, answer := h.start("session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}`, sid))
	require.Eventually(t, func() bool { return strings.Contains(strings.Join(h.got(), "\n"), `"toolCallId":"b1"`) }, 10*time.Second, 10*time.Millisecond)
	steer := fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"STEER-now"}]}`, sid)
	assert.Contains(t, h.call("_session/steering", steer), `"outcome":"injected"`)
	var relayed bool
	for _, l := range h.agent.seenLines() {
		relayed = relayed || strings.Contains(l, `"method":"_session/steering","params":`+steer)
	}
	assert.True(t, relayed, "the steer reached the agent unchanged")

	res := parsePromptResult(t, h.await(answer))
	data := res.loopData(t)
	assert.EqualValues(t, 4, data["toolCalls"], "the calls before and after the steer count in one turn")

	// With no turn running, a steer that starts one starts a turn the
	// guard counts too; the session's next prompt ends it.
	h.agent.onPrompt = func(a *fakeAgent, p *prompt) { a.answer(p, "end_turn") }
	h.agent.onSteer = func(a *fakeAgent, sessionID string, p *prompt, _ json.RawMessage) string {
		go func() {
			time.Sleep(100 * time.Millisecond) // after the answer
			a.toolCall(sessionID, "d0", `,"title":"ls","kind":"execute","status":"completed","rawInput":{"command":"ls detached"}`)
		}()
		return "startedNewTurn"
	}
	assert.Contains(t, h.call("_session/steering", steer), `"outcome":"startedNewTurn"`)
	require.Eventually(t, func() bool { return strings.Contains(strings.Join(h.got(), "\n"), `"toolCallId":"d0"`) }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "end_turn", h.prompt(sid, "next").StopReason)
	h.eng.Close()

	rep, err := stats.Collect(stats.Options{DataDir: h.data})
	require.NoError(t, err)
	require.Len(t, rep.Turns, 3, "the prompt with its steer, the turn the idle steer started, the next prompt")
	assert.Equal(t, 4, rep.Turns[0].ToolCalls)
	assert.Equal(t, "loop", rep.Turns[0].Outcome)
	assert.Equal(t, 1, rep.Turns[1].ToolCalls)
	assert.Equal(t, 0, rep.Turns[2].ToolCalls)
}
