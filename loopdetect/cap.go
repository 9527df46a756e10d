package loopdetect

import "math"

// Cap is the configured per-turn tool-call cap. Max <= 0 disables it
// whether or not it was set explicitly. Explicit records that the user set
// model.maxToolCallsPerTurn (even to 100): an explicit cap is hard, a
// default one adaptive.
type Cap struct {
	Max      int
	Explicit bool
	// StuckWindow (model.stuckWindow) narrows the adaptive cap's stuck
	// signal to the turn's last StuckWindow calls: the highest repeat of one
	// key among them. 0 (the default) is the reference's whole-turn signal.
	// It changes nothing else: explicit caps, the backstop and the daemon's
	// global-duplicate halt still count the whole turn. It is read only by
	// CapTracker; ShouldHaltOnTurnToolCallCap takes the signal as computed.
	StuckWindow int
	// Signal (model.stuckSignal) is what counts as a repeat for the stuck
	// signal and the global duplicate: "" or SignalCalls, the reference's
	// (every call of a key), or SignalResults (a call of a key only when
	// its result equals an earlier result of that key; see ObserveResult).
	Signal StuckSignal
	// Recovery (model.loopRecovery) is what the stuck signal and the global
	// duplicate do when they fire: "" or RecoveryStop, the reference's
	// (halt), or RecoveryWarn (the first firing of the turn warns, the next
	// one halts; see Verdict). Explicit caps and the backstop always halt.
	Recovery LoopRecovery
}

// StuckSignal is model.stuckSignal.
type StuckSignal string

// The StuckSignal values ("" is SignalCalls).
const (
	SignalCalls   StuckSignal = "calls"
	SignalResults StuckSignal = "results"
)

// LoopRecovery is model.loopRecovery.
type LoopRecovery string

// The LoopRecovery values ("" is RecoveryStop).
const (
	RecoveryStop LoopRecovery = "stop"
	RecoveryWarn LoopRecovery = "warn"
)

// Results reports whether the cap counts result repeats.
func (c Cap) Results() bool { return c.Signal == SignalResults }

// Warns reports whether the first stuck or duplicate firing only warns.
func (c Cap) Warns() bool { return c.Recovery == RecoveryWarn }

// DefaultCap is the cap used when none is configured: adaptive, soft 100,
// backstop 1000.
func DefaultCap() Cap { return Cap{Max: DefaultMaxToolCallsPerTurn} }

// CapReason says which of the three cap outcomes halted a turn. Its values
// are the wire values of data.capReason, the transcript's loop record and
// telemetry's cap_reason.
type CapReason string

// The CapReason values.
const (
	// CapExplicit: a configured (hard) cap was crossed.
	CapExplicit CapReason = "explicit"
	// CapStuck: past the adaptive soft cap with one repeat key seen
	// GlobalDuplicateThreshold times.
	CapStuck CapReason = "stuck"
	// CapBackstop: past Max × AdaptiveCapHardMultiplier.
	CapBackstop CapReason = "backstop"
	// CapStuckAfterWarning: the stuck signal fired again after the turn's
	// warning (model.loopRecovery = "warn").
	CapStuckAfterWarning CapReason = "stuck_after_warning"
)

// TurnToolCallCapReason is ShouldHaltOnTurnToolCallCap with the reason: ""
// when the turn may go on, otherwise the rule that halts it. When several
// hold, explicit wins over backstop, and backstop over stuck (the order in
// which a user would look for the cause: their own setting, then the hard
// limit no turn may pass, then the heuristic).
func TurnToolCallCapReason(totalCalls, maxKeyRepeat int, cap Cap) CapReason {
	if cap.Max <= 0 || totalCalls <= cap.Max {
		return ""
	}
	if cap.Explicit {
		return CapExplicit
	}
	hard := math.MaxInt
	if cap.Max <= math.MaxInt/AdaptiveCapHardMultiplier {
		hard = cap.Max * AdaptiveCapHardMultiplier
	}
	if totalCalls > hard {
		return CapBackstop
	}
	if maxKeyRepeat >= GlobalDuplicateThreshold {
		return CapStuck
	}
	return ""
}

