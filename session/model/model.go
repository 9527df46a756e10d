// Package model is acpd's language-model client: the Provider interface the
// turn engine streams from, the OpenAI-compatible provider, and the scripted
// provider used for offline demos and tests.
package model

import (
	"context"
	"encoding/json"
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
	Role      Role
	Content   string
	Images    []Image    // user messages only
	Reasoning string     // assistant reasoning_content, kept for providers that want it back
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
}

// Usage is token accounting for one model response.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
	// CachedTokens is the part of PromptTokens the provider served from its
	// prompt cache (billed at a fraction of the input price).
	CachedTokens int
	// ReasoningTokens is the part of CompletionTokens spent reasoning.
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
)

// Event is one item of a model response stream, in order.
type Event struct {
	Kind         EventKind
	Text         string
	ToolCall     ToolCall
	Usage        Usage
	FinishReason string
	RetryErr     error
}

// Request is one model call.
type Request struct {
	Model       string
	System      string
	Messages    []Message
	Tools       []ToolSpec
	MaxTokens   int      // 0: provider default
	Temperature *float64 // nil: provider default
	// Cache, when set, memoises the encoding of Messages across requests of
	// one conversation (see MessageCache); nil encodes everything each time.
	Cache *MessageCache
}

// Provider streams one model response. The sequence ends after the last
// event; a non-nil error is yielded last (a cancelled ctx yields ctx.Err()).
// Tool calls are yielded only when complete, after all text of the attempt.
type Provider interface {
	Stream(ctx context.Context, req Request) iter.Seq2[Event, error]
}
