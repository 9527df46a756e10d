// Package jsonschema holds the pieces of JSON Schema that acpd's two
// argument checkers share: the one for acpd's own tools (session/tools),
// which refuses every keyword those tools do not use, and the one for MCP
// servers' tools (session/mcp), which accepts a wider subset. Only what is
// the same in both lives here: reading keyword values of a schema decoded
// with numbers kept as text, and naming a value's JSON type. What a keyword
// means, which keywords are allowed and every message about the model's
// arguments stay with each checker, because their policies differ.
//
// It links nothing but the standard library: both checkers are in every
// acpd process, and a schema library would cost start-up time.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Types are the names JSON Schema gives JSON types.
var Types = []string{"object", "array", "string", "integer", "number", "boolean", "null"}

// Decode parses the first JSON value in data with numbers kept as written
// (json.Number), so an integer is judged by its text and not by a float.
func Decode(data []byte) (any, error) {
	v, _, err := decode(data)
	return v, err
}

// DecodeOnly is Decode for text that must hold one JSON value and nothing
// after it.
func DecodeOnly(data []byte) (any, error) {
	v, dec, err := decode(data)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func decode(data []byte) (any, *json.Decoder, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, err
	}
	return v, dec, nil
}

// TypeNames reads the value of "type": one type name or a list of them.
func TypeNames(v any) ([]string, error) {
	var names []string
	switch t := v.(type) {
	case string:
		names = []string{t}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, errors.New("not a type name")
			}
			names = append(names, s)
		}
	default:
		return nil, errors.New("not a type name or a list of them")
	}
	for _, n := range names {
		if !slices.Contains(Types, n) {
			// The schema would refuse every value here: it is unusable.
			return nil, fmt.Errorf("%q is not a JSON type", n)
		}
	}
	return names, nil
}

// StringList reads an array of strings, such as the value of "required".
func StringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("not an array")
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, errors.New("not an array of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

// Number reads a keyword value that must be a number; how it is then read
// (a float, an exact fraction, a count) is the checker's choice.
func Number(v any) (json.Number, error) {
	n, ok := v.(json.Number)
	if !ok {
		return "", errors.New("not a number")
	}
	return n, nil
}

// ErrNotCount is the error for a count keyword (minItems, maxLength and the
// like) whose value is a number but not a non-negative integer.
var ErrNotCount = errors.New("not a non-negative integer")

// Pattern reads and compiles the value of "pattern".
func Pattern(v any) (*regexp.Regexp, error) {
	s, ok := v.(string)
	if !ok {
		return nil, errors.New("not a string")
	}
	return regexp.Compile(s)
}

// Kind names v's JSON type as Types spells it; integer decides which
// numbers count as integers (JSON Schema counts 1.0 as one), as each
// checker reads numbers its own way.
func Kind(v any, integer func(json.Number) bool) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if integer(t) {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// TypeAllowed reports whether a value of JSON type got passes "type":
// types (empty: any type); an integer is also a number.
func TypeAllowed(types []string, got string) bool {
	return len(types) == 0 || slices.Contains(types, got) || (got == "integer" && slices.Contains(types, "number"))
}

// Missing says which required properties obj lacks ("missing property
// 'a'", "missing properties 'a', 'b'"), each name written by quote; it is
// empty when none is missing.
func Missing(obj map[string]any, required []string, quote func(string) string) string {
	var missing []string
	for _, name := range required {
		if _, ok := obj[name]; !ok {
			missing = append(missing, quote(name))
		}
	}
	switch len(missing) {
	case 0:
		return ""
	case 1:
		return "missing property " + missing[0]
	}
	return "missing properties " + strings.Join(missing, ", ")
}

// PointerToken escapes a property name for a JSON pointer.
func PointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
