// Package credhttptest is the attack the credhttp policy answers, for tests:
// an endpoint that answers every request with a redirect to another origin
// (another loopback port), and that origin recording what reaches it.
package credhttptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Request is what one of the servers received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         string
}

// Redirect is the pair: URL is the endpoint to configure, Sink the other
// origin it redirects to.
type Redirect struct {
	URL  string
	Sink string

	mu    sync.Mutex
	front []Request
	sink  []Request
}

// New starts both servers, closed when the test ends. The endpoint
// answers status (307 when 0) with Location: the sink's URL with the
// request's path and query; the sink answers 200 with an empty body.
func New(t testing.TB, status int) *Redirect {
	t.Helper()
	if status == 0 {
		status = http.StatusTemporaryRedirect
	}
	r := &Redirect{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.record(&r.sink, req)
	}))
	t.Cleanup(sink.Close)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.record(&r.front, req)
		w.Header().Set("Location", sink.URL+req.URL.RequestURI())
		w.WriteHeader(status)
	}))
	t.Cleanup(front.Close)
	r.URL, r.Sink = front.URL, sink.URL
	return r
}

func (r *Redirect) record(to *[]Request, req *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	r.mu.Lock()
	defer r.mu.Unlock()
	*to = append(*to, Request{Method: req.Method, Path: req.URL.RequestURI(), Header: req.Header.Clone(), Body: string(b)})
}

// Front is what the configured endpoint received.
func (r *Redirect) Front() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.front...)
}

// Leaked is what reached the other origin: nothing, when the policy holds.
func (r *Redirect) Leaked() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.sink...)
}
