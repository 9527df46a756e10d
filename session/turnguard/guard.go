// Package turnguard is the per-turn loop guard of acpd's daemon (qwen-code's
// DaemonToolLoopState and recordDaemonToolCalls, loop-detection.md §7): it
// counts a prompt turn's tool calls and decides, through package
// loopdetect's CapTracker, cap predicate, repeat key and thresholds, when
// the turn must stop. acpd's own turns feed it one model response (batch)
// at a time; `acpd guard`, which only sees another agent's calls go by on
// the wire, feeds it call by call (Observer turns ACP tool-call frames into
// those calls). Both then report a stop the same way: LoopError for the
// prompt's answer, Facts for the log, the transcript and telemetry.
//
// A Guard lives for one prompt turn (or one subagent run) and is used from
// one goroutine.
package turnguard

import (
	"fmt"
	"log/slog"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/store"
)

// UnknownTool is the name a call without one is counted under (§7.4).
const UnknownTool = "unknown_tool"

// Guard is one turn's loop state.
type Guard struct {
	cap      *loopdetect.CapTracker
	skipLoop bool // skipLoopDetection: gates only the global-duplicate halt
	logger   *slog.Logger

	invalidParams map[string]int // per tool name

	detected bool
	loopType loopdetect.LoopType
	facts    Facts // what the stop saw, for the error data, log and transcript

	keyNames map[string]string // repeat key -> tool name, for the repeated-call facts

	// pending is a stop RecordOpenCall found on a call whose key is not
	// final yet; RecordKey latches it with the key counted.
	pending loopdetect.Verdict

	// warning is the text of a warning the last check gave
	// (model.loopRecovery warn), until TakeWarning hands it out; warnOpen
	// marks one RecordOpenCall gave, before the call's key was known.
	warning  string
	warnOpen bool

	failureMode  loopdetect.FailureMode
	failureState loopdetect.FailureState
}

// New returns the guard of one turn: the cap, skipLoopDetection and the
// repeated-tool-failure guard's mode. A nil logger discards.
func New(c loopdetect.Cap, skipLoop bool, mode loopdetect.FailureMode, logger *slog.Logger) *Guard {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Guard{
		cap:           loopdetect.NewCapTracker(c),
		skipLoop:      skipLoop,
		logger:        logger,
		invalidParams: map[string]int{},
		keyNames:      map[string]string{},
		failureMode:   mode,
		failureState:  loopdetect.NewFailureState(),
	}
}

// Detected reports whether the turn has been stopped.
func (g *Guard) Detected() bool { return g.detected }

// LoopType is the stop's loop type ("" before a stop).
func (g *Guard) LoopType() loopdetect.LoopType { return g.loopType }

// Facts are what the guard knew at the stop (zero before a stop).
func (g *Guard) Facts() Facts { return g.facts }

// Total is the number of calls counted this turn.
func (g *Guard) Total() int { return g.cap.Total() }

// Facts are what the guard knew when it stopped a turn: which cap rule
// fired, the turn's counted total and its highest key repeat, the cap in
// force, and for a stop on a repeated call that call's tool name and count.
// The same facts go into the foreground error's data, the slog warning, the
// transcript's loop_stop record and telemetry.
type Facts struct {
	CapReason    loopdetect.CapReason // "" unless the loop type is turn_tool_call_cap
	ToolCalls    int                  // the turn's total counted, the stopped batch included
	MaxKeyRepeat int                  // the highest count of one repeat key in the turn
	Cap          loopdetect.Cap
	// WindowRepeat is the windowed stuck signal when Cap.StuckWindow > 0.
	WindowRepeat int
	// RepeatedTool and RepeatCount name the repeated call of a
	// global-duplicate stop or a stuck cap stop.
	RepeatedTool string
	RepeatCount  int
	// ResultRepeat is the highest result count of one key when the stuck
	// signal is "results" (Cap.Signal); Warned is set on a stop that came
	// after the turn's warning (Cap.Recovery warn).
	ResultRepeat int
	Warned       bool
}

