package model

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

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
		assert.Equal(t, tt.want, ParseRetryAfter(tt.in, now), tt.in)
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
			e := NewHTTPError(tt.status, http.Header{}, []byte(tt.body), time.Now())
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

func TestNormalizeArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		invalid        bool
		cut            bool
	}{
		{"object", `{"a": 1}`, `{"a":1}`, false, false},
		{"empty", ``, `{}`, false, false},
		{"blank", " \n", `{}`, false, false},
		{"null", `null`, `{}`, false, false},
		{"string object", `"{\"a\":1}"`, `{"a":1}`, false, false},
		{"empty string", `""`, `{}`, false, false},
		{"duplicates", `{"a":1}{"a": 1}{"a":1}`, `{"a":1}`, false, false},
		{"different concatenation", `{"a":1}{"a":2}`, `"{\"a\":1}{\"a\":2}"`, true, false},
		{"stray closers", `{"a":[1]}]}`, `{"a":[1]}`, false, false},
		{"truncated", `{"a":"b`, `"{\"a\":\"b"`, true, true},
		{"truncated nested", `{"a":{"b":1}`, `"{\"a\":{\"b\":1}"`, true, true},
		{"syntax", `{"a": }`, `"{\"a\": }"`, true, false},
		{"number", `42`, `"42"`, true, false},
		{"bool", `true`, `"true"`, true, false},
		{"array", `[]`, `"[]"`, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, invalid, cut := NormalizeArgs([]byte(tt.in))
			assert.Equal(t, tt.want, string(got))
			assert.Equal(t, tt.invalid, invalid != "", invalid)
			assert.Equal(t, tt.cut, cut)
			assert.True(t, json.Valid(got))
		})
	}
}
