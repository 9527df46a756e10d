package mcp

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInputSchema_Dialects: the schemas MCP servers emit (2020-12, draft-07
// with and without '#', none) validate the model's arguments, $ref included;
// what cannot be validated faithfully falls back to any object.
func TestInputSchema_Dialects(t *testing.T) {
	valid := map[string]string{
		"no $schema": `{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"integer","minimum":1}},"required":["n"]}`,
		"2020-12":    `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"integer","minimum":1}},"required":["n"]}`,
		"draft-07 #": `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"$ref":"#/definitions/n"}},"definitions":{"n":{"type":"integer","minimum":1}},"required":["n"],"additionalProperties":false}`,
		"draft-07":   `{"$schema":"http://json-schema.org/draft-07/schema","type":"object","properties":{"n":{"$ref":"#/definitions/n"}},"definitions":{"n":{"type":"integer","minimum":1}},"required":["n"]}`,
	}
	for name, schema := range valid {
		t.Run(name, func(t *testing.T) {
			tl := toolWithSchema(t, schema)
			require.NotNil(t, tl.def.schema, "compiled")
			_, err := tl.Build(nil, json.RawMessage(`{"n":2}`))
			require.NoError(t, err)
			_, err = tl.Build(nil, json.RawMessage(`{"n":0}`))
			require.ErrorContains(t, err, "minimum")
			_, err = tl.Build(nil, json.RawMessage(`{"n":"2"}`))
			require.ErrorContains(t, err, "type")
			_, err = tl.Build(nil, json.RawMessage(`{}`))
			require.ErrorContains(t, err, `"n"`)
		})
	}

	unusable := map[string]string{
		"draft-04":       `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer","minimum":1,"exclusiveMinimum":true}}}`,
		"2019-09":        `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object","properties":{"p":{"type":"array","items":[{"type":"string"}]}}}`,
		"unknown type":   `{"type":"object","properties":{"a":{"anyOf":[{"type":"strng"}]}}}`,
		"remote $ref":    `{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`,
		"file $ref":      `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`,
		"dangling $ref":  `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`,
		"bad pattern":    `{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`,
		"mistyped value": `{"type":"object","properties":{"a":{"minLength":"3"}}}`,
		"not an object":  `["type"]`,
	}
	for name, schema := range unusable {
		t.Run(name, func(t *testing.T) {
			tl := toolWithSchema(t, schema)
			assert.Nil(t, tl.def.schema)
			assert.JSONEq(t, `{"type":"object"}`, string(tl.Spec().Parameters), "the model is offered any object")
			_, err := tl.Build(nil, json.RawMessage(`{"a":1,"n":"x"}`))
			require.NoError(t, err, "the server judges the arguments")
		})
	}
}

// TestInputSchema_Keywords: the applicators and assertions servers use all
// bite on the model's arguments.
func TestInputSchema_Keywords(t *testing.T) {
	tl := toolWithSchema(t, `{"type":"object","properties":{
		"mode":{"enum":["fast","slow"]},
		"path":{"type":"string","pattern":"^/"},
		"tags":{"type":"array","items":{"type":"string"},"maxItems":2,"uniqueItems":true},
		"id":{"anyOf":[{"type":"integer"},{"type":"string","format":"uuid"}]},
		"one":{"oneOf":[{"type":"integer","multipleOf":2},{"type":"integer","multipleOf":3}]},
		"opts":{"type":"object","properties":{"deep":{"type":"boolean"}},"additionalProperties":false}
	}}`)
	require.NotNil(t, tl.def.schema)
	_, err := tl.Build(nil, json.RawMessage(`{"mode":"fast","path":"/a","tags":["x","y"],"id":"abc","one":3,"opts":{"deep":true}}`))
	require.NoError(t, err)
	for args, want := range map[string]string{
		`{"mode":"medium"}`:       "/properties/mode",
		`{"path":"a"}`:            "/properties/path",
		`{"tags":["x","x"]}`:      "uniqueItems",
		`{"tags":["x","y","z"]}`:  "maxItems",
		`{"tags":[1]}`:            "/properties/tags",
		`{"id":1.5}`:              "anyOf",
		`{"one":6}`:               "oneOf",
		`{"opts":{"deep":"yes"}}`: "/properties/opts/properties/deep",
		`{"opts":{"wide":true}}`:  "wide",
	} {
		_, err := tl.Build(nil, json.RawMessage(args))
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), "invalid arguments", args)
		assert.Contains(t, err.Error(), want, args)
		assert.NotContains(t, err.Error(), "validating root", args)
	}
}

func toolWithSchema(t *testing.T, schema string) *Tool {
	t.Helper()
	def := newToolDef(&mcpTool{Name: "t", InputSchema: json.RawMessage(schema)})
	return &Tool{name: "mcp__s__t", srv: &server{name: "s"}, def: def}
}
