package loopdetect

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reason agrees with the predicate on every vector-76 input and names
// the rule that fired.
func TestTurnToolCallCapReason(t *testing.T) {
	tests := []struct {
		total, maxRepeat int
		cap              Cap
		want             CapReason
	}{
		{100, 0, Cap{Max: 100}, ""},
		{101, 5, Cap{Max: 100}, ""},
		{101, 6, Cap{Max: 100}, CapStuck},
		{1000, 1, Cap{Max: 100}, ""},
		{1001, 1, Cap{Max: 100}, CapBackstop},
		{1001, 9, Cap{Max: 100}, CapBackstop}, // backstop wins over stuck
		{101, 1, Cap{Max: 100, Explicit: true}, CapExplicit},
		{101, 9, Cap{Max: 100, Explicit: true}, CapExplicit}, // explicit wins over stuck
		{3, 1, Cap{Max: 2, Explicit: true}, CapExplicit},
		{5000, 99, Cap{Max: 0, Explicit: true}, ""},
		{2, 1, Cap{Max: 1}, ""},
		{11, 1, Cap{Max: 1}, CapBackstop},
		{120, 99, Cap{Max: -1, Explicit: true}, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d_%d_%+v", tt.total, tt.maxRepeat, tt.cap), func(t *testing.T) {
			got := TurnToolCallCapReason(tt.total, tt.maxRepeat, tt.cap)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got != "", ShouldHaltOnTurnToolCallCap(tt.total, tt.maxRepeat, tt.cap))
		})
	}
}

// The core service reports the reason with the detection, in the record and
// through LastCapReason.
func TestDetector_CapReason(t *testing.T) {
	call := func(args map[string]any) Event {
		return Event{Kind: EventToolCallRequest, ToolName: "any_tool", Args: args}
	}
	tests := []struct {
		name   string
		cap    Cap
		events func() []Event
		fireAt int // 1-based call that fires
		want   CapReason
	}{
		{"explicit", Cap{Max: 2, Explicit: true}, func() []Event {
			return []Event{call(map[string]any{"d": 1}), call(map[string]any{"d": 2}), call(map[string]any{"d": 3})}
		}, 3, CapExplicit},
		{"stuck", Cap{Max: 10}, func() []Event {
			var evs []Event
			for i := range 10 {
				evs = append(evs, call(map[string]any{"stuck": true}), call(map[string]any{"filler": i}))
			}
			return evs
		}, 11, CapStuck},
		{"backstop", Cap{Max: 2}, func() []Event {
			var evs []Event
			for i := range 21 {
				evs = append(evs, call(map[string]any{"d": i}))
			}
			return evs
		}, 21, CapBackstop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recs []Record
			d := New(Config{Cap: tt.cap, SkipLoopDetection: true, OnRecord: func(r Record) { recs = append(recs, r) }})
			evs := tt.events()
			fired := 0
			for i, ev := range evs {
				if d.Check(ev) {
					fired = i + 1
					break
				}
			}
			assert.Equal(t, tt.fireAt, fired)
			assert.Equal(t, LoopTurnToolCallCap, d.LastLoopType())
			assert.Equal(t, tt.want, d.LastCapReason())
			require.Len(t, recs, 1)
			assert.Equal(t, Record{Kind: RecordLoopDetected, LoopType: LoopTurnToolCallCap, CapReason: tt.want}, recs[0])
			d.Reset()
			assert.Equal(t, CapReason(""), d.LastCapReason())
		})
	}
}

// spreadTestRuns re-runs the same test six times spread over 300 calls
// (every 50th call), the rest distinct: a productive fix-and-retest turn.
func spreadTestRuns() []string {
	out := make([]string, 300)
	for i := range out {
		if (i+1)%50 == 0 {
			out[i] = "run-tests"
		} else {
			out[i] = fmt.Sprintf("edit-%d", i)
		}
	}
	return out
}

// tightLoop is 100 distinct calls, then one call alternating with fillers.
func tightLoop() []string {
	out := distinctKeys("d", 100)
	for i := range 20 {
		out = append(out, "run-tests", fmt.Sprintf("f%d", i))
	}
	return out
}

// haltAt feeds keys one at a time, as the core service does, and returns
// the 1-based call that halts (0: none) and the reason.
func haltAt(c Cap, keys []string) (int, CapReason) {
	tr := NewCapTracker(c)
	for i, k := range keys {
		tr.ObserveKey(k)
		tr.AddCalls(1)
		if r := tr.HaltReason(); r != "" {
			return i + 1, r
		}
	}
	return 0, ""
}

func TestCapTracker_StuckWindow(t *testing.T) {
	spread, tight := spreadTestRuns(), tightLoop()
	tests := []struct {
		name   string
		window int
		keys   []string
		at     int
		reason CapReason
	}{
		{"spread re-runs, whole-turn signal: stuck", 0, spread, 300, CapStuck},
		{"spread re-runs, W=50: productive", 50, spread, 0, ""},
		{"tight loop, whole-turn signal: stuck", 0, tight, 111, CapStuck},
		{"tight loop, W=50: stuck", 50, tight, 111, CapStuck},
		{"tight loop, W=11: stuck", 11, tight, 111, CapStuck},
		{"tight loop, W=10: never six in the window", 10, tight, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, r := haltAt(Cap{Max: 100, StuckWindow: tt.window}, tt.keys)
			assert.Equal(t, tt.at, at)
			assert.Equal(t, tt.reason, r)
		})
	}
	// The window never touches explicit caps or the backstop.
	at, r := haltAt(Cap{Max: 100, Explicit: true, StuckWindow: 50}, spread)
	assert.Equal(t, 101, at)
	assert.Equal(t, CapExplicit, r)
	at, r = haltAt(Cap{Max: 20, StuckWindow: 5}, distinctKeys("x", 300))
	assert.Equal(t, 201, at)
	assert.Equal(t, CapBackstop, r)
}

// The core service uses the same window (through its tracker).
func TestDetector_StuckWindow(t *testing.T) {
	for _, w := range []int{0, 50} {
		d := New(Config{Cap: Cap{Max: 100, StuckWindow: w}, SkipLoopDetection: true})
		fired := 0
		for i, k := range spreadTestRuns() {
			if d.Check(Event{Kind: EventToolCallRequest, ToolName: "run_shell_command", Args: map[string]any{"command": k}}) {
				fired = i + 1
				break
			}
		}
		if w == 0 {
			assert.Equal(t, 300, fired)
			assert.Equal(t, CapStuck, d.LastCapReason())
		} else {
			assert.Equal(t, 0, fired)
		}
	}
}

// The O(1) window maximum equals a brute-force count over the last W keys.
func TestCapTracker_WindowMatchesBruteForce(t *testing.T) {
	keys := make([]string, 2000)
	x := uint32(7)
	for i := range keys {
		x = x*1103515245 + 12345
		keys[i] = fmt.Sprint(x >> 16 % 9)
	}
	for _, w := range []int{1, 2, 7, 50} {
		tr := NewCapTracker(Cap{Max: 100, StuckWindow: w})
		for i, k := range keys {
			if i == 1000 {
				tr.Retry() // floor 0: clears counts and window
			}
			tr.ObserveKey(k)
			lo := max(0, i-w+1)
			if i >= 1000 {
				lo = max(lo, 1000)
			}
			counts := map[string]int{}
			want := 0
			for _, kk := range keys[lo : i+1] {
				counts[kk]++
				want = max(want, counts[kk])
			}
			require.Equal(t, want, tr.StuckRepeat(), "w=%d i=%d", w, i)
		}
	}
}
