package model

import (
	"encoding/json"
	"testing"
)

func TestArgumentsText(t *testing.T) {
	for _, c := range []struct {
		name string
		tc   ToolCall
		want string
	}{
		{"empty", ToolCall{}, "{}"},
		{"blank", ToolCall{Arguments: json.RawMessage("  \n")}, "{}"},
		{"compacted", ToolCall{Arguments: json.RawMessage(`{ "a" : [1, 2] }`)}, `{"a":[1,2]}`},
		// An invalid call holds the model's text as a JSON string; the
		// model gets that text back, not the string's encoding.
		{"invalid", ToolCall{Arguments: json.RawMessage(`"{\"a\": 1"`), Invalid: "truncated"}, `{"a": 1`},
		{"valid string kept", ToolCall{Arguments: json.RawMessage(`"x"`)}, `"x"`},
		{"not JSON", ToolCall{Arguments: json.RawMessage(" {oops "), Invalid: "bad"}, "{oops"},
	} {
		if got := c.tc.ArgumentsText(); got != c.want {
			t.Errorf("%s: ArgumentsText() = %q, want %q", c.name, got, c.want)
		}
	}
}
