package loopdetect

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNormalizeResult: each rule on its own, with a near miss it must keep.
func TestNormalizeResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule, a, b string // a and b must normalise alike
		differ     string // must not normalise like a
	}{
		{"ansi colour", "\x1b[31mFAIL\x1b[0m TestX", "FAIL TestX", "PASS TestX"},
		{"ansi osc title", "\x1b]0;make\x07done", "done", "dune"},
		{"rfc3339", "started 2026-12-01T21:03:04.123Z", "started 2027-01-02T01:02:03Z", "started later"},
		{"date time with space", "at 2026-12-01 21:03:04", "at 2025-05-05 10:00:00", "at noon"},
		{"time of day", "[21:03:04.551] build failed", "[09:15:00.000] build failed", "[21:03:04.551] build passed"},
		{"epoch ms", `{"ts":1796150358206}`, `{"ts":1796150362418}`, `{"ts":17}`},
		{"seconds", "ok  \tpkg\t0.012s", "ok  \tpkg\t1.5s", "FAIL\tpkg\t0.012s"},
		{"millis", "took 123ms", "took 7ms", "took many"},
		{"compound", "elapsed 1m2.5s", "elapsed 3h4m5s", "elapsed never"},
		{"word unit", "Ran 3 tests in 3.2 seconds", "Ran 3 tests in 0.4 seconds", "Ran 4 tests in 3.2 seconds"},
		{"micro", "45 µs per op", "3 µs per op", "45 ops"},
		{"tmp", "open /tmp/go-build3321/b001/x.test: no such file", "open /tmp/go-build9/b001/x.test: no such file",
			"open /tmp/go-build9/b002/x.test: no such file"},
		{"macos tmp", "wrote /var/folders/xy/abc123/T/TestFoo99/out.txt", "wrote /var/folders/qq/zz9/T/TestFoo12/out.txt",
			"wrote /home/u/out.txt"},
		{"windows tmp", `C:\Users\u\AppData\Local\Temp\tmp1234\a.txt`, `C:\Users\u\AppData\Local\Temp\tmp99\a.txt`, `C:\work\a.txt`},
		{"pid", "server exited (pid 4242)", "server exited (pid 77)", "server exited (code 1)"},
		{"pid equals", "pid=12 killed", "pid=99999 killed", "uid=12 killed"},
		{"process", "process 4242 exited with status 1", "process 31 exited with status 1", "process 31 exited with status 2"},
		{"hex id", "commit 3168d4a9e1 pushed", "commit 9cb29c2ffa pushed", "commit main pushed"},
		{"uuid", "request 01a2c6f0-3b7e-7d21-9c4e-58f1a0b2c3d4 failed", "request 9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0 failed", "request failed"},
		{"address", "panic at 0x7ffd1234abcd", "panic at 0x1", "panic at main"},
	}
	for _, tt := range tests {
		na, nb := NormalizeResult(tt.a), NormalizeResult(tt.b)
		assert.Equal(t, na, nb, "%s: %q and %q", tt.rule, tt.a, tt.b)
		assert.NotEqual(t, na, NormalizeResult(tt.differ), "%s: %q", tt.rule, tt.differ)
	}
	// What counts stays: counts, exit codes, line numbers, plain words and
	// numbers, hex-looking words without a digit.
	for _, keep := range []string{"3 passed, 1 failed", "exit status 2", "main.go:42:7: undefined: x", "deadbeef cafe", "12345678"} {
		assert.Equal(t, keep, NormalizeResult(keep))
	}
}

// TestResultHash: a failure's text is compared as an error; the digest
// round-trips through the transcript's form.
func TestResultHash(t *testing.T) {
	t.Parallel()
	assert.Equal(t, ResultHash(true, "boom after 3ms"), ResultHash(true, "boom after 9ms"))
	assert.NotEqual(t, ResultHash(true, "boom"), ResultHash(false, "boom"))
	assert.NotEqual(t, ResultHash(false, "1 failed"), ResultHash(false, "2 failed"))
	h := ResultHash(false, "x")
	s := FormatResultHash(h)
	require.Len(t, s, 16)
	back, ok := ParseResultHash(s)
	require.True(t, ok)
	assert.Equal(t, h, back)
	_, ok = ParseResultHash("xyz")
	assert.False(t, ok)
}

// batch feeds one call of key with result res to tr: counted, checked,
// then (when it runs) its result.
func batch(tr *CapTracker, key, res string, skip bool) Verdict {
	v := tr.RecordBatch([]string{key}, skip)
	if !v.Stops() {
		tr.ObserveResult(key, ResultHash(false, res))
	}
	return v
}

