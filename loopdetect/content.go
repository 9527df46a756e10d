package loopdetect

import (
	"crypto/sha256"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// contentTracker is the chanting detector's state. Positions and lengths are
// UTF-16 code units, as in the reference (Decision 2 for acpd).
type contentTracker struct {
	history []uint16
	stats   map[[sha256.Size]byte][]int
	index   int
}

func (c *contentTracker) reset() {
	c.history = c.history[:0]
	clear(c.stats)
	c.index = 0
}

// contentFlags are the markdown structure signals of one content delta.
type contentFlags struct {
	fences  int
	reset   bool // table, list item, heading, blockquote, fence or divider
	divider bool
}

func classifyContent(s string) contentFlags {
	f := contentFlags{fences: strings.Count(s, "```"), divider: isDivider(s)}
	f.reset = f.fences > 0 || f.divider || atLineStart(s, startsTableOrList) ||
		atLineStart(s, startsHeadingOrQuote)
	return f
}

// atLineStart runs match at the start of s and after every '\n', like a
// reference regex anchored on (^|\n).
func atLineStart(s string, match func(string) bool) bool {
	if match(s) {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' && match(s[i+1:]) {
			return true
		}
	}
	return false
}

// firstRune returns the first rune of s, or -1 when s is empty.
func firstRune(s string) (rune, int) {
	if s == "" {
		return -1, 0
	}
	return utf8.DecodeRuneInString(s)
}

func startsWithSpace(s string) bool {
	r, _ := firstRune(s)
	return r >= 0 && isJSSpace(r)
}

// startsTableOrList covers the reference's \s*(\|.*\||[|+-]{3,}),
// \s*[-*+]\s and \s*\d+\.\s after a line start.
func startsTableOrList(s string) bool {
	t := s[spaceLen(s):]
	if strings.HasPrefix(t, "|") {
		// "." in a JavaScript regex stops at line terminators.
		for _, r := range t[1:] {
			if r == '|' {
				return true
			}
			if r == '\n' || r == '\r' || r == 0x2028 || r == 0x2029 {
				break
			}
		}
	}
	if len(t) >= 3 && strings.IndexByte("|+-", t[0]) >= 0 && strings.IndexByte("|+-", t[1]) >= 0 &&
		strings.IndexByte("|+-", t[2]) >= 0 {
		return true
	}
	if t != "" && strings.IndexByte("-*+", t[0]) >= 0 && startsWithSpace(t[1:]) {
		return true
	}
	d := 0
	for d < len(t) && t[d] >= '0' && t[d] <= '9' {
		d++
	}
	return d > 0 && d < len(t) && t[d] == '.' && startsWithSpace(t[d+1:])
}

// startsHeadingOrQuote covers #+\s and >\s right at a line start (no indent).
func startsHeadingOrQuote(s string) bool {
	h := 0
	for h < len(s) && s[h] == '#' {
		h++
	}
	if h > 0 && startsWithSpace(s[h:]) {
		return true
	}
	return strings.HasPrefix(s, ">") && startsWithSpace(s[1:])
}

// isDivider reports a delta made only of - + _ = * and box-drawing characters.
func isDivider(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r == '-' || r == '+' || r == '_' || r == '=' || r == '*':
		case r >= 0x2500 && r <= 0x257F:
		default:
			return false
		}
	}
	return true
}

// appendUTF16 appends the UTF-16 code units of s (invalid UTF-8 becomes U+FFFD).
func appendUTF16(dst []uint16, s string) []uint16 {
	for _, r := range s {
		dst = utf16.AppendRune(dst, r)
	}
	return dst
}

// chunkHash is SHA-256 over the UTF-8 encoding of a chunk, with lone
// surrogates (a chunk can split a pair) written as U+FFFD as Node does.
func chunkHash(chunk []uint16, buf []byte) ([sha256.Size]byte, []byte) {
	buf = buf[:0]
	for i := 0; i < len(chunk); i++ {
		u := chunk[i]
		switch {
		case u < 0xD800 || u > 0xDFFF:
			buf = utf8.AppendRune(buf, rune(u))
		case u <= 0xDBFF && i+1 < len(chunk) && chunk[i+1] >= 0xDC00 && chunk[i+1] <= 0xDFFF:
			buf = utf8.AppendRune(buf, utf16.DecodeRune(rune(u), rune(chunk[i+1])))
			i++
		default:
			buf = utf8.AppendRune(buf, utf8.RuneError)
		}
	}
	return sha256.Sum256(buf), buf
}

// add appends s and scans the new chunks; it reports a chant.
func (c *contentTracker) add(s string) bool {
	c.history = appendUTF16(c.history, s)
	c.truncate()
	if c.stats == nil {
		c.stats = make(map[[sha256.Size]byte][]int)
	}
	var buf []byte
	for c.index+ContentChunkSize <= len(c.history) {
		chunk := c.history[c.index : c.index+ContentChunkSize]
		var h [sha256.Size]byte
		h, buf = chunkHash(chunk, buf)
		if c.loopAt(chunk, h) {
			return true
		}
		c.index++
	}
	return false
}

func (c *contentTracker) loopAt(chunk []uint16, h [sha256.Size]byte) bool {
	indices, ok := c.stats[h]
	if !ok {
		c.stats[h] = []int{c.index}
		return false
	}
	first := indices[0]
	if !slices.Equal(c.history[first:first+ContentChunkSize], chunk) {
		return false // a hash collision, ignored as the reference does
	}
	indices = append(indices, c.index)
	c.stats[h] = indices
	if len(indices) < ContentLoopThreshold {
		return false
	}
	recent := indices[len(indices)-ContentLoopThreshold:]
	// average distance (last-first)/9 <= 1.5 × chunk size, in integers.
	return 2*(recent[len(recent)-1]-recent[0]) <= maxAverageChunkDistanceX2*(ContentLoopThreshold-1)
}

// truncate keeps the last MaxHistoryLength units and shifts recorded positions.
func (c *contentTracker) truncate() {
	if len(c.history) <= MaxHistoryLength {
		return
	}
	cut := len(c.history) - MaxHistoryLength
	c.history = c.history[:copy(c.history, c.history[cut:])]
	c.index = max(0, c.index-cut)
	for h, idx := range c.stats {
		kept := idx[:0]
		for _, i := range idx {
			if i-cut >= 0 {
				kept = append(kept, i-cut)
			}
		}
		if len(kept) == 0 {
			delete(c.stats, h)
		} else {
			c.stats[h] = kept
		}
	}
}
