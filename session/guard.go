package session

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/acpd/acpd/loopdetect"
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

	failureMode  loopdetect.FailureMode
	failureState loopdetect.FailureState
}

func newGuard(c loopdetect.Cap, skipLoop bool, mode loopdetect.FailureMode, logger *slog.Logger) *guard {
	return &guard{
		cap:           loopdetect.NewCapTracker(c),
		skipLoop:      skipLoop,
		logger:        logger,
		invalidParams: map[string]int{},
		failureMode:   mode,
		failureState:  loopdetect.NewFailureState(),
	}
}

// latch records the first detection only; later ones change nothing.
func (g *guard) latch(t loopdetect.LoopType, warn string) bool {
	if !g.detected {
		g.detected = true
		g.loopType = t
		g.logger.Warn(warn, "loop_type", string(t))
	}
	return true
}

// recordBatch is recordDaemonToolCalls: it counts every call of one model
// response (keys are the calls' repeat keys) before any of them runs, then
// checks once. A true result means the whole batch is skipped.
func (g *guard) recordBatch(keys []string) bool {
	if g.detected {
		return true
	}
	for _, k := range keys {
		g.cap.ObserveKey(k)
	}
	g.cap.AddCalls(len(keys))
	if g.cap.ShouldHalt() {
		return g.latch(loopdetect.LoopTurnToolCallCap,
			fmt.Sprintf("Stopping ACP turn after %d tool calls in one turn.", g.cap.Total()))
	}
	if !g.skipLoop && g.cap.MaxKeyRepeat() >= loopdetect.GlobalDuplicateThreshold {
		return g.latch(loopdetect.LoopGlobalToolCallDuplicate,
			fmt.Sprintf("Stopping ACP turn after the same tool call repeated %d times.", g.cap.MaxKeyRepeat()))
	}
	return false
}

// recordInvalidParams is recordDaemonInvalidToolParams: counted per tool
// name ("unknown_tool" when the model sent none); true at the threshold.
func (g *guard) recordInvalidParams(tool, msg string) bool {
	if tool == "" {
		tool = "unknown_tool"
	}
	g.invalidParams[tool]++
	if g.invalidParams[tool] >= loopdetect.DaemonInvalidToolParamsThreshold {
		return g.latch(loopdetect.LoopInvalidToolParamsStagnation,
			fmt.Sprintf("Stopping ACP turn after repeated tool parameter errors from %s: %s", tool, msg))
	}
	return false
}

// recordDuplicateReplay latches when the model repeats a provider call id
// that was already answered as a duplicate (§7.5).
func (g *guard) recordDuplicateReplay(id, name string) bool {
	return g.latch(loopdetect.LoopGlobalToolCallDuplicate,
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
		g.latch(loopdetect.LoopRepeatedToolExecutionFailure, "Stopping ACP turn after repeated tool execution failures.")
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
