package chat

import (
	"encoding/json"

	"github.com/acpd/acpd/session/model"
)

// Protocol tags the thinking blocks this protocol alone sends back.
const Protocol = "chat"

// Thinking block types of the chat-completions path. Gateways carry what
// chat completions has no field for in fields of their own, and a tool
// loop with thinking only works when those come back exactly as received:
const (
	// TypeReasoningDetails is OpenRouter's reasoning_details list of the
	// assistant message (reasoning.text with its signature,
	// reasoning.encrypted, reasoning.summary), merged across the stream.
	TypeReasoningDetails = "reasoning_details"
	// TypeExtraContent is a tool call's extra_content (Gemini's
	// OpenAI-compatible endpoint puts the call's thought_signature in
	// extra_content.google).
	TypeExtraContent = "extra_content"
)

// thinkingRaw is the Raw of the first block of this protocol and type, nil
// when there is none.
func thinkingRaw(ts []model.Thinking, typ string) json.RawMessage {
	for _, t := range ts {
		if t.Protocol == Protocol && t.Type == typ && len(t.Raw) > 0 {
			return t.Raw
		}
	}
	return nil
}
