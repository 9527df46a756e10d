package headless

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

func TestParseInputLine(t *testing.T) {
	ok := []struct {
		name, line string
		want       []acp.ContentBlock
	}{
		{"Claude Code's shape", `{"type":"user","message":{"role":"user","content":"hi"},"session_id":"default","parent_tool_use_id":null}`,
			[]acp.ContentBlock{acp.TextBlock("hi")}},
		{"short form", `{"type":"user","content":"hi"}`, []acp.ContentBlock{acp.TextBlock("hi")}},
		{"blocks", `{"type":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}]}`,
			[]acp.ContentBlock{acp.TextBlock("a"), {Type: "image", Data: "AA==", MimeType: "image/png"}}},
		{"role left out", `{"type":"user","message":{"content":"hi"}}`, []acp.ContentBlock{acp.TextBlock("hi")}},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseInputLine(3, []byte(c.line))
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
	bad := []struct{ line, field, msg string }{
		{`not json`, "", "not a JSON object"},
		{`{"type":"user","content":"x"`, "", "not valid JSON"},
		{`{"content":"x"}`, "type", "missing"},
		{`{"type":"control_request","content":"x"}`, "type", `"control_request" is not accepted`},
		{`{"type":7,"content":"x"}`, "type", "must be a string"},
		{`{"type":"user"}`, "content", "missing"},
		{`{"type":"user","content":null}`, "content", "missing"},
		{`{"type":"user","content":"  "}`, "content", "empty"},
		{`{"type":"user","content":[]}`, "content", "empty"},
		{`{"type":"user","content":{"text":"x"}}`, "content", "must be a string or an array"},
		{`{"type":"user","content":[{"type":"text","text":""}]}`, "content[0].text", "empty"},
		{`{"type":"user","content":[{"type":"image","mimeType":"image/png"}]}`, "content[0].data", "missing required field content[0].data"},
		{`{"type":"user","message":{"role":"assistant","content":"x"}}`, "message.role", `"assistant" is not accepted`},
		{`{"type":"user","message":{"role":"user","content":"x"},"content":"y"}`, "content", "not both"},
		{`{"type":"user","message":{"role":"user","content":[{"type":"audio"}]}}`, "message.content[0].data", "missing"},
	}
	for _, c := range bad {
		t.Run(c.line, func(t *testing.T) {
			_, err := ParseInputLine(3, []byte(c.line))
			var le *LineError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, 3, le.Line)
			assert.Equal(t, c.field, le.Field)
			assert.Contains(t, le.Msg, c.msg)
			assert.Contains(t, err.Error(), "input line 3: ")
		})
	}
}

func TestInput_NumbersLinesAndGoesOnAfterABadOne(t *testing.T) {
	in := NewInput(strings.NewReader("{\"type\":\"user\",\"content\":\"a\"}\n\nbad\n" + `{"type":"user","content":"b"}`))
	n, b, err := in.Next()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, "a", b[0].Text)
	_, _, err = in.Next()
	var le *LineError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 3, le.Line, "the blank line counts")
	n, b, err = in.Next()
	require.NoError(t, err, "a last line without a newline is read")
	assert.Equal(t, 4, n)
	assert.Equal(t, "b", b[0].Text)
	_, _, err = in.Next()
	assert.True(t, errors.Is(err, io.EOF))
}

func TestInput_LongLineSkipped(t *testing.T) {
	long := `{"type":"user","content":"` + strings.Repeat("x", MaxInputLine) + "\"}\n"
	in := NewInput(strings.NewReader(long + `{"type":"user","content":"after"}` + "\n"))
	_, _, err := in.Next()
	var le *LineError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 1, le.Line)
	assert.Contains(t, le.Msg, "longer than 16 MiB")
	n, b, err := in.Next()
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, "after", b[0].Text)
}
