package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// NormalizeArgs turns a call's concatenated argument text into a JSON
// object. Safe repairs: blank or null → {}; an object encoded as a JSON
// string is unwrapped; an object repeated back to back (a replayed whole
// payload) or followed only by stray closing brackets keeps the object.
// Anything else is reported as invalid with the raw text as a JSON string;
// cut is set when the text ends inside the JSON (truncated output).
func NormalizeArgs(raw []byte) (args json.RawMessage, invalid string, cut bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return json.RawMessage("{}"), "", false
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return rawString(raw), "arguments are truncated JSON (the output was cut off)", true
		}
		return rawString(raw), "arguments are not valid JSON: " + err.Error(), false
	}
	obj, why := asObject(first)
	if why != "" {
		return rawString(raw), why, false
	}
	if rest := t[dec.InputOffset():]; !harmlessTail(rest, first) {
		return rawString(raw), "arguments have trailing data after the JSON object", false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, obj) != nil {
		return rawString(raw), "arguments are not valid JSON", false
	}
	return json.RawMessage(buf.Bytes()), "", false
}

func asObject(v json.RawMessage) (json.RawMessage, string) {
	switch v[0] {
	case '{':
		return v, ""
	case 'n':
		return json.RawMessage("{}"), ""
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, "arguments are not valid JSON"
		}
		inner := bytes.TrimSpace([]byte(s))
		if len(inner) == 0 {
			return json.RawMessage("{}"), ""
		}
		if inner[0] == '{' && json.Valid(inner) {
			return inner, ""
		}
		return nil, "arguments are a JSON string, not an object"
	case '[':
		return nil, "arguments are a JSON array, not an object"
	}
	return nil, "arguments are a JSON " + jsonKind(v) + ", not an object"
}

func jsonKind(v json.RawMessage) string {
	if v[0] == 't' || v[0] == 'f' {
		return "boolean"
	}
	return "number"
}

// harmlessTail accepts what may follow the first value: nothing, stray
// closing brackets, or exact repeats of the first value.
func harmlessTail(rest []byte, first json.RawMessage) bool {
	rest = bytes.TrimSpace(rest)
	if len(rest) == 0 {
		return true
	}
	if len(bytes.Trim(rest, "}] \t\r\n")) == 0 {
		return true
	}
	var want bytes.Buffer
	if json.Compact(&want, first) != nil {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	for dec.More() {
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return false
		}
		var got bytes.Buffer
		if json.Compact(&got, v) != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
			return false
		}
	}
	// More() stops at a closing bracket; anything left must be closers.
	return len(bytes.Trim(rest[dec.InputOffset():], "}] \t\r\n")) == 0
}

func rawString(raw []byte) json.RawMessage {
	b, _ := json.Marshal(string(raw)) // a string always marshals
	return b
}

// ArgumentsText is a call's arguments as the text protocols that carry them
// as a string (chat, Responses) send back in history: compact JSON, or the
// model's own text for a call that was invalid, so the model sees what it
// wrote rather than the JSON string it was wrapped in.
func (tc ToolCall) ArgumentsText() string {
	raw := bytes.TrimSpace(tc.Arguments)
	if len(raw) == 0 {
		return "{}"
	}
	if tc.Invalid != "" && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return strings.TrimSpace(string(raw))
	}
	return buf.String()
}

// emptySchema stands for a tool declared without parameters: the APIs that
// require a schema accept an object with no properties.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// Schema is the parameters schema of t, the i-th tool of a request, as the
// protocols that require one send it: {"type":"object","properties":{}}
// when t has none. A tool without a name or with parameters that are not
// JSON is an error naming tools[i] and the field.
func (t ToolSpec) Schema(i int) (json.RawMessage, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("tools[%d].name: required", i)
	}
	if len(bytes.TrimSpace(t.Parameters)) == 0 {
		return emptySchema, nil
	}
	if !json.Valid(t.Parameters) {
		return nil, fmt.Errorf("tools[%d].parameters: not valid JSON", i)
	}
	return t.Parameters, nil
}
