package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustCompile(t *testing.T, params string) *jsonschema.Resolved {
	t.Helper()
	rs, err := compileParams(params)
	require.NoError(t, err)
	return rs
}

func checkJSON(t *testing.T, rs *jsonschema.Resolved, args string) error {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(args), &v), args)
	return CheckArgs(rs, v)
}

// Each keyword a tool schema uses, broken in turn: the problem is named by
// where it is in the arguments (a JSON pointer under "params", array items
// by index) and by the keyword that refused it.
func TestCheckArgs_NamesWhereAndWhy(t *testing.T) {
	rs := mustCompile(t, `{
		"type": "object",
		"properties": {
			"name": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
			"n": {"type": "integer", "minimum": 1, "maximum": 9},
			"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
			"mode": {"type": "string", "enum": ["a", "b"]},
			"tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
			"todos": {"type": "array", "items": {"type": "object", "required": ["id"],
				"properties": {"id": {"type": "string"}, "status": {"enum": ["pending", "done"]}}}},
			"a/b": {"type": ["string", "null"]}
		},
		"required": ["name", "n"],
		"additionalProperties": false
	}`)
	for _, args := range []string{
		`{"name": "ab", "n": 1}`,
		`{"name": "abcd", "n": 9, "x": 0.5, "mode": "b", "tags": ["t"], "todos": [{"id": "1", "status": "done"}], "a/b": null}`,
		`{"name": "ab", "n": 3.0}`, // 3.0 is an integer to JSON Schema
	} {
		assert.NoError(t, checkJSON(t, rs, args), args)
	}
	for _, tt := range []struct{ args, at, why string }{
		{`[]`, "params", "type"},
		{`{"n": 1}`, "params", `required: missing properties: ["name"]`},
		{`{"name": "ab", "n": 1, "extra": true}`, "params", `additional properties ["extra"]`},
		{`{"name": 5, "n": 1}`, "params/name", `type: 5 has type "integer", want "string"`},
		{`{"name": "a", "n": 1}`, "params/name", "minLength"},
		{`{"name": "abcde", "n": 1}`, "params/name", "maxLength"},
		{`{"name": "ab1", "n": 1}`, "params/name", "pattern"},
		{`{"name": "ab", "n": 1.5}`, "params/n", `want "integer"`},
		{`{"name": "ab", "n": 0}`, "params/n", "minimum"},
		{`{"name": "ab", "n": 10}`, "params/n", "maximum"},
		{`{"name": "ab", "n": 1, "x": 0}`, "params/x", "exclusiveMinimum"},
		{`{"name": "ab", "n": 1, "x": 1}`, "params/x", "exclusiveMaximum"},
		{`{"name": "ab", "n": 1, "mode": "c"}`, "params/mode", "enum"},
		{`{"name": "ab", "n": 1, "tags": []}`, "params/tags", "minItems"},
		{`{"name": "ab", "n": 1, "tags": ["a", "b", "c"]}`, "params/tags", "maxItems"},
		{`{"name": "ab", "n": 1, "tags": ["a", 2]}`, "params/tags/1", "type"},
		{`{"name": "ab", "n": 1, "todos": [{"id": "1"}, {"id": "2", "status": "gone"}]}`, "params/todos/1/status", "enum"},
		{`{"name": "ab", "n": 1, "todos": [{"status": "done"}]}`, "params/todos/0", `missing properties: ["id"]`},
		{`{"name": "ab", "n": 1, "a/b": 1}`, "params/a~1b", "type"},
	} {
		err := checkJSON(t, rs, tt.args)
		require.Error(t, err, tt.args)
		assert.True(t, strings.HasPrefix(err.Error(), tt.at+": "), "%s: %v", tt.args, err)
		assert.NotContains(t, err.Error(), "validating", tt.args)
		assert.Contains(t, err.Error(), tt.why, tt.args)
	}
}

// The library quotes the refused value; a huge one is cut.
func TestCheckArgs_LongValueCut(t *testing.T) {
	rs := mustCompile(t, `{"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}}`)
	err := checkJSON(t, rs, `{"s": "`+strings.Repeat("é", 1<<20)+`"}`)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 400)
	assert.True(t, strings.HasPrefix(err.Error(), "params/s: maxLength"), err.Error())
	assert.True(t, strings.HasSuffix(err.Error(), "…"), err.Error())
}

// A part of a schema that refers to the rest ($ref) cannot be checked on its
// own: the problem is reported where the whole schema found it.
func TestCheckArgs_RefReportedAtItsParent(t *testing.T) {
	rs := mustCompile(t, `{"type": "object", "$defs": {"id": {"type": "string"}},
		"properties": {"item": {"type": "object", "properties": {"id": {"$ref": "#/$defs/id"}}}}}`)
	err := checkJSON(t, rs, `{"item": {"id": 1}}`)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "params: "), err.Error())
	assert.Contains(t, err.Error(), "type")
}

// The decoded arguments may be any JSON value; none makes CheckArgs panic.
func FuzzCheckArgs(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `null`, `{"todos":[{"id":1}]}`, `{"file_path":"/x","offset":-1}`, `"s"`, `1e400`} {
		f.Add(s)
	}
	schemas := []*jsonschema.Resolved{}
	for _, tl := range Builtin() {
		schemas = append(schemas, tl.(interface{ compiled() *jsonschema.Resolved }).compiled())
	}
	f.Fuzz(func(t *testing.T, args string) {
		var v any
		if json.Unmarshal([]byte(args), &v) != nil {
			return
		}
		for _, rs := range schemas {
			_ = CheckArgs(rs, v)
		}
	})
}
