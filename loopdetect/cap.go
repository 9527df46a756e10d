package loopdetect

import "math"

// Cap is the configured per-turn tool-call cap. Max <= 0 disables it
// whether or not it was set explicitly. Explicit records that the user set
// model.maxToolCallsPerTurn (even to 100): an explicit cap is hard, a
// default one adaptive.
type Cap struct {
	Max      int
	Explicit bool
}

// DefaultCap is the cap used when none is configured: adaptive, soft 100,
// backstop 1000.
func DefaultCap() Cap { return Cap{Max: DefaultMaxToolCallsPerTurn} }

// ShouldHaltOnTurnToolCallCap reports whether a turn that has made
// totalCalls tool calls (including the ones being checked), with some repeat
// key seen maxKeyRepeat times, must halt. Explicit caps halt past Max;
// default caps halt past Max only when stuck (maxKeyRepeat >=
// GlobalDuplicateThreshold), and always past Max*AdaptiveCapHardMultiplier.
// The core service and the daemon guard both decide through this function.
func ShouldHaltOnTurnToolCallCap(totalCalls, maxKeyRepeat int, cap Cap) bool {
	if cap.Max <= 0 || totalCalls <= cap.Max {
		return false
	}
	hard := math.MaxInt
	if cap.Max <= math.MaxInt/AdaptiveCapHardMultiplier {
		hard = cap.Max * AdaptiveCapHardMultiplier
	}
	stuck := maxKeyRepeat >= GlobalDuplicateThreshold
	return cap.Explicit || totalCalls > hard || stuck
}

// CapTracker keeps one turn's always-on cap state: the running total, the
// per-key repeat counts and their maximum, and the rollback floor a retry
// returns to. The core service feeds it one call at a time; the daemon's
// per-batch guard observes a whole batch, adds its size, then checks once.
type CapTracker struct {
	cap       Cap
	total     int
	committed int
	counts    map[string]int
	maxRepeat int
}

// NewCapTracker returns an empty tracker for cap.
func NewCapTracker(cap Cap) *CapTracker {
	return &CapTracker{cap: cap, counts: make(map[string]int)}
}

// ObserveKey counts one occurrence of a repeat key, raises the running
// maximum and returns the key's new count. It does not change the total.
func (t *CapTracker) ObserveKey(key string) int {
	n := t.counts[key] + 1
	t.counts[key] = n
	if n > t.maxRepeat {
		t.maxRepeat = n
	}
	return n
}

// AddCalls adds n calls to the turn total.
func (t *CapTracker) AddCalls(n int) { t.total += n }

// Total is the number of calls counted this turn.
func (t *CapTracker) Total() int { return t.total }

// MaxKeyRepeat is the highest count of any single repeat key this turn.
func (t *CapTracker) MaxKeyRepeat() int { return t.maxRepeat }

// Cap returns the cap the tracker checks against.
func (t *CapTracker) Cap() Cap { return t.cap }

// ShouldHalt applies ShouldHaltOnTurnToolCallCap to the tracker's state.
func (t *CapTracker) ShouldHalt() bool {
	return ShouldHaltOnTurnToolCallCap(t.total, t.maxRepeat, t.cap)
}

// Finished commits the current total as the rollback floor: a model
// response completed, so its calls stay counted even if a later one retries.
func (t *CapTracker) Finished() { t.committed = t.total }

// Retry discards the failed attempt: the total returns to the floor and the
// repeat counts are cleared (the replayed calls re-populate them).
func (t *CapTracker) Retry() {
	t.total = t.committed
	clear(t.counts)
	t.maxRepeat = 0
}

// Reset clears everything for a new turn.
func (t *CapTracker) Reset() {
	t.total, t.committed, t.maxRepeat = 0, 0, 0
	clear(t.counts)
}
