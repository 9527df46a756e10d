package server

import (
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counting is a releaser with the given durations that records the time
// of each release in place of freeing.
func counting(quiet, interval, delay time.Duration) (*releaser, func() []time.Time) {
	var mu sync.Mutex
	var at []time.Time
	r := &releaser{quiet: quiet, minInterval: interval, maxDelay: delay, free: func() {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
	}}
	return r, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), at...)
	}
}

// TestReleaser_OneReleaseAfterTheBurst: a burst of notes ends in one
// release, once the burst is over, and the pages of the garbage it left
// are back with the operating system.
func TestReleaser_OneReleaseAfterTheBurst(t *testing.T) {
	r := newReleaser()
	r.quiet = 100 * time.Millisecond
	garbage := make([][]byte, 0, 4096)
	for range 4096 {
		garbage = append(garbage, make([]byte, 4096))
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	for range 10 {
		r.note()
	}
	assert.Zero(t, r.count(), "not inside the burst")
	require.Eventually(t, func() bool { return r.count() == 1 }, 30*time.Second, 10*time.Millisecond)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	assert.Less(t, ms.HeapSys-ms.HeapReleased-ms.HeapInuse, uint64(4<<20), "the burst's 16 MB of garbage returned")
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, 1, r.count(), "no second release without a note")
}

// TestReleaser_MinInterval: notes a little more than quiet apart do not
// buy a release each; releases are at least minInterval apart.
func TestReleaser_MinInterval(t *testing.T) {
	t.Parallel()
	r, releases := counting(10*time.Millisecond, 300*time.Millisecond, time.Minute)
	start := time.Now()
	for time.Since(start) < time.Second {
		r.note()
		time.Sleep(25 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return len(releases()) >= 2 }, 10*time.Second, 5*time.Millisecond)
	at := releases()
	assert.LessOrEqual(t, len(at), 5, "a second of notes, releases at most every 300 ms")
	for i := 1; i < len(at); i++ {
		assert.GreaterOrEqual(t, at[i].Sub(at[i-1]), 300*time.Millisecond, "release %d", i)
	}
}

// TestReleaser_MaxDelay: notes that never leave quiet between them put
// the release off by maxDelay at most.
func TestReleaser_MaxDelay(t *testing.T) {
	t.Parallel()
	r, releases := counting(5*time.Second, 10*time.Millisecond, 300*time.Millisecond)
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		r.note()
		time.Sleep(20 * time.Millisecond)
	}
	at := releases()
	require.NotEmpty(t, at, "released within the notes")
	assert.Less(t, at[0].Sub(start), time.Second, "at maxDelay after the first note, not after the last")
}

// BenchmarkRelease is the cost of one release with a daemon's heap of a
// thousand idle sessions (about 5 MB live in small objects) after the
// burst that opened them (about 100 MB of garbage).
func BenchmarkRelease(b *testing.B) {
	live := make([][]byte, 0, 50000)
	for i := range 1_000_000 {
		p := make([]byte, 100)
		if i%20 == 0 {
			live = append(live, p)
		}
	}
	for b.Loop() {
		debug.FreeOSMemory()
	}
	runtime.KeepAlive(live)
}
