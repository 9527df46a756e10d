package model

import (
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// overflowMarkers are the texts providers use to refuse a request whose
// input is longer than the model's context window (matched lower-case
// against the error's message, code and type). The list and its sources are
// in README.md ("Context overflow").
var overflowMarkers = []string{
	"context_length_exceeded",                      // OpenAI code (and DeepSeek, Groq, OpenRouter)
	"maximum context length",                       // OpenAI, vLLM, DeepSeek, Mistral message
	"range of input length should be",              // DashScope
	"exceed_context_size_error",                    // llama.cpp type
	"exceeds the available context size",           // llama.cpp message
	"input exceeds the context window",             // OpenAI Responses-style message
	"prompt is too long",                           // Anthropic-compatible gateways
	"exceeds the maximum number of tokens allowed", // Gemini's OpenAI endpoint
	"input is too long",                            // Bedrock and generic gateways
	"reduce the length of the messages",
}

// IsContextOverflow reports whether err is a provider's refusal of a
// request as longer than the model's context window: a 400 or 413 (or an
// error inside a 200 stream) whose message, code or type says so. A 413 on
// its own is not one: proxies answer it for a body over their size limit,
// which says nothing about the model's window, and taking it for an
// overflow would shrink the learned window for good.
func IsContextOverflow(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusOK:
	default:
		return false
	}
	text := strings.ToLower(ae.Message + " " + ae.Code + " " + ae.Type)
	for _, m := range overflowMarkers {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// overflowCount finds the request's size in an overflow message:
// "resulted in 52130 tokens", "you requested 52130 tokens", "prompt is too
// long: 52130 tokens", "input token count (52130)".
var overflowCount = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(?:resulted in|requested|too long:|token count \(|prompt contains)\s*(\d+)`)
})

// OverflowTokens is the request size an overflow error reports, 0 when it
// names none.
func OverflowTokens(err error) int {
	var ae *APIError
	if !errors.As(err, &ae) {
		return 0
	}
	m := overflowCount().FindStringSubmatch(ae.Message)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// overflowLimit finds the model's window in an overflow message: "maximum
// context length is 48000 tokens", "Range of input length should be [1,
// 30720]", "> 200000 maximum", "maximum number of tokens allowed (1048576)".
var overflowLimit = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(?:maximum context length is|input length should be \[\d+,|tokens >|tokens allowed \()\s*(\d+)`)
})

// OverflowLimit is the context window an overflow error names, 0 when it
// names none.
func OverflowLimit(err error) int {
	var ae *APIError
	if !errors.As(err, &ae) {
		return 0
	}
	m := overflowLimit().FindStringSubmatch(ae.Message)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
