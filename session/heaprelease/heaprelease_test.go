package heaprelease

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNote_OneReleaseAfterTheBurst: a burst of notes ends in one release,
// once the burst is over, and the pages of the garbage it left are back
// with the operating system.
func TestNote_OneReleaseAfterTheBurst(t *testing.T) {
	before := Released()
	garbage := make([][]byte, 0, 4096)
	for range 4096 {
		garbage = append(garbage, make([]byte, 4096))
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	for range 10 {
		Note()
	}
	assert.Equal(t, before, Released(), "not inside the burst")
	require.Eventually(t, func() bool { return Released() == before+1 }, 30*time.Second, 10*time.Millisecond)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	assert.Less(t, ms.HeapSys-ms.HeapReleased-ms.HeapInuse, uint64(4<<20), "the burst's 16 MB of garbage returned")
	time.Sleep(Quiet + 500*time.Millisecond)
	assert.Equal(t, before+1, Released(), "no second release without a note")
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

// policy shortens the policy's durations for one test and counts the
// releases, with their start times, in place of freeing.
func policy(t *testing.T, q, interval, delay time.Duration) func() []time.Time {
	t.Helper()
	var tmu sync.Mutex
	var at []time.Time
	mu.Lock()
	if timer != nil {
		timer.Stop()
	}
	saved := []time.Duration{quiet, minInterval, maxDelay}
	savedGC := burstGC
	burstGC = 0
	savedFree := free
	quiet, minInterval, maxDelay = q, interval, delay
	first, last = time.Time{}, time.Time{}
	free = func() {
		tmu.Lock()
		at = append(at, time.Now())
		tmu.Unlock()
	}
	mu.Unlock()
	t.Cleanup(func() {
		mu.Lock()
		timer.Stop()
		quiet, minInterval, maxDelay = saved[0], saved[1], saved[2]
		free = savedFree
		burstGC = savedGC
		if gcPercent > 0 {
			debug.SetGCPercent(gcPercent)
			gcPercent = 0
		}
		first, last = time.Time{}, time.Time{}
		mu.Unlock()
	})
	return func() []time.Time {
		tmu.Lock()
		defer tmu.Unlock()
		return append([]time.Time(nil), at...)
	}
}

// TestNote_MinInterval: notes a little more than Quiet apart do not buy a
// release each; releases are at least MinInterval apart.
func TestNote_MinInterval(t *testing.T) {
	releases := policy(t, 10*time.Millisecond, 300*time.Millisecond, time.Minute)
	start := time.Now()
	for time.Since(start) < time.Second {
		Note()
		time.Sleep(25 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return len(releases()) >= 2 }, 10*time.Second, 5*time.Millisecond)
	at := releases()
	assert.LessOrEqual(t, len(at), 5, "a second of notes, releases at most every 300 ms")
	for i := 1; i < len(at); i++ {
		assert.GreaterOrEqual(t, at[i].Sub(at[i-1]), 300*time.Millisecond, "release %d", i)
	}
}

// TestNote_MaxDelay: notes that never leave Quiet between them put the
// release off by MaxDelay at most.
func TestNote_MaxDelay(t *testing.T) {
	releases := policy(t, 5*time.Second, 10*time.Millisecond, 300*time.Millisecond)
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		Note()
		time.Sleep(10 * time.Millisecond)
	}
	at := releases()
	require.NotEmpty(t, at, "a release while the notes went on")
	assert.GreaterOrEqual(t, at[0].Sub(start), 300*time.Millisecond, "not before MaxDelay")
}

// TestNote_Quiet: one release after the last of a burst's notes, once it
// is quiet, and none more without a note.
func TestNote_Quiet(t *testing.T) {
	releases := policy(t, 50*time.Millisecond, 10*time.Millisecond, time.Minute)
	var lastNote time.Time
	for range 10 {
		Note()
		lastNote = time.Now()
	}
	require.Eventually(t, func() bool { return len(releases()) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.GreaterOrEqual(t, releases()[0].Sub(lastNote), 50*time.Millisecond, "not before Quiet")
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, releases(), 1, "no second release without a note")
}

// TestNote_BurstGC: while a release is pending the collector runs at half
// its percentage; the release restores it. With GOGC from the environment
// (burstGC 0) or the collector off, it is left alone.
func TestNote_BurstGC(t *testing.T) {
	releases := policy(t, 50*time.Millisecond, 10*time.Millisecond, time.Minute)
	defer debug.SetGCPercent(debug.SetGCPercent(80))
	mu.Lock()
	burstGC = 2
	mu.Unlock()
	Note()
	assert.Equal(t, 40, currentGCPercent(), "halved during the burst")
	Note()
	assert.Equal(t, 40, currentGCPercent(), "halved once")
	require.Eventually(t, func() bool { return len(releases()) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 80, currentGCPercent(), "restored by the release")

	debug.SetGCPercent(-1)
	Note()
	assert.Equal(t, -1, currentGCPercent(), "off stays off")
	require.Eventually(t, func() bool { return len(releases()) == 2 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, -1, currentGCPercent())
	debug.SetGCPercent(80)

	mu.Lock()
	burstGC = 0
	mu.Unlock()
	Note()
	assert.Equal(t, 80, currentGCPercent(), "GOGC from the environment is left alone")
	require.Eventually(t, func() bool { return len(releases()) == 3 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 80, currentGCPercent())

	// The runtime's default, which lowerGCPercent sets in one call.
	debug.SetGCPercent(100)
	mu.Lock()
	burstGC = 2
	mu.Unlock()
	Note()
	assert.Equal(t, 50, currentGCPercent(), "the default halved")
	require.Eventually(t, func() bool { return len(releases()) == 4 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 100, currentGCPercent(), "the default restored")
}

// currentGCPercent is the collector's percentage now (-1: off), read
// without setting it.
func currentGCPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[0].Value.Uint64() > math.MaxInt32 {
		return -1
	}
	return int(s[0].Value.Uint64())
}
