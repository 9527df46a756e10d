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

// endless is a body of prefix then b repeated n times, made as it is read,
// counting what was read.
type endless struct {
	prefix []byte
	b      byte
	n      int64
	read   int64
}

func (e *endless) Read(p []byte) (int, error) {
	if len(e.prefix) > 0 {
		c := copy(p, e.prefix)
		e.prefix = e.prefix[c:]
		e.read += int64(c)
		return c, nil
	}
	if e.n <= 0 {
		return 0, io.EOF
	}
	c := int64(len(p))
	c = min(c, e.n)
	for i := range p[:c] {
		p[i] = e.b
	}
	e.n -= c
	e.read += c
	return int(c), nil
}

// One 400 MiB `data:` line without a newline: the reader stops once the
// line passes the bound, having read no more than the bound and one
// buffer, and says so.
func TestReader_HugeLineStopsAtTheBound(t *testing.T) {
	t.Parallel()
	body := &endless{prefix: []byte("data: {\"x\":\""), b: 'a', n: 400 << 20}
	r := NewReader(body)
	defer r.Release()
	_, _, err := r.Next()
	var tl *TooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Equal(t, MaxEventBytes, tl.Limit)
	assert.Contains(t, err.Error(), "over 16 MiB")
	assert.LessOrEqual(t, body.read, int64(MaxEventBytes+128<<10), "read past the bound")
}

// The bound holds for an event of many lines, for a comment line, and
// for the error field; an event just under it passes.
func TestReader_EventBound(t *testing.T) {
	t.Parallel()
	next := func(body string) error {
		r := NewReader(strings.NewReader(body))
		defer r.Release()
		r.SetMax(1000)
		for {
			_, _, err := r.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}
	line := "data: " + strings.Repeat("z", 94) + "\n" // 100 bytes, 94 of data
	var tl *TooLargeError
	require.NoError(t, next(strings.Repeat(line, 10)+"\n"), "10 × 94 data bytes and the newlines between: under 1000")
	require.ErrorAs(t, next(strings.Repeat(line, 12)+"\n"), &tl)
	require.ErrorAs(t, next(": "+strings.Repeat("c", 2000)+"\n\n"), &tl)
	require.ErrorAs(t, next(strings.Repeat("error: "+strings.Repeat("e", 200)+"\n", 6)+"\n"), &tl)
	require.NoError(t, next(strings.Repeat(line, 8)+"\n"+strings.Repeat(line, 8)+"\n"), "the bound is per event")
}
