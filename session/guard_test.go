package session

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
)

// Scripts of the measured table in loop-detection.md ("Observed on
// @qwen-code/qwen-code 0.24.4 in ACP mode").
func distinctSingles(n int) [][]model.Event {
	var rs [][]model.Event
	for i := range n {
		rs = append(rs, callsResp(read(fmt.Sprintf("/w/distinct_%d.txt", i))))
	}
	return append(rs, textResp("done"))
}

func alternating(n int) [][]model.Event {
	var rs [][]model.Event
	for i := range n {
		if i%2 == 0 {
			rs = append(rs, callsResp(read("/w/same.txt")))
		} else {
			rs = append(rs, callsResp(read(fmt.Sprintf("/w/d_%d.txt", i))))
		}
	}
	return append(rs, textResp("done"))
}

func batches(n, per int) [][]model.Event {
	var rs [][]model.Event
	for i := range n {
		var cs []call
		for j := range per {
			cs = append(cs, read(fmt.Sprintf("/w/b%d_%d.txt", i, j)))
		}
		rs = append(rs, callsResp(cs...))
	}
	return append(rs, textResp("done"))
}

func TestGuard_MeasuredTable(t *testing.T) {
	explicit := func(n int) loopdetect.Cap { return loopdetect.Cap{Max: n, Explicit: true} }
	tests := []struct {
		name      string
		script    [][]model.Event
		cap       loopdetect.Cap
		skip      *bool
		loop      loopdetect.LoopType // "" = end_turn
		completed int
		failed    int
	}{
		{"150 distinct singles, default", distinctSingles(150), loopdetect.Cap{}, nil, "", 150, 0},
		{"120 alternating, default", alternating(120), loopdetect.Cap{}, nil, loopdetect.LoopTurnToolCallCap, 100, 1},
		{"12 with one call repeated 6 times, default", alternating(12), loopdetect.Cap{}, nil, "", 12, 0},
		{"60 distinct, cap 50", distinctSingles(60), explicit(50), nil, loopdetect.LoopTurnToolCallCap, 50, 1},
		{"15 batches of 4, cap 50", batches(15, 4), explicit(50), nil, loopdetect.LoopTurnToolCallCap, 48, 4},
		{"12 repeat script, skipLoopDetection=false", alternating(12), loopdetect.Cap{}, new(false), loopdetect.LoopGlobalToolCallDuplicate, 10, 1},
		{"150 distinct, cap 0", distinctSingles(150), explicit(0), nil, "", 150, 0},
		{"120 alternating, cap -1", alternating(120), explicit(-1), nil, "", 120, 0},
		{"105 batches of 10, default", batches(105, 10), loopdetect.Cap{}, nil, loopdetect.LoopTurnToolCallCap, 1000, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Cap: tt.cap, SkipLoopDetection: true}
			if tt.cap == (loopdetect.Cap{}) {
				opts.Cap = loopdetect.Cap{Max: loopdetect.DefaultMaxToolCallsPerTurn}
			}
			if tt.skip != nil {
				opts.SkipLoopDetection = *tt.skip
			}
			h := newHarness(t, opts, tt.script...)
			resp, err := h.prompt(t, "go")
			if tt.loop == "" {
				require.NoError(t, err)
				assert.Equal(t, acp.StopEndTurn, resp.StopReason)
			} else {
				data := requireLoopError(t, err, tt.loop)
				delete(data, "code")
				delete(data, "errorKind")
				delete(data, "loopType")
				assert.Equal(t, measuredFacts[tt.name], data, "the guard's facts at the stop: cap rule, counts, repeated call")
			}
			completed, failed := h.client.counts()
			assert.Equal(t, tt.completed, completed, "completed")
			assert.Equal(t, tt.failed, failed, "failed")
		})
	}
}

