package loopdetect

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// maxJSONDepth bounds nesting of tool arguments, as encoding/json does; it
// keeps a hostile argument from exhausting the stack.
const maxJSONDepth = 10000

// CanonicalToolName resolves a legacy tool alias (search_file_content,
// replace, task) to its current name; any other name, including inherited
// JavaScript property names such as "toString", comes back unchanged.
func CanonicalToolName(name string) string {
	switch name {
	case "search_file_content":
		return "grep_search"
	case "replace":
		return "edit"
	case "task":
		return "agent"
	}
	return name
}

// ToolCallRepeatKey returns the repeat key of a tool call whose arguments are
// already decoded (map[string]any, []any, string, float64, json.Number, bool,
// nil, or anything encoding/json can marshal): the lowercase hex SHA-256 of
// CanonicalToolName(toolName) + ":" + JSON.stringify of the key-sorted args.
// Nil args hash as JSON null; values nested deeper than 10000 levels hash as null.
func ToolCallRepeatKey(toolName string, args any) string {
	var w keySink
	w.buf = w.arr[:0]
	w.toolName(toolName)
	w.anyValue(args, 0)
	return w.sum()
}

// ToolCallRepeatKeyJSON returns the repeat key of a tool call whose arguments
// are raw JSON as the model sent them. It equals what the reference gets from
// JSON.parse followed by the key-sorted JSON.stringify, including number
// rounding and duplicate keys (the last one wins). Empty or all-whitespace
// args count as {}. Invalid JSON is an error naming the offset.
func ToolCallRepeatKeyJSON(toolName string, args []byte) (string, error) {
	var w keySink
	w.buf = w.arr[:0]
	w.toolName(toolName)
	if err := w.rawJSON(args); err != nil {
		return "", err
	}
	return w.sum(), nil
}

// toolName writes the canonical name and the ":" separator.
func (w *keySink) toolName(name string) {
	name = CanonicalToolName(name)
	if utf8.ValidString(name) {
		w.writeString(name)
	} else {
		w.buf = appendSanitized(w.buf, bytesOf(name))
	}
	w.writeByte(':')
}

// rawJSON parses args and writes their canonical form.
func (w *keySink) rawJSON(args []byte) error {
	var p jsonParser
	return w.rawJSONWith(&p, args)
}

// RepeatKeyer computes ToolCallRepeatKeyJSON keys reusing its parse and
// hash buffers, for a caller that keys many calls in a row (`acpd stats`
// re-keying recorded turns): the one-shot function's buffers escape to the
// heap on every call. The zero value is ready; a RepeatKeyer is not safe
// for concurrent use.
type RepeatKeyer struct {
	w keySink
	p jsonParser
}

// KeyJSON is ToolCallRepeatKeyJSON.
func (k *RepeatKeyer) KeyJSON(toolName string, args []byte) (string, error) {
	w := &k.w
	w.h = nil
	w.buf = w.arr[:0]
	w.toolName(toolName)
	if err := w.rawJSONWith(&k.p, args); err != nil {
		return "", err
	}
	return w.sum(), nil
}

// rawJSONWith is rawJSON with the caller's parser.
func (w *keySink) rawJSONWith(p *jsonParser, args []byte) error {
	p.init(args)
	p.skipSpace()
	if p.pos == len(args) {
		w.buf = append(w.buf, "{}"...)
		return nil
	}
	root, err := p.value(0)
	if err != nil {
		return err
	}
	p.skipSpace()
	if p.pos != len(args) {
		return p.errorf("unexpected data after the top-level value")
	}
	p.emit(w, root)
	return nil
}

// bytesOf views a string's bytes without copying; callers only read them.
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// appendSanitized appends b with every invalid UTF-8 sequence replaced by
// U+FFFD, as Node would decode it.
func appendSanitized(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			dst = append(dst, "\uFFFD"...)
			i += invalidUTF8Len(b[i:])
			continue
		}
		dst = append(dst, b[i:i+size]...)
		i += size
	}
	return dst
}

