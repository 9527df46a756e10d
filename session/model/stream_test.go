package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"5", 5 * time.Second},
		{"0.5", 500 * time.Millisecond},
		{"-3", 0},
		{"NaN", 0},
		{"99999", maxRetryAfter},
		{now.Add(42 * time.Second).Format(http.TimeFormat), 42 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, parseRetryAfter(tt.in, now), tt.in)
	}
}

// TestNewHTTPError_Shapes covers the error bodies of spec §4.1: the
// provider's message is surfaced verbatim, code may be a string or a
// number, and only 408, 429 and 5xx are retryable.
func TestNewHTTPError_Shapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		status         int
		body           string
		msg, typ, code string
		retry          bool
	}{
		{"openai 401", 401, `{"error":{"message":"Incorrect API key provided: sk-***","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			"Incorrect API key provided: sk-***", "invalid_request_error", "invalid_api_key", false},
		{"openai 500", 500, `{"error":{"message":"The server had an error processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
			"The server had an error processing your request. Sorry about that!", "server_error", "", true},
		{"openrouter 429 numeric code", 429, `{"error":{"message":"Rate limit exceeded: free-models-per-min","code":429,"metadata":{"headers":{"X-RateLimit-Limit":"1"},"provider_name":null}},"user_id":"u"}`,
			"Rate limit exceeded: free-models-per-min", "", "429", true},
		{"dashscope 400", 400, `{"error":{"code":"invalid_parameter_error","param":null,"message":"parameter.enable_thinking must be set to false for non-streaming calls","type":"invalid_request_error"},"id":"chatcmpl-1","request_id":"r"}`,
			"parameter.enable_thinking must be set to false for non-streaming calls", "invalid_request_error", "invalid_parameter_error", false},
		{"dashscope loop guard 400", 400, `{"error":{"message":"<400> InternalError.Algo.InvalidParameter: Repetitive tool calls detected in the conversation history.","type":"invalid_request_error","param":null,"code":null},"request_id":"r"}`,
			"<400> InternalError.Algo.InvalidParameter: Repetitive tool calls detected in the conversation history.", "invalid_request_error", "", false},
		{"deepseek 400 reasoning_content", 400, `{"error":{"message":"The reasoning_content in the thinking mode must be passed back to the API.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			"The reasoning_content in the thinking mode must be passed back to the API.", "invalid_request_error", "invalid_request_error", false},
		{"vllm new", 400, `{"error":{"message":"bad model","type":"BadRequestError","param":null,"code":400}}`,
			"bad model", "BadRequestError", "400", false},
		{"vllm old top-level", 400, `{"object":"error","message":"bad model","type":"BadRequestError","param":null,"code":400}`,
			"bad model", "BadRequestError", "400", false},
		{"ollama 404", 404, `{"error":{"message":"model \"qwen9\" not found","type":"not_found_error","param":null,"code":null}}`,
			`model "qwen9" not found`, "not_found_error", "", false},
		{"ollama native", 500, `{"error":"model not found"}`, "model not found", "", "", true},
		{"llama.cpp", 400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`,
			"the request exceeds the available context size, try increasing it", "exceed_context_size_error", "400", false},
		{"408", 408, `{"error":{"message":"Request timed out","code":408}}`, "Request timed out", "", "408", true},
		{"html", 502, `<html>bad gateway</html>`, "HTTP 502: <html>bad gateway</html>", "", "", true},
		{"empty", 503, ``, "HTTP 503: Service Unavailable", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newHTTPError(tt.status, http.Header{}, []byte(tt.body), time.Now())
			assert.Equal(t, tt.msg, e.Error())
			assert.Equal(t, tt.typ, e.Type)
			assert.Equal(t, tt.code, e.Code)
			assert.Equal(t, tt.status, e.Status)
			assert.Equal(t, tt.body, e.Body)
			assert.Equal(t, tt.retry, e.Retryable())
		})
	}
}

// FuzzAssemble feeds arbitrary bytes both as SSE bodies and as a sequence
// of chunk payloads (one per line): nothing may panic, and every call the
// assembler emits carries valid JSON arguments.
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
		check := func(ev Event) bool {
			if ev.Kind == EventToolCall && !bytesValidJSON(ev.ToolCall.Arguments) {
				t.Fatalf("invalid arguments JSON %q", ev.ToolCall.Arguments)
			}
			return true
		}
		_ = streamSSE(bytes.NewReader(data), NewAssembler(nil), func() {}, check)

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
		err := streamSSE(bytes.NewReader(body), NewAssembler(nil), func() {}, func(ev Event) bool {
			if ev.Kind == EventToolCall {
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
