package session

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/store"
)

// guard is the daemon's per-turn loop state (qwen-code's DaemonToolLoopState,
// loop-detection.md §7). It shares the cap predicate, the repeat key and the
// thresholds with package loopdetect through loopdetect.CapTracker, so the
// daemon and the core detector can never drift. One guard lives for one
// prompt turn and is used only from that turn's goroutine.
type guard struct {
	cap      *loopdetect.CapTracker
	skipLoop bool // skipLoopDetection: gates only the global-duplicate halt
	logger   *slog.Logger

	invalidParams map[string]int // per tool name

	detected bool
	loopType loopdetect.LoopType
	facts    loopFacts // what the stop saw, for the error data, log and transcript

	keyNames map[string]string // repeat key -> tool name, for the repeated-call facts

	failureMode  loopdetect.FailureMode
	failureState loopdetect.FailureState
}

func newGuard(c loopdetect.Cap, skipLoop bool, mode loopdetect.FailureMode, logger *slog.Logger) *guard {
	return &guard{
		cap:           loopdetect.NewCapTracker(c),
		skipLoop:      skipLoop,
		logger:        logger,
		invalidParams: map[string]int{},
		keyNames:      map[string]string{},
		failureMode:   mode,
		failureState:  loopdetect.NewFailureState(),
	}
}

// loopFacts is what the guard knew when it stopped a turn (issue 17): which
// cap rule fired, the turn's counted total and its highest key repeat, the
// cap in force, and for a stop on a repeated call that call's tool name and
// count. The same facts go into the foreground error's data, the slog
// warning, the transcript's loop_stop record and telemetry.
type loopFacts struct {
	capReason    loopdetect.CapReason // "" unless the loop type is turn_tool_call_cap
	toolCalls    int                  // the turn's total counted, the stopped batch included
	maxKeyRepeat int                  // the highest count of one repeat key in the turn
	cap          loopdetect.Cap
	// windowRepeat is the windowed stuck signal when cap.StuckWindow > 0.
	windowRepeat int
	// repeatedTool and repeatCount name the repeated call of a
	// global-duplicate stop or a stuck cap stop.
	repeatedTool string
	repeatCount  int
}

// logAttrs are the facts as slog attributes, after loop_type.
func (f loopFacts) logAttrs(t loopdetect.LoopType) []any {
	a := []any{"loop_type", string(t)}
	if f.capReason != "" {
		a = append(a, "cap_reason", string(f.capReason))
	}
	a = append(a, "tool_calls", f.toolCalls, "max_key_repeat", f.maxKeyRepeat,
		"max_tool_calls_per_turn", f.cap.Max, "explicit", f.cap.Explicit)
	if f.cap.StuckWindow > 0 {
		a = append(a, "stuck_window", f.cap.StuckWindow, "window_key_repeat", f.windowRepeat)
	}
	if f.repeatedTool != "" {
		a = append(a, "repeated_tool", f.repeatedTool, "repeat_count", f.repeatCount)
	}
	return a
}

// data adds the facts to a loop error's data. The existing fields (code,
// errorKind, loopType) are the caller's and stay as they are.
func (f loopFacts) data(d map[string]any) {
	if f.capReason != "" {
		d["capReason"] = string(f.capReason)
	}
	d["toolCalls"] = f.toolCalls
	d["maxKeyRepeat"] = f.maxKeyRepeat
	d["maxToolCallsPerTurn"] = f.cap.Max
	d["explicit"] = f.cap.Explicit
	if f.cap.StuckWindow > 0 {
		d["stuckWindow"] = f.cap.StuckWindow
		d["windowKeyRepeat"] = f.windowRepeat
	}
	if f.repeatedTool != "" {
		d["repeatedTool"] = f.repeatedTool
		d["repeatCount"] = f.repeatCount
	}
}

// record is the facts as the transcript's loop_stop record holds them.
func (f loopFacts) record(t loopdetect.LoopType) *store.LoopStop {
	st := &store.LoopStop{
		LoopType: string(t), CapReason: string(f.capReason), ToolCalls: f.toolCalls,
		MaxKeyRepeat: f.maxKeyRepeat, MaxToolCallsPerTurn: f.cap.Max, Explicit: f.cap.Explicit,
		RepeatedTool: f.repeatedTool, RepeatCount: f.repeatCount,
	}
	if f.cap.StuckWindow > 0 {
		st.StuckWindow, st.WindowKeyRepeat = f.cap.StuckWindow, f.windowRepeat
	}
	return st
}

// currentFacts reads the facts off the tracker.
func (g *guard) currentFacts(reason loopdetect.CapReason) loopFacts {
	return loopFacts{
		capReason: reason, toolCalls: g.cap.Total(), maxKeyRepeat: g.cap.MaxKeyRepeat(),
		cap: g.cap.Cap(), windowRepeat: g.cap.StuckRepeat(),
	}
}

// latch records the first detection only; later ones change nothing.
func (g *guard) latch(t loopdetect.LoopType, f loopFacts, warn string) bool {
	if !g.detected {
		g.detected = true
		g.loopType = t
		g.facts = f
		g.logger.Warn(warn, f.logAttrs(t)...)
	}
	return true
}

