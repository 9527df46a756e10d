package loopdetect

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fnf is the reference test's observation: read_file failing with FILE_NOT_FOUND.
func fnf() FailureObservation {
	return FailureObservation{Terminal: TerminalError, Execution: ExecutionError, PolicyToolName: "read_file", ErrorType: "file_not_found"}
}

func batchOf(obs ...FailureObservation) FailureBatch {
	return FailureBatch{Complete: true, InputReliable: true, Observations: obs}
}

func failures(n int) FailureBatch {
	obs := make([]FailureObservation, n)
	for i := range obs {
		obs[i] = fnf()
	}
	return batchOf(obs...)
}

// runBatches feeds batches from the initial state and returns the result kinds.
func runBatches(mode FailureMode, state FailureState, batches ...FailureBatch) ([]FailureResultKind, FailureState) {
	var kinds []FailureResultKind
	for _, b := range batches {
		r := ReduceRepeatedFailure(mode, state, b)
		kinds = append(kinds, r.Kind)
		state = r.State
	}
	return kinds, state
}

func TestResolveFailureMode(t *testing.T) { // vector 105
	for in, want := range map[string]FailureMode{
		"": FailureModeShadow, "invalid": FailureModeShadow, " WARN ": FailureModeWarn,
		"off": FailureModeOff, "Enforce": FailureModeEnforce, "shadow": FailureModeShadow, "\twarn\n": FailureModeWarn,
	} {
		assert.Equal(t, want, ResolveFailureMode(in), "%q", in)
	}
}

