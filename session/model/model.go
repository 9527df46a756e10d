// Package model is acpd's provider-neutral language-model interface: the
// Provider the turn engine streams from, the conversation types every wire
// protocol converts from (Message, ToolCall, Thinking) and to (Event,
// Usage), the retrying HTTP Streamer and the error type they share, and the
// scripted provider used for offline demos and tests. Each wire protocol is
// a package of its own beside this one (chat: OpenAI-compatible chat
// completions; anthropic: the Messages API; …), reading its stream with
// package sse; package providers builds one from its configuration.
package model

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
)

// Role of a message in the conversation sent to the model.
type Role string

// Message roles, as the OpenAI chat format names them.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Image is an inline image sent with a user message.
type Image struct {
	MimeType string // e.g. "image/png"
	Data     string // base64
}

// Message is one conversation entry.
type Message struct {
	Role    Role
	Content string
	Images  []Image // user messages only
	// Reasoning is the assistant's thinking as plain text, the way chat
	// completions carry it (reasoning_content) and the way it was shown.
	Reasoning string
	// Thinking is the assistant's thinking as the provider returned it:
	// opaque, provider-tagged blocks that only their own protocol sends
	// back, unmodified and in order (Anthropic's signed and redacted
	// thinking, Responses' encrypted reasoning items, …).
	Thinking  []Thinking
	ToolCalls []ToolCall // assistant messages that called tools
	// ToolCallID and Name identify the call a RoleTool message answers.
	ToolCallID string
	Name       string
}

// ToolSpec is a tool offered to the model.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON schema object
}

// ToolCall is one completed tool call from the model.
type ToolCall struct {
	ID        string          // provider call id ("" when the provider sent none)
	Name      string          // "" when the provider sent none
	Arguments json.RawMessage // valid JSON (repaired if needed); "{}" when empty
	// Invalid is set when the arguments could not be parsed or repaired;
	// Arguments then holds the raw text as a JSON string. The turn treats the
	// call as an invalid-params error (which feeds the loop guard).
	Invalid string
	// Thinking is provider-tagged data that rides on this call and goes
	// back with it (Gemini's thoughtSignature on its functionCall part, a
	// gateway's extra_content); only the protocol named replays it.
	Thinking []Thinking
}

// Thinking is one opaque piece of a model's thinking, kept so it can be sent
// back exactly as received: providers reject thinking that was rebuilt,
// edited or dropped from the middle of a tool loop. Only the protocol named
// by Protocol replays it (and, when Provider is set, only to that provider);
// the others skip it, which is how thinking that another provider cannot
// read is dropped rather than sent where it would be rejected. The JSON
// form is how transcripts store it.
type Thinking struct {
	// Protocol produced the block and alone may replay it: "anthropic",
	// "gemini", "responses", "chat".
	Protocol string `json:"protocol"`
	// Provider is the configured provider id that produced it ("" when
	// unknown); set by the router, which drops blocks of other providers.
	Provider string `json:"provider,omitempty"`
	// Type is the protocol's own kind of block: "thinking",
	// "redacted_thinking", "reasoning", "thought_signature", …
	Type string `json:"type,omitempty"`
	// Text is the thinking text (or its summary), as shown to the user.
	Text string `json:"text,omitempty"`
	// Signature is the provider's signature over the block.
	Signature string `json:"signature,omitempty"`
	// Data is the redacted or encrypted content.
	Data string `json:"data,omitempty"`
	// ID is the provider's id of the item (Responses' rs_…).
	ID string `json:"id,omitempty"`
	// Raw is the block as received, for a protocol that replays it whole.
	Raw json.RawMessage `json:"raw,omitempty"`
	// Prefix is the protocol's digest of the conversation that preceded
	// the block when it was produced. Providers that bind thinking to its
	// conversation reject a block whose prefix was edited since (by a
	// compaction, a changed system prompt); with the digest the protocol
	// drops such a block instead of sending it.
	Prefix string `json:"prefix,omitempty"`
}