// anyValue writes a decoded Go value as the reference would serialise the
// equivalent JavaScript value.
func (w *keySink) anyValue(v any, depth int) {
	if depth > maxJSONDepth {
		w.buf = append(w.buf, "null"...)
		return
	}
	switch x := v.(type) {
	case nil:
		w.buf = append(w.buf, "null"...)
	case bool:
		w.buf = strconv.AppendBool(w.buf, x)
	case string:
		w.jsString(bytesOf(x))
	case float64:
		w.buf = appendJSNumber(w.buf, x)
	case float32:
		w.buf = appendJSNumber(w.buf, float64(x))
	case int:
		w.buf = appendJSNumber(w.buf, float64(x))
	case int64:
		w.buf = appendJSNumber(w.buf, float64(x))
	case int32:
		w.buf = appendJSNumber(w.buf, float64(x))
	case uint64:
		w.buf = appendJSNumber(w.buf, float64(x))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !isRangeErr(err) {
			w.buf = append(w.buf, "null"...)
			return
		}
		w.buf = appendJSNumber(w.buf, f)
	case []any:
		w.writeByte('[')
		for i, e := range x {
			if i > 0 {
				w.writeByte(',')
			}
			w.anyValue(e, depth+1)
		}
		w.writeByte(']')
	case map[string]any:
		// sortKey is the key as Node would see it (invalid UTF-8 replaced).
		type entry struct{ sortKey, key string }
		entries := make([]entry, 0, len(x))
		for k := range x {
			sk := k
			if !utf8.ValidString(k) {
				sk = string(appendSanitized(nil, bytesOf(k)))
			}
			entries = append(entries, entry{sk, k})
		}
		slices.SortFunc(entries, func(a, b entry) int {
			return compareJSKeys(bytesOf(a.sortKey), bytesOf(b.sortKey))
		})
		w.writeByte('{')
		for i, e := range entries {
			if i > 0 {
				w.writeByte(',')
			}
			w.jsString(bytesOf(e.sortKey))
			w.writeByte(':')
			w.anyValue(x[e.key], depth+1)
		}
		w.writeByte('}')
	case json.RawMessage:
		w.rawOrString(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			w.buf = append(w.buf, "null"...)
			return
		}
		w.rawOrString(b)
	}
}

// rawOrString writes raw JSON canonically, or as a JSON string of its text
// when it does not parse (the reference keeps unparsable arguments as text).
func (w *keySink) rawOrString(raw []byte) {
	var p jsonParser
	p.init(raw)
	p.skipSpace()
	if p.pos == len(raw) {
		w.buf = append(w.buf, "null"...)
		return
	}
	root, err := p.value(0)
	if err == nil {
		p.skipSpace()
		if p.pos != len(raw) {
			err = p.errorf("unexpected data after the top-level value")
		}
	}
	if err != nil {
		w.jsString(raw)
		return
	}
	p.emit(w, root)
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// jsonParser turns raw JSON into a tree whose leaves already hold their
// JSON.stringify text. Leaves point into the input whenever the reference
// would write the same bytes back, so large strings are never copied.
type jsonParser struct {
	src     []byte
	pos     int
	scratch []byte // rebuilt strings, reformatted numbers, decoded keys; append-only
	nodes   []jnode
	elems   []int    // children of arrays, contiguous per array
	members []member // members of objects, sorted and deduplicated per object
	stackE  []int
	stackM  []member

	// Inline backing arrays: typical arguments parse without allocating.
	nodeBuf    [16]jnode
	memberBuf  [8]member
	stackMBuf  [8]member
	elemBuf    [8]int
	stackEBuf  [8]int
	scratchBuf [128]byte
}

func (p *jsonParser) init(src []byte) {
	p.src = src
	p.pos = 0
	p.nodes = p.nodeBuf[:0]
	p.members = p.memberBuf[:0]
	p.stackM = p.stackMBuf[:0]
	p.elems = p.elemBuf[:0]
	p.stackE = p.stackEBuf[:0]
	p.scratch = p.scratchBuf[:0]
}

type nodeKind uint8

const (
	nodeLeaf nodeKind = iota
	nodeArray
	nodeObject
)

type jnode struct {
	kind   nodeKind
	canon  []byte // leaf: its JSON.stringify text
	lo, hi int    // containers: range in elems or members
}

type member struct {
	key      []byte // decoded key in WTF-8 (lone surrogates kept)
	keyCanon []byte // its JSON.stringify text
	index    uint32 // array-index value when isIndex
	isIndex  bool
	val      int
}

// SyntaxError reports invalid JSON in tool arguments.
type SyntaxError struct {
	Offset int // byte offset into the arguments
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("loopdetect: args: %s at offset %d", e.Msg, e.Offset)
}

func (p *jsonParser) errorf(format string, a ...any) error {
	return &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf(format, a...)}
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) leaf(canon []byte) int {
	p.nodes = append(p.nodes, jnode{kind: nodeLeaf, canon: canon})
	return len(p.nodes) - 1
}

