package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/acpd/acpd/session/jsonschema"
)

// argSchema is a compiled parameter schema of acpd's own tools. Those
// schemas are constants of acpd, so they need only a small part of JSON
// Schema (draft 2020-12): the keywords argKeywords lists. A general
// library would do, but every JSON Schema library acpd could link spends
// milliseconds at package init (compiling its meta-schema) in every process,
// before the editor's initialize is answered. Compiling refuses any other
// keyword, so a schema that asked for more than this checks would fail
// TestBuiltinSchemasCompile instead of being silently half-enforced. Schemas
// written by others (MCP servers' tool inputs) are not compiled here.
type argSchema struct {
	types                []string // empty: any type
	properties           map[string]*argSchema
	required             []string
	additionalProperties *bool // false: only the listed properties
	items                *argSchema
	minItems, maxItems   *int
	minLength, maxLength *int
	pattern              *regexp.Regexp
	minimum, maximum     *float64
	exclusiveMinimum     *float64
	exclusiveMaximum     *float64
	enum                 []any
}

// argKeywords are the keywords compileArgSchema understands; description
// and title are annotations only.
var argKeywords = []string{
	"type", "description", "title", "properties", "required", "additionalProperties",
	"items", "minItems", "maxItems", "minLength", "maxLength", "pattern",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum",
}

// compileArgSchema parses a parameter schema of the subset above.
func compileArgSchema(params string) (*argSchema, error) {
	doc, err := jsonschema.Decode([]byte(params))
	if err != nil {
		return nil, err
	}
	return compileArgNode(doc, "")
}

func compileArgNode(doc any, at string) (*argSchema, error) {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema%s: not an object", at)
	}
	s := &argSchema{}
	for k, v := range m {
		if !slices.Contains(argKeywords, k) {
			return nil, fmt.Errorf("schema%s: keyword %q is not supported for acpd's own tools", at, k)
		}
		var err error
		switch k {
		case "type":
			s.types, err = jsonschema.TypeNames(v)
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("schema%s/properties: not an object", at)
			}
			s.properties = map[string]*argSchema{}
			for name, sub := range props {
				if s.properties[name], err = compileArgNode(sub, at+"/properties/"+name); err != nil {
					return nil, err
				}
			}
		case "required":
			s.required, err = jsonschema.StringList(v)
		case "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				err = errors.New("only true or false is supported")
			}
			s.additionalProperties = &b
		case "items":
			s.items, err = compileArgNode(v, at+"/items")
			if err != nil {
				return nil, err
			}
		case "minItems":
			s.minItems, err = count(v)
		case "maxItems":
			s.maxItems, err = count(v)
		case "minLength":
			s.minLength, err = count(v)
		case "maxLength":
			s.maxLength, err = count(v)
		case "pattern":
			s.pattern, err = jsonschema.Pattern(v)
		case "minimum":
			s.minimum, err = number(v)
		case "maximum":
			s.maximum, err = number(v)
		case "exclusiveMinimum":
			s.exclusiveMinimum, err = number(v)
		case "exclusiveMaximum":
			s.exclusiveMaximum, err = number(v)
		case "enum":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				err = errors.New("not a non-empty array")
			}
			s.enum = list
		}
		if err != nil {
			return nil, fmt.Errorf("schema%s/%s: %v", at, k, err)
		}
	}
	return s, nil
}

// count reads a count keyword by its text: 1.0 and 1e2 are refused, as
// acpd's own schemas have no reason to write them.
func count(v any) (*int, error) {
	n, err := jsonschema.Number(v)
	if err != nil {
		return nil, err
	}
	i, err := strconv.Atoi(n.String())
	if err != nil || i < 0 {
		return nil, jsonschema.ErrNotCount
	}
	return &i, nil
}

