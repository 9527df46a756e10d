package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"

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

// modelParts is a received turn as it goes back: function calls and text
// with their signatures on the parts that carried them; thought summaries
// and empty unsigned text are not sent (Gemini does not read them back).
func modelParts(parts []Part, _ bool) []outPart {
	out := make([]outPart, 0, len(parts))
	for _, p := range parts {
		switch {
		case p.FunctionCall != nil:
			out = append(out, outPart{FunctionCall: &outCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: p.FunctionCall.Args}, ThoughtSignature: p.Signature})
		case p.Thought && p.Signature == "":
		case p.Text == "" && p.Signature == "":
		default:
			out = append(out, outPart{Text: str(p.Text), Thought: p.Thought, ThoughtSignature: p.Signature})
		}
	}
	return out
}

// buildInput says how one request is built beyond the model.Request.
type buildInput struct {
	// turn returns the parts Gemini sent for the i-th message, an assistant
	// message, when they are known.
	turn     func(i int, m model.Message) []Part
	thinking *thinkingConfig
}

// assistantParts is the model turn for m: the received parts when they
// still say what m says, else m rebuilt, each call keeping the signature it
// was given and the step's first call never left unsigned.
func assistantParts(m model.Message, received []Part) []outPart {
	if received != nil && sameTurn(m, received) {
		out := modelParts(received, false)
		// The ids are the ones the conversation uses (Gemini 2.5 sends
		// none; acpd's are kept, as the recorded clients do).
		j := 0
		for k := range out {
			if out[k].FunctionCall != nil {
				if out[k].FunctionCall.ID == "" {
					out[k].FunctionCall.ID = m.ToolCalls[j].ID
				}
				j++
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	var out []outPart
	if m.Content != "" {
		out = append(out, outPart{Text: str(m.Content)})
	}
	var sigs []string
	for _, p := range received {
		if p.FunctionCall != nil {
			sigs = append(sigs, p.Signature)
		}
	}
	for j, tc := range m.ToolCalls {
		p := outPart{FunctionCall: &outCall{ID: tc.ID, Name: tc.Name, Args: callArgs(tc)}}
		if j < len(sigs) {
			p.ThoughtSignature = sigs[j]
		}
		if j == 0 && p.ThoughtSignature == "" {
			p.ThoughtSignature = SkipSignature
		}
		out = append(out, p)
	}
	return out
}

// sameTurn reports whether the received parts carry m's text and calls.
func sameTurn(m model.Message, parts []Part) bool {
	var text bytes.Buffer
	var calls []*Call
	for _, p := range parts {
		switch {
		case p.FunctionCall != nil:
			calls = append(calls, p.FunctionCall)
		case !p.Thought:
			text.WriteString(p.Text)
		}
	}
	if text.String() != m.Content || len(calls) != len(m.ToolCalls) {
		return false
	}
	for j, c := range calls {
		tc := m.ToolCalls[j]
		if c.Name != tc.Name || (c.ID != "" && c.ID != tc.ID) || !bytes.Equal(compact(c.Args), compact(callArgs(tc))) {
			return false
		}
	}
	return true
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
			var received []Part
			if in.turn != nil {
				received = in.turn(i, m)
			}
			parts := assistantParts(m, received)
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