// measuredFacts are the facts the guard adds to the error data of the
// measured table's loop stops, beyond the reference's code, errorKind and
// loopType: which cap rule fired (explicit, stuck, backstop), the turn's
// counted total (the skipped batch included) and the repeated call.
var measuredFacts = map[string]map[string]any{
	"120 alternating, default": {"capReason": "stuck", "toolCalls": 101, "maxKeyRepeat": 51,
		"maxToolCallsPerTurn": 100, "explicit": false, "repeatedTool": "read_file", "repeatCount": 51},
	"60 distinct, cap 50": {"capReason": "explicit", "toolCalls": 51, "maxKeyRepeat": 1,
		"maxToolCallsPerTurn": 50, "explicit": true},
	"15 batches of 4, cap 50": {"capReason": "explicit", "toolCalls": 52, "maxKeyRepeat": 1,
		"maxToolCallsPerTurn": 50, "explicit": true},
	"12 repeat script, skipLoopDetection=false": {"toolCalls": 11, "maxKeyRepeat": 6,
		"maxToolCallsPerTurn": 100, "explicit": false, "repeatedTool": "read_file", "repeatCount": 6},
	"105 batches of 10, default": {"capReason": "backstop", "toolCalls": 1010, "maxKeyRepeat": 1,
		"maxToolCallsPerTurn": 100, "explicit": false},
}

// After a loop stop the skipped call's result in history is the exact skip
// message, and the next prompt's first user message starts with the exact
// context message, followed by the prompt.
func TestGuard_ContextAfterLoopStop(t *testing.T) {
	script := append(distinctSingles(3)[:3], textResp("fresh"))
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 2, Explicit: true}}, script...)
	_, err := h.prompt(t, "first")
	requireLoopError(t, err, loopdetect.LoopTurnToolCallCap)
	assert.Equal(t, []string{loopdetect.LoopDetectedSkipMessage}, h.client.failedTexts())

	resp, err := h.prompt(t, "second")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)

	last := h.prov.requests[len(h.prov.requests)-1]
	var toolResults []string
	var users []model.Message
	for _, m := range last.Messages {
		switch m.Role {
		case model.RoleTool:
			toolResults = append(toolResults, m.Content)
		case model.RoleUser:
			users = append(users, m)
		}
	}
	assert.Equal(t, loopdetect.LoopDetectedSkipMessage, toolResults[len(toolResults)-1])
	require.Len(t, users, 2)
	assert.True(t, strings.HasPrefix(users[1].Content, loopdetect.LoopDetectedContextMessage), users[1].Content)
	assert.True(t, strings.HasSuffix(users[1].Content, "second"))
	assert.False(t, strings.Contains(users[0].Content, loopdetect.LoopDetectedContextMessage))
}

// The stuck-window vectors (model.stuckWindow) through the daemon guard: a turn
// re-running the same test six times spread over 300 calls is productive
// with model.stuckWindow = 50 and stuck without it; a tight loop is stuck
// either way.
func TestGuard_StuckWindow(t *testing.T) {
	spread := func() [][]model.Event {
		var rs [][]model.Event
		for i := range 300 {
			if (i+1)%50 == 0 {
				rs = append(rs, callsResp(read("/w/run-tests")))
			} else {
				rs = append(rs, callsResp(read(fmt.Sprintf("/w/edit_%d.go", i))))
			}
		}
		return append(rs, textResp("done"))
	}
	tight := func() [][]model.Event {
		rs := distinctSingles(100)[:100]
		for i := range 20 {
			rs = append(rs, callsResp(read("/w/run-tests")), callsResp(read(fmt.Sprintf("/w/f_%d", i))))
		}
		return append(rs, textResp("done"))
	}
	tests := []struct {
		name      string
		script    [][]model.Event
		window    int
		stuckAt   int // the turn's counted total at the stop; 0: end_turn
		completed int
	}{
		{"spread, whole turn", spread(), 0, 300, 299},
		{"spread, W=50", spread(), 50, 0, 300},
		{"tight, whole turn", tight(), 0, 111, 110},
		{"tight, W=50", tight(), 50, 111, 110},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 100, StuckWindow: tt.window}, SkipLoopDetection: true}, tt.script...)
			resp, err := h.prompt(t, "go")
			completed, _ := h.client.counts()
			assert.Equal(t, tt.completed, completed)
			if tt.stuckAt == 0 {
				require.NoError(t, err)
				assert.Equal(t, acp.StopEndTurn, resp.StopReason)
				return
			}
			data := requireLoopError(t, err, loopdetect.LoopTurnToolCallCap)
			assert.Equal(t, "stuck", data["capReason"])
			assert.Equal(t, tt.stuckAt, data["toolCalls"])
			assert.Equal(t, 6, data["maxKeyRepeat"])
			assert.Equal(t, "read_file", data["repeatedTool"])
			if tt.window > 0 {
				assert.Equal(t, tt.window, data["stuckWindow"])
				assert.Equal(t, 6, data["windowKeyRepeat"])
			} else {
				assert.NotContains(t, data, "stuckWindow")
			}
		})
	}
}