func (p *jsonParser) value(depth int) (int, error) {
	if depth > maxJSONDepth {
		return 0, p.errorf("nesting deeper than %d", maxJSONDepth)
	}
	if p.pos >= len(p.src) {
		return 0, p.errorf("unexpected end of input")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		canon, _, err := p.str(false)
		if err != nil {
			return 0, err
		}
		return p.leaf(canon), nil
	case c == '-' || (c >= '0' && c <= '9'):
		canon, err := p.number()
		if err != nil {
			return 0, err
		}
		return p.leaf(canon), nil
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	default:
		return 0, p.errorf("invalid character %q", c)
	}
}

func (p *jsonParser) literal(lit string) (int, error) {
	end := p.pos + len(lit)
	if end > len(p.src) || string(p.src[p.pos:end]) != lit {
		return 0, p.errorf("invalid literal")
	}
	n := p.leaf(p.src[p.pos:end])
	p.pos = end
	return n, nil
}

func (p *jsonParser) array(depth int) (int, error) {
	p.pos++ // '['
	base := len(p.stackE)
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
	} else {
		for {
			p.skipSpace()
			v, err := p.value(depth + 1)
			if err != nil {
				return 0, err
			}
			p.stackE = append(p.stackE, v)
			p.skipSpace()
			if p.pos >= len(p.src) {
				return 0, p.errorf("unterminated array")
			}
			if c := p.src[p.pos]; c == ',' {
				p.pos++
				continue
			} else if c == ']' {
				p.pos++
				break
			}
			return 0, p.errorf("expected ',' or ']' in array")
		}
	}
	lo := len(p.elems)
	p.elems = append(p.elems, p.stackE[base:]...)
	p.stackE = p.stackE[:base]
	p.nodes = append(p.nodes, jnode{kind: nodeArray, lo: lo, hi: len(p.elems)})
	return len(p.nodes) - 1, nil
}

func (p *jsonParser) object(depth int) (int, error) {
	p.pos++ // '{'
	base := len(p.stackM)
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
	} else {
		for {
			p.skipSpace()
			if p.pos >= len(p.src) || p.src[p.pos] != '"' {
				return 0, p.errorf("expected a string key in object")
			}
			keyCanon, key, err := p.str(true)
			if err != nil {
				return 0, err
			}
			p.skipSpace()
			if p.pos >= len(p.src) || p.src[p.pos] != ':' {
				return 0, p.errorf("expected ':' after object key")
			}
			p.pos++
			p.skipSpace()
			v, err := p.value(depth + 1)
			if err != nil {
				return 0, err
			}
			idx, isIdx := arrayIndex(key)
			p.stackM = append(p.stackM, member{key: key, keyCanon: keyCanon, index: idx, isIndex: isIdx, val: v})
			p.skipSpace()
			if p.pos >= len(p.src) {
				return 0, p.errorf("unterminated object")
			}
			if c := p.src[p.pos]; c == ',' {
				p.pos++
				continue
			} else if c == '}' {
				p.pos++
				break
			}
			return 0, p.errorf("expected ',' or '}' in object")
		}
	}
	ms := p.stackM[base:]
	// Stable, so that among equal keys the last one stays last: JSON.parse
	// keeps the last duplicate.
	slices.SortStableFunc(ms, compareMembers)
	lo := len(p.members)
	for i := range ms {
		if i+1 < len(ms) && bytes.Equal(ms[i].key, ms[i+1].key) {
			continue
		}
		p.members = append(p.members, ms[i])
	}
	p.stackM = p.stackM[:base]
	p.nodes = append(p.nodes, jnode{kind: nodeObject, lo: lo, hi: len(p.members)})
	return len(p.nodes) - 1, nil
}

func compareMembers(a, b member) int {
	switch {
	case a.isIndex && b.isIndex:
		if a.index < b.index {
			return -1
		} else if a.index > b.index {
			return 1
		}
		return 0
	case a.isIndex:
		return -1
	case b.isIndex:
		return 1
	}
	return compareUTF16(a.key, b.key)
}

