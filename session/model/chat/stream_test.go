package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

func TestSSEReader_LongLineAndFraming(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 300<<10) // past bufio's buffer: whole write_file contents in one line
	body := ": comment\r\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"write_file","arguments":"{\"content\":\"` + big + `\"}"}}]}}]}` + "\r\n\r\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"id: 7\nretry: 100\nevent: message\n" +
		"data: [DONE]" // no trailing newline at all
	got, err := assembleBody(t, []byte(body))
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, `call:c|write_file|{"content":"`+big+`"}`, got[0])
	assert.Equal(t, "finish:tool_calls", got[1])
}

func TestSSEReader_EventErrorType(t *testing.T) {
	t.Parallel()
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\nevent: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\n"
	got, err := assembleBody(t, []byte(body))
	require.Error(t, err)
	assert.Equal(t, []string{"text:a", "error:boom"}, got)
}

func FuzzAssemble(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/transcripts/*.sse")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err == nil {
			f.Add(b)
			// The same chunks one per line, for the Feed-per-line half.
			f.Add(bytes.ReplaceAll(b, []byte("data: "), nil))
		}
	}
	f.Add([]byte(`{"choices":[{"index":9007199254740993,"delta":{"tool_calls":[{"index":-5,"id":"","function":{"arguments":7}}]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(ev model.Event) bool {
			if ev.Kind == model.EventToolCall && !bytesValidJSON(ev.ToolCall.Arguments) {
				t.Fatalf("invalid arguments JSON %q", ev.ToolCall.Arguments)
			}
			return true
		}
		_ = streamSSE(bytes.NewReader(data), NewAssembler(nil), check)

		// The assembler reuses its decode targets from chunk to chunk; a
		// twin decoding every chunk afresh must see exactly the same.
		a, ref := NewAssembler(nil), NewAssembler(nil)
		ref.fresh = true
		for line := range bytes.SplitSeq(data, []byte{'\n'}) {
			evs, err := a.Feed(line)
			revs, rerr := ref.Feed(line)
			if !reflect.DeepEqual(evs, revs) || fmt.Sprint(err) != fmt.Sprint(rerr) {
				t.Fatalf("reused decode targets diverge on %q:\n%#v %v\n%#v %v", line, evs, err, revs, rerr)
			}
			if err != nil {
				break
			}
			for _, ev := range evs {
				check(ev)
			}
		}
		evs, err := a.Finish()
		revs, rerr := ref.Finish()
		if !reflect.DeepEqual(evs, revs) || fmt.Sprint(err) != fmt.Sprint(rerr) {
			t.Fatalf("reused decode targets diverge at Finish:\n%#v %v\n%#v %v", evs, err, revs, rerr)
		}
		for _, ev := range evs {
			check(ev)
		}
	})
}

func bytesValidJSON(b []byte) bool { return len(b) > 0 && jsonValid(b) }

// benchBody is about 1 MiB of SSE: small text deltas, then one tool call
// whose arguments arrive in small fragments, as real providers send them.
func benchBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for i := 0; b.Len() < size/2; i++ {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok%d "},"finish_reason":null}]}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"write_file","arguments":"{\"content\":\""}}]},"finish_reason":null}]}` + "\n\n")
	for i := 0; b.Len() < size-400; i++ {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"line %d\\n"}}]},"finish_reason":null}]}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]},"finish_reason":null}]}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}` + "\n\ndata: [DONE]\n\n")
	return b.Bytes()
}

func BenchmarkAssemble1MiB(b *testing.B) {
	body := benchBody(1 << 20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		calls := 0
		err := streamSSE(bytes.NewReader(body), NewAssembler(nil), func(ev model.Event) bool {
			if ev.Kind == model.EventToolCall {
				calls++
			}
			return true
		})
		if err != nil || calls != 1 {
			b.Fatalf("err %v, calls %d", err, calls)
		}
	}
}

func jsonValid(b []byte) bool { return json.Valid(b) }
