package tools

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool arguments are checked with google/jsonschema-go, the JSON Schema
// library the MCP SDK brings: one library for the built-in tools, the agent
// tool and MCP servers' tools.

// compileParams resolves a parameter schema written as JSON.
func compileParams(params string) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(params), &s); err != nil {
		return nil, err
	}
	return s.Resolve(nil)
}

// maxProblem bounds the text of one argument problem: the library quotes
// the value it refused, which may be a whole file's content.
const maxProblem = 300

// CheckArgs validates decoded arguments (what encoding/json decodes into
// an any) against rs. Its error names where the arguments went wrong, as a
// JSON pointer under "params" ("params/todos/1/status: enum: …"), for the
// model to correct; the library reports the first problem only, and says
// where in the schema, not where in the arguments, so the place is found
// by checking each property and item against its own part of the schema.
func CheckArgs(rs *jsonschema.Resolved, args any) error {
	err := rs.Validate(args)
	if err == nil {
		return nil
	}
	at, err := locate(rs.Schema(), args, "params", err)
	msg := innermost(err.Error())
	if len(msg) > maxProblem {
		cut := maxProblem
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return errors.New(at + ": " + msg)
}

// locate descends from s, which refuses v with err, to the deepest
// property or item that its own part of the schema refuses.
func locate(s *jsonschema.Schema, v any, at string, err error) (string, error) {
	switch t := v.(type) {
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(t)) {
			if ps := s.Properties[name]; ps != nil {
				if perr := checkPart(ps, t[name]); perr != nil {
					return locate(ps, t[name], at+"/"+pointerToken(name), perr)
				}
			}
		}
	case []any:
		if s.Items != nil {
			for i, e := range t {
				if ierr := checkPart(s.Items, e); ierr != nil {
					return locate(s.Items, e, at+"/"+strconv.Itoa(i), ierr)
				}
			}
		}
	}
	return at, err
}

// checkPart validates v against a part of a schema on its own. A part that
// cannot stand alone (a $ref into the rest of the schema) counts as
// passing: the problem is then reported where the whole schema found it.
func checkPart(s *jsonschema.Schema, v any) error {
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil
	}
	return rs.Validate(v)
}

// innermost drops the library's "validating <schema path>: " prefixes.
func innermost(msg string) string {
	for {
		rest, ok := strings.CutPrefix(msg, "validating ")
		if !ok {
			return msg
		}
		_, after, ok := strings.Cut(rest, ": ")
		if !ok {
			return msg
		}
		msg = after
	}
}

// pointerToken escapes a property name for a JSON pointer.
func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
