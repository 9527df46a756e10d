// Package heaprelease hands the heap freed by a burst of work back to the
// operating system once the burst is over.
//
// Opening a session builds temporary structures (the environment's git
// runs, the instruction files, the index update, JSON) and keeps little of
// them; setting up a TLS connection (key exchange, certificate, transcript)
// keeps even less. The Go runtime collects that garbage but keeps the
// pages: its scavenger only returns what lies above about 110 % of the
// heap goal, which is twice the live heap, so a daemon that opened a
// thousand sessions and then sits idle holds two to three times their live
// size for as long as it runs. After a burst of session opens or
// connection set-ups, and once a quiet period has passed with none, one
// debug.FreeOSMemory returns those pages: a full collection of a heap of a
// few tens of MB, tens of milliseconds of CPU once per burst, never on the
// path of a message.
//
// Two bounds keep that a policy for bursts, not a collector of its own: a
// release runs at most once every MinInterval, however the notes are
// spaced (notes a little more than Quiet apart would otherwise buy a full
// collection each), and at the latest MaxDelay after the first note it
// answers, so a steady trickle (a probe connecting every second) cannot put
// off for ever the release of the burst before it. After a burst shorter
// than MaxDelay with no release in its last MinInterval (the idle
// benchmarks), the release comes Quiet after its last note.
//
// While a release is pending the collector runs at half the heap growth
// it otherwise allows (GOGC 50 for the runtime's default of 100), and the
// release restores it. A burst's survivors (a session's state, a TLS
// connection's keys and buffers) are allocated among its garbage, and a
// page that keeps one of them cannot be returned: collecting twice as
// often reuses the freed slots sooner, so the survivors end up on fewer
// pages. With a thousand sessions opened over as many TLS connections that
// left 4 MB of partly used pages in place of 6-7 MB, 1.5 KB a session of
// resident memory once released, for about 50 more collections in a
// burst of a minute (under a second of CPU). A daemon setting up
// connections all the time collects at that rate all the time, its heap
// peaking at 1.5 times the live heap rather than twice, for twice the
// collections. A GOGC given in the environment is the operator's and is
// left alone.
package heaprelease

import (
	"os"
	"runtime/debug"
	"sync"
	"time"
)

const (
	// Quiet is how long no burst may be noted before the heap is released.
	Quiet = 2 * time.Second
	// MinInterval is the least time between two releases. A release is a
	// full collection (20 ms of CPU, 90 ms of wall time at load 40, with a
	// thousand idle sessions on as many TLS connections live: 15 MB) and
	// the pages it returns are faulted in again by the next burst, so a
	// daemon whose notes come just over Quiet apart pays it at most every
	// MinInterval: 0.2 % of a core.
	MinInterval = 10 * time.Second
	// MaxDelay bounds how long notes arriving less than Quiet apart put a
	// release off. Long beside any burst of set-ups (a thousand sessions
	// open in about a minute): a release in the middle of a burst returns
	// pages the burst faults in again, and would hold the release at its
	// end back by up to MinInterval.
	MaxDelay = 5 * time.Minute
)

// burstGC divides the collector's percentage while a release is pending;
// zero leaves it alone (GOGC set in the environment).
var burstGC = func() int {
	if _, set := os.LookupEnv("GOGC"); set {
		return 0
	}
	return 2
}()

// The policy's durations and the release itself; tests shorten and count.
var (
	quiet       = Quiet
	minInterval = MinInterval
	maxDelay    = MaxDelay
	free        = debug.FreeOSMemory
)

var (
	mu    sync.Mutex
	timer *time.Timer
	// first is the first note the next release answers; zero when none
	// waits.
	first time.Time
	// last is when the last release started.
	last time.Time
	// gcPercent is the collector's percentage to restore at the release;
	// zero when it was not changed.
	gcPercent int
	// released counts releases; read by tests.
	released int
)

// Note records that a burst's work just happened (a session opened, a
// connection set up). The release waits until Quiet has passed since the
// last Note, process-wide (every connection's work counts towards the same
// burst), or MaxDelay since the first, and until MinInterval has passed
// since the previous release.
func Note() {
	mu.Lock()
	defer mu.Unlock()
	now := time.Now()
	if first.IsZero() {
		first = now
		if burstGC > 0 {
			gcPercent = lowerGCPercent(burstGC)
		}
	}
	wait := min(quiet, first.Add(maxDelay).Sub(now))
	if !last.IsZero() {
		wait = max(wait, last.Add(minInterval).Sub(now))
	}
	if timer == nil {
		timer = time.AfterFunc(wait, release)
		return
	}
	timer.Reset(wait)
}

func release() {
	mu.Lock()
	if first.IsZero() {
		// A Reset raced with the run that answered its note.
		mu.Unlock()
		return
	}
	// Notes from here on wait for the next release, MinInterval on.
	first, last = time.Time{}, time.Now()
	if gcPercent > 0 {
		debug.SetGCPercent(gcPercent)
		gcPercent = 0
	}
	mu.Unlock()
	free()
	mu.Lock()
	released++
	mu.Unlock()
}

// lowerGCPercent divides the collector's percentage by div and returns the
// one it replaced, for the release to restore; 0 when it left it alone
// (the collector off, or at GOGC 0). debug.SetGCPercent reads the
// percentage only by setting one, so it sets the runtime's default divided
// first and corrects that when the percentage was another. Reading it
// through runtime/metrics instead would link that package, whose init
// builds its table of every metric in every acpd process: 0.1 ms of the
// time an editor waits for initialize.
func lowerGCPercent(div int) int {
	guess := max(1, 100/div)
	prev := debug.SetGCPercent(guess)
	switch {
	case prev <= 0:
		debug.SetGCPercent(prev)
		return 0
	case max(1, prev/div) != guess:
		debug.SetGCPercent(max(1, prev/div))
	}
	return prev
}

// Released is how many releases have run.
func Released() int {
	mu.Lock()
	defer mu.Unlock()
	return released
}