// Usage is token accounting for one model response. PromptTokens is the
// whole input, whatever the protocol counts apart (Anthropic reports
// uncached input, cache writes and cache reads separately; they are summed
// here), so the uncached part is PromptTokens − CachedTokens −
// CacheWriteTokens.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
	// CachedTokens is the part of PromptTokens the provider served from its
	// prompt cache (billed at a fraction of the input price).
	CachedTokens int
	// CacheWriteTokens is the part of PromptTokens the provider wrote to its
	// prompt cache (Anthropic bills it above the input price).
	CacheWriteTokens int
	// ReasoningTokens is the part of CompletionTokens spent thinking.
	ReasoningTokens int
}

// EventKind tells which field of an Event is set.
type EventKind int

const (
	EventText      EventKind = iota + 1 // Text: a delta of assistant text
	EventReasoning                      // Text: a delta of reasoning
	EventToolCall                       // ToolCall: one fully assembled call
	EventUsage                          // Usage
	EventFinish                         // FinishReason: "stop", "tool_calls", "length", "content_filter", …
	EventRetry                          // RetryErr: the attempt failed mid-stream and is retried; discard its text and calls
	// EventThinking carries one complete Thinking block, to be kept on the
	// assistant message in the order received. Its text, if any, was
	// already streamed as EventReasoning deltas.
	EventThinking
)

// Event is one item of a model response stream, in order.
type Event struct {
	Kind         EventKind
	Text         string
	ToolCall     ToolCall
	Usage        Usage
	FinishReason string
	RetryErr     error
	Thinking     Thinking
}

// String renders the event on one line, for logs and tests.
func (e Event) String() string {
	switch e.Kind {
	case EventText:
		return "text:" + e.Text
	case EventReasoning:
		return "reasoning:" + e.Text
	case EventToolCall:
		tc := e.ToolCall
		if tc.Invalid != "" {
			return fmt.Sprintf("invalid:%s|%s|%s|%s", tc.ID, tc.Name, tc.Arguments, tc.Invalid)
		}
		return fmt.Sprintf("call:%s|%s|%s", tc.ID, tc.Name, tc.Arguments)
	case EventUsage:
		return fmt.Sprintf("usage:%d/%d/%d", e.Usage.PromptTokens, e.Usage.CompletionTokens, e.Usage.TotalTokens)
	case EventFinish:
		return "finish:" + e.FinishReason
	case EventRetry:
		return "retry:" + e.RetryErr.Error()
	case EventThinking:
		th := e.Thinking
		return fmt.Sprintf("thinking:%s/%s|%s|sig=%s|data=%s", th.Protocol, th.Type, th.Text, th.Signature, th.Data)
	}
	return fmt.Sprintf("unknown kind %d", e.Kind)
}

// Request is one model call.
type Request struct {
	Model       string
	System      string
	Messages    []Message
	Tools       []ToolSpec
	MaxTokens   int      // 0: provider default
	Temperature *float64 // nil: provider default
	// Cache, when set, holds what a protocol keeps between the requests of
	// one conversation (the encoding of the messages already sent); nil
	// encodes everything each time.
	Cache *Cache
	// CacheHints tell protocols with explicit prompt caching where the
	// stable prefix ends; the others ignore them.
	CacheHints CacheHints
	// ThinkingLevel is the thinking the editor chose for the model: ""
	// (the model's configured default), "off", or a level the model's
	// configuration lists ("low", "medium", "high", …); each protocol maps
	// it to its own setting (budget tokens, effort, thinking level).
	ThinkingLevel string
	// NoToolUse sends Tools but lets the model call none of them
	// (tool_choice "none" or the protocol's equivalent): a side question
	// keeps the conversation's tool list, so the provider's cached prefix
	// still matches, and is answered in text.
	NoToolUse bool
}

// CacheHints describe a request's prefix for prompt caching.
type CacheHints struct {
	// Key identifies the conversation (Responses' prompt_cache_key routes a
	// session's requests to the same cache); "" sends none.
	Key string
	// Stable is how many leading Messages the following requests repeat
	// unchanged (a compacted history's summary and what is kept with it):
	// a protocol that places breakpoints puts one after them.
	Stable int
}

// Provider streams one model response. The sequence ends after the last
// event; a non-nil error is yielded last (a cancelled ctx yields ctx.Err()).
// Tool calls are yielded only when complete, after all text of the attempt.
type Provider interface {
	Stream(ctx context.Context, req Request) iter.Seq2[Event, error]
}
