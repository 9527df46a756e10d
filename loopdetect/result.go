package loopdetect

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The result signal (model.stuckSignal = "results") compares what a call
// returned with what earlier calls of the same (tool, args) key returned.
// Two results are the same when they are equal after NormalizeResult has
// replaced what changes between runs without changing what they say:
//
//   - ANSI escape sequences (colour, cursor moves, OSC titles): removed;
//   - timestamps: ISO 8601 / RFC 3339 date-times ("2026-12-01T21:03:04.5Z",
//     "2026-12-01 21:03:04"), dates ("2026-12-01"), times of day
//     ("21:03:04", "21:03:04.123") and epoch milliseconds (13 digits from
//     1000000000000): "<time>";
//   - durations: a number with a unit of time ("0.42s", "123ms", "1m2.5s",
//     "3.2 seconds", "45 µs"): "<dur>";
//   - temporary paths: the temporary root and the folder made in it
//     ("/tmp/go-build123/", "/var/folders/xy/abc/T/TestX99/",
//     "C:\Users\u\AppData\Local\Temp\tmp12"): "<tmp>/", the rest kept;
//   - process ids: the number after "pid", "PID" or "process" ("pid 4242",
//     "pid=4242", "PID: 4242", "process 4242"): "pid <n>";
//   - hex ids: UUIDs, 0x addresses and runs of 8 or more hex digits holding
//     both a digit and a letter (commit hashes, request ids): "<hex>".
//
// Everything else counts: a test count, an exit code, a line number, the
// name of the failing test. Decision: the rules replace only values whose
// shape says what they are; a result that differs in anything else is a
// new result, so a productive turn (each test run failing differently) is
// never taken for a stuck one. A missed volatile value only makes a stuck
// turn look productive until the backstop, as without this signal.

var (
	ansiRe = regexp.MustCompile(`\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])`)
	timeRe = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b|\b1\d{12}\b`)
	durRe  = regexp.MustCompile(`\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?(?:ns|µs|us|ms|s)\b|\b\d+(?:\.\d+)? ?(?:nanoseconds?|microseconds?|milliseconds?|seconds?|secs?|ms|minutes?|mins?|hours?|µs)\b`)
	tmpRe  = regexp.MustCompile(`(?:/private)?/var/folders/[^/\s]+/[^/\s]+/T/[^/\s"':]+|/(?:tmp|var/tmp|dev/shm)/[^/\s"':]+|[A-Za-z]:\\Users\\[^\\\s]+\\AppData\\Local\\Temp\\[^\\\s"':]+`)
	pidRe  = regexp.MustCompile(`\b(pid|PID|Pid|process)(\s*[:=#]?\s*)\d+\b`)
	hexRe  = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b|\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{8,}\b`)
)

// NormalizeResult applies the rules above to one result's text.
func NormalizeResult(s string) string {
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansiRe.ReplaceAllString(s, "")
	}
	if !strings.ContainsAny(s, "0123456789") {
		return s // every rule but the ANSI one needs a digit
	}
	s = timeRe.ReplaceAllString(s, "<time>")
	s = durRe.ReplaceAllString(s, "<dur>")
	s = tmpRe.ReplaceAllLiteralString(s, "<tmp>")
	s = pidRe.ReplaceAllString(s, "pid <n>")
	s = hexRe.ReplaceAllStringFunc(s, func(h string) string {
		if len(h) == 36 || strings.HasPrefix(h, "0x") || (strings.ContainsAny(h, "0123456789") && strings.ContainsAny(h, "abcdefABCDEF")) {
			return "<hex>"
		}
		return h
	})
	return s
}

// ResultHash is what the result signal compares for one call: a 64-bit
// digest of the normalised result text and whether the call failed (a
// failed call's text is its error), so a failure and a success with the
// same text differ. Only the digest is kept (and written in the
// transcript's tool_result record as resultHash), never the text a second
// time.
func ResultHash(failed bool, text string) uint64 {
	h := sha256.New()
	if failed {
		h.Write([]byte("error\x00"))
	} else {
		h.Write([]byte("ok\x00"))
	}
	h.Write([]byte(NormalizeResult(text)))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// FormatResultHash is a digest as the transcript writes it: 16 hex digits.
func FormatResultHash(h uint64) string { return fmt.Sprintf("%016x", h) }

// ParseResultHash reads a digest FormatResultHash wrote.
func ParseResultHash(s string) (uint64, bool) {
	if len(s) != 16 {
		return 0, false
	}
	h, err := strconv.ParseUint(s, 16, 64)
	return h, err == nil
}