func number(v any) (*float64, error) {
	n, err := jsonschema.Number(v)
	if err != nil {
		return nil, err
	}
	f, err := n.Float64()
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// decodeArgs parses tool arguments as the validator sees them: numbers
// kept as written, so an integer is judged by its text and not by a float.
func decodeArgs(args []byte) (any, error) {
	return jsonschema.DecodeOnly(args)
}

// validate reports every violation in v as "params<pointer>: reason"
// (sorted, without repeats) so the model learns which parameter was wrong.
func (s *argSchema) validate(v any) []string {
	var out []string
	s.check(v, "params", &out)
	slices.Sort(out)
	return slices.Compact(out)
}

func (s *argSchema) check(v any, at string, out *[]string) {
	add := func(format string, a ...any) { *out = append(*out, at+": "+fmt.Sprintf(format, a...)) }
	got := jsonType(v)
	if !jsonschema.TypeAllowed(s.types, got) {
		add("got %s, want %s", got, strings.Join(s.types, " or "))
		return // the other keywords are about the wanted type
	}
	if s.enum != nil && !slices.ContainsFunc(s.enum, func(e any) bool { return jsonEqual(e, v) }) {
		add("must be one of %s", enumText(s.enum))
	}
	switch t := v.(type) {
	case map[string]any:
		if msg := jsonschema.Missing(t, s.required, quoteName); msg != "" {
			add("%s", msg)
		}
		for name, pv := range t {
			ps, known := s.properties[name]
			switch {
			case known:
				ps.check(pv, at+"/"+jsonschema.PointerToken(name), out)
			case s.additionalProperties != nil && !*s.additionalProperties:
				add("additional property '%s' is not allowed", name)
			}
		}
	case []any:
		if s.minItems != nil && len(t) < *s.minItems {
			add("has %d items, want at least %d", len(t), *s.minItems)
		}
		if s.maxItems != nil && len(t) > *s.maxItems {
			add("has %d items, want at most %d", len(t), *s.maxItems)
		}
		if s.items != nil {
			for i, e := range t {
				s.items.check(e, at+"/"+strconv.Itoa(i), out)
			}
		}
	case string:
		n := len([]rune(t))
		if s.minLength != nil && n < *s.minLength {
			add("length %d is less than %d", n, *s.minLength)
		}
		if s.maxLength != nil && n > *s.maxLength {
			add("length %d is more than %d", n, *s.maxLength)
		}
		if s.pattern != nil && !s.pattern.MatchString(t) {
			add("does not match pattern '%s'", s.pattern)
		}
	case json.Number:
		f, err := t.Float64()
		if err != nil {
			add("%v", err)
			return
		}
		if s.minimum != nil && f < *s.minimum {
			add("%s is less than the minimum %v", t, *s.minimum)
		}
		if s.maximum != nil && f > *s.maximum {
			add("%s is more than the maximum %v", t, *s.maximum)
		}
		if s.exclusiveMinimum != nil && f <= *s.exclusiveMinimum {
			add("%s must be more than %v", t, *s.exclusiveMinimum)
		}
		if s.exclusiveMaximum != nil && f >= *s.exclusiveMaximum {
			add("%s must be less than %v", t, *s.exclusiveMaximum)
		}
	}
}

// jsonType names v's JSON type; a number without a fractional part is an
// integer, as JSON Schema counts 1.0 as one.
func jsonType(v any) string { return jsonschema.Kind(v, isInteger) }

func isInteger(n json.Number) bool {
	f, err := n.Float64()
	return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
}

// jsonEqual compares two decoded JSON values, numbers by value.
func jsonEqual(a, b any) bool {
	if na, ok := a.(json.Number); ok {
		nb, ok := b.(json.Number)
		if !ok {
			return false
		}
		fa, errA := na.Float64()
		fb, errB := nb.Float64()
		return errA == nil && errB == nil && fa == fb
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func enumText(enum []any) string {
	parts := make([]string, len(enum))
	for i, e := range enum {
		if s, ok := e.(string); ok {
			parts[i] = "'" + s + "'"
		} else {
			b, _ := json.Marshal(e)
			parts[i] = string(b)
		}
	}
	return strings.Join(parts, ", ")
}

func quoteName(name string) string { return "'" + name + "'" }
