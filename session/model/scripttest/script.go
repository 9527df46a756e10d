package scripttest

import (
	"sync"

	"github.com/acpd/acpd/session/model"
)

// Script is the part of a scripted server that is the same whatever the
// wire format: the requests received, an optional responder asked first,
// and the queues of scripted responses behind it (a response with a match
// text in that text's own queue). It has its own lock, so a server may call
// it while holding its own; it never calls back into the server.
type Script[Q, R any] struct {
	mu        sync.Mutex
	queues    model.ScriptQueues[R]
	requests  []Q
	responder func(Q) (R, bool)
}

// Add appends r to the queue of match ("" is the main script).
func (s *Script[Q, R]) Add(match string, r R) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues.Add(match, r)
}

// SetResponder installs f, asked first for every request Next is given:
// when it returns true its response is served and no queue advances.
func (s *Script[Q, R]) SetResponder(f func(Q) (R, bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = f
}

// Record keeps req, refused or not, for Requests.
func (s *Script[Q, R]) Record(req Q) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
}

// Requests returns the requests recorded so far, in order.
func (s *Script[Q, R]) Requests() []Q {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Q(nil), s.requests...)
}

// Served is how many responses of the main script have been used.
func (s *Script[Q, R]) Served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues.Served("")
}

// Remaining is how many scripted responses are left in all the queues.
func (s *Script[Q, R]) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues.Remaining()
}

// Next is the response to req: the responder's when it has one, else the
// next one of the queue first (the request's first user text) selects.
// When neither has one, exhausted names the queue that ran out. The
// responder is called without the lock held, so it may call Add.
func (s *Script[Q, R]) Next(req Q, first string) (r R, ok bool, exhausted string) {
	s.mu.Lock()
	responder := s.responder
	s.mu.Unlock()
	if responder != nil {
		if r, ok = responder(req); ok {
			return r, true, ""
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues.Next(first)
}
