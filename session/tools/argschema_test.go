package tools

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestArgSchema_EachKeywordBites validates one schema using every keyword of
// the subset against arguments that break each in turn.
func TestArgSchema_EachKeywordBites(t *testing.T) {
	sch, err := compileArgSchema(`{
		"type": "object",
		"title": "t", "description": "d",
		"properties": {
			"name": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
			"n": {"type": "integer", "minimum": 1, "maximum": 9},
			"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
			"mode": {"type": "string", "enum": ["a", "b"]},
			"tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
			"a/b": {"type": ["string", "null"]},
			"open": {"type": "object"}
		},
		"required": ["name", "n"],
		"additionalProperties": false
	}`)
	require.NoError(t, err)

	ok := []string{
		`{"name": "ab", "n": 1}`,
		`{"name": "abcd", "n": 9, "x": 0.5, "mode": "b", "tags": ["t"], "a/b": null, "open": {"any": 1}}`,
		`{"name": "ab", "n": 3.0}`, // 3.0 is an integer to JSON Schema
		`{"name": "ab", "n": 2, "x": 0.25}`,
	}
	for _, args := range ok {
		v, err := decodeArgs([]byte(args))
		require.NoError(t, err)
		assert.Empty(t, sch.validate(v), args)
	}

	bad := []struct{ args, want string }{
		{`[]`, "params: got array, want object"},
		{`{"n": 1}`, "params: missing property 'name'"},
		{`{}`, "params: missing properties 'name', 'n'"},
		{`{"name": 5, "n": 1}`, "params/name: got integer, want string"},
		{`{"name": "a", "n": 1}`, "params/name: length 1 is less than 2"},
		{`{"name": "abcde", "n": 1}`, "params/name: length 5 is more than 4"},
		{`{"name": "ab1", "n": 1}`, "params/name: does not match pattern '^[a-z]+$'"},
		{`{"name": "ab", "n": 1.5}`, "params/n: got number, want integer"},
		{`{"name": "ab", "n": 0}`, "params/n: 0 is less than the minimum 1"},
		{`{"name": "ab", "n": 10}`, "params/n: 10 is more than the maximum 9"},
		{`{"name": "ab", "n": 1, "x": 0}`, "params/x: 0 must be more than 0"},
		{`{"name": "ab", "n": 1, "x": 1}`, "params/x: 1 must be less than 1"},
		{`{"name": "ab", "n": 1, "x": "1"}`, "params/x: got string, want number"},
		{`{"name": "ab", "n": 1, "mode": "c"}`, "params/mode: must be one of 'a', 'b'"},
		{`{"name": "ab", "n": 1, "tags": []}`, "params/tags: has 0 items, want at least 1"},
		{`{"name": "ab", "n": 1, "tags": ["a", "b", "c"]}`, "params/tags: has 3 items, want at most 2"},
		{`{"name": "ab", "n": 1, "tags": ["a", 2]}`, "params/tags/1: got integer, want string"},
		{`{"name": "ab", "n": 1, "a/b": 1}`, "params/a~1b: got integer, want string or null"},
		{`{"name": "ab", "n": 1, "open": []}`, "params/open: got array, want object"},
		{`{"name": "ab", "n": 1, "extra": true}`, "params: additional property 'extra' is not allowed"},
	}
	for _, tt := range bad {
		v, err := decodeArgs([]byte(tt.args))
		require.NoError(t, err)
		assert.Equal(t, []string{tt.want}, sch.validate(v), tt.args)
	}

	// Several violations are all reported, sorted.
	v, err := decodeArgs([]byte(`{"name": "A", "n": 0}`))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"params/n: 0 is less than the minimum 1",
		"params/name: does not match pattern '^[a-z]+$'",
		"params/name: length 1 is less than 2",
	}, sch.validate(v))
}

// TestArgSchema_RefusesWhatItDoesNotCheck: a keyword outside the subset, or
// a malformed one, fails to compile rather than being ignored.
func TestArgSchema_RefusesWhatItDoesNotCheck(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type": "object", "oneOf": []}`:              `keyword "oneOf" is not supported`,
		`{"properties": {"a": {"$ref": "#/x"}}}`:       `schema/properties/a: keyword "$ref"`,
		`{"type": "strng"}`:                            `"strng" is not a JSON type`,
		`{"minLength": -1}`:                            "non-negative integer",
		`{"minLength": 1.5}`:                           "non-negative integer",
		`{"pattern": "("}`:                             "schema/pattern",
		`{"enum": []}`:                                 "non-empty array",
		`{"required": "a"}`:                            "schema/required: not an array",
		`{"additionalProperties": {"type": "string"}}`: "only true or false",
		`{"items": [{"type": "string"}]}`:              "schema/items: not an object",
		`[]`:                                           "not an object",
		`{"type": "object", "properties": {"a": {"type": "string"}}`: "unexpected EOF",
	} {
		_, err := compileArgSchema(schema)
		require.Error(t, err, schema)
		assert.Contains(t, err.Error(), want, schema)
	}
}

func TestDecodeArgs_OneValue(t *testing.T) {
	_, err := decodeArgs([]byte(`{} {}`))
	require.Error(t, err)
	_, err = decodeArgs([]byte(`{"a": 1`))
	require.Error(t, err)
	v, err := decodeArgs([]byte(` {"a": 12345678901234567890} `))
	require.NoError(t, err)
	assert.Equal(t, "integer", jsonType(v.(map[string]any)["a"]))
}
