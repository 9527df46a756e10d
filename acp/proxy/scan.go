package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The scanner finds members of a JSON object without decoding the values it
// passes over: a relayed line is read once, at memory speed, whatever it
// holds (a multi-megabyte file in fs/write_text_file, a diff in a
// tool_call_update), and only the few values a hook asks for are decoded.

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at b[i] (a
// '"'), or -1 when it is not terminated. A quote ends the string unless an
// odd number of backslashes precede it.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
		i++
	}
}

// skipValue returns the index just past the JSON value starting at b[i], or
// -1 when none is there. It checks structure (brackets, strings), not the
// spelling of literals and numbers: lines it cannot place are relayed
// untouched anyway.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// members calls f for each member of the object b holds, with the key's raw
// bytes (quotes included) and the raw value, until f returns false. It
// reports whether b is an object it could walk to the end.
func members(b []byte, f func(key, value []byte) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		if b[i] != '"' {
			return false
		}
		k := skipString(b, i)
		if k < 0 {
			return false
		}
		key := b[i:k]
		i = skipSpace(b, k)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		v := skipValue(b, i)
		if v < 0 {
			return false
		}
		if !f(key, b[i:v]) {
			return true
		}
		i = skipSpace(b, v)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
	return false
}

// keyIs reports whether a raw key (quotes included) spells name. Keys with
// escapes are decoded first.
func keyIs(raw []byte, name string) bool {
	if len(raw) == len(name)+2 && string(raw[1:len(raw)-1]) == name {
		return true
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return false
	}
	s, err := strconv.Unquote(string(raw))
	if err != nil {
		var d string
		if json.Unmarshal(raw, &d) != nil {
			return false
		}
		s = d
	}
	return s == name
}

// Members calls f with each member of the JSON object obj, in order: the
// key (decoded) and the raw value, until f returns false. It reports
// whether obj is an object it could walk. Values are not decoded, so a
// caller picking a few small members out of a large object pays one pass.
func Members(obj []byte, f func(key, value []byte) bool) bool {
	return members(obj, func(k, v []byte) bool {
		key := k[1 : len(k)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(String(k))
		}
		return f(key, v)
	})
}

// Field returns the raw value of the member key of the JSON object obj, or
// nil when obj is not an object or has no such member. When a key repeats,
// the last one wins, as encoding/json decodes it.
func Field(obj []byte, key string) json.RawMessage {
	var out json.RawMessage
	members(obj, func(k, v []byte) bool {
		if keyIs(k, key) {
			out = v
		}
		return true
	})
	return out
}

// String decodes a raw JSON string value; "" for anything else.
func String(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// IDKey is a map key for a JSON-RPC id: strings and numbers with the same
// text stay apart, and a string is compared decoded. "" means the raw value
// is not a usable id (absent or null).
func IDKey(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		return "s" + String(raw)
	}
	return "n" + string(raw)
}