// LogAttrs are the facts as slog attributes, after loop_type.
func (f Facts) LogAttrs(t loopdetect.LoopType) []any {
	a := []any{"loop_type", string(t)}
	if f.CapReason != "" {
		a = append(a, "cap_reason", string(f.CapReason))
	}
	a = append(a, "tool_calls", f.ToolCalls, "max_key_repeat", f.MaxKeyRepeat,
		"max_tool_calls_per_turn", f.Cap.Max, "explicit", f.Cap.Explicit)
	if f.Cap.StuckWindow > 0 {
		a = append(a, "stuck_window", f.Cap.StuckWindow, "window_key_repeat", f.WindowRepeat)
	}
	if f.RepeatedTool != "" {
		a = append(a, "repeated_tool", f.RepeatedTool, "repeat_count", f.RepeatCount)
	}
	if f.Cap.Results() {
		a = append(a, "stuck_signal", string(f.Cap.Signal), "result_repeat", f.ResultRepeat)
	}
	if f.Warned {
		a = append(a, "warned", true)
	}
	return a
}

// data adds the facts to a loop error's data. The existing fields (code,
// errorKind, loopType) are the caller's and stay as they are.
func (f Facts) data(d map[string]any) {
	if f.CapReason != "" {
		d["capReason"] = string(f.CapReason)
	}
	d["toolCalls"] = f.ToolCalls
	d["maxKeyRepeat"] = f.MaxKeyRepeat
	d["maxToolCallsPerTurn"] = f.Cap.Max
	d["explicit"] = f.Cap.Explicit
	if f.Cap.StuckWindow > 0 {
		d["stuckWindow"] = f.Cap.StuckWindow
		d["windowKeyRepeat"] = f.WindowRepeat
	}
	if f.RepeatedTool != "" {
		d["repeatedTool"] = f.RepeatedTool
		d["repeatCount"] = f.RepeatCount
	}
	if f.Cap.Results() {
		d["stuckSignal"] = string(f.Cap.Signal)
		d["resultRepeat"] = f.ResultRepeat
	}
	if f.Warned {
		d["warned"] = true
	}
}

// Record is the facts as the transcript's loop_stop record holds them.
func (f Facts) Record(t loopdetect.LoopType) *store.LoopStop {
	st := &store.LoopStop{
		LoopType: string(t), CapReason: string(f.CapReason), ToolCalls: f.ToolCalls,
		MaxKeyRepeat: f.MaxKeyRepeat, MaxToolCallsPerTurn: f.Cap.Max, Explicit: f.Cap.Explicit,
		RepeatedTool: f.RepeatedTool, RepeatCount: f.RepeatCount,
	}
	if f.Cap.StuckWindow > 0 {
		st.StuckWindow, st.WindowKeyRepeat = f.Cap.StuckWindow, f.WindowRepeat
	}
	if f.Cap.Results() {
		st.StuckSignal, st.ResultRepeat = string(f.Cap.Signal), f.ResultRepeat
	}
	st.Warned = f.Warned
	return st
}

// LoopError is the foreground rejection of a loop-stopped turn (§8): the
// reference's data (code, errorKind, loopType) and message, unchanged, plus
// the guard's facts.
func LoopError(t loopdetect.LoopType, f Facts) *acp.Error {
	data := map[string]any{"code": "LOOP_DETECTED", "errorKind": "loop_detected"}
	if t != "" {
		data["loopType"] = string(t)
	}
	f.data(data)
	return &acp.Error{Code: acp.CodeInternalError, Message: loopdetect.LoopDetectedTurnErrorMessage, Data: data}
}

// Err is the turn's LoopError once it has been stopped, else nil.
func (g *Guard) Err() *acp.Error {
	if !g.detected {
		return nil
	}
	return LoopError(g.loopType, g.facts)
}

// currentFacts reads the facts off the tracker.
func (g *Guard) currentFacts(reason loopdetect.CapReason) Facts {
	return Facts{
		CapReason: reason, ToolCalls: g.cap.Total(), MaxKeyRepeat: g.cap.MaxKeyRepeat(),
		Cap: g.cap.Cap(), WindowRepeat: g.cap.StuckRepeat(), ResultRepeat: g.cap.ResultRepeat(),
	}
}

// latch records the first detection only; later ones change nothing.
func (g *Guard) latch(t loopdetect.LoopType, f Facts, warn string) bool {
	if !g.detected {
		g.detected = true
		g.loopType = t
		g.facts = f
		g.logger.Warn(warn, f.LogAttrs(t)...)
	}
	return true
}