// ShouldHaltOnTurnToolCallCap reports whether a turn that has made
// totalCalls tool calls (including the ones being checked), with some repeat
// key seen maxKeyRepeat times, must halt. Explicit caps halt past Max;
// default caps halt past Max only when stuck (maxKeyRepeat >=
// GlobalDuplicateThreshold), and always past Max*AdaptiveCapHardMultiplier.
// The core service and the daemon guard both decide through this function
// (TurnToolCallCapReason says which rule fired).
func ShouldHaltOnTurnToolCallCap(totalCalls, maxKeyRepeat int, cap Cap) bool {
	return TurnToolCallCapReason(totalCalls, maxKeyRepeat, cap) != ""
}

// CapTracker keeps one turn's always-on cap state: the running total, the
// per-key repeat counts and their maximum, the windowed stuck signal when
// Cap.StuckWindow > 0, and the rollback floor a retry returns to. The core
// service feeds it one call at a time; the daemon's per-batch guard observes
// a whole batch, adds its size, then checks once.
type CapTracker struct {
	cap       Cap
	total     int
	committed int
	counts    map[string]int
	maxRepeat int
	maxKey    string // a key holding maxRepeat (the first to reach it)

	// The window: the last cap.StuckWindow keys in a ring, their counts,
	// and how many keys have each count, so the maximum is kept in O(1).
	ring      []string
	ringPos   int
	ringLen   int
	winCounts map[string]int
	winHist   []int // winHist[c] = number of keys counted c times in the window
	winMax    int

	// The result signal (Cap.Signal results): the result digests seen per
	// key, each key's result count (1 for its first call, +1 for each call
	// whose result repeated an earlier one of the key) and their maximum.
	resSeen   map[resultKey]struct{}
	resCount  map[string]int
	resMax    int
	resMaxKey string
	noResults bool // FallBackToCalls: the results are not visible

	// Warn-before-stop (Cap.Recovery warn): events counts the calls of a
	// key at or past the threshold (in the active signal); a warning
	// records it, and only a later event fires again.
	events   int
	warned   bool
	warnedAt int
}

type resultKey struct {
	key string
	h   uint64
}

// NewCapTracker returns an empty tracker for cap.
func NewCapTracker(cap Cap) *CapTracker {
	t := &CapTracker{cap: cap, counts: make(map[string]int)}
	if cap.Results() {
		t.resSeen = make(map[resultKey]struct{})
		t.resCount = make(map[string]int)
	}
	if cap.StuckWindow > 0 {
		t.ring = make([]string, cap.StuckWindow)
		t.winCounts = make(map[string]int)
		t.winHist = make([]int, cap.StuckWindow+1)
	}
	return t
}

// ObserveKey counts one occurrence of a repeat key, raises the running
// maximum and returns the key's new count. It does not change the total.
func (t *CapTracker) ObserveKey(key string) int {
	n := t.counts[key] + 1
	t.counts[key] = n
	if n > t.maxRepeat {
		t.maxRepeat = n
		t.maxKey = key
	}
	if t.ring != nil {
		t.observeWindow(key)
	}
	if t.results() {
		r := t.resCount[key]
		if r == 0 {
			r = 1
			t.resCount[key] = 1
			if r > t.resMax {
				t.resMax, t.resMaxKey = r, key
			}
		}
		if r >= GlobalDuplicateThreshold {
			t.events++ // a call again of a key whose results repeat
		}
	} else if n >= GlobalDuplicateThreshold {
		t.events++
	}
	return n
}

func (t *CapTracker) results() bool { return t.resCount != nil && !t.noResults }

// ObserveResult adds the result digest (ResultHash) of a call of key that
// has run. With the result signal, a result equal to an earlier result of
// the same key is a repeat: the key's result count goes up. Results of any
// kind alternate freely (A, B, A, B: the second A and the second B are
// repeats). Without the result signal it does nothing.
func (t *CapTracker) ObserveResult(key string, h uint64) {
	if !t.results() {
		return
	}
	rk := resultKey{key, h}
	if _, ok := t.resSeen[rk]; !ok {
		t.resSeen[rk] = struct{}{}
		if t.resCount[key] == 0 {
			t.resCount[key] = 1 // a result of a call the tracker did not see
		}
		return
	}
	r := t.resCount[key] + 1
	t.resCount[key] = r
	if r > t.resMax {
		t.resMax, t.resMaxKey = r, key
	}
	if r == GlobalDuplicateThreshold {
		t.events++ // a key newly at the threshold
	}
}

