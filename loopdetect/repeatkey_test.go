package loopdetect

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type goldenCase struct {
	Name       string `json:"name"`
	Args       string `json:"args,omitempty"`
	ArgsBase64 string `json:"argsBase64,omitempty"`
	Canonical  string `json:"canonical"`
	Key        string `json:"key"`
}

func (c goldenCase) argBytes(t *testing.T) []byte {
	if c.ArgsBase64 == "" {
		return []byte(c.Args)
	}
	b, err := base64.StdEncoding.DecodeString(c.ArgsBase64)
	require.NoError(t, err)
	return b
}

// recorder is a hash.Hash that keeps what it is given, so tests can see the
// exact text the repeat key hashes.
type recorder struct{ bytes.Buffer }

func (r *recorder) Sum(b []byte) []byte {
	s := sha256.Sum256(r.Bytes())
	return append(b, s[:]...)
}
func (r *recorder) Size() int      { return sha256.Size }
func (r *recorder) BlockSize() int { return sha256.BlockSize }

// canonicalText returns the string ToolCallRepeatKeyJSON hashes.
func canonicalText(t *testing.T, name string, args []byte) string {
	t.Helper()
	rec := &recorder{}
	w := keySink{h: rec}
	w.toolName(name)
	require.NoError(t, w.rawJSON(args))
	w.flush()
	return rec.String()
}

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "repeatkey_golden.json"))
	require.NoError(t, err)
	var cases []goldenCase
	require.NoError(t, json.Unmarshal(data, &cases))
	require.GreaterOrEqual(t, len(cases), 40)
	return cases
}

// TestRepeatKeyGolden_NodeAgrees re-derives the golden digests with Node when
// it is installed, so the checked-in file cannot drift from JavaScript.
func TestRepeatKeyGolden_NodeAgrees(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH; using the checked-in golden file")
	}
	cmd := exec.CommandContext(t.Context(), node, "repeatkey_golden.mjs", "repeatkey_cases.json")
	cmd.Dir = "testdata"
	out, err := cmd.Output()
	require.NoError(t, err)
	var fresh []goldenCase
	require.NoError(t, json.Unmarshal(out, &fresh))
	require.Equal(t, loadGolden(t), fresh, "regenerate testdata/repeatkey_golden.json with the node script")
}

func TestToolCallRepeatKeyJSON_Golden(t *testing.T) {
	for i, c := range loadGolden(t) {
		args := c.argBytes(t)
		got, err := ToolCallRepeatKeyJSON(c.Name, args)
		require.NoError(t, err, "case %d", i)
		assert.Equal(t, c.Key, got, "case %d %s %q\nwant %s\ngot  %s", i, c.Name, args, c.Canonical, canonicalText(t, c.Name, args))
	}
}

// One RepeatKeyer reused over every golden case (big and small, errors in
// between) gives the one-shot function's keys.
func TestRepeatKeyer_Golden(t *testing.T) {
	var k RepeatKeyer
	for i, c := range loadGolden(t) {
		args := c.argBytes(t)
		got, err := k.KeyJSON(c.Name, args)
		require.NoError(t, err, "case %d", i)
		assert.Equal(t, c.Key, got, "case %d", i)
		_, err = k.KeyJSON("t", []byte(`{"a":1,}`))
		require.Error(t, err)
	}
}

var loneSurrogateEscape = regexp.MustCompile(`(?i)\\ud[89a-f]`)

// TestToolCallRepeatKey_GoldenDecoded checks the decoded-value entry point
// on every golden case encoding/json can represent faithfully (it cannot
// hold lone surrogates, and it replaces invalid UTF-8 byte by byte).
func TestToolCallRepeatKey_GoldenDecoded(t *testing.T) {
	checked := 0
	for i, c := range loadGolden(t) {
		if c.ArgsBase64 != "" || loneSurrogateEscape.MatchString(c.Args) {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(c.Args))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v), "case %d", i)
		assert.Equal(t, c.Key, ToolCallRepeatKey(c.Name, v), "case %d %s %s", i, c.Name, c.Args)
		checked++
	}
	assert.Greater(t, checked, 40)
}

