package loopdetect

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
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

// NormalizeResult applies the rules above to one result's text, in one
// pass (a result may be a megabyte of test output, and the daemon digests
// every call's).
func NormalizeResult(s string) string {
	if !strings.ContainsAny(s, "\x1b0123456789/\\") {
		return s // every rule needs an escape, a digit or a path
	}
	var b strings.Builder
	b.Grow(len(s))
	i := 0
	for i < len(s) {
		c := s[i]
		boundary := i == 0 || !isWord(s[i-1])
		switch {
		case c == 0x1b:
			i = skipEscape(s, i)
			continue
		case c == '/' || (c >= 'A' && c <= 'Z' && i+1 < len(s) && s[i+1] == ':'):
			if n := tmpPath(s, i); n > 0 {
				b.WriteString("<tmp>")
				i = n
				continue
			}
		case boundary && isWord(c):
			if n, repl := token(s, i); n > i {
				b.WriteString(repl)
				i = n
				continue
			}
			// Not a value the rules replace: copy the whole word, so a
			// rule never starts inside one.
			j := i
			for j < len(s) && isWord(s[j]) {
				j++
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// ends reports whether position i of s ends a word.
func ends(s string, i int) bool { return i >= len(s) || !isWord(s[i]) }

// skipEscape returns the index after the escape sequence at i: CSI
// (ESC [ params final), OSC (ESC ] … BEL or ESC \), or ESC and one byte.
func skipEscape(s string, i int) int {
	i++
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		i++
		for i < len(s) && (s[i] >= 0x20 && s[i] <= 0x3f) {
			i++
		}
		if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
			i++
		}
		return i
	case ']':
		for i++; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return i
	}
	return i + 1
}

// tmpRoots are the temporary roots; the folder made in one is replaced too.
var tmpRoots = []string{"/private/var/folders/", "/var/folders/", "/tmp/", "/var/tmp/", "/dev/shm/"}

// tmpPath returns the index after a temporary root and the folder made in
// it at i (0: none). macOS's /var/folders/xx/yyy/T/ and Windows'
// C:\Users\u\AppData\Local\Temp\ count as roots.
func tmpPath(s string, i int) int {
	if i > 0 && (isWord(s[i-1]) || s[i-1] == '.' || s[i-1] == '/') {
		return 0
	}
	rest := s[i:]
	n := 0
	switch {
	case strings.HasPrefix(rest, "/private/var/folders/") || strings.HasPrefix(rest, "/var/folders/"):
		// two folders, then T/
		j := strings.Index(rest, "/folders/") + len("/folders/")
		for range 2 {
			k := segEnd(rest, j)
			if k == j || k >= len(rest) || rest[k] != '/' {
				return 0
			}
			j = k + 1
		}
		if !strings.HasPrefix(rest[j:], "T/") {
			return 0
		}
		n = j + 2
	case strings.HasPrefix(rest, "/tmp/"):
		n = 5
	case strings.HasPrefix(rest, "/var/tmp/"):
		n = 9
	case strings.HasPrefix(rest, "/dev/shm/"):
		n = 9
	case len(rest) > 3 && rest[1] == ':' && rest[2] == '\\' && strings.HasPrefix(rest[3:], "Users\\"):
		k := strings.Index(rest, "\\AppData\\Local\\Temp\\")
		if k < 0 || strings.ContainsAny(rest[:k], " \t\n\"'") {
			return 0
		}
		n = k + len("\\AppData\\Local\\Temp\\")
	default:
		return 0
	}
	k := segEnd(rest, n)
	if k == n {
		return 0
	}
	return i + k
}

// segEnd is the end of the path segment starting at j.
func segEnd(s string, j int) int {
	for j < len(s) {
		switch s[j] {
		case '/', '\\', ' ', '\t', '\n', '\r', '"', '\'', ':', ')', ']', ',':
			return j
		}
		j++
	}
	return j
}

// token matches the rules that start at a word (i is at a word boundary):
// it returns the index after the match and its replacement, or i.
func token(s string, i int) (int, string) {
	if isDigit(s[i]) {
		if n := dateTime(s, i); n > i {
			return n, "<time>"
		}
		if n := timeOfDay(s, i); n > i {
			return n, "<time>"
		}
		if n := i + 13; n <= len(s) && s[i] == '1' && allDigits(s[i:n]) && ends(s, n) {
			return n, "<time>" // epoch milliseconds
		}
	}
	if isHex(s[i]) {
		if n := uuid(s, i); n > i {
			return n, "<hex>"
		}
		if n := hexID(s, i); n > i {
			return n, "<hex>"
		}
	}
	if isDigit(s[i]) {
		if n := duration(s, i); n > i {
			return n, "<dur>"
		}
	}
	if n := pid(s, i); n > i {
		return n, "pid <n>"
	}
	return i, ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// digits returns the index after at most max (at least min) digits at i,
// or -1.
func digits(s string, i, lo, hi int) int {
	j := i
	for j < len(s) && j-i < hi && isDigit(s[j]) {
		j++
	}
	if j-i < lo {
		return -1
	}
	return j
}

// dateTime: dddd-dd-dd, optionally [T ]dd:dd[:dd[.d+]] and a zone.
func dateTime(s string, i int) int {
	j := digits(s, i, 4, 4)
	if j < 0 || j >= len(s) || s[j] != '-' {
		return i
	}
	if j = digits(s, j+1, 2, 2); j < 0 || j >= len(s) || s[j] != '-' {
		return i
	}
	if j = digits(s, j+1, 2, 2); j < 0 {
		return i
	}
	end := j
	if j < len(s) && (s[j] == 'T' || s[j] == ' ') {
		if k := clock(s, j+1, false); k > j+1 {
			end = k
			if end < len(s) && s[end] == 'Z' {
				end++
			} else if end+5 <= len(s) && (s[end] == '+' || s[end] == '-') && isDigit(s[end+1]) && isDigit(s[end+2]) {
				k := end + 3
				if s[k] == ':' {
					k++
				}
				if k+2 <= len(s) && isDigit(s[k]) && isDigit(s[k+1]) {
					end = k + 2
				}
			}
		}
	}
	if !ends(s, end) && end < len(s) && isDigit(s[end]) {
		return i
	}
	return end
}

// clock: dd:dd, with :dd (required when needSeconds) and a fraction.
func clock(s string, i int, needSeconds bool) int {
	lo := 2
	if needSeconds {
		lo = 1
	}
	j := digits(s, i, lo, 2)
	if j < 0 || j >= len(s) || s[j] != ':' {
		return i
	}
	if j = digits(s, j+1, 2, 2); j < 0 {
		return i
	}
	if j < len(s) && s[j] == ':' {
		k := digits(s, j+1, 2, 2)
		if k < 0 {
			return i
		}
		j = k
		if j+1 < len(s) && (s[j] == '.' || s[j] == ',') && isDigit(s[j+1]) {
			j = digits(s, j+1, 1, 64)
		}
	} else if needSeconds {
		return i
	}
	return j
}

// timeOfDay: d{1,2}:dd:dd[.d+], ending a word.
func timeOfDay(s string, i int) int {
	j := clock(s, i, true)
	if j == i || !ends(s, j) {
		return i
	}
	return j
}

// uuid: 8-4-4-4-12 hex digits, ending a word.
func uuid(s string, i int) int {
	j := i
	for g, n := range []int{8, 4, 4, 4, 12} {
		for k := 0; k < n; k++ {
			if j >= len(s) || !isHex(s[j]) {
				return i
			}
			j++
		}
		if g < 4 {
			if j >= len(s) || s[j] != '-' {
				return i
			}
			j++
		}
	}
	if !ends(s, j) {
		return i
	}
	return j
}

// hexID: 0x and hex digits, or 8+ hex digits holding a digit and a letter,
// ending a word.
func hexID(s string, i int) int {
	if i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && isHex(s[i+2]) {
		j := i + 2
		for j < len(s) && isHex(s[j]) {
			j++
		}
		if ends(s, j) {
			return j
		}
		return i
	}
	j := i
	digit, letter := false, false
	for j < len(s) && isHex(s[j]) {
		if isDigit(s[j]) {
			digit = true
		} else {
			letter = true
		}
		j++
	}
	if j-i < 8 || !digit || !letter || !ends(s, j) {
		return i
	}
	return j
}

// durUnits are the units of time a duration may end in, longest first.
var durUnits = []string{"nanoseconds", "microseconds", "milliseconds", "nanosecond", "microsecond", "millisecond",
	"seconds", "minutes", "second", "minute", "hours", "hour", "secs", "mins", "sec", "min", "ns", "µs", "us", "ms", "s"}

// duration: (\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|us|ms|s), or a number, an
// optional space and a unit word (seconds, ms, µs, minutes …), ending a
// word.
func duration(s string, i int) int {
	j := i
	// Go's compound form: 1h2m3.5s.
	for _, u := range []byte{'h', 'm'} {
		if k := digits(s, j, 1, 64); k > 0 && k < len(s) && s[k] == u && k+1 < len(s) && isDigit(s[k+1]) {
			j = k + 1
		}
	}
	k := digits(s, j, 1, 64)
	if k < 0 {
		return i
	}
	if k+1 < len(s) && s[k] == '.' && isDigit(s[k+1]) {
		k = digits(s, k+1, 1, 64)
	}
	for _, space := range []bool{false, true} {
		at := k
		if space {
			if at >= len(s) || s[at] != ' ' {
				break
			}
			at++
		}
		for _, u := range durUnits {
			if space && (u == "s" || u == "us" || u == "ns") {
				continue // "5 s", "3 us": too likely words
			}
			if !space && j > i && len(u) > 2 {
				continue // after 1h2m only the short units
			}
			if strings.HasPrefix(s[at:], u) && ends(s, at+len(u)) {
				return at + len(u)
			}
		}
	}
	return i
}

// pidWords precede a process id.
var pidWords = []string{"pid", "PID", "Pid", "process"}

// pid: pid, PID or process, an optional [:=#] and spaces, then digits.
func pid(s string, i int) int {
	for _, w := range pidWords {
		if !strings.HasPrefix(s[i:], w) || !ends(s, i+len(w)) {
			continue
		}
		j := i + len(w)
		for j < len(s) && s[j] == ' ' {
			j++
		}
		if j < len(s) && (s[j] == ':' || s[j] == '=' || s[j] == '#') {
			j++
		}
		for j < len(s) && s[j] == ' ' {
			j++
		}
		if k := digits(s, j, 1, 20); k > 0 && ends(s, k) {
			return k
		}
	}
	return i
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
