package sse

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll renders every event of body as kind:name:data.
func readAll(t *testing.T, body string) []string {
	t.Helper()
	r := NewReader(strings.NewReader(body))
	defer r.Release()
	var out []string
	for {
		k, d, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%d:%s:%s", k, r.Name(), d))
	}
}

func TestReader_Framings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       []string
	}{
		{"anthropic named events", "event: message_start\ndata: {\"a\":1}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
			[]string{`1:message_start:{"a":1}`, `1:ping:{"type": "ping"}`}},
		{"gemini CRLF blank lines", "data: {\"x\":1}\r\n\r\ndata: {\"x\":2}\r\n\r\n", []string{`1::{"x":1}`, `1::{"x":2}`}},
		{"event error", "event: error\ndata: {\"type\":\"error\"}\n\n", []string{`2:error:{"type":"error"}`}},
		{"error field", "error: {\"m\":1}\n\ndata: [DONE]\n\n", []string{`2::{"m":1}`, `3::`}},
		{"multi-line data, comment, no final blank line", ": hi\ndata: a\ndata: b", []string{"1::a\nb"}},
		{"name does not leak to the next event", "event: x\ndata: 1\n\ndata: 2\n\n", []string{"1:x:1", "1::2"}},
		{"a line past the buffer", "data: " + strings.Repeat("y", 100<<10) + "\n\n", []string{"1::" + strings.Repeat("y", 100<<10)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, readAll(t, tt.body))
		})
	}
}
