// Package scripttest is the scaffolding the scripted model servers share
// (modeltest, anthropictest, geminitest, responsestest): the loopback
// listener and its shutdown, the scripted delay, JSON error writing, the
// SSE writer with its injected faults (raw body, cut, hang), and rune-safe
// splitting of streamed text, and the script of requests received and
// responses to serve (Script); and Sleeps, the backoff recorder the
// clients' tests put in place of a real sleep. Each server keeps its own wire format; only
// what is the same in all of them lives here.
package scripttest

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unicode/utf8"
)

// Listen serves h on 127.0.0.1 until the test ends and returns the base
// URL and a channel closed at the end of the test, before the listener is
// closed, so handlers hanging on it return and Close does not block.
func Listen(t testing.TB, h http.HandlerFunc) (url string, closing <-chan struct{}) {
	t.Helper()
	c := make(chan struct{})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		close(c)
		srv.Close()
	})
	return srv.URL, c
}

// Wait sleeps d; false means the request or the server ended first and the
// handler should return without answering.
func Wait(r *http.Request, closing <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-closing:
	}
	return false
}

// WriteJSON writes a JSON body with status, Content-Type contentType and,
// when retryAfter is set, a Retry-After header.
func WriteJSON(w http.ResponseWriter, status int, contentType string, body []byte, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Faults are the stream faults a scripted response can ask for.
type Faults struct {
	// Raw, when set, is written as the whole body instead of the events.
	Raw string
	// CutAfter > 0 drops the connection after that many events.
	CutAfter int
	// Hang keeps the stream open (after the events, or at the cut) until
	// the client or the server gives up.
	Hang bool
}

// Stream answers 200 with the headers already set on w and writes events
// one by one, flushing each as a real server does, with f's faults. It
// returns true when every event was written and the stream did not hang,
// so the caller may write a closing frame.
func Stream(w http.ResponseWriter, r *http.Request, closing <-chan struct{}, f Faults, events [][]byte) bool {
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	hang := func() {
		flush()
		select {
		case <-r.Context().Done():
		case <-closing:
		}
	}
	if f.Raw != "" {
		_, _ = w.Write([]byte(f.Raw))
		if f.Hang {
			hang()
		}
		return false
	}
	sent := 0
	for _, ev := range events {
		if _, err := w.Write(ev); err != nil {
			return false
		}
		sent++
		if f.CutAfter > 0 && sent >= f.CutAfter {
			if f.Hang {
				hang()
				return false
			}
			flush()
			panic(http.ErrAbortHandler) // drops the connection mid-body
		}
		flush()
	}
	if f.Hang {
		hang()
		return false
	}
	return true
}

// Split cuts s into pieces of about n bytes without splitting a rune.
func Split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}
