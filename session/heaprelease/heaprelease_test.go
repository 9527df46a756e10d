package heaprelease

import (
	"runtime"
	"runtime/debug"
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
