package acptest

import (
	"strings"
	"sync"
)

// SyncBuffer collects what another goroutine writes — a process's stdout
// or stderr copied by exec, a logger — so that a test can read it while
// the writing goes on.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