func TestReduceRepeatedFailure(t *testing.T) {
	tracked := func(t *testing.T) FailureState {
		r := ReduceRepeatedFailure(FailureModeEnforce, NewFailureState(), failures(1))
		require.Equal(t, FailureTracked, r.Kind)
		return r.State
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"106 off does nothing", func(t *testing.T) {
			s := tracked(t)
			r := ReduceRepeatedFailure(FailureModeOff, s, failures(8))
			assert.Equal(t, FailureResult{Kind: FailureNone, State: s}, r)
		}},
		{"107 eight in one batch, then one", func(t *testing.T) {
			r := ReduceRepeatedFailure(FailureModeEnforce, NewFailureState(), failures(8))
			assert.Equal(t, FailureTracked, r.Kind)
			assert.Equal(t, PhaseTracking, r.State.Phase)
			assert.Equal(t, [2]int{8, 1}, [2]int{r.State.Failures, r.State.Batches})
			r = ReduceRepeatedFailure(FailureModeEnforce, r.State, failures(1))
			assert.Equal(t, FailureWarn, r.Kind)
			assert.Equal(t, PhaseWarned, r.State.Phase)
			assert.Equal(t, [2]int{9, 2}, [2]int{r.State.Failures, r.State.Batches})
		}},
		{"108 4, 4, 1 then latched", func(t *testing.T) {
			kinds, s := runBatches(FailureModeEnforce, NewFailureState(), failures(4), failures(4), failures(1), failures(4))
			assert.Equal(t, []FailureResultKind{FailureTracked, FailureWarn, FailureStop, FailureNone}, kinds)
			assert.Equal(t, PhaseLatched, s.Phase)
		}},
		{"109 modes", func(t *testing.T) {
			for mode, want := range map[FailureMode][]FailureResultKind{
				FailureModeShadow:  {FailureTracked, FailureWouldWarn, FailureWouldStop},
				FailureModeWarn:    {FailureTracked, FailureWarn, FailureWouldStop},
				FailureModeEnforce: {FailureTracked, FailureWarn, FailureStop},
			} {
				kinds, _ := runBatches(mode, NewFailureState(), failures(4), failures(4), failures(1))
				assert.Equal(t, want, kinds, mode)
			}
		}},
		{"110 non-failures reset to idle", func(t *testing.T) {
			for _, st := range [][2]string{
				{"success", "success"}, {"success", "not_started"}, {"cancelled", "cancelled"},
				{"error", "cancelled"}, {"error", "not_started"}, {"error", "success"},
			} {
				o := fnf()
				o.Terminal, o.Execution = TerminalStatus(st[0]), ExecutionStatus(st[1])
				r := ReduceRepeatedFailure(FailureModeEnforce, tracked(t), batchOf(o))
				assert.Equal(t, FailureReset, r.Kind, st)
				assert.Equal(t, PhaseIdle, r.State.Phase, st)
				assert.Equal(t, [2]int{0, 0}, [2]int{r.State.Failures, r.State.Batches}, st)
				assert.False(t, r.State.EnforcementDisabled, st)
			}
		}},
		{"111 provider duplicates only", func(t *testing.T) {
			s := tracked(t)
			o := fnf()
			o.ProviderDuplicate = true
			assert.Equal(t, FailureResult{Kind: FailureNone, State: s}, ReduceRepeatedFailure(FailureModeEnforce, s, batchOf(o)))
		}},
		{"112 mixed, then a new candidate", func(t *testing.T) {
			denied := fnf()
			denied.ErrorType = "permission_denied"
			r := ReduceRepeatedFailure(FailureModeEnforce, tracked(t), batchOf(fnf(), denied))
			assert.Equal(t, FailureReset, r.Kind)
			assert.Equal(t, ResetMixed, r.Reason)
			r = ReduceRepeatedFailure(FailureModeEnforce, r.State, batchOf(denied))
			assert.Equal(t, FailureTracked, r.Kind)
			assert.Equal(t, 2, r.State.CandidateOrdinal)
		}},
		{"113 batch-level resets", func(t *testing.T) {
			cases := map[FailureResetReason]func(*FailureBatch){
				ResetIncomplete:      func(b *FailureBatch) { b.Complete = false },
				ResetExternalInput:   func(b *FailureBatch) { b.HasExternalInput = true },
				ResetQueuedPrompt:    func(b *FailureBatch) { b.HasQueuedPrompt = true },
				ResetUnreliableInput: func(b *FailureBatch) { b.InputReliable = false },
			}
			for reason, mutate := range cases {
				b := failures(1)
				mutate(&b)
				r := ReduceRepeatedFailure(FailureModeEnforce, tracked(t), b)
				assert.Equal(t, FailureReset, r.Kind, reason)
				assert.Equal(t, reason, r.Reason)
				assert.Equal(t, reason == ResetUnreliableInput, r.State.EnforcementDisabled, reason)
			}
		}},
		{"114 unknown status disables enforcement", func(t *testing.T) {
			o := fnf()
			o.Execution = ExecutionUnreported
			r := ReduceRepeatedFailure(FailureModeEnforce, NewFailureState(), batchOf(o))
			assert.Equal(t, FailureReset, r.Kind, "idle but enforcement changed")
			assert.Equal(t, ResetUnknown, r.Reason)
			assert.True(t, r.State.EnforcementDisabled)
			kinds, _ := runBatches(FailureModeEnforce, r.State, failures(4), failures(4), failures(1))
			assert.Equal(t, []FailureResultKind{FailureTracked, FailureWarn, FailureWouldStop}, kinds)
		}},
		{"115 contract violations and unknowns", func(t *testing.T) {
			mk := func(f func(*FailureObservation)) FailureObservation { o := fnf(); f(&o); return o }
			for name, tc := range map[string]struct {
				o      FailureObservation
				reason FailureResetReason
			}{
				"success/error":     {mk(func(o *FailureObservation) { o.Terminal = TerminalSuccess }), ResetContractViolation},
				"success/cancelled": {mk(func(o *FailureObservation) { o.Terminal, o.Execution = TerminalSuccess, ExecutionCancelled }), ResetContractViolation},
				"type unknown":      {mk(func(o *FailureObservation) { o.ErrorType = ErrorTypeUnknown }), ResetUnknown},
				"type missing":      {mk(func(o *FailureObservation) { o.ErrorType = "" }), ResetUnknown},
				"status unknown":    {mk(func(o *FailureObservation) { o.Execution = ExecutionUnknown }), ResetUnknown},
				"no policy name":    {mk(func(o *FailureObservation) { o.PolicyToolName = "" }), ResetUnknown},
			} {
				r := ReduceRepeatedFailure(FailureModeEnforce, NewFailureState(), batchOf(tc.o))
				assert.Equal(t, tc.reason, r.Reason, name)
				assert.Equal(t, PhaseIdle, r.State.Phase, name)
				assert.True(t, r.State.EnforcementDisabled, name)
			}
		}},
		{"116 post-execution failure", func(t *testing.T) {
			o := fnf()
			o.Execution, o.ErrorType = ExecutionSuccess, "unhandled_exception"
			r := ReduceRepeatedFailure(FailureModeEnforce, tracked(t), batchOf(o))
			assert.Equal(t, FailureReset, r.Kind)
			assert.Equal(t, ResetPostExecutionFailure, r.Reason)
		}},
		{"117 cancelled keeps enforcement", func(t *testing.T) {
			o := FailureObservation{Terminal: TerminalCancelled, PolicyToolName: "read_file"}
			r := ReduceRepeatedFailure(FailureModeEnforce, tracked(t), batchOf(o))
			assert.Equal(t, FailureReset, r.Kind)
			assert.Equal(t, ResetCancelled, r.Reason)
			assert.False(t, r.State.EnforcementDisabled)
		}},
		{"reset from idle reports none", func(t *testing.T) {
			o := fnf()
			o.Terminal, o.Execution = TerminalSuccess, ExecutionSuccess
			r := ReduceRepeatedFailure(FailureModeEnforce, NewFailureState(), batchOf(o))
			assert.Equal(t, FailureNone, r.Kind)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}
