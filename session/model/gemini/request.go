package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acpd/acpd/session/model"
)

// SkipSignature is the value Google documents for a function call the model
// did not sign in this conversation (history from another provider, or
// rewritten by compaction): Gemini 3 refuses an unsigned first call of a
// step, and accepts this in its place.
const SkipSignature = "skip_thought_signature_validator"

// Wire shapes of a generateContent request.
type wireRequest struct {
	Contents          []wireContent     `json:"contents"`
	SystemInstruction *wireContent      `json:"systemInstruction,omitempty"`
	Tools             []wireTools       `json:"tools,omitempty"`
	ToolConfig        *wireToolConfig   `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type wireContent struct {
	Role  string    `json:"role,omitempty"`
	Parts []outPart `json:"parts"`
}

type outPart struct {
	Text             *string      `json:"text,omitempty"`
	Thought          bool         `json:"thought,omitempty"`
	InlineData       *inlineData  `json:"inlineData,omitempty"`
	FunctionCall     *outCall     `json:"functionCall,omitempty"`
	FunctionResponse *outResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string       `json:"thoughtSignature,omitempty"`
}

type inlineData struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type outCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type outResponse struct {
	ID       string `json:"id,omitempty"`
	Name     string `json:"name"`
	Response struct {
		Output string `json:"output"`
	} `json:"response"`
}

type wireTools struct {
	FunctionDeclarations []funcDecl `json:"functionDeclarations"`
}

// funcDecl sends the schema as parametersJsonSchema, which takes JSON Schema
// as tools (and MCP servers) write it; `parameters` takes only an OpenAPI
// subset and refuses additionalProperties, $ref and the like.
type funcDecl struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type wireToolConfig struct {
	FunctionCallingConfig struct {
		Mode string `json:"mode"`
	} `json:"functionCallingConfig"`
}

type generationConfig struct {
	MaxOutputTokens int             `json:"maxOutputTokens,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	ThinkingConfig  *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

func str(s string) *string { return &s }

// buildInput says how one request is built beyond the model.Request.
type buildInput struct {
	thinking *thinkingConfig
}

// Thinking block types this protocol produces and replays.
const (
	// typeSignature rides on a call: the thoughtSignature of its part.
	typeSignature = "thought_signature"
	// typeTextParts is a turn's text parts with the signatures some of
	// them carried (Signature empty on the others), kept so the text goes
	// back split as it came, each signature on its own part.
	typeTextParts = "text_parts"
)

// callSignature is the signature Gemini put on tc's part, "" if none.
func callSignature(tc model.ToolCall) string {
	for _, th := range tc.Thinking {
		if th.Protocol == Protocol && th.Type == typeSignature {
			return th.Signature
		}
	}
	return ""
}

// textParts are m's text parts as Gemini sent them, when a signature rode on
// one and they still make up m's text.
func textParts(m model.Message) []outPart {
	for _, th := range m.Thinking {
		if th.Protocol != Protocol || th.Type != typeTextParts {
			continue
		}
		var parts []textPart
		if json.Unmarshal(th.Raw, &parts) != nil {
			return nil
		}
		var text strings.Builder
		out := make([]outPart, 0, len(parts))
		for _, p := range parts {
			text.WriteString(p.Text)
			out = append(out, outPart{Text: str(p.Text), ThoughtSignature: p.Signature})
		}
		if text.String() != m.Content {
			return nil // edited since (compaction): sent as plain text
		}
		return out
	}
	return nil
}

// textPart is one element of a typeTextParts block.
type textPart struct {
	Text      string `json:"text"`
	Signature string `json:"thoughtSignature,omitempty"`
}

// assistantParts is the model turn for m: its text (split as received when
// a part was signed), then its calls, each with the signature Gemini put on
// it. A step whose first call has no signature (history from another
// provider, or one the signature was lost from) gets SkipSignature.
func assistantParts(m model.Message) []outPart {
	out := textParts(m)
	if out == nil && m.Content != "" {
		out = append(out, outPart{Text: str(m.Content)})
	}
	for j, tc := range m.ToolCalls {
		p := outPart{FunctionCall: &outCall{ID: tc.ID, Name: tc.Name, Args: callArgs(tc)}, ThoughtSignature: callSignature(tc)}
		if j == 0 && p.ThoughtSignature == "" {
			p.ThoughtSignature = SkipSignature
		}
		out = append(out, p)
	}
	return out
}

// callArgs is a call's arguments as the object Gemini takes: an invalid
// call's raw text is wrapped, since args must be an object.
func callArgs(tc model.ToolCall) json.RawMessage {
	raw := bytes.TrimSpace(tc.Arguments)
	if len(raw) == 0 || tc.Invalid != "" || raw[0] != '{' || !json.Valid(raw) {
		if len(raw) == 0 {
			return json.RawMessage("{}")
		}
		b, _ := json.Marshal(map[string]json.RawMessage{"invalid_arguments": jsonString(raw)})
		return b
	}
	return raw
}

func jsonString(raw []byte) json.RawMessage {
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(s)
		return b
	}
	b, _ := json.Marshal(string(raw))
	return b
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
	out := wireRequest{Contents: make([]wireContent, 0, len(req.Messages))}
	if req.System != "" {
		out.SystemInstruction = &wireContent{Parts: []outPart{{Text: str(req.System)}}}
	}
	if req.MaxTokens > 0 || req.Temperature != nil || in.thinking != nil {
		out.GenerationConfig = &generationConfig{MaxOutputTokens: req.MaxTokens, Temperature: req.Temperature, ThinkingConfig: in.thinking}
	}
	if len(req.Tools) > 0 {
		decls := make([]funcDecl, 0, len(req.Tools))
		for i, t := range req.Tools {
			if t.Name == "" {
				return nil, fmt.Errorf("tools[%d].name: required", i)
			}
			params := bytes.TrimSpace(t.Parameters)
			if len(params) > 0 && !json.Valid(params) {
				return nil, fmt.Errorf("tools[%d].parameters: not valid JSON", i)
			}
			decls = append(decls, funcDecl{Name: t.Name, Description: t.Description, ParametersJSONSchema: params})
		}
		out.Tools = []wireTools{{FunctionDeclarations: decls}}
		out.ToolConfig = &wireToolConfig{}
		out.ToolConfig.FunctionCallingConfig.Mode = "AUTO"
		if req.NoToolUse {
			out.ToolConfig.FunctionCallingConfig.Mode = "NONE"
		}
	}
	// appendTo adds parts to the conversation, merged into the last content
	// when it has the same role: Gemini wants a step's function responses
	// in one content, and user text after them in the same turn.
	appendTo := func(role string, parts ...outPart) {
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			return
		}
		out.Contents = append(out.Contents, wireContent{Role: role, Parts: parts})
	}
	// names maps the calls of the last model turn by id, and in order, for
	// results that do not name their function.
	var calls []model.ToolCall
	answered := 0
	for i, m := range req.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case model.RoleSystem:
			appendTo("user", outPart{Text: str(m.Content)})
		case model.RoleUser:
			var parts []outPart
			if m.Content != "" || len(m.Images) == 0 {
				parts = append(parts, outPart{Text: str(m.Content)})
			}
			for j, img := range m.Images {
				if img.MimeType == "" || img.Data == "" {
					return nil, fmt.Errorf("%s.images[%d]: mimeType and data are required", field, j)
				}
				parts = append(parts, outPart{InlineData: &inlineData{MimeType: img.MimeType, Data: img.Data}})
			}
			appendTo("user", parts...)
		case model.RoleAssistant:
			for j, tc := range m.ToolCalls {
				if tc.Name == "" {
					return nil, fmt.Errorf("%s.toolCalls[%d].name: required", field, j)
				}
			}
			parts := assistantParts(m)
			if len(parts) == 0 {
				continue // an empty turn: Gemini refuses a content without parts
			}
			appendTo("model", parts...)
			calls, answered = m.ToolCalls, 0
		case model.RoleTool:
			name, id := m.Name, m.ToolCallID
			if name == "" {
				for _, c := range calls {
					if id != "" && c.ID == id {
						name = c.Name
					}
				}
				if name == "" && id == "" && answered < len(calls) {
					name, id = calls[answered].Name, calls[answered].ID
				}
			}
			if name == "" {
				return nil, fmt.Errorf("%s.name: required (no preceding call to answer)", field)
			}
			answered++
			fr := &outResponse{ID: id, Name: name}
			fr.Response.Output = m.Content
			appendTo("user", outPart{FunctionResponse: fr})
		default:
			return nil, fmt.Errorf("%s.role: unknown role %q", field, m.Role)
		}
	}
	return json.Marshal(out)
}
