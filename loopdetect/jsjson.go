package loopdetect

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// This file holds the pieces that make Go write JSON exactly as JavaScript's
// JSON.stringify does (number formatting, string escaping, key order) and the
// streaming SHA-256 sink the repeat key is hashed through.

// keySink buffers small writes and hands large ones straight to SHA-256, so
// a 1 MiB write_file payload is hashed without being copied.
type keySink struct {
	h   hash.Hash
	buf []byte
	arr [512]byte // initial backing of buf
}

const (
	sinkDirectMin = 4096 // pieces at least this long bypass the buffer
	sinkFlushAt   = 8192
)

func (w *keySink) flush() {
	if len(w.buf) == 0 {
		return
	}
	if w.h == nil {
		w.h = sha256.New()
	}
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
}

func (w *keySink) writeByte(c byte) {
	w.buf = append(w.buf, c)
}

func (w *keySink) write(b []byte) {
	if len(b) >= sinkDirectMin {
		w.flush()
		if w.h == nil {
			w.h = sha256.New()
		}
		w.h.Write(b)
		return
	}
	w.buf = append(w.buf, b...)
	if len(w.buf) >= sinkFlushAt {
		w.flush()
	}
}

func (w *keySink) writeString(s string) {
	if len(s) >= sinkDirectMin {
		// The hasher only reads the bytes, so viewing the string's storage
		// as a slice saves copying a large payload.
		w.write(unsafe.Slice(unsafe.StringData(s), len(s)))
		return
	}
	w.buf = append(w.buf, s...)
	if len(w.buf) >= sinkFlushAt {
		w.flush()
	}
}

// sum returns the lowercase hex SHA-256 of everything written.
func (w *keySink) sum() string {
	var d [sha256.Size]byte
	if w.h == nil {
		d = sha256.Sum256(w.buf)
	} else {
		w.flush()
		w.h.Sum(d[:0])
	}
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], d[:])
	return string(out[:])
}

// appendJSNumber appends f formatted as JavaScript's Number::toString, which
// JSON.stringify uses; non-finite values become null as JSON.stringify writes them.
func appendJSNumber(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		return append(dst, '0') // also -0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest round-trip digits, as ECMAScript requires; Go picks the
	// closest candidate as well.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	// e is "d.ddddde±XX" or "de±XX".
	var digits [24]byte
	k := 0
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[k] = e[i]
			k++
		}
	}
	exp, _ := strconv.Atoi(string(e[i+1:]))
	n := exp + 1 // position of the decimal point relative to the digits
	d := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendJSEscapedUnit appends the JSON.stringify form of one UTF-16 code unit
// that needs escaping (a quote, a backslash, a control character or a lone
// surrogate).
func appendJSEscapedUnit(dst []byte, u uint16) []byte {
	switch u {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', hexDigits[u>>12], hexDigits[u>>8&0xf], hexDigits[u>>4&0xf], hexDigits[u&0xf])
}

const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// plainRun returns the length of the leading run of b that JSON.stringify
// writes unchanged and that is plain inside a JSON string literal: printable
// ASCII other than '"' and '\\'. It checks eight bytes at a time, because this
// scan runs over every byte of large payloads.
func plainRun(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ (swarOnes * '"')
		bs := x ^ (swarOnes * '\\')
		m := x & swarHigh                        // non-ASCII
		m |= (x - swarOnes*0x20) &^ x & swarHigh // below 0x20
		m |= (q - swarOnes) &^ q & swarHigh
		m |= (bs - swarOnes) &^ bs & swarHigh
		if m != 0 {
			// Borrows only spill into later bytes, so the lowest flagged
			// byte is a real hit.
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

// invalidUTF8Len returns how many bytes at the start of b (which does not
// begin with a valid UTF-8 sequence) decode to one U+FFFD under the WHATWG
// decoder Node uses: the maximal subpart of a well-formed sequence, or 1.
func invalidUTF8Len(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

// appendJSString appends s, taken as UTF-8 text, as JSON.stringify writes
// it. Invalid bytes become U+FFFD, as they would when Node decodes them.
func (w *keySink) jsString(s []byte) {
	w.writeByte('"')
	start := 0
	for i := 0; i < len(s); {
		i += plainRun(s[i:])
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			w.write(s[start:i])
			w.buf = appendJSEscapedUnit(w.buf, uint16(c))
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size <= 1 {
			w.write(s[start:i])
			w.buf = append(w.buf, "\uFFFD"...)
			i += invalidUTF8Len(s[i:])
			start = i
			continue
		}
		i += size
	}
	w.write(s[start:])
	w.writeByte('"')
}

// decodeWTF8 decodes one code point from well-formed WTF-8 (UTF-8 that may
// also encode lone surrogates, which is how keys holding escaped lone
// surrogates are kept).
func decodeWTF8(b []byte) (rune, int) {
	c := b[0]
	switch {
	case c < 0x80:
		return rune(c), 1
	case c < 0xE0:
		return rune(c&0x1F)<<6 | rune(b[1]&0x3F), 2
	case c < 0xF0:
		return rune(c&0x0F)<<12 | rune(b[1]&0x3F)<<6 | rune(b[2]&0x3F), 3
	default:
		return rune(c&0x07)<<18 | rune(b[1]&0x3F)<<12 | rune(b[2]&0x3F)<<6 | rune(b[3]&0x3F), 4
	}
}

// appendWTF8 appends r (which may be a surrogate) in WTF-8.
func appendWTF8(dst []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(dst, 0xED, byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(dst, r)
}

// utf16Units yields the UTF-16 code units of well-formed WTF-8 text one by one.
type utf16Units struct {
	b       []byte
	pending uint16 // low surrogate still to yield, or 0
}

func (u *utf16Units) next() (uint16, bool) {
	if u.pending != 0 {
		p := u.pending
		u.pending = 0
		return p, true
	}
	if len(u.b) == 0 {
		return 0, false
	}
	r, n := decodeWTF8(u.b)
	u.b = u.b[n:]
	if r >= 0x10000 {
		r -= 0x10000
		u.pending = uint16(0xDC00 + r&0x3FF)
		return uint16(0xD800 + r>>10), true
	}
	return uint16(r), true
}

// compareUTF16 orders two WTF-8 strings by UTF-16 code units, the order of
// JavaScript's default Array.prototype.sort.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	for i > 0 && a[i]&0xC0 == 0x80 {
		i--
	}
	ua, ub := utf16Units{b: a[i:]}, utf16Units{b: b[i:]}
	for {
		x, okA := ua.next()
		y, okB := ub.next()
		switch {
		case !okA && !okB:
			return 0
		case !okA:
			return -1
		case !okB:
			return 1
		case x != y:
			return int(x) - int(y)
		}
	}
}

// arrayIndex reports whether key is a JavaScript array index (the canonical
// decimal form of an integer in [0, 2^32-2]). Objects list such keys first,
// in numeric order, whatever order they were inserted in.
func arrayIndex(key []byte) (uint32, bool) {
	if len(key) == 0 || len(key) > 10 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var v uint64
	for _, c := range key {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxUint32-1 {
		return 0, false
	}
	return uint32(v), true
}

// compareJSKeys orders object keys as JSON.stringify emits a freshly built
// object whose keys were inserted in sorted order: array indices first,
// numerically, then the rest by UTF-16 code units.
func compareJSKeys(a, b []byte) int {
	ia, okA := arrayIndex(a)
	ib, okB := arrayIndex(b)
	switch {
	case okA && okB:
		return cmp.Compare(ia, ib)
	case okA:
		return -1
	case okB:
		return 1
	}
	return compareUTF16(a, b)
}
