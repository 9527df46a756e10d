package scripttest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitKeepsRunesWhole(t *testing.T) {
	s := "héllo wörld ☃☃"
	parts := Split(s, 2)
	if strings.Join(parts, "") != s {
		t.Fatalf("pieces %q do not rejoin to %q", parts, s)
	}
	for _, p := range parts {
		if !utf8.ValidString(p) || len(p) > 4 {
			t.Fatalf("piece %q splits a rune or is too long", p)
		}
	}
	if got := Split("", 3); got != nil {
		t.Fatalf("Split of empty = %q, want nil", got)
	}
}

// TestStream checks the three endings a scripted stream has: all events
// then true, a raw body instead of the events, and a cut that drops the
// connection after CutAfter events.
func TestStream(t *testing.T) {
	faults := make(chan Faults, 1)
	dones := make(chan bool, 1)
	var closing <-chan struct{}
	url, c := Listen(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := <-faults
		done := false
		defer func() { dones <- done }() // sent even when a cut panics
		done = Stream(w, r, closing, f, [][]byte{[]byte("data: 1\n\n"), []byte("data: 2\n\n")})
	})
	closing = c
	get := func(f Faults) (string, bool, error) {
		faults <- f
		resp, err := http.Get(url)
		if err != nil {
			return "", false, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done := <-dones
		return string(b), done, err
	}
	if body, done, err := get(Faults{}); err != nil || body != "data: 1\n\ndata: 2\n\n" || !done {
		t.Fatalf("plain stream: body %q, err %v, done %v", body, err, done)
	}
	if body, done, err := get(Faults{Raw: "data: raw\n\n"}); err != nil || body != "data: raw\n\n" || done {
		t.Fatalf("raw stream: body %q, err %v, done %v", body, err, done)
	}
	if body, _, err := get(Faults{CutAfter: 1}); err == nil {
		t.Fatalf("cut stream: body %q read without error", body)
	}
}
