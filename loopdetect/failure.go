package loopdetect

import "strings"

// FailureMode is the repeated-tool-failure guard's mode
// (QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD).
type FailureMode string

// Guard modes: off does nothing, shadow only reports would_* results, warn
// warns but never stops, enforce warns and then stops.
const (
	FailureModeOff     FailureMode = "off"
	FailureModeShadow  FailureMode = "shadow"
	FailureModeWarn    FailureMode = "warn"
	FailureModeEnforce FailureMode = "enforce"
)

// ResolveFailureMode trims and lower-cases s; anything that is not a known
// mode (including "") resolves to shadow, the default.
func ResolveFailureMode(s string) FailureMode {
	switch m := FailureMode(strings.ToLower(jsTrim(s))); m {
	case FailureModeOff, FailureModeShadow, FailureModeWarn, FailureModeEnforce:
		return m
	}
	return FailureModeShadow
}

// TerminalStatus is how a tool call ended as the model sees it.
type TerminalStatus string

// Terminal statuses.
const (
	TerminalSuccess   TerminalStatus = "success"
	TerminalError     TerminalStatus = "error"
	TerminalCancelled TerminalStatus = "cancelled"
)

// ExecutionStatus is how far the tool's execution itself got. The empty
// value means it was not reported.
type ExecutionStatus string

// Execution statuses.
const (
	ExecutionUnreported ExecutionStatus = ""
	ExecutionSuccess    ExecutionStatus = "success"
	ExecutionError      ExecutionStatus = "error"
	ExecutionCancelled  ExecutionStatus = "cancelled"
	ExecutionNotStarted ExecutionStatus = "not_started"
	ExecutionUnknown    ExecutionStatus = "unknown"
)

// ErrorTypeUnknown is the tool error type that carries no classification;
// like an empty type it disables enforcement.
const ErrorTypeUnknown = "unknown"

// FailureObservation is one executed tool call of a batch.
type FailureObservation struct {
	// ProviderDuplicate marks a provider replay of an already answered call;
	// such observations are ignored.
	ProviderDuplicate bool
	Terminal          TerminalStatus
	Execution         ExecutionStatus
	// PolicyToolName is the tool's policy name; empty means unknown.
	PolicyToolName string
	// ErrorType is the classified execution error (e.g. "file_not_found");
	// empty means unreported.
	ErrorType string
}

// FailureBatch is everything the guard learns after one tool batch.
type FailureBatch struct {
	Complete         bool // every call of the batch reported
	Observations     []FailureObservation
	HasExternalInput bool // mid-turn user input was drained
	HasQueuedPrompt  bool
	InputReliable    bool
}

// FailurePhase is the guard's phase.
type FailurePhase string

// Phases: idle, tracking one failure key, warned once, latched after a stop.
const (
	PhaseIdle     FailurePhase = "idle"
	PhaseTracking FailurePhase = "tracking"
	PhaseWarned   FailurePhase = "warned"
	PhaseLatched  FailurePhase = "latched"
)

// FailureKey identifies "the same failure": tool and classified error.
type FailureKey struct {
	PolicyToolName string
	ErrorType      string
}

// FailureState is the guard's state; the zero value is not valid, start
// from NewFailureState.
type FailureState struct {
	Phase                FailurePhase
	Key                  FailureKey
	HasKey               bool
	Failures             int
	Batches              int
	CandidateOrdinal     int
	NextCandidateOrdinal int
	EnforcementDisabled  bool
}

// NewFailureState is the initial (idle) state.
func NewFailureState() FailureState {
	return FailureState{Phase: PhaseIdle, NextCandidateOrdinal: 1}
}

// FailureResultKind is what the guard asks the session to do.
type FailureResultKind string

// Result kinds. Only warn (append the reminder) and stop (end the turn)
// change behaviour; would_warn and would_stop are shadow reports.
const (
	FailureNone      FailureResultKind = "none"
	FailureTracked   FailureResultKind = "tracked"
	FailureReset     FailureResultKind = "reset"
	FailureWouldWarn FailureResultKind = "would_warn"
	FailureWarn      FailureResultKind = "warn"
	FailureWouldStop FailureResultKind = "would_stop"
	FailureStop      FailureResultKind = "stop"
)

// FailureResetReason says why a reset happened.
type FailureResetReason string

// Reset reasons.
const (
	ResetSuccess              FailureResetReason = "success"
	ResetCancelled            FailureResetReason = "cancelled"
	ResetNotStarted           FailureResetReason = "not_started"
	ResetPostExecutionFailure FailureResetReason = "post_execution_failure"
	ResetUnknown              FailureResetReason = "unknown"
	ResetMixed                FailureResetReason = "mixed"
	ResetIncomplete           FailureResetReason = "incomplete"
	ResetExternalInput        FailureResetReason = "external_input"
	ResetQueuedPrompt         FailureResetReason = "queued_prompt"
	ResetUnreliableInput      FailureResetReason = "unreliable_input"
	ResetContractViolation    FailureResetReason = "contract_violation"
)

