package scripttest

import (
	"context"
	"sync"
	"time"
)

// Sleeps records the backoff waits a client asks for instead of spending
// them: its Sleep goes in model.HTTPOptions.Sleep. Like a real sleep it
// reports a context that is done. Safe for concurrent use.
type Sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

// Sleep records d and returns ctx's error, at once.
func (s *Sleeps) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

// Got returns the waits asked for so far, in order.
func (s *Sleeps) Got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}
