package config

import (
	"fmt"
	"strings"
)

// Error is a configuration mistake the user can fix. It names where the bad
// value came from: a file position (File, Line, Col, all 1-based), or an
// environment variable or flag (Origin). Commands exit with status 2 on it.
type Error struct {
	File      string // config file path; "" when the value came from env or a flag
	Line, Col int
	Origin    string // "env NAME" or "flag --name" when File is ""
	Key       string // dotted key, e.g. "model.maxToolCallsPerTurn"; may be ""
	Msg       string // what is wrong, and how to fix it when known
	Err       error  // underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "":
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Col)
	case e.Origin != "":
		b.WriteString(e.Origin + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// fullError marks a decode error whose text already names the key, such as
// qwen-code's "Invalid maxToolCallsPerTurn: ..." which is kept verbatim.
type fullError struct{ msg string }

func (e fullError) Error() string { return e.msg }

// keyMsg prefixes a decode error with its key unless it names it already.
func keyMsg(key string, err error) string {
	if fe, ok := err.(fullError); ok {
		return fe.msg
	}
	return key + ": " + err.Error()
}

// editDistance is the Levenshtein distance over bytes; keys are ASCII.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// suggest returns the candidate closest to s (case-insensitively), or "" when
// none is close enough to be a plausible typo.
func suggest(s string, candidates []string) string {
	best, bestD := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		d := editDistance(ls, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(s)/3) {
		return ""
	}
	return best
}