// FallBackToCalls makes a result-signal tracker count calls for the rest of
// the turn: used where the calls' results cannot be seen (an agent behind
// acpd guard that reports none).
func (t *CapTracker) FallBackToCalls() { t.noResults = true }

// ResultRepeat is the highest result count of one key (0 without the
// result signal).
func (t *CapTracker) ResultRepeat() int {
	if !t.results() {
		return 0
	}
	return t.resMax
}

func (t *CapTracker) observeWindow(key string) {
	if t.ringLen == len(t.ring) {
		old := t.ring[t.ringPos]
		c := t.winCounts[old]
		t.winHist[c]--
		if c == t.winMax && t.winHist[c] == 0 {
			t.winMax--
		}
		if c == 1 {
			delete(t.winCounts, old)
		} else {
			t.winCounts[old] = c - 1
			t.winHist[c-1]++
		}
	} else {
		t.ringLen++
	}
	t.ring[t.ringPos] = key
	t.ringPos = (t.ringPos + 1) % len(t.ring)
	c := t.winCounts[key]
	if c > 0 {
		t.winHist[c]--
	}
	t.winCounts[key] = c + 1
	t.winHist[c+1]++
	if c+1 > t.winMax {
		t.winMax = c + 1
	}
}

// AddCalls adds n calls to the turn total.
func (t *CapTracker) AddCalls(n int) { t.total += n }

// Total is the number of calls counted this turn.
func (t *CapTracker) Total() int { return t.total }

// MaxKeyRepeat is the highest count of any single repeat key this turn.
func (t *CapTracker) MaxKeyRepeat() int { return t.maxRepeat }

// MaxRepeatKey is a key counted MaxKeyRepeat times ("" before any call).
func (t *CapTracker) MaxRepeatKey() string { return t.maxKey }

// StuckRepeat is the adaptive cap's stuck signal: MaxKeyRepeat, or with a
// StuckWindow the highest count of one key among the last StuckWindow calls.
// With the result signal it is the highest result count (never above the
// call count); with both, the lower of the two, so each narrows the other.
func (t *CapTracker) StuckRepeat() int {
	n := t.maxRepeat
	if t.ring != nil {
		n = t.winMax
	}
	if t.results() {
		n = min(n, t.resMax)
	}
	return n
}

// dupRepeat is the global duplicate's count: the highest key repeat, or
// with the result signal the highest result count.
func (t *CapTracker) dupRepeat() int {
	if t.results() {
		return t.resMax
	}
	return t.maxRepeat
}

// SignalKey is a key holding the signal's highest count: MaxRepeatKey, or
// with the result signal the key with the highest result count.
func (t *CapTracker) SignalKey() string {
	if t.results() {
		return t.resMaxKey
	}
	return t.maxKey
}

// Cap returns the cap the tracker checks against.
func (t *CapTracker) Cap() Cap { return t.cap }

// ShouldHalt applies ShouldHaltOnTurnToolCallCap to the tracker's state.
func (t *CapTracker) ShouldHalt() bool { return t.HaltReason() != "" }

// HaltReason applies TurnToolCallCapReason to the tracker's state.
func (t *CapTracker) HaltReason() CapReason {
	return TurnToolCallCapReason(t.total, t.StuckRepeat(), t.cap)
}

// Verdict is the daemon guard's decision on a batch: Loop is "" when the
// turn goes on. With Warn set the turn also goes on, but the model is to be
// told it repeats itself (the first firing of the stuck signal or the
// global duplicate under Cap.Recovery warn); AfterWarning marks a halt that
// came after such a warning.
type Verdict struct {
	Loop         LoopType
	Reason       CapReason // for LoopTurnToolCallCap
	Warn         bool
	AfterWarning bool
}

