package stats

import (
	"fmt"

	"github.com/acpd/acpd/loopdetect"
)

// Settings are the guard settings a what-if replay runs with.
type Settings struct {
	Cap               loopdetect.Cap `json:"cap"`
	SkipLoopDetection bool           `json:"skipLoopDetection"`
}

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
	// Why says what the replay saw.
	Why string `json:"why"`
}

// Outcome is the replay's outcome in OutcomeText's form.
func (c *Change) Outcome() string {
	if !c.Stops {
		return "continues"
	}
	if c.CapReason != "" {
		return c.LoopType + "/" + c.CapReason
	}
	return c.LoopType
}

func (r *reader) replay(t *Turn, tc *turnCalls, s Settings) *Change {
	tr := r.tracker
	start := 0
	for bi, end := range tc.ends {
		keys := r.keyBuf[:0]
		for _, c := range tc.calls[start:end] {
			keys = append(keys, c.key)
		}
		r.keyBuf = keys
		batchStart := start
		start = end
		lt, cr := tr.RecordBatch(keys, s.SkipLoopDetection)
		if lt == "" {
			continue
		}
		names := func(key string) string {
			for _, c := range tc.calls[:batchStart+len(keys)] {
				if c.key == key {
					return c.name
				}
			}
			return ""
		}
		last := bi == len(tc.ends)-1
		if last && t.stoppedByGuard() && string(lt) == t.LoopType && (t.CapReason == "" || string(cr) == t.CapReason) {
			return nil // the same stop on the same batch
		}
		return &Change{Stops: true, LoopType: string(lt), CapReason: string(cr), AtCall: tr.Total(),
			Why: why(lt, cr, tr, names(tr.MaxRepeatKey()))}
	}
	if t.stoppedByGuard() {
		return &Change{AtCall: tr.Total(), Why: fmt.Sprintf(
			"no cap or duplicate rule holds at call %d (%d calls, max repeat %d); the transcript ends there",
			tr.Total(), tr.Total(), tr.MaxKeyRepeat())}
	}
	return nil
}

func why(lt loopdetect.LoopType, cr loopdetect.CapReason, tr *loopdetect.CapTracker, tool string) string {
	c := tr.Cap()
	switch {
	case lt == loopdetect.LoopGlobalToolCallDuplicate:
		return fmt.Sprintf("%s repeated %d times (skipLoopDetection false)", tool, tr.MaxKeyRepeat())
	case cr == loopdetect.CapExplicit:
		return fmt.Sprintf("%d calls past the hard cap of %d", tr.Total(), c.Max)
	case cr == loopdetect.CapBackstop:
		return fmt.Sprintf("%d calls past the backstop of %d", tr.Total(), c.Max*loopdetect.AdaptiveCapHardMultiplier)
	case c.StuckWindow > 0:
		return fmt.Sprintf("%d calls past the soft cap of %d with one call repeated %d times in the last %d",
			tr.Total(), c.Max, tr.StuckRepeat(), c.StuckWindow)
	default:
		return fmt.Sprintf("%d calls past the soft cap of %d with %s repeated %d times",
			tr.Total(), c.Max, tool, tr.MaxKeyRepeat())
	}
}
