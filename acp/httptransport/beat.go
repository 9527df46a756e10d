package httptransport

import (
	"sync"
	"time"
)

// beat is the keepalive clock every SSE stream of a Handler shares: one
// timer however many streams are open, where a ticker per stream cost each
// idle session stream a timer of its own. A stream waits on the channel
// next returns; each beat closes it and makes the next one. The timer runs
// only while a stream is open.
type beat struct {
	every  time.Duration
	onBeat func() // also run at each beat (the hijacked streams' keepalives)

	mu      sync.Mutex
	ch      chan struct{}
	t       *time.Timer
	holders int
}

// hold counts an open stream; release undoes it.
func (b *beat) hold() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holders++
	if b.holders > 1 {
		return
	}
	if b.t == nil {
		b.t = time.AfterFunc(b.every, b.fire)
	} else {
		b.t.Reset(b.every)
	}
}

func (b *beat) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holders--
	if b.holders == 0 {
		b.t.Stop()
	}
}

// next is closed at the next beat.
func (b *beat) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *beat) fire() {
	b.mu.Lock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	if b.holders > 0 {
		b.t.Reset(b.every)
	}
	b.mu.Unlock()
	if b.onBeat != nil {
		b.onBeat()
	}
}