// RecordBatch is recordDaemonToolCalls: it counts every call of one model
// response (keys are the calls' repeat keys, names their tool names, or nil)
// before any of them runs, then checks once. A true result means the whole
// batch is skipped.
func (g *Guard) RecordBatch(keys, names []string) bool {
	if g.detected {
		return true
	}
	for i, k := range keys {
		if i < len(names) {
			g.nameKey(k, names[i])
		}
	}
	return g.decide(g.cap.RecordBatch(keys, g.skipLoop))
}

// RecordCall counts one call the moment it is first seen, before its repeat
// key is known (RecordKey adds that later). The rules that need only the
// total (an explicit cap, the backstop) and a stuck turn already seen decide
// here. A true result means the turn stops at this call.
func (g *Guard) RecordCall() bool {
	if g.detected {
		return true
	}
	g.cap.AddCalls(1)
	return g.decide(g.cap.Check(g.skipLoop))
}

// RecordOpenCall is RecordCall for a call whose input is still a
// placeholder: a stop it finds is held, not latched, so the facts and the
// transcript see the call's real key. The caller must then give the call's
// key to RecordKey (the full input, or the placeholder's if none came),
// which latches the stop. A true result means the turn stops at this call.
func (g *Guard) RecordOpenCall() bool {
	if g.detected {
		return true
	}
	g.cap.AddCalls(1)
	v := g.cap.Check(g.skipLoop)
	if !v.Stops() {
		g.warnOpen = v.Warn
		return g.decide(v)
	}
	g.pending = v
	return true
}

// RecordKey adds the repeat key of a call RecordCall or RecordOpenCall
// counted, once the key is final, and checks again: the stuck signal and
// the global duplicate depend on it. A stop RecordOpenCall held is latched
// here whatever the check says (with a stuck window, the call's own key
// can push an old repeat out of the window).
func (g *Guard) RecordKey(key, name string) bool {
	if g.detected {
		return true
	}
	g.nameKey(key, name)
	g.cap.ObserveKey(key)
	if g.warnOpen {
		// The warned call's own key belongs to the firing that warned.
		g.cap.ArmWarning()
		g.warnOpen = false
	}
	v := g.cap.Check(g.skipLoop)
	if !v.Stops() && g.pending.Stops() {
		v = g.pending
	}
	g.pending = loopdetect.Verdict{}
	return g.decide(v)
}

// ObserveResult adds the result of a call that ran (its repeat key and
// loopdetect.ResultHash) to the result signal; without it, it does
// nothing.
func (g *Guard) ObserveResult(key string, h uint64) { g.cap.ObserveResult(key, h) }

// FallBackToCalls makes a "results" guard count calls for the rest of the
// turn (the agent reports no results).
func (g *Guard) FallBackToCalls() { g.cap.FallBackToCalls() }

// TakeWarning returns the warning the last check gave, once, or "" (see
// loopdetect.Verdict.Warn). The daemon gives it to the model after the
// batch's results; the editor is shown it.
func (g *Guard) TakeWarning() string {
	w := g.warning
	g.warning = ""
	return w
}

func (g *Guard) nameKey(key, name string) {
	if _, ok := g.keyNames[key]; !ok {
		g.keyNames[key] = name
	}
}

// decide latches a stop the tracker found, or holds its warning.
func (g *Guard) decide(v loopdetect.Verdict) bool {
	if v.Warn {
		name, n := g.repeated()
		g.warning = WarningText(name, n, g.cap.Cap().Results())
		f := g.currentFacts(v.Reason)
		f.RepeatedTool, f.RepeatCount = name, n
		g.logger.Warn("loop protection: warning the model before stopping the turn", f.LogAttrs(v.Loop)...)
		return false
	}
	switch v.Loop {
	case loopdetect.LoopTurnToolCallCap:
		f := g.currentFacts(v.Reason)
		if v.Reason == loopdetect.CapStuck || v.Reason == loopdetect.CapStuckAfterWarning {
			f.RepeatedTool, f.RepeatCount = g.repeated()
		}
		f.Warned = v.AfterWarning
		return g.latch(v.Loop, f, fmt.Sprintf("Stopping ACP turn after %d tool calls in one turn.", g.cap.Total()))
	case loopdetect.LoopGlobalToolCallDuplicate:
		f := g.currentFacts("")
		f.RepeatedTool, f.RepeatCount = g.repeated()
		f.Warned = v.AfterWarning
		return g.latch(v.Loop, f, fmt.Sprintf("Stopping ACP turn after the same tool call repeated %d times.", f.RepeatCount))
	}
	return false
}

