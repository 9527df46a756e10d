package stats

import (
	"fmt"

	"github.com/acpd/acpd/loopdetect"
)

// Settings are the guard settings a what-if replay runs with; the stuck
// signal and the loop recovery are the Cap's.
type Settings struct {
	Cap               loopdetect.Cap `json:"cap"`
	SkipLoopDetection bool           `json:"skipLoopDetection"`
}

// stoppedByGuard reports whether the turn ended in a stop the per-batch
// guard decides (the cap or the global duplicate), which a replay can
// reproduce; the other loop stops happen while a batch runs.
func (t *Turn) stoppedByGuard() bool {
	return t.Outcome == "loop" && (t.LoopType == string(loopdetect.LoopTurnToolCallCap) ||
		t.LoopType == string(loopdetect.LoopGlobalToolCallDuplicate))
}

// Change is how a replay's outcome differs from the recorded one.
type Change struct {
	// Stops is true when the replay stops the turn, false when it lets a
	// recorded stop through.
	Stops     bool   `json:"stops"`
	LoopType  string `json:"loopType,omitempty"`
	CapReason string `json:"capReason,omitempty"`
	// AtCall is the turn's counted total when the replay stops (its batch
	// included), or for a stop let through, the recorded stop's total.
	AtCall int `json:"atCall"`
	// WarnedAt is the total at which the replay warned the model
	// (model.loopRecovery warn; 0: it did not).
	WarnedAt int `json:"warnedAt,omitempty"`
	// Why says what the replay saw.
	Why string `json:"why"`
}

// Outcome is the replay's outcome in OutcomeText's form.
func (c *Change) Outcome() string {
	if !c.Stops {
		if c.WarnedAt > 0 {
			return "warns, continues"
		}
		return "continues"
	}
	if c.CapReason != "" {
		return c.LoopType + "/" + c.CapReason
	}
	return c.LoopType
}

// The replay's verdicts on a turn (Turn.Replay).
const (
	ReplayStopped  = "stopped"  // the replay stops the turn
	ReplayWarned   = "warned"   // it warns the model (model.loopRecovery warn) and lets the turn go on
	ReplayFinished = "finished" // it lets the turn run as recorded
)

// replay runs the daemon guard's per-batch decision over the turn's batches
// under s — with the result signal, each batch's recorded result digests
// after the batch, as the daemon saw them — and returns how the outcome
// would change (nil: it would not) and its verdict on the turn. A turn
// recorded without result digests (before acpd wrote them) is replayed
// under "results" as "calls", and says so.
func (r *reader) replay(t *Turn, tc *turnCalls, s Settings) (*Change, string) {
	tr := r.tracker
	results := s.Cap.Results()
	noResults := false
	if results && len(tc.calls) > 0 {
		noResults = true
		for _, id := range tc.ids {
			if _, ok := r.results[id]; ok {
				noResults = false
				break
			}
		}
		if noResults {
			tr.FallBackToCalls()
		}
	}
	note := func(why string) string {
		if noResults {
			return why + " (recorded without results: replayed as calls)"
		}
		return why
	}
	warnAt := 0
	start := 0
	for bi, end := range tc.ends {
		keys := r.keyBuf[:0]
		for _, c := range tc.calls[start:end] {
			keys = append(keys, c.key)
		}
		r.keyBuf = keys
		batchStart := start
		start = end
		v := tr.RecordBatch(keys, s.SkipLoopDetection)
		if v.Warn && warnAt == 0 {
			warnAt = tr.Total()
		}
		if !v.Stops() {
			if results {
				for i := batchStart; i < end; i++ {
					if h, ok := r.results[tc.ids[i]]; ok {
						tr.ObserveResult(tc.calls[i].key, h)
					}
				}
			}
			continue
		}
		lt, cr := v.Loop, v.Reason
		last := bi == len(tc.ends)-1
		if last && t.stoppedByGuard() && string(lt) == t.LoopType && (t.CapReason == "" || string(cr) == t.CapReason) {
			return nil, ReplayStopped // the same stop on the same batch
		}
		return &Change{Stops: true, LoopType: string(lt), CapReason: string(cr), AtCall: tr.Total(), WarnedAt: warnAt,
			Why: note(why(v, tr, tc.name(tr.SignalKey(), end)))}, ReplayStopped
	}
	verdict := ReplayFinished
	if warnAt > 0 {
		verdict = ReplayWarned
	}
	switch {
	case t.stoppedByGuard():
		return &Change{AtCall: tr.Total(), WarnedAt: warnAt, Why: note(fmt.Sprintf(
			"no cap or duplicate rule holds at call %d (%d calls, max repeat %d); the transcript ends there",
			tr.Total(), tr.Total(), tr.MaxKeyRepeat()))}, verdict
	case warnAt > 0:
		return &Change{AtCall: tr.Total(), WarnedAt: warnAt, Why: note(fmt.Sprintf(
			"warned at call %d, no second firing before the turn ends", warnAt))}, verdict
	}
	return nil, verdict
}

// name is the tool of the first of the first n calls keyed key.
func (tc *turnCalls) name(key string, n int) string {
	for _, c := range tc.calls[:n] {
		if c.key == key {
			return c.name
		}
	}
	return ""
}

// why says what the replay saw when it stopped a turn.
func why(v loopdetect.Verdict, tr *loopdetect.CapTracker, tool string) string {
	c := tr.Cap()
	repeat := fmt.Sprintf("%s repeated %d times", tool, tr.MaxKeyRepeat())
	if r := tr.ResultRepeat(); r > 0 {
		repeat = fmt.Sprintf("%s repeated %d times with the same result", tool, r)
	}
	after := ""
	if v.AfterWarning {
		after = ", again after the warning"
	}
	switch {
	case v.Loop == loopdetect.LoopGlobalToolCallDuplicate:
		return fmt.Sprintf("%s (skipLoopDetection false)%s", repeat, after)
	case v.Reason == loopdetect.CapExplicit:
		return fmt.Sprintf("%d calls past the hard cap of %d", tr.Total(), c.Max)
	case v.Reason == loopdetect.CapBackstop:
		return fmt.Sprintf("%d calls past the backstop of %d", tr.Total(), c.Max*loopdetect.AdaptiveCapHardMultiplier)
	case c.StuckWindow > 0:
		return fmt.Sprintf("%d calls past the soft cap of %d with one call repeated %d times in the last %d%s",
			tr.Total(), c.Max, tr.StuckRepeat(), c.StuckWindow, after)
	default:
		return fmt.Sprintf("%d calls past the soft cap of %d with %s%s", tr.Total(), c.Max, repeat, after)
	}
}
