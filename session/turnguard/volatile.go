package turnguard

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Volatile values: what an agent stamps on each call it reports, which
// makes two identical calls look different. codex-acp puts the whole exec
// event in rawInput — call_id, turn_id, process_id and started_at_ms beside
// the command — so hashed raw, 130 identical `ls` calls are 130 keys and a
// stuck turn runs to the backstop.
//
// The rule recognises such values rather than listing every agent's field
// names. A member of rawInput, at any depth, is dropped from the key when
//
//  1. its value is a string equal to the call's own toolCallId; or
//  2. its name says it is the id of this call, turn or process: the name's
//     words (split at _, -, . and lower-to-upper case changes) end in "id"
//     and every word before it is one of call, tool, use, turn, process,
//     exec, execution or invocation (call_id, toolCallId, tool_use_id,
//     turn_id, processId, execution_id), or the name is "pid"; and the value
//     is a string or a number; or
//  3. its name says it is a moment (its last word is at, ms, ts, time,
//     timestamp, ns or us: started_at_ms, createdAt, ts) and its value is a
//     time within stampWindow of the guard's own clock when the frame came:
//     an epoch number in seconds, milliseconds, microseconds or nanoseconds
//     (or those digits as a string), or an RFC 3339 text.
//
// Why both a name and a value: a false stop is worse than a late one. A
// model's own arguments are often ids (an issue id, a message id, a run id)
// and times (a log query's "since"); dropping one would merge calls that
// differ in a real argument, and the merged repeats could stop a productive
// turn. Rule 2 names only the ids of the call itself, which no model
// chooses; rule 3 needs the value to be "now", which a stamp always is and
// a model's argument rarely is. A volatile value the rule misses only makes
// a stuck turn run to the backstop, as before. An agent whose clock is more
// than stampWindow off the guard's keeps its stamps (late, never false).
const stampWindow = 15 * time.Minute

// dropVolatile returns input without its volatile members (the rules
// above), re-encoded with sorted keys; it returns input itself when there
// is nothing to drop or it is not JSON.
func dropVolatile(input json.RawMessage, callID string, now time.Time) json.RawMessage {
	if !maybeVolatile(input, callID) {
		return input
	}
	return strip(input, stripper{callID: callID, now: now})
}

// dropVolatileOutput is dropVolatile for a call's rawOutput, which the
// result signal compares: it also drops what measures the run (members
// named duration, elapsed, took, latency or wall_time, whatever their
// value: codex-acp reports {"duration":{"secs":0,"nanos":18844}}), since a
// result is the same result however long it took.
func dropVolatileOutput(output json.RawMessage, callID string, now time.Time) json.RawMessage {
	return strip(output, stripper{callID: callID, now: now, timings: true})
}

func strip(input json.RawMessage, s stripper) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return input
	}
	if _, ok := v.(map[string]any); !ok {
		if _, ok := v.([]any); !ok {
			return input
		}
	}
	v = s.strip(v)
	if !s.dropped {
		return input
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return input
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// nameEnds are the ends of every name the rules can drop, as they appear
// before a member's closing quote; an input holding none of them (nor the
// call's id) is returned without being decoded.
var nameEnds = [][]byte{[]byte(`id"`), []byte(`Id"`), []byte(`ID"`), []byte(`at"`), []byte(`At"`), []byte(`AT"`),
	[]byte(`s"`), []byte(`S"`), []byte(`me"`), []byte(`ME"`), []byte(`mp"`), []byte(`MP"`)}

func maybeVolatile(input json.RawMessage, callID string) bool {
	if callID != "" && bytes.Contains(input, []byte(callID)) {
		return true
	}
	for _, e := range nameEnds {
		if bytes.Contains(input, e) {
			return true
		}
	}
	return false
}

type stripper struct {
	callID  string
	now     time.Time
	timings bool // also drop the members timingWords name
	dropped bool
}

// timingWords name what measures a run, in a result. It and the word sets
// below are built on first use: a package-level map is built by package
// initialization, on every start of acpd.
var timingWords = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"duration": true, "elapsed": true, "took": true, "latency": true}
})

func (s *stripper) strip(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if s.volatile(k, e) {
				delete(t, k)
				s.dropped = true
				continue
			}
			t[k] = s.strip(e)
		}
	case []any:
		out := t[:0]
		for _, e := range t {
			if str, ok := e.(string); ok && s.callID != "" && str == s.callID {
				s.dropped = true
				continue
			}
			out = append(out, s.strip(e))
		}
		return out
	}
	return v
}

// volatile applies the three rules to one member.
func (s *stripper) volatile(name string, v any) bool {
	if str, ok := v.(string); ok && s.callID != "" && str == s.callID {
		return true
	}
	words := nameWords(name)
	if len(words) == 0 {
		return false
	}
	if s.timings && (timingWords()[words[len(words)-1]] || name == "wall_time") {
		return true
	}
	switch v.(type) {
	case string, json.Number:
	default:
		return false
	}
	if isOwnID(words) {
		return true
	}
	return timeWords()[words[len(words)-1]] && s.isNow(v)
}

// ownIDWords are the words that may come before "id" in the name of a
// call's, turn's or process's own id.
var ownIDWords = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"call": true, "tool": true, "use": true, "turn": true, "process": true,
		"exec": true, "execution": true, "invocation": true}
})

func isOwnID(words []string) bool {
	if len(words) == 1 && words[0] == "pid" {
		return true
	}
	if len(words) < 2 || words[len(words)-1] != "id" {
		return false
	}
	for _, w := range words[:len(words)-1] {
		if !ownIDWords()[w] {
			return false
		}
	}
	return true
}

// timeWords end the names of moments.
var timeWords = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"at": true, "ms": true, "ts": true, "time": true, "timestamp": true, "ns": true, "us": true}
})

// isNow reports whether v is a time within stampWindow of s.now.
func (s *stripper) isNow(v any) bool {
	var digits string
	switch t := v.(type) {
	case json.Number:
		digits = t.String()
	case string:
		if ts, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return within(ts, s.now)
		}
		digits = t
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 {
		return false
	}
	// The unit is the one that puts n nearest now: 10 digits are seconds,
	// 13 milliseconds, 16 microseconds, 19 nanoseconds (until 2286).
	var ts time.Time
	switch len(digits) {
	case 10:
		ts = time.Unix(n, 0)
	case 13:
		ts = time.UnixMilli(n)
	case 16:
		ts = time.UnixMicro(n)
	case 19:
		ts = time.Unix(0, n)
	default:
		return false
	}
	return within(ts, s.now)
}

func within(ts, now time.Time) bool {
	d := ts.Sub(now)
	return d <= stampWindow && d >= -stampWindow
}

// nameWords splits a member name into lower-case words at _, -, ., spaces
// and lower-to-upper case changes: "started_at_ms" and "startedAtMs" are
// both [started at ms]; "toolCallID" is [tool call id].
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			continue
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])):
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return words
}
