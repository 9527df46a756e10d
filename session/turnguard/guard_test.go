package turnguard

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
)

// §8: the loop rejection's data carries loopType only when one was
// recorded; acpd adds the guard's facts next to the reference fields.
func TestLoopErrorShape(t *testing.T) {
	capFacts := Facts{CapReason: loopdetect.CapStuck, ToolCalls: 101, MaxKeyRepeat: 6,
		Cap: loopdetect.Cap{Max: 100}, RepeatedTool: "read_file", RepeatCount: 6}
	tests := []struct {
		lt    loopdetect.LoopType
		facts Facts
		want  map[string]any
	}{
		{"", Facts{}, map[string]any{"code": "LOOP_DETECTED", "errorKind": "loop_detected",
			"toolCalls": 0, "maxKeyRepeat": 0, "maxToolCallsPerTurn": 0, "explicit": false}},
		{loopdetect.LoopTurnToolCallCap, capFacts, map[string]any{"code": "LOOP_DETECTED", "errorKind": "loop_detected",
			"loopType": "turn_tool_call_cap", "capReason": "stuck", "toolCalls": 101, "maxKeyRepeat": 6,
			"maxToolCallsPerTurn": 100, "explicit": false, "repeatedTool": "read_file", "repeatCount": 6}},
		{loopdetect.LoopTurnToolCallCap, Facts{CapReason: loopdetect.CapExplicit, ToolCalls: 4, MaxKeyRepeat: 1,
			Cap: loopdetect.Cap{Max: 3, Explicit: true, StuckWindow: 50}, WindowRepeat: 1}, map[string]any{
			"code": "LOOP_DETECTED", "errorKind": "loop_detected", "loopType": "turn_tool_call_cap", "capReason": "explicit",
			"toolCalls": 4, "maxKeyRepeat": 1, "maxToolCallsPerTurn": 3, "explicit": true, "stuckWindow": 50, "windowKeyRepeat": 1}},
	}
	for _, tt := range tests {
		e := LoopError(tt.lt, tt.facts)
		assert.Equal(t, acp.CodeInternalError, e.Code)
		assert.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, e.Message)
		assert.Equal(t, tt.want, e.Data)
	}
}

// §7.2–§7.5: the guard's warnings are the exact texts.
func TestGuardWarnTexts(t *testing.T) {
	tests := []struct {
		name string
		cap  loopdetect.Cap
		skip bool
		run  func(g *Guard)
		want string
	}{
		{"cap", loopdetect.Cap{Max: 3, Explicit: true}, false, func(g *Guard) { g.RecordBatch([]string{"a", "b", "c", "d"}, nil) },
			"Stopping ACP turn after 4 tool calls in one turn."},
		{"global duplicate", loopdetect.Cap{Max: 100}, false, func(g *Guard) { g.RecordBatch([]string{"k", "k", "k", "k", "k", "k"}, nil) },
			"Stopping ACP turn after the same tool call repeated 6 times."},
		{"invalid params", loopdetect.Cap{Max: 100}, true, func(g *Guard) {
			for range 3 {
				g.RecordInvalidParams("", "Missing function name")
			}
		}, "Stopping ACP turn after repeated tool parameter errors from unknown_tool: Missing function name"},
		{"duplicate id", loopdetect.Cap{Max: 100}, false, func(g *Guard) { g.RecordDuplicateReplay("shell_1", "run_shell_command") },
			"Stopping ACP turn after repeated duplicate provider tool-call id: shell_1 (tool: run_shell_command)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf strings.Builder
			g := New(tt.cap, tt.skip, loopdetect.FailureModeOff, slog.New(slog.NewTextHandler(&buf, nil)))
			tt.run(g)
			assert.True(t, g.Detected())
			assert.Contains(t, buf.String(), fmt.Sprintf("msg=%q", tt.want))
			before := buf.Len()
			g.RecordBatch([]string{"z"}, nil)
			g.RecordInvalidParams("x", "y")
			assert.Equal(t, before, buf.Len(), "later detections change nothing")
		})
	}
}