func TestToolCallRepeatKey_Vectors(t *testing.T) {
	key := func(name string, args any) string { return ToolCallRepeatKey(name, args) }
	obj := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name  string
		a, b  string
		equal bool
	}{
		// 86: aliases, case-sensitive.
		{"86 task=agent", key("task", obj("x", 1.0)), key("agent", obj("x", 1.0)), true},
		{"86 search_file_content=grep_search", key("search_file_content", obj()), key("grep_search", obj()), true},
		{"86 replace=edit", key("replace", obj("a", 1.0)), key("edit", obj("a", 1.0)), true},
		{"86 Task!=agent", key("Task", obj()), key("agent", obj()), false},
		// 87: key order is irrelevant, array order is not.
		{"87 flat order", key("t", obj("a", 1.0, "b", 2.0)), key("t", obj("b", 2.0, "a", 1.0)), true},
		{"87 nested order", mustKeyJSON(t, "t", `{"n":{"y":2,"x":1}}`), mustKeyJSON(t, "t", `{"n":{"x":1,"y":2}}`), true},
		{"87 array order", key("t", obj("l", []any{1.0, 2.0})), key("t", obj("l", []any{2.0, 1.0})), false},
		// 90: __proto__ is a real key.
		{"90 __proto__", mustKeyJSON(t, "t", `{"__proto__":1}`), mustKeyJSON(t, "t", `{}`), false},
		{"empty args are {}", mustKeyJSON(t, "t", ""), mustKeyJSON(t, "t", []byte(" \n")), true},
		{"empty args equal explicit {}", mustKeyJSON(t, "t", ""), key("t", obj()), true},
		{"json.Number equals float64", key("t", obj("n", json.Number("1.0"))), key("t", obj("n", 1.0)), true},
		{"int equals float64", key("t", obj("n", 3)), key("t", obj("n", 3.0)), true},
		{"RawMessage is parsed", key("t", json.RawMessage(`{"b":1,"a":2}`)), mustKeyJSON(t, "t", `{"a":2,"b":1}`), true},
		{"struct is marshalled", key("t", struct {
			B int `json:"b"`
			A int `json:"a"`
		}{1, 2}), mustKeyJSON(t, "t", `{"a":2,"b":1}`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.equal {
				assert.Equal(t, tt.a, tt.b)
			} else {
				assert.NotEqual(t, tt.a, tt.b)
			}
		})
	}
}

func mustKeyJSON[T string | []byte](t *testing.T, name string, args T) string {
	t.Helper()
	k, err := ToolCallRepeatKeyJSON(name, []byte(args))
	require.NoError(t, err)
	return k
}

// Vector 88: the hashed text and the digest format.
func TestToolCallRepeatKey_HashedText(t *testing.T) {
	assert.Equal(t, `agent:{"a":1,"b":2}`, canonicalText(t, "task", []byte(`{"b":2,"a":1}`)))
	sum := sha256.Sum256([]byte(`agent:{"a":1,"b":2}`))
	assert.Equal(t, hex.EncodeToString(sum[:]), ToolCallRepeatKey("task", map[string]any{"b": 2.0, "a": 1.0}))
}

// Vector 89.
func TestCanonicalToolName(t *testing.T) {
	for in, want := range map[string]string{
		"toString": "toString", "__proto__": "__proto__", "todo_write": "todo_write",
		"task": "agent", "replace": "edit", "search_file_content": "grep_search",
		"Task": "Task", "constructor": "constructor", "": "",
	} {
		assert.Equal(t, want, CanonicalToolName(in), in)
	}
}

