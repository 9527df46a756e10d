// Package heaprelease hands the heap freed by a burst of work back to the
// operating system once the burst is over.
//
// Opening a session builds temporary structures (the environment's git
// runs, the instruction files, the index update, JSON) and keeps little of
// them. The Go runtime collects that garbage but keeps the pages: its
// scavenger only returns what lies above about 110 % of the heap goal,
// which is twice the live heap, so a daemon that opened a thousand sessions
// and then sits idle holds two to three times their live size for as long
// as it runs. After a burst of session opens, and once a quiet period has
// passed with none, one debug.FreeOSMemory returns those pages: a full
// collection of a heap of a few tens of MB, some milliseconds of CPU once
// per burst, never on the path of a message.
package heaprelease

import (
	"runtime/debug"
	"sync"
	"time"
)

// Quiet is how long no burst may be noted before the heap is released.
const Quiet = 2 * time.Second

var (
	mu    sync.Mutex
	timer *time.Timer
	// released counts releases; read by tests.
	released int
)

// Note records that a burst's work just happened (one session opened). The
// release waits until Quiet has passed since the last Note, process-wide:
// every connection's sessions count towards the same burst.
func Note() {
	mu.Lock()
	defer mu.Unlock()
	if timer != nil {
		timer.Reset(Quiet)
		return
	}
	timer = time.AfterFunc(Quiet, release)
}

func release() {
	debug.FreeOSMemory()
	mu.Lock()
	released++
	mu.Unlock()
}

// Released is how many releases have run.
func Released() int {
	mu.Lock()
	defer mu.Unlock()
	return released
}