// recordBatch is recordDaemonToolCalls: it counts every call of one model
// response (keys are the calls' repeat keys, names their tool names, or nil)
// before any of them runs, then checks once. A true result means the whole
// batch is skipped.
func (g *guard) recordBatch(keys, names []string) bool {
	if g.detected {
		return true
	}
	for i, k := range keys {
		if i < len(names) {
			if _, ok := g.keyNames[k]; !ok {
				g.keyNames[k] = names[i]
			}
		}
	}
	lt, r := g.cap.RecordBatch(keys, g.skipLoop)
	switch lt {
	case loopdetect.LoopTurnToolCallCap:
		f := g.currentFacts(r)
		if r == loopdetect.CapStuck {
			f.repeatedTool, f.repeatCount = g.repeated()
		}
		return g.latch(lt, f, fmt.Sprintf("Stopping ACP turn after %d tool calls in one turn.", g.cap.Total()))
	case loopdetect.LoopGlobalToolCallDuplicate:
		f := g.currentFacts("")
		f.repeatedTool, f.repeatCount = g.repeated()
		return g.latch(lt, f, fmt.Sprintf("Stopping ACP turn after the same tool call repeated %d times.", g.cap.MaxKeyRepeat()))
	}
	return false
}

// repeated names the most repeated call of the turn and its count. A call
// the model sent without a name is counted under nameless. Decision: with a
// stuck window this is still the whole turn's most repeated call (the one
// the window found is almost always the same call; the window's own
// highest count is reported as windowKeyRepeat).
func (g *guard) repeated() (string, int) {
	name := g.keyNames[g.cap.MaxRepeatKey()]
	if name == "" {
		name = nameless
	}
	return name, g.cap.MaxKeyRepeat()
}

// recordInvalidParams is recordDaemonInvalidToolParams: counted per tool
// name ("unknown_tool" when the model sent none); true at the threshold.
func (g *guard) recordInvalidParams(tool, msg string) bool {
	if tool == "" {
		tool = "unknown_tool"
	}
	g.invalidParams[tool]++
	if g.invalidParams[tool] >= loopdetect.DaemonInvalidToolParamsThreshold {
		return g.latch(loopdetect.LoopInvalidToolParamsStagnation, g.currentFacts(""),
			fmt.Sprintf("Stopping ACP turn after repeated tool parameter errors from %s: %s", tool, msg))
	}
	return false
}

// recordDuplicateReplay latches when the model repeats a provider call id
// that was already answered as a duplicate (§7.5).
func (g *guard) recordDuplicateReplay(id, name string) bool {
	return g.latch(loopdetect.LoopGlobalToolCallDuplicate, g.currentFacts(""),
		fmt.Sprintf("Stopping ACP turn after repeated duplicate provider tool-call id: %s (tool: %s).", id, name))
}

// failureVerdict feeds one finished batch to the repeated-tool-failure
// reducer (§7.6). It returns the text to add after the tool responses: the
// reminder on warn, the stop message on stop (which also latches the turn).
// Shadow-mode verdicts are only logged.
func (g *guard) failureVerdict(obs []failureObservation) string {
	batch := loopdetect.FailureBatch{Complete: true, InputReliable: true}
	for _, o := range obs {
		batch.Observations = append(batch.Observations, loopdetect.FailureObservation{
			ProviderDuplicate: o.providerDuplicate,
			Terminal:          loopdetect.TerminalStatus(o.terminal),
			Execution:         loopdetect.ExecutionStatus(o.execution),
			PolicyToolName:    o.tool,
			ErrorType:         failureErrorType(o.errType),
		})
	}
	r := loopdetect.ReduceRepeatedFailure(g.failureMode, g.failureState, batch)
	g.failureState = r.State
	switch r.Kind {
	case loopdetect.FailureWouldWarn, loopdetect.FailureWouldStop:
		g.logger.Info("repeated tool failure guard (shadow)", "verdict", string(r.Kind),
			"tool", r.State.Key.PolicyToolName, "error_type", r.State.Key.ErrorType)
	case loopdetect.FailureWarn:
		g.logger.Warn("repeated tool failure: reminding the model", "tool", r.State.Key.PolicyToolName)
		return loopdetect.RepeatedToolFailureReminder
	case loopdetect.FailureStop:
		g.latch(loopdetect.LoopRepeatedToolExecutionFailure, g.currentFacts(""), "Stopping ACP turn after repeated tool execution failures.")
		return "System: " + loopdetect.RepeatedToolFailureStopMessage
	}
	return ""
}

// failureErrorType maps a tool's error type to the reducer's: acpd's tools
// spell qwen-code's ToolErrorType names in upper case (tools.ErrTypeUnknown
// is "UNKNOWN"), and an unclassified failure must disable enforcement
// (§7.6), not become a failure key of its own.
func failureErrorType(t string) string {
	if strings.EqualFold(t, loopdetect.ErrorTypeUnknown) {
		return loopdetect.ErrorTypeUnknown
	}
	return t
}