// TestResultSignal: with Signal results a repeat counts only when its
// result repeats an earlier one of the key; alternation repeats; the
// threshold, soft cap and backstop are the calls signal's.
func TestResultSignal(t *testing.T) {
	t.Parallel()
	results := Cap{Max: 10, Signal: SignalResults}
	t.Run("new results never stuck", func(t *testing.T) {
		tr := NewCapTracker(results)
		for i := range 99 {
			v := batch(tr, "test", "failures: "+string(rune('a'+i%26))+string(rune('a'+i/26)), false)
			require.False(t, v.Stops(), "call %d", i+1)
		}
		assert.Equal(t, 99, tr.MaxKeyRepeat())
		assert.Equal(t, 1, tr.ResultRepeat())
		// ... until the backstop, which still bounds the turn.
		v := batch(tr, "test", "z", false)
		assert.Equal(t, Verdict{Loop: LoopTurnToolCallCap, Reason: CapBackstop}, batch(tr, "test", "zz", false), "%v", v)
	})
	t.Run("same result stuck as calls", func(t *testing.T) {
		calls, res := NewCapTracker(Cap{Max: 10}), NewCapTracker(results)
		stopAt := func(tr *CapTracker) int {
			for i := 1; i <= 40; i++ {
				if batch(tr, "k", "same", true).Stops() {
					return i
				}
			}
			return 0
		}
		assert.Equal(t, 11, stopAt(calls))
		assert.Equal(t, 11, stopAt(res), "past the soft cap, repeats known: the same call")
	})
	t.Run("alternating results are repeats", func(t *testing.T) {
		tr := NewCapTracker(results)
		for i := range 7 {
			batch(tr, "poll", []string{"A", "B"}[i%2], false)
		}
		// A B A B A B A: the first A and B are new, the next five repeat.
		assert.Equal(t, 6, tr.ResultRepeat())
	})
	t.Run("global duplicate on result repeats", func(t *testing.T) {
		tr := NewCapTracker(Cap{Max: 100, Signal: SignalResults})
		for i := range 6 {
			require.False(t, batch(tr, "k", "r"+string(rune('0'+i)), false).Stops(), "new results: no duplicate")
		}
		tr = NewCapTracker(Cap{Max: 100, Signal: SignalResults})
		stop := 0
		for i := 1; i <= 10 && stop == 0; i++ {
			if batch(tr, "k", "same", false).Stops() {
				stop = i
			}
		}
		assert.Equal(t, 7, stop, "the 6th same result is known after the 6th call; the 7th stops")
	})
	t.Run("fall back to calls", func(t *testing.T) {
		tr := NewCapTracker(results)
		tr.FallBackToCalls()
		for range 6 {
			tr.ObserveKey("k")
		}
		tr.AddCalls(11)
		assert.Equal(t, Verdict{Loop: LoopTurnToolCallCap, Reason: CapStuck}, tr.Check(true))
	})
	t.Run("reset clears results", func(t *testing.T) {
		tr := NewCapTracker(results)
		batch(tr, "k", "x", true)
		batch(tr, "k", "x", true)
		assert.Equal(t, 2, tr.ResultRepeat())
		tr.Reset()
		assert.Equal(t, 0, tr.ResultRepeat())
	})
}

// TestWarnRecovery: under Recovery warn the first firing warns and the
// turn goes on; it stops only when a call at or past the threshold comes
// again; explicit caps and the backstop are not softened.
func TestWarnRecovery(t *testing.T) {
	t.Parallel()
	for _, signal := range []StuckSignal{SignalCalls, SignalResults} {
		t.Run(string(signal), func(t *testing.T) {
			c := Cap{Max: 10, Signal: signal, Recovery: RecoveryWarn}
			run := func(script func(i int) string) (warnAt, stopAt int, v Verdict) {
				tr := NewCapTracker(c)
				for i := 1; i <= 60; i++ {
					v = batch(tr, script(i), "same", true)
					if v.Warn && warnAt == 0 {
						warnAt = i
					}
					if v.Stops() {
						return warnAt, i, v
					}
				}
				return warnAt, 0, v
			}
			// Stuck on one call: warned where "stop" would halt, stopped at
			// the next call of it.
			warnAt, stopAt, v := run(func(int) string { return "k" })
			assert.Equal(t, 11, warnAt)
			assert.Equal(t, 12, stopAt)
			assert.Equal(t, Verdict{Loop: LoopTurnToolCallCap, Reason: CapStuckAfterWarning, AfterWarning: true}, v)
			// A model that changes approach after the warning goes on.
			warnAt, stopAt, _ = run(func(i int) string {
				if i <= 11 {
					return "k"
				}
				return "other" + string(rune('a'+i))
			})
			assert.Equal(t, 11, warnAt)
			assert.Zero(t, stopAt, "changed approach: no second firing")
		})
	}
	t.Run("duplicate", func(t *testing.T) {
		tr := NewCapTracker(Cap{Max: 100, Recovery: RecoveryWarn})
		var vs []Verdict
		for range 7 {
			vs = append(vs, tr.RecordBatch([]string{"k"}, false))
		}
		assert.Equal(t, Verdict{Loop: LoopGlobalToolCallDuplicate, Warn: true}, vs[5])
		assert.Equal(t, Verdict{Loop: LoopGlobalToolCallDuplicate, AfterWarning: true}, vs[6])
	})
	t.Run("explicit and backstop halt at once", func(t *testing.T) {
		tr := NewCapTracker(Cap{Max: 2, Explicit: true, Recovery: RecoveryWarn})
		assert.Equal(t, Verdict{Loop: LoopTurnToolCallCap, Reason: CapExplicit}, tr.RecordBatch([]string{"a", "b", "c"}, true))
		tr = NewCapTracker(Cap{Max: 2, Recovery: RecoveryWarn})
		assert.Equal(t, Verdict{Loop: LoopTurnToolCallCap, Reason: CapBackstop},
			tr.RecordBatch(make([]string, 21), true))
	})
	t.Run("stop is the reference", func(t *testing.T) {
		for _, r := range []LoopRecovery{"", RecoveryStop} {
			tr := NewCapTracker(Cap{Max: 100, Recovery: r})
			var last Verdict
			for range 6 {
				last = tr.RecordBatch([]string{"k"}, false)
			}
			assert.Equal(t, Verdict{Loop: LoopGlobalToolCallDuplicate}, last)
		}
	})
}
