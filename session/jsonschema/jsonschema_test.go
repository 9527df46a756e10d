package jsonschema

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTypeNames(t *testing.T) {
	names, err := TypeNames("string")
	require.NoError(t, err)
	assert.Equal(t, []string{"string"}, names)
	names, err = TypeNames([]any{"integer", "null"})
	require.NoError(t, err)
	assert.Equal(t, []string{"integer", "null"}, names)
	for want, v := range map[string]any{
		"not a type name":                   []any{"string", json.Number("1")},
		"not a type name or a list of them": json.Number("1"),
		`"int" is not a JSON type`:          []any{"int"},
	} {
		_, err := TypeNames(v)
		assert.EqualError(t, err, want, "%v", v)
	}
}

func TestStringList(t *testing.T) {
	list, err := StringList([]any{"a", "b"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, list)
	_, err = StringList("a")
	assert.EqualError(t, err, "not an array")
	_, err = StringList([]any{"a", true})
	assert.EqualError(t, err, "not an array of strings")
}

func TestNumberAndPattern(t *testing.T) {
	n, err := Number(json.Number("1.5"))
	require.NoError(t, err)
	assert.Equal(t, json.Number("1.5"), n)
	_, err = Number("1.5")
	assert.EqualError(t, err, "not a number")

	re, err := Pattern("^a+$")
	require.NoError(t, err)
	assert.True(t, re.MatchString("aa"))
	_, err = Pattern(true)
	assert.EqualError(t, err, "not a string")
	_, err = Pattern("(")
	assert.Error(t, err)
}

func TestDecode(t *testing.T) {
	v, err := Decode([]byte(`{"a": 12345678901234567890} {}`))
	require.NoError(t, err, "Decode reads the first value only")
	assert.Equal(t, json.Number("12345678901234567890"), v.(map[string]any)["a"])
	_, err = DecodeOnly([]byte(`{} {}`))
	assert.EqualError(t, err, "more than one JSON value")
	v, err = DecodeOnly([]byte(" [1] \n"))
	require.NoError(t, err)
	assert.Equal(t, []any{json.Number("1")}, v)
	_, err = DecodeOnly([]byte(`{"a": 1`))
	assert.Error(t, err)
}

func TestKindAndTypeAllowed(t *testing.T) {
	whole := func(n json.Number) bool { _, err := strconv.Atoi(n.String()); return err == nil }
	for want, v := range map[string]any{
		"null": nil, "boolean": false, "string": "", "array": []any{}, "object": map[string]any{},
		"integer": json.Number("3"), "number": json.Number("3.5"), "float64": 3.0,
	} {
		assert.Equal(t, want, Kind(v, whole))
	}
	assert.True(t, TypeAllowed(nil, "string"))
	assert.True(t, TypeAllowed([]string{"number"}, "integer"))
	assert.False(t, TypeAllowed([]string{"integer"}, "number"))
	assert.False(t, TypeAllowed([]string{"string", "null"}, "object"))
}

func TestMissing(t *testing.T) {
	obj := map[string]any{"a": 1}
	q := func(s string) string { return "'" + s + "'" }
	assert.Equal(t, "", Missing(obj, []string{"a"}, q))
	assert.Equal(t, "missing property 'b'", Missing(obj, []string{"a", "b"}, q))
	assert.Equal(t, `missing properties "b", "c"`, Missing(obj, []string{"b", "a", "c"}, strconv.Quote))
}

func TestPointerToken(t *testing.T) {
	assert.Equal(t, "plain", PointerToken("plain"))
	assert.Equal(t, "a~1b~0c~01", PointerToken("a/b~c~1"))
}