// WarningText is the notice a model gets, with the results of the batch
// that fired the stuck signal or the global duplicate, under
// model.loopRecovery = "warn"; the editor is shown the same text.
func WarningText(tool string, n int, results bool) string {
	same := fmt.Sprintf("the same %s call %d times in this turn", tool, n)
	if results {
		same = fmt.Sprintf("the same %s call %d times with the same result", tool, n)
	}
	return "System: you have made " + same + ". Repeating it again will stop this turn. " +
		"Change your approach: read the result above, try something different, or explain what blocks you."
}

// repeated names the most repeated call of the turn and its count. A call
// the model sent without a name is counted under UnknownTool. Decision: with
// a stuck window this is still the whole turn's most repeated call (the one
// the window found is almost always the same call; the window's own highest
// count is reported as windowKeyRepeat).
func (g *Guard) repeated() (string, int) {
	key, n := g.cap.MaxRepeatKey(), g.cap.MaxKeyRepeat()
	if r := g.cap.ResultRepeat(); r > 0 {
		key, n = g.cap.SignalKey(), r
	}
	name := g.keyNames[key]
	if name == "" {
		name = UnknownTool
	}
	return name, n
}

// RecordInvalidParams is recordDaemonInvalidToolParams: counted per tool
// name (UnknownTool when the model sent none); true at the threshold.
func (g *Guard) RecordInvalidParams(tool, msg string) bool {
	if tool == "" {
		tool = UnknownTool
	}
	g.invalidParams[tool]++
	if g.invalidParams[tool] >= loopdetect.DaemonInvalidToolParamsThreshold {
		return g.latch(loopdetect.LoopInvalidToolParamsStagnation, g.currentFacts(""),
			fmt.Sprintf("Stopping ACP turn after repeated tool parameter errors from %s: %s", tool, msg))
	}
	return false
}

// RecordDuplicateReplay latches when the model repeats a provider call id
// that was already answered as a duplicate (§7.5).
func (g *Guard) RecordDuplicateReplay(id, name string) bool {
	return g.latch(loopdetect.LoopGlobalToolCallDuplicate, g.currentFacts(""),
		fmt.Sprintf("Stopping ACP turn after repeated duplicate provider tool-call id: %s (tool: %s).", id, name))
}

// FailureVerdict feeds one finished batch to the repeated-tool-failure
// reducer (§7.6). It returns the verdict's kind and the text to add after
// the tool responses: the reminder on warn, the stop message on stop (which
// also latches the turn). Shadow-mode verdicts are only logged.
func (g *Guard) FailureVerdict(obs []loopdetect.FailureObservation) (loopdetect.FailureResultKind, string) {
	batch := loopdetect.FailureBatch{Complete: true, InputReliable: true, Observations: obs}
	r := loopdetect.ReduceRepeatedFailure(g.failureMode, g.failureState, batch)
	g.failureState = r.State
	switch r.Kind {
	case loopdetect.FailureWouldWarn, loopdetect.FailureWouldStop:
		g.logger.Info("repeated tool failure guard (shadow)", "verdict", string(r.Kind),
			"tool", r.State.Key.PolicyToolName, "error_type", r.State.Key.ErrorType)
	case loopdetect.FailureWarn:
		g.logger.Warn("repeated tool failure: reminding the model", "tool", r.State.Key.PolicyToolName)
		return r.Kind, loopdetect.RepeatedToolFailureReminder
	case loopdetect.FailureStop:
		g.latch(loopdetect.LoopRepeatedToolExecutionFailure, g.currentFacts(""), "Stopping ACP turn after repeated tool execution failures.")
		return r.Kind, "System: " + loopdetect.RepeatedToolFailureStopMessage
	}
	return r.Kind, ""
}
