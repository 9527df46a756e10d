package server

import (
	"runtime/debug"
	"sync"
	"time"
)

// releaser hands the heap freed by a burst of connections and session
// opens back to the operating system once the burst is over. Opening a
// session builds and drops tens of KB (the environment's git runs, the
// instruction files, JSON), a TLS handshake about 45 KB (the hybrid key
// exchange, the certificate, the transcript), and the Go runtime keeps the
// pages of what it collected up to about twice the live heap. Measured on
// 1,000 idle sessions (BenchmarkServe_IdleSessions, docs/benchmarks.md):
// without a release a served daemon holds 31-36 KB a session over HTTP/2
// and over HTTP/1.1 with TLS, against the 32 KB target; with it 20-26 KB.
// Over stdio an editor opens one session at a time and the daemon stays
// at 10-12 KB a session without one, so only the served daemon releases.
//
// A release is a full collection (tens of milliseconds of CPU with a
// thousand sessions live) and the pages it returns are faulted in again by
// the next burst, so it runs once the daemon has been quiet for quiet, at
// most once every minInterval, and at the latest maxDelay after the
// burst's first note: a client connecting every second can neither put it
// off for ever nor buy a collection per connection.
type releaser struct {
	quiet, minInterval, maxDelay time.Duration
	free                         func()

	mu       sync.Mutex
	timer    *time.Timer
	first    time.Time // the first note the next release answers; zero if none waits
	last     time.Time // when the last release ran
	released int
}

func newReleaser() *releaser {
	return &releaser{quiet: 2 * time.Second, minInterval: 10 * time.Second, maxDelay: 5 * time.Minute, free: debug.FreeOSMemory}
}

// note records a burst's work: a connection let in, a session opened.
func (r *releaser) note() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.first.IsZero() {
		r.first = now
	}
	wait := min(r.quiet, r.first.Add(r.maxDelay).Sub(now))
	if !r.last.IsZero() {
		wait = max(wait, r.last.Add(r.minInterval).Sub(now))
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(wait, r.release)
		return
	}
	r.timer.Reset(wait)
}

func (r *releaser) release() {
	r.mu.Lock()
	if r.first.IsZero() {
		// A Reset raced with the run that answered its note.
		r.mu.Unlock()
		return
	}
	r.first, r.last = time.Time{}, time.Now()
	r.mu.Unlock()
	r.free()
	r.mu.Lock()
	r.released++
	r.mu.Unlock()
}

// count is how many releases have run.
func (r *releaser) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.released
}
