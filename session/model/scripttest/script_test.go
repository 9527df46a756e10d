package scripttest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScriptResponderThenQueues(t *testing.T) {
	var s Script[string, string]
	s.Add("", "main-1")
	s.Add("weather", "keyed-1")
	s.SetResponder(func(req string) (string, bool) {
		if req == "ask responder" {
			// The lock is not held: the responder may add to the script.
			s.Add("", "main-2")
			return "from responder", true
		}
		return "", false
	})
	next := func(req, first string) string {
		t.Helper()
		s.Record(req)
		r, ok, exhausted := s.Next(req, first)
		if !ok {
			return "exhausted: " + exhausted
		}
		return r
	}
	got := []string{
		next("ask responder", "hi"),
		next("a", "what is the weather"),
		next("b", "hi"),
		next("c", "hi"),
		next("d", "hi"),
		next("e", "weather again"),
	}
	want := []string{"from responder", "keyed-1", "main-1", "main-2", "exhausted: 2 responses", `exhausted: 1 responses matching "weather"`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("served %q, want %q", got, want)
	}
	if n := s.Served(); n != 2 {
		t.Errorf("Served() = %d, want 2 (the responder's and the keyed one do not count)", n)
	}
	if r := s.Requests(); strings.Join(r, ",") != "ask responder,a,b,c,d,e" {
		t.Errorf("Requests() = %q", r)
	}
}

func TestSleepsRecordAndHonourTheContext(t *testing.T) {
	var s Sleeps
	require.NoError(t, s.Sleep(t.Context(), time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, s.Sleep(ctx, 2*time.Second), context.Canceled)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, s.Got())
}
