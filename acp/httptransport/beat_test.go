package httptransport

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBeat: every holder's wait ends at each beat, a wait begun after a
// beat waits for the next one, and with no holder left the clock stops.
func TestBeat(t *testing.T) {
	b := &beat{every: 20 * time.Millisecond}
	b.hold()
	b.hold()
	first := b.next()
	require.Equal(t, first, b.next(), "one channel for everyone until the beat")
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("no beat")
	}
	second := b.next()
	assert.NotEqual(t, first, second, "a wait after the beat waits for the next")
	select {
	case <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("no second beat")
	}
	b.release()
	b.release()
	idle := b.next()
	select {
	case <-idle:
		// At most the beat that was already due when the last holder
		// left; nothing after it.
		idle = b.next()
	case <-time.After(100 * time.Millisecond):
	}
	select {
	case <-idle:
		t.Fatal("the clock kept beating with no holder")
	case <-time.After(100 * time.Millisecond):
	}
	b.hold()
	select {
	case <-b.next():
	case <-time.After(5 * time.Second):
		t.Fatal("no beat after a new holder")
	}
	b.release()
}