// Stops reports whether the verdict halts the turn.
func (v Verdict) Stops() bool { return v.Loop != "" && !v.Warn }

// RecordBatch is the daemon guard's per-batch decision
// (recordDaemonToolCalls, loop-detection.md §7.2): it counts every call of
// one model response (keys are their repeat keys) before any runs, then
// checks once: the cap first, then, unless skipLoopDetection, the global
// duplicate (one key GlobalDuplicateThreshold times in the whole turn). A
// verdict that Stops means the whole batch is skipped and the turn stops.
// The daemon and `acpd stats` replaying a transcript both decide through
// it.
func (t *CapTracker) RecordBatch(keys []string, skipLoopDetection bool) Verdict {
	for _, k := range keys {
		t.ObserveKey(k)
	}
	t.AddCalls(len(keys))
	return t.Check(skipLoopDetection)
}

// Check is the daemon guard's decision on the tracker's current state: the
// cap first, then, unless skipLoopDetection, the global duplicate. A guard
// that sees calls one at a time, and learns a call's key only after it
// counted the call (`acpd guard`), checks after each AddCalls and each
// ObserveKey. Under Cap.Recovery warn, the first firing of the stuck signal
// or the global duplicate in the turn is a warning; after it, they halt
// only when a call of a key at or past the threshold comes again (the
// model did not change approach), not because the old count still stands.
func (t *CapTracker) Check(skipLoopDetection bool) Verdict {
	switch r := t.HaltReason(); r {
	case "":
	case CapStuck:
		if v, ok := t.recovery(Verdict{Loop: LoopTurnToolCallCap, Reason: r}); ok {
			return v
		}
	default:
		return Verdict{Loop: LoopTurnToolCallCap, Reason: r}
	}
	if !skipLoopDetection && t.dupRepeat() >= GlobalDuplicateThreshold {
		if v, ok := t.recovery(Verdict{Loop: LoopGlobalToolCallDuplicate}); ok {
			return v
		}
	}
	return Verdict{}
}

// recovery applies Cap.Recovery to a firing; ok false: it does not count
// (warned already, and nothing repeated since).
func (t *CapTracker) recovery(v Verdict) (Verdict, bool) {
	if !t.cap.Warns() {
		return v, true
	}
	if !t.warned {
		t.warned, t.warnedAt = true, t.events
		v.Warn = true
		return v, true
	}
	if t.events > t.warnedAt {
		v.AfterWarning = true
		if v.Reason == CapStuck {
			v.Reason = CapStuckAfterWarning
		}
		return v, true
	}
	return Verdict{}, false
}

// ArmWarning moves the warning's mark to now: events counted so far are
// part of the firing that warned. A guard that warned on a call before it
// knew the call's key (`acpd guard`) arms it once the key is counted, so
// that key does not count as the model repeating after the warning.
func (t *CapTracker) ArmWarning() {
	if t.warned {
		t.warnedAt = t.events
	}
}

// Warned reports whether the turn has had its warning.
func (t *CapTracker) Warned() bool { return t.warned }

// Finished commits the current total as the rollback floor: a model
// response completed, so its calls stay counted even if a later one retries.
func (t *CapTracker) Finished() { t.committed = t.total }

// Retry discards the failed attempt: the total returns to the floor and the
// repeat counts (and the window) are cleared; the replayed calls
// re-populate them.
func (t *CapTracker) Retry() {
	t.total = t.committed
	t.clearCounts()
}

// Reset clears everything for a new turn.
func (t *CapTracker) Reset() {
	t.total, t.committed = 0, 0
	t.noResults = false
	t.clearCounts()
}

func (t *CapTracker) clearCounts() {
	clear(t.counts)
	t.maxRepeat, t.maxKey = 0, ""
	clear(t.resSeen)
	clear(t.resCount)
	t.resMax, t.resMaxKey = 0, ""
	t.events, t.warned, t.warnedAt = 0, false, 0
	if t.ring != nil {
		clear(t.ring)
		clear(t.winCounts)
		clear(t.winHist)
		t.ringPos, t.ringLen, t.winMax = 0, 0, 0
	}
}