// FailureResult is the guard's decision and its next state.
type FailureResult struct {
	Kind   FailureResultKind
	Reason FailureResetReason // set when Kind is FailureReset
	State  FailureState
}

// ReduceRepeatedFailure advances the repeated-tool-failure guard by one
// batch (loop-detection.md §7.6). It is pure: the caller keeps the state.
func ReduceRepeatedFailure(mode FailureMode, state FailureState, batch FailureBatch) FailureResult {
	if mode == FailureModeOff || state.Phase == PhaseLatched {
		return FailureResult{Kind: FailureNone, State: state}
	}
	switch {
	case !batch.InputReliable:
		return resetFailure(state, ResetUnreliableInput, true)
	case batch.HasExternalInput:
		return resetFailure(state, ResetExternalInput, state.EnforcementDisabled)
	case batch.HasQueuedPrompt:
		return resetFailure(state, ResetQueuedPrompt, state.EnforcementDisabled)
	case !batch.Complete:
		return resetFailure(state, ResetIncomplete, state.EnforcementDisabled)
	}

	var key FailureKey
	n := 0
	mixed := false
	for _, o := range batch.Observations {
		if o.ProviderDuplicate {
			continue
		}
		reason, disable, k := classifyObservation(o)
		if reason != "" {
			return resetFailure(state, reason, disable || state.EnforcementDisabled)
		}
		if n > 0 && k != key {
			mixed = true
		}
		if n == 0 {
			key = k
		}
		n++
	}
	if n == 0 {
		// Only provider duplicates: nothing ran.
		return FailureResult{Kind: FailureNone, State: state}
	}
	if mixed {
		return resetFailure(state, ResetMixed, state.EnforcementDisabled)
	}

	if !state.HasKey || state.Key != key {
		next := FailureState{
			Phase:                PhaseTracking,
			Key:                  key,
			HasKey:               true,
			Failures:             n,
			Batches:              1,
			CandidateOrdinal:     state.NextCandidateOrdinal,
			NextCandidateOrdinal: state.NextCandidateOrdinal + 1,
			EnforcementDisabled:  state.EnforcementDisabled,
		}
		return FailureResult{Kind: FailureTracked, State: next}
	}

	next := state
	next.Failures += n
	next.Batches++
	effective := mode
	if mode == FailureModeEnforce && state.EnforcementDisabled {
		effective = FailureModeWarn
	}
	if state.Phase == PhaseWarned {
		next.Phase = PhaseLatched
		if effective == FailureModeEnforce {
			return FailureResult{Kind: FailureStop, State: next}
		}
		return FailureResult{Kind: FailureWouldStop, State: next}
	}
	if next.Failures < RepeatedToolFailureThreshold || next.Batches < RepeatedToolFailureBatchThreshold {
		return FailureResult{Kind: FailureTracked, State: next}
	}
	next.Phase = PhaseWarned
	if effective == FailureModeShadow {
		return FailureResult{Kind: FailureWouldWarn, State: next}
	}
	return FailureResult{Kind: FailureWarn, State: next}
}

// classifyObservation returns the reset an observation forces (and whether
// it disables enforcement), or else its failure key. The checks run in the
// reference's order.
func classifyObservation(o FailureObservation) (FailureResetReason, bool, FailureKey) {
	switch {
	case o.Terminal == TerminalSuccess && (o.Execution == ExecutionError || o.Execution == ExecutionCancelled):
		return ResetContractViolation, true, FailureKey{}
	case o.Terminal == TerminalCancelled:
		return ResetCancelled, false, FailureKey{}
	case o.Execution == ExecutionUnreported || o.Execution == ExecutionUnknown:
		return ResetUnknown, true, FailureKey{}
	case o.Execution == ExecutionCancelled:
		return ResetCancelled, false, FailureKey{}
	case o.Terminal == TerminalSuccess:
		return ResetSuccess, false, FailureKey{}
	case o.Execution == ExecutionNotStarted:
		return ResetNotStarted, false, FailureKey{}
	case o.Execution == ExecutionSuccess:
		return ResetPostExecutionFailure, false, FailureKey{}
	case o.PolicyToolName == "" || o.ErrorType == "" || o.ErrorType == ErrorTypeUnknown:
		return ResetUnknown, true, FailureKey{}
	}
	return "", false, FailureKey{PolicyToolName: o.PolicyToolName, ErrorType: o.ErrorType}
}

// resetFailure returns to idle (keeping the candidate ordinal counter); a
// reset from idle that changes nothing reports none.
func resetFailure(state FailureState, reason FailureResetReason, enforcementDisabled bool) FailureResult {
	next := FailureState{
		Phase:                PhaseIdle,
		NextCandidateOrdinal: state.NextCandidateOrdinal,
		EnforcementDisabled:  enforcementDisabled,
	}
	if state.Phase == PhaseIdle && state.EnforcementDisabled == enforcementDisabled {
		return FailureResult{Kind: FailureNone, State: next}
	}
	return FailureResult{Kind: FailureReset, Reason: reason, State: next}
}
