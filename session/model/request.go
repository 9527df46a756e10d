package model

import (
	segjson "github.com/segmentio/encoding/json"

	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Wire shapes of a chat.completions request (spec §2).
type chatRequest struct {
	Model         string         `json:"model,omitempty"`
	Messages      []chatMessage  `json:"messages"`
	Tools         []chatTool     `json:"tools,omitempty"` // some providers reject tools:[]
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"` // DashScope refuses max_completion_tokens
	Temperature   *float64       `json:"temperature,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, null (assistant with only tool calls) or parts.
	Content          any            `json:"content"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a string holding JSON, not an object
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatToolSpec `json:"function"`
}

type chatToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// buildRequest converts a Request to the wire body. Bad input is reported
// with the offending field's path.
func buildRequest(req Request) ([]byte, error) {
	out := chatRequest{
		Model:         req.Model,
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
		MaxTokens:     req.MaxTokens,
		Temperature:   req.Temperature,
		Messages:      make([]chatMessage, 0, len(req.Messages)+1),
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("maxTokens: must not be negative, got %d", req.MaxTokens)
	}
	if req.System != "" {
		out.Messages = append(out.Messages, chatMessage{Role: string(RoleSystem), Content: req.System})
	}
	// Calls without a provider id get call_<msg>_<n>; the tool results that
	// follow with an empty ToolCallID take those ids in order, so the pairs
	// the provider checks stay intact.
	var pending []string
	for i, m := range req.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case RoleSystem:
			out.Messages = append(out.Messages, chatMessage{Role: string(RoleSystem), Content: m.Content})
		case RoleUser:
			cm := chatMessage{Role: string(RoleUser), Content: m.Content}
			if len(m.Images) > 0 {
				parts := make([]chatPart, 0, len(m.Images)+1)
				if m.Content != "" {
					parts = append(parts, chatPart{Type: "text", Text: m.Content})
				}
				for j, img := range m.Images {
					if img.MimeType == "" || img.Data == "" {
						return nil, fmt.Errorf("%s.images[%d]: mimeType and data are required", field, j)
					}
					parts = append(parts, chatPart{Type: "image_url", ImageURL: &imageURL{
						URL: "data:" + img.MimeType + ";base64," + img.Data,
					}})
				}
				cm.Content = parts
			}
			out.Messages = append(out.Messages, cm)
		case RoleAssistant:
			cm := chatMessage{Role: string(RoleAssistant)}
			if m.Content != "" {
				cm.Content = m.Content
			} else if m.Reasoning != "" {
				cm.Content = "" // Ollama rejects null content next to reasoning_content
			}
			if m.Reasoning != "" {
				r := m.Reasoning
				cm.ReasoningContent = &r
			}
			pending = pending[:0]
			for j, tc := range m.ToolCalls {
				if tc.Name == "" {
					return nil, fmt.Errorf("%s.toolCalls[%d].name: required", field, j)
				}
				id := tc.ID
				if id == "" {
					id = fmt.Sprintf("call_%d_%d", i, j)
					pending = append(pending, id)
				}
				cm.ToolCalls = append(cm.ToolCalls, chatToolCall{
					ID: id, Type: "function",
					Function: chatFunction{Name: tc.Name, Arguments: argumentsText(tc)},
				})
			}
			out.Messages = append(out.Messages, cm)
		case RoleTool:
			id := m.ToolCallID
			if id == "" {
				if len(pending) == 0 {
					return nil, fmt.Errorf("%s.toolCallId: required (no preceding call without an id)", field)
				}
				id, pending = pending[0], pending[1:]
			}
			out.Messages = append(out.Messages, chatMessage{Role: string(RoleTool), Content: m.Content, ToolCallID: id})
		default:
			return nil, fmt.Errorf("%s.role: unknown role %q", field, m.Role)
		}
	}
	for i, t := range req.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("tools[%d].name: required", i)
		}
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 {
			params = emptySchema
		} else if !json.Valid(params) {
			return nil, fmt.Errorf("tools[%d].parameters: not valid JSON", i)
		}
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: chatToolSpec{
			Name: t.Name, Description: t.Description, Parameters: params,
		}})
	}
	// segmentio encodes the growing history about twice as fast as
	// encoding/json; the whole history is re-sent on every model request.
	return segjson.Marshal(out)
}

// argumentsText is the arguments string echoed back in history: compact
// JSON, or the model's raw text for a call that was invalid.
func argumentsText(tc ToolCall) string {
	raw := bytes.TrimSpace(tc.Arguments)
	if len(raw) == 0 {
		return "{}"
	}
	if tc.Invalid != "" && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return strings.TrimSpace(string(raw))
	}
	return buf.String()
}
