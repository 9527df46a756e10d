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

// TestInputSchema_MoreKeywords: the rest of the subset, each with a value
// that passes and one that must not.
func TestInputSchema_MoreKeywords(t *testing.T) {
	tests := []struct {
		name, schema, good, bad, want string
	}{
		{"const", `{"properties":{"v":{"const":{"a":[1,2]}}}}`, `{"v":{"a":[1,2.0]}}`, `{"v":{"a":[2,1]}}`, "const"},
		{"integer by value", `{"properties":{"n":{"type":"integer"}}}`, `{"n":2.0}`, `{"n":2.5}`, "want integer"},
		{"multipleOf exact", `{"properties":{"n":{"multipleOf":0.1}}}`, `{"n":0.3}`, `{"n":0.35}`, "multipleOf"},
		{"exclusive bounds", `{"properties":{"n":{"exclusiveMinimum":0,"exclusiveMaximum":10}}}`, `{"n":5}`, `{"n":10}`, "exclusiveMaximum"},
		{"string length in characters", `{"properties":{"s":{"maxLength":2}}}`, `{"s":"日本"}`, `{"s":"日本語"}`, "maxLength"},
		{"patternProperties", `{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`, `{"x-a":"b"}`, `{"y":"b"}`, `"y"`},
		{"additionalProperties schema", `{"properties":{"a":{}},"additionalProperties":{"type":"integer"}}`, `{"a":"s","b":1}`, `{"b":"s"}`, "/b"},
		{"propertyNames", `{"propertyNames":{"maxLength":3}}`, `{"abc":1}`, `{"abcd":1}`, "maxLength"},
		{"min/maxProperties", `{"minProperties":1,"maxProperties":1}`, `{"a":1}`, `{"a":1,"b":2}`, "maxProperties"},
		{"dependentRequired", `{"dependentRequired":{"a":["b"]}}`, `{"a":1,"b":2}`, `{"a":1}`, `"b"`},
		{"draft-07 dependencies", `{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":["b"],"c":{"required":["d"]}}}`, `{"a":1,"b":2,"c":3,"d":4}`, `{"c":3}`, `"d"`},
		{"prefixItems", `{"properties":{"p":{"prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}}}`, `{"p":["a",1]}`, `{"p":["a",1,2]}`, "/p/2"},
		{"draft-07 tuple items", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"p":{"items":[{"type":"string"}],"additionalItems":{"type":"integer"}}}}`, `{"p":["a",1]}`, `{"p":["a","b"]}`, "/p/1"},
		{"contains", `{"properties":{"l":{"contains":{"const":"x"},"maxContains":1}}}`, `{"l":["a","x"]}`, `{"l":["a"]}`, "contains"},
		{"allOf", `{"allOf":[{"required":["a"]},{"required":["b"]}]}`, `{"a":1,"b":1}`, `{"a":1}`, `"b"`},
		{"not", `{"properties":{"s":{"not":{"const":"no"}}}}`, `{"s":"yes"}`, `{"s":"no"}`, "not"},
		{"if/then/else", `{"if":{"required":["a"]},"then":{"required":["b"]},"else":{"required":["c"]}}`, `{"a":1,"b":1}`, `{"x":1}`, `"c"`},
		{"recursive $ref", `{"$defs":{"t":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/t"}},"n":{"type":"integer"}}}},"$ref":"#/$defs/t"}`, `{"kids":[{"kids":[{"n":1}]}]}`, `{"kids":[{"kids":[{"n":"x"}]}]}`, "/kids/0/kids/0/n"},
		{"escaped $ref", `{"$defs":{"a/b c":{"type":"string"}},"properties":{"v":{"$ref":"#/$defs/a~1b%20c"}}}`, `{"v":"s"}`, `{"v":1}`, "type"},
		{"false schema", `{"properties":{"gone":false}}`, `{}`, `{"gone":1}`, "/gone"},
		{"unknown keywords ignored", `{"x-mcp-header":"X","properties":{"s":{"format":"email","type":"string"}}}`, `{"s":"not an email"}`, `{"s":1}`, "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := toolWithSchema(t, tt.schema)
			require.NotNil(t, tl.def.schema, "compiled")
			_, err := tl.Build(nil, json.RawMessage(tt.good))
			require.NoError(t, err)
			_, err = tl.Build(nil, json.RawMessage(tt.bad))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	// A $ref loop that consumes nothing ends at the depth bound, as an error.
	tl := toolWithSchema(t, `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`)
	require.NotNil(t, tl.def.schema)
	_, err := tl.Build(nil, json.RawMessage(`{}`))
	require.ErrorContains(t, err, "nests deeper")

	// Applicators that branch through $refs multiply; the check has a
	// budget rather than running for ever.
	tl = toolWithSchema(t, `{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`)
	require.NotNil(t, tl.def.schema)
	_, err = tl.Build(nil, json.RawMessage(`{}`))
	require.ErrorContains(t, err, "too complex")

	for name, schema := range map[string]string{
		"anchor $ref":           `{"properties":{"a":{"$ref":"#node"}}}`,
		"unevaluatedProperties": `{"unevaluatedProperties":false}`,
		"2020-12 tuple items":   `{"properties":{"p":{"items":[{"type":"string"}]}}}`,
		"negative multipleOf":   `{"properties":{"n":{"multipleOf":-1}}}`,
	} {
		assert.Nil(t, toolWithSchema(t, schema).def.schema, name)
	}
}

// FuzzInputSchema: whatever a server sends as a schema and the model as
// arguments, compiling and validating end with a result, never a panic.
func FuzzInputSchema(f *testing.F) {
	f.Add(`{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"integer","minimum":1}},"required":["n"]}`, `{"n":2}`)
	f.Add(`{"anyOf":[{"items":{"enum":[1,"a"]}},{"patternProperties":{"^a":{"multipleOf":0.5}}}]}`, `{"a":[1.5e3]}`)
	f.Add(`{"$ref":"#"}`, `{}`)
	f.Fuzz(func(t *testing.T, schemaText, args string) {
		sch, err := compileSchema([]byte(schemaText))
		if err != nil {
			return
		}
		_ = sch.validate([]byte(args))
	})
}
