package responses

import (
	"encoding/json"
	"fmt"

	"github.com/acpd/acpd/session/model"
)

// Wire shapes of a Responses request for a client that keeps its own
// history: store false, and the reasoning items' ciphertext included so
// they can be sent back.
type wireRequest struct {
	Model           string            `json:"model"`
	Instructions    string            `json:"instructions,omitempty"`
	Input           []json.RawMessage `json:"input"`
	Tools           []wireTool        `json:"tools,omitempty"`
	ToolChoice      string            `json:"tool_choice,omitempty"`
	Stream          bool              `json:"stream"`
	Store           bool              `json:"store"`
	Include         []string          `json:"include,omitempty"`
	PromptCacheKey  string            `json:"prompt_cache_key,omitempty"`
	Reasoning       *wireReasoning    `json:"reasoning,omitempty"`
	MaxOutputTokens int               `json:"max_output_tokens,omitempty"`
	Temperature     *float64          `json:"temperature,omitempty"`
}

type wireTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type wireReasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

type inputMessage struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type inputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
}

type inputCall struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type inputOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

// buildInput says how one request is built beyond the model.Request.
type buildInput struct {
	// reasoning returns the reasoning items (raw, as received) to send back
	// before the i-th message, an assistant message.
	reasoning func(i int, m model.Message) []json.RawMessage
	cacheKey  string
	effort    string // reasoning.effort; "" sends no reasoning parameter
	summary   string // reasoning.summary, with effort
}

// buildRequest converts req to the wire body. Bad input is reported with
// the offending field's path.
func buildRequest(req model.Request, in buildInput) ([]byte, error) {
	if req.Model == "" {
		return nil, fmt.Errorf("model: required")
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("maxTokens: must not be negative, got %d", req.MaxTokens)
	}
	out := wireRequest{
		Model:           req.Model,
		Instructions:    req.System,
		Stream:          true,
		Store:           false,
		Include:         []string{"reasoning.encrypted_content"},
		PromptCacheKey:  in.cacheKey,
		MaxOutputTokens: req.MaxTokens,
		Temperature:     req.Temperature,
		Input:           make([]json.RawMessage, 0, len(req.Messages)+4),
	}
	if in.effort != "" || in.summary != "" {
		out.Reasoning = &wireReasoning{Effort: in.effort, Summary: in.summary}
	}
	for i, t := range req.Tools {
		params, err := t.Schema(i)
		if err != nil {
			return nil, err
		}
		out.Tools = append(out.Tools, wireTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params})
	}
	if len(out.Tools) > 0 {
		out.ToolChoice = "auto"
		if req.NoToolUse {
			out.ToolChoice = "none"
		}
	}
	add := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out.Input = append(out.Input, b)
		return nil
	}
	// Calls without an id get call_<msg>_<n>, and the results that follow
	// without one take those ids in order: the API pairs them by call_id.
	var pending []string
	for i, m := range req.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		var err error
		switch m.Role {
		case model.RoleSystem:
			err = add(inputMessage{Type: "message", Role: "system", Content: m.Content})
		case model.RoleUser:
			var content any = m.Content
			if len(m.Images) > 0 {
				parts := make([]inputPart, 0, len(m.Images)+1)
				if m.Content != "" {
					parts = append(parts, inputPart{Type: "input_text", Text: m.Content})
				}
				for j, img := range m.Images {
					if img.MimeType == "" || img.Data == "" {
						return nil, fmt.Errorf("%s.images[%d]: mimeType and data are required", field, j)
					}
					parts = append(parts, inputPart{Type: "input_image", ImageURL: "data:" + img.MimeType + ";base64," + img.Data})
				}
				content = parts
			}
			err = add(inputMessage{Type: "message", Role: "user", Content: content})
		case model.RoleAssistant:
			// Reasoning goes back only with the calls it led to: that is
			// where the API needs it to continue, and an answer's reasoning
			// is not used by later turns.
			if len(m.ToolCalls) > 0 && in.reasoning != nil {
				for _, raw := range in.reasoning(i, m) {
					out.Input = append(out.Input, raw)
				}
			}
			if m.Content != "" {
				if err = add(inputMessage{Type: "message", Role: "assistant", Content: m.Content}); err != nil {
					break
				}
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
				if err = add(inputCall{Type: "function_call", CallID: id, Name: tc.Name, Arguments: tc.ArgumentsText()}); err != nil {
					break
				}
			}
		case model.RoleTool:
			id := m.ToolCallID
			if id == "" {
				if len(pending) == 0 {
					return nil, fmt.Errorf("%s.toolCallId: required (no preceding call without an id)", field)
				}
				id, pending = pending[0], pending[1:]
			}
			err = add(inputOutput{Type: "function_call_output", CallID: id, Output: m.Content})
		default:
			return nil, fmt.Errorf("%s.role: unknown role %q", field, m.Role)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
	}
	return json.Marshal(out)
}