func TestAppendJSNumber(t *testing.T) {
	a, b := 0.1, 0.2 // variables: constant arithmetic would be exact
	tests := []struct {
		in   float64
		want string
	}{
		{1, "1"}, {1.5, "1.5"}, {1e21, "1e+21"}, {1e20, "100000000000000000000"}, {1e-7, "1e-7"},
		{1e-6, "0.000001"}, {math.Copysign(0, -1), "0"}, {12345678901234567890, "12345678901234567000"},
		{a + b, "0.30000000000000004"}, {-2.5e-10, "-2.5e-10"}, {5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"}, {math.Inf(1), "null"}, {math.NaN(), "null"},
		{123e-20, "1.23e-18"}, {1.5e300, "1.5e+300"}, {-100, "-100"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, string(appendJSNumber(nil, tt.in)), "%v", tt.in)
	}
}

func TestToolCallRepeatKeyJSON_Errors(t *testing.T) {
	for _, in := range []string{
		`{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `01`, `1.`, `1e`, `-`, `"abc`, `"a\x"`, `"\u12"`,
		"\"a\x01\"", `tru`, `nul`, `{"a":1} x`, `{a:1}`, `[1 2]`, `+1`, `.5`, `NaN`,
		strings.Repeat("[", maxJSONDepth+2) + strings.Repeat("]", maxJSONDepth+2),
	} {
		_, err := ToolCallRepeatKeyJSON("t", []byte(in))
		var se *SyntaxError
		if assert.ErrorAs(t, err, &se, "%q", in) {
			assert.Contains(t, se.Error(), "loopdetect: args:")
		}
	}
}

func TestCompareUTF16(t *testing.T) {
	// U+FF61 sorts after U+1F600 by code point but before it by UTF-16
	// units (0xFF61 > 0xD83D): JavaScript puts the astral key first.
	keys := []string{"\uff61", "\U0001F600", "a", "\ue000", "\U00010000", ""}
	slices.SortFunc(keys, func(a, b string) int { return compareUTF16([]byte(a), []byte(b)) })
	assert.Equal(t, []string{"", "a", "\U00010000", "\U0001F600", "\ue000", "\uff61"}, keys)
}

// FuzzToolCallRepeatKeyJSON: never panics; reordering object members never
// changes the key; reordering distinct array elements always does.
func FuzzToolCallRepeatKeyJSON(f *testing.F) {
	for _, s := range []string{
		`{"b":2,"a":1}`, `{"l":[1,2,{"y":1,"x":[3,4]}]}`, `[1,"a",null,true,{"k":{}}]`, `"\ud800"`,
		`{"__proto__":1,"10":2,"9":3}`, `{"a":1,"a":2}`, `1e400`, `{"s":"\u2028<>&\u0001"}`, ``,
	} {
		f.Add([]byte(s), uint64(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		k1, err := ToolCallRepeatKeyJSON("fuzz", data)
		if err != nil {
			return
		}
		// encoding/json cannot hold what the permutation needs to keep
		// intact otherwise: lone surrogates, invalid UTF-8, duplicate keys.
		if !json.Valid(data) || !isUTF8(data) || loneSurrogateEscape.Match(data) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		shuffled := marshalShuffled(v, rng)
		k2, err := ToolCallRepeatKeyJSON("fuzz", shuffled)
		require.NoError(t, err)
		if hasDuplicateKeys(data) {
			return
		}
		require.Equal(t, k1, k2, "permuted %s -> %s", data, shuffled)
		if swapped, ok := swapFirstArray(v); ok {
			k3, err := ToolCallRepeatKeyJSON("fuzz", marshalShuffled(swapped, rng))
			require.NoError(t, err)
			require.NotEqual(t, k1, k3, "array order must matter for %s", data)
		}
	})
}

func isUTF8(b []byte) bool { return strings.ToValidUTF8(string(b), "\x00") == string(b) }

// hasDuplicateKeys reports whether some object in data repeats a key (then
// a Go map already lost the earlier value, so the permutation is not exact).
func hasDuplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				ks, _ := k.(string)
				if seen[ks] {
					return true
				}
				seen[ks] = true
				if walk() {
					return true
				}
			}
			dec.Token()
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
			dec.Token()
		}
		return false
	}
	return walk()
}

// marshalShuffled writes v as JSON with every object's members in a random order.
func marshalShuffled(v any, rng *rand.Rand) []byte {
	var buf bytes.Buffer
	var write func(any)
	write = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			buf.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					buf.WriteByte(',')
				}
				kb, _ := json.Marshal(k)
				buf.Write(kb)
				buf.WriteByte(':')
				write(x[k])
			}
			buf.WriteByte('}')
		case []any:
			buf.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					buf.WriteByte(',')
				}
				write(e)
			}
			buf.WriteByte(']')
		default:
			b, _ := json.Marshal(x)
			buf.Write(b)
		}
	}
	write(v)
	return buf.Bytes()
}

// swapFirstArray returns a copy of v in which the first array holding two
// elements with different keys has those two swapped.
func swapFirstArray(v any) (any, bool) {
	switch x := v.(type) {
	case []any:
		for i := 1; i < len(x); i++ {
			if ToolCallRepeatKey("", x[0]) != ToolCallRepeatKey("", x[i]) {
				c := slices.Clone(x)
				c[0], c[i] = c[i], c[0]
				return c, true
			}
		}
		for i, e := range x {
			if s, ok := swapFirstArray(e); ok {
				c := slices.Clone(x)
				c[i] = s
				return c, true
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if s, ok := swapFirstArray(x[k]); ok {
				c := make(map[string]any, len(x))
				for kk, vv := range x {
					c[kk] = vv
				}
				c[k] = s
				return c, true
			}
		}
	}
	return nil, false
}