// number parses a JSON number and returns its JSON.stringify text: the
// input itself for short integers, else the JavaScript rendering of the
// nearest float64 (what JSON.parse produces).
func (p *jsonParser) number() ([]byte, error) {
	src := p.src
	start := p.pos
	i := start
	neg := src[i] == '-'
	if neg {
		i++
	}
	digits := func() int {
		j := i
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		return i - j
	}
	if i >= len(src) {
		p.pos = i
		return nil, p.errorf("invalid number")
	}
	if src[i] == '0' {
		i++
	} else if src[i] >= '1' && src[i] <= '9' {
		digits()
	} else {
		p.pos = i
		return nil, p.errorf("invalid number")
	}
	intDigits := i - start
	if neg {
		intDigits--
	}
	simple := true
	if i < len(src) && src[i] == '.' {
		i++
		simple = false
		if digits() == 0 {
			p.pos = i
			return nil, p.errorf("invalid number: no digits after '.'")
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		simple = false
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.pos = i
			return nil, p.errorf("invalid number: no exponent digits")
		}
	}
	p.pos = i
	lit := src[start:i]
	// Up to 15 digits every integer is exact and already shortest.
	if simple && intDigits <= 15 && !(neg && lit[1] == '0') {
		return lit, nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil && !isRangeErr(err) {
		return nil, p.errorf("invalid number")
	}
	base := len(p.scratch)
	p.scratch = appendJSNumber(p.scratch, f)
	return p.scratch[base:len(p.scratch):len(p.scratch)], nil
}

// isStdEscape reports the escapes JSON.stringify writes back unchanged.
func isStdEscape(c byte) bool {
	switch c {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return true
	}
	return false
}

func hex4(b []byte) (uint16, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var u uint16
	for _, c := range b[:4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		u = u<<4 | uint16(d)
	}
	return u, true
}

// lowSurrogateEscape returns the low surrogate escaped at the start of b, if any.
func lowSurrogateEscape(b []byte) (uint16, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	u, ok := hex4(b[2:])
	return u, ok && u >= 0xDC00 && u <= 0xDFFF
}

// str parses the string literal at p.pos. canon is its JSON.stringify text;
// decoded (only when decode is set) is its value in WTF-8.
func (p *jsonParser) str(decode bool) (canon, decoded []byte, err error) {
	src := p.src
	start := p.pos
	i := start + 1
	rebuilt := false // canonical text is being rebuilt in scratch
	cbase, pend := 0, 0
	escaped := false
	// replace makes the n input bytes at i come out as repl.
	replace := func(n int, repl []byte) {
		if !rebuilt {
			rebuilt = true
			cbase = len(p.scratch)
			pend = start
		}
		p.scratch = append(p.scratch, src[pend:i]...)
		p.scratch = append(p.scratch, repl...)
		pend = i + n
	}
	var tmp [12]byte
	for {
		// Skip plain bytes eight at a time, stepping over standard escapes
		// inside the word. This loop is inlined rather than calling
		// plainRun because file contents stop it every few dozen bytes
		// (\n, \", \t), and a call or a reload per stop doubles the cost.
	scan:
		for i+8 <= len(src) {
			x := binary.LittleEndian.Uint64(src[i:])
			q := x ^ (swarOnes * '"')
			bs := x ^ (swarOnes * '\\')
			m := x&swarHigh | (x-swarOnes*0x20)&^x&swarHigh | (q-swarOnes)&^q&swarHigh | (bs-swarOnes)&^bs&swarHigh
			base := i
			i += 8
			for m != 0 {
				// Borrows only spill into later bytes, so the lowest
				// flagged byte is a real hit.
				off := bits.TrailingZeros64(m) >> 3
				at := base + off
				if src[at] == '\\' && at+1 < len(src) && isStdEscape(src[at+1]) {
					escaped = true
					if rebuilt {
						// Rare: keep the general path simple.
						i = at
						goto special
					}
					if off >= 6 {
						i = at + 2
						continue scan
					}
					m &^= uint64(1)<<((off+2)*8) - 1
					continue
				}
				i = at
				goto special
			}
		}
		i += plainRun(src[i:])
		if i >= len(src) {
			p.pos = i
			return nil, nil, p.errorf("unterminated string")
		}
	special:
		c := src[i]
		switch {
		case c == '"':
			if rebuilt {
				p.scratch = append(p.scratch, src[pend:i+1]...)
				canon = p.scratch[cbase:len(p.scratch):len(p.scratch)]
			} else {
				canon = src[start : i+1]
			}
			p.pos = i + 1
			if decode {
				if escaped || rebuilt {
					decoded = p.decodeString(src[start+1 : i])
				} else {
					decoded = src[start+1 : i]
				}
			}
			return canon, decoded, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(src) {
				p.pos = i
				return nil, nil, p.errorf("unterminated string")
			}
			switch src[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case '/':
				replace(2, []byte{'/'})
				i += 2
			case 'u':
				u, ok := hex4(src[i+2:])
				if !ok {
					p.pos = i
					return nil, nil, p.errorf("invalid \\u escape in string")
				}
				if u >= 0xD800 && u <= 0xDBFF {
					if lo, ok := lowSurrogateEscape(src[i+6:]); ok {
						r := 0x10000 + (rune(u)-0xD800)<<10 + rune(lo) - 0xDC00
						replace(12, utf8.AppendRune(tmp[:0], r))
						i += 12
						continue
					}
				}
				var out []byte
				if u < 0x20 || u == '"' || u == '\\' || (u >= 0xD800 && u <= 0xDFFF) {
					out = appendJSEscapedUnit(tmp[:0], u)
				} else {
					out = utf8.AppendRune(tmp[:0], rune(u))
				}
				if rebuilt || !bytes.Equal(out, src[i:i+6]) {
					replace(6, out)
				}
				i += 6
			default:
				p.pos = i
				return nil, nil, p.errorf("invalid escape in string")
			}
		case c < 0x20:
			p.pos = i
			return nil, nil, p.errorf("control character in string")
		default:
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size <= 1 {
				n := invalidUTF8Len(src[i:])
				replace(n, []byte("\uFFFD"))
				i += n
				continue
			}
			i += size
		}
	}
}

// decodeString decodes the body of a string literal already validated by
// str into WTF-8, keeping lone surrogates so that keys compare and
// deduplicate as JavaScript strings do.
func (p *jsonParser) decodeString(raw []byte) []byte {
	base := len(p.scratch)
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			e := raw[i+1]
			i += 2
			switch e {
			case 'b':
				p.scratch = append(p.scratch, '\b')
			case 'f':
				p.scratch = append(p.scratch, '\f')
			case 'n':
				p.scratch = append(p.scratch, '\n')
			case 'r':
				p.scratch = append(p.scratch, '\r')
			case 't':
				p.scratch = append(p.scratch, '\t')
			case 'u':
				u, _ := hex4(raw[i:])
				i += 4
				r := rune(u)
				if u >= 0xD800 && u <= 0xDBFF {
					if lo, ok := lowSurrogateEscape(raw[i:]); ok {
						r = 0x10000 + (r-0xD800)<<10 + rune(lo) - 0xDC00
						i += 6
					}
				}
				p.scratch = appendWTF8(p.scratch, r)
			default: // '"', '\\', '/'
				p.scratch = append(p.scratch, e)
			}
		case c < utf8.RuneSelf:
			p.scratch = append(p.scratch, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size <= 1 {
				p.scratch = append(p.scratch, "\uFFFD"...)
				i += invalidUTF8Len(raw[i:])
				continue
			}
			p.scratch = append(p.scratch, raw[i:i+size]...)
			i += size
		}
	}
	return p.scratch[base:len(p.scratch):len(p.scratch)]
}

// emit writes node n's canonical text.
func (p *jsonParser) emit(w *keySink, n int) {
	nd := &p.nodes[n]
	switch nd.kind {
	case nodeLeaf:
		w.write(nd.canon)
	case nodeArray:
		w.writeByte('[')
		for i, e := range p.elems[nd.lo:nd.hi] {
			if i > 0 {
				w.writeByte(',')
			}
			p.emit(w, e)
		}
		w.writeByte(']')
	case nodeObject:
		w.writeByte('{')
		for i, m := range p.members[nd.lo:nd.hi] {
			if i > 0 {
				w.writeByte(',')
			}
			w.write(m.keyCanon)
			w.writeByte(':')
			p.emit(w, m.val)
		}
		w.writeByte('}')
	}
}
