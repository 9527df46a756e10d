package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimitMessage is the error text once HTTP 429 outlasts every retry
// (qwen-code's wording, so users see the same thing in both agents).
const RateLimitMessage = "Rate limit exceeded. Try again later."

// ErrTruncated reports a stream that ended (EOF or [DONE]) without a
// finish_reason: a dropped connection or a server that gave up (LM Studio on
// context overflow). It is retried like a cut connection.
var ErrTruncated = errors.New("model stream ended without a finish reason")

// APIError is an error reported by the provider: an HTTP error status before
// the stream, or an error inside a 200 stream (Status is then 200). Error()
// is the provider's own message, verbatim, so users see what the server said.
type APIError struct {
	Status  int    // HTTP status; 200 for an error reported mid-stream
	Message string // provider message (or a synthesised one when the body had none)
	Type    string // provider error type, e.g. "invalid_request_error"
	Code    string // provider error code; numbers are rendered in decimal
	// RetryAfter is the server's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// Body is the raw error body (capped), for logs.
	Body string
	// FinishReason is set when the error came as finish_reason "error" or
	// "error_finish" (DashScope throttling) instead of an error object.
	FinishReason string
}

func (e *APIError) Error() string { return e.Message }

// Retryable reports whether the same request may succeed later: 408, 429
// and 5xx statuses and every mid-stream failure. Other 4xx are final.
func (e *APIError) Retryable() bool {
	switch {
	case e.Status == http.StatusOK:
		return true
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests:
		return true
	case e.Status >= 500:
		return true
	}
	return false
}

// wireError is the union of the error body shapes providers send:
// {"error":{...}} (OpenAI, DashScope, DeepSeek, OpenRouter, new vLLM, Ollama,
// llama.cpp), top-level {"object":"error","message":...} (old vLLM) and
// {"error":"text"} (Ollama's native API).
type wireError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// ParseErrorObject decodes the value of an `error` key: an object or a string.
func ParseErrorObject(raw []byte) (msg, typ, code string, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", "", "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, "", "", true
		}
		return "", "", "", false
	}
	var w wireError
	if json.Unmarshal(raw, &w) != nil {
		return "", "", "", false
	}
	return w.Message, w.Type, rawCode(w.Code), true
}

// rawCode renders a code that may be a string or a number (OpenRouter).
func rawCode(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// NewHTTPError builds the APIError for a non-200 response.
func NewHTTPError(status int, header http.Header, body []byte, now time.Time) *APIError {
	e := &APIError{Status: status, Body: string(body)}
	var top struct {
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &top) == nil {
		if msg, typ, code, ok := ParseErrorObject(top.Error); ok {
			e.Message, e.Type, e.Code = msg, typ, code
		} else if top.Message != "" {
			e.Message, e.Type, e.Code = top.Message, top.Type, rawCode(top.Code)
		}
	}
	if e.Message == "" {
		text := strings.TrimSpace(string(body))
		if text == "" {
			text = http.StatusText(status)
		}
		e.Message = fmt.Sprintf("HTTP %d: %s", status, text)
	}
	e.RetryAfter = ParseRetryAfter(header.Get("Retry-After"), now)
	return e
}

// maxRetryAfter bounds a server's Retry-After so a bogus header cannot park a
// turn for hours; the user can always cancel sooner.
const maxRetryAfter = 10 * time.Minute

// ParseRetryAfter accepts delta-seconds or an HTTP date (RFC 9110 §10.2.3).
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if !(secs > 0) { // also rejects NaN
			return 0
		}
		return time.Duration(min(secs, maxRetryAfter.Seconds()) * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}
