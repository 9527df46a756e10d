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

func TestToolSpecSchema(t *testing.T) {
	got, err := ToolSpec{Name: "ls", Parameters: json.RawMessage(" \n")}.Schema(0)
	if err != nil || string(got) != `{"type":"object","properties":{}}` {
		t.Errorf("no parameters: %s, %v; want the empty object schema", got, err)
	}
	own := json.RawMessage(`{"type":"object","properties":{"p":{"type":"string"}}}`)
	if got, err := (ToolSpec{Name: "ls", Parameters: own}).Schema(0); err != nil || string(got) != string(own) {
		t.Errorf("own schema: %s, %v; want it unchanged", got, err)
	}
	if _, err := (ToolSpec{Parameters: own}).Schema(2); err == nil || err.Error() != "tools[2].name: required" {
		t.Errorf("nameless tool: %v", err)
	}
	if _, err := (ToolSpec{Name: "ls", Parameters: json.RawMessage(`{`)}).Schema(1); err == nil || err.Error() != "tools[1].parameters: not valid JSON" {
		t.Errorf("bad schema: %v", err)
	}
}
