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
}

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
}

// NewCapTracker returns an empty tracker for cap.
func NewCapTracker(cap Cap) *CapTracker {
	t := &CapTracker{cap: cap, counts: make(map[string]int)}
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
	return n
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
func (t *CapTracker) StuckRepeat() int {
	if t.ring != nil {
		return t.winMax
	}
	return t.maxRepeat
}

// Cap returns the cap the tracker checks against.
func (t *CapTracker) Cap() Cap { return t.cap }

// ShouldHalt applies ShouldHaltOnTurnToolCallCap to the tracker's state.
func (t *CapTracker) ShouldHalt() bool { return t.HaltReason() != "" }

// HaltReason applies TurnToolCallCapReason to the tracker's state.
func (t *CapTracker) HaltReason() CapReason {
	return TurnToolCallCapReason(t.total, t.StuckRepeat(), t.cap)
}

// RecordBatch is the daemon guard's per-batch decision
// (recordDaemonToolCalls, loop-detection.md §7.2): it counts every call of
// one model response (keys are their repeat keys) before any runs, then
// checks once: the cap first, then, unless skipLoopDetection, the global
// duplicate (one key GlobalDuplicateThreshold times in the whole turn). A
// non-empty loop type means the whole batch is skipped and the turn stops;
// the cap reason is set for LoopTurnToolCallCap. The daemon and `acpd stats`
// replaying a transcript both decide through it.
func (t *CapTracker) RecordBatch(keys []string, skipLoopDetection bool) (LoopType, CapReason) {
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
// ObserveKey.
func (t *CapTracker) Check(skipLoopDetection bool) (LoopType, CapReason) {
	if r := t.HaltReason(); r != "" {
		return LoopTurnToolCallCap, r
	}
	if !skipLoopDetection && t.maxRepeat >= GlobalDuplicateThreshold {
		return LoopGlobalToolCallDuplicate, ""
	}
	return "", ""
}

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
	t.clearCounts()
}

func (t *CapTracker) clearCounts() {
	clear(t.counts)
	t.maxRepeat, t.maxKey = 0, ""
	if t.ring != nil {
		clear(t.ring)
		clear(t.winCounts)
		clear(t.winHist)
		t.ringPos, t.ringLen, t.winMax = 0, 0, 0
	}
}
