// Package tokens is acpd's one token estimator. Wherever a token count must
// be guessed — the size of a request before the provider reports it, what
// compaction saves, the figures /context shows, instruction budgets, a
// turn's token budget where the provider sends no usage — it comes from
// here, so the numbers the user sees are the ones acpd acts on.
//
// The estimate is agent-features.md §1.3's: four bytes a token, 1,600
// tokens an inline image, plus a little framing per message, tool call and
// tool schema. Provider counts, when there are any, always win over it.
package tokens

import "github.com/acpd/acpd/session/model"

const (
	// BytesPerToken is the estimate's ratio.
	BytesPerToken = 4
	// Image is what one inline image is counted as.
	Image = 1600
	// MessageOverhead covers a message's role and framing.
	MessageOverhead = 4
	// CallOverhead covers a tool call's id, type and framing.
	CallOverhead = 8
	// ToolOverhead covers a tool schema's type/function wrapping.
	ToolOverhead = 8
)

// Bytes is the estimated token count of n bytes of text, rounded up.
func Bytes(n int) int {
	if n <= 0 {
		return 0
	}
	return (n + BytesPerToken - 1) / BytesPerToken
}

// Text is the estimated token count of s.
func Text(s string) int { return Bytes(len(s)) }

// ToBytes is how many bytes of text make up n tokens: a token budget as a
// byte budget.
func ToBytes(n int) int { return max(n, 0) * BytesPerToken }

// Message is the estimated token count of one message as it is sent. It
// reads only lengths, so it costs the same for any message size.
func Message(m *model.Message) int {
	chars := len(m.Content) + len(m.ToolCallID)
	if len(m.ToolCalls) > 0 {
		// Reasoning is echoed back only next to tool calls.
		chars += len(m.Reasoning)
	}
	n := MessageOverhead + len(m.Images)*Image
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		chars += len(c.ID) + len(c.Name) + len(c.Arguments)
		n += CallOverhead
	}
	return n + Bytes(chars)
}

// Messages is the estimated token count of msgs.
func Messages(msgs []model.Message) int {
	n := 0
	for i := range msgs {
		n += Message(&msgs[i])
	}
	return n
}

// Tool is the estimated token count of one tool schema as it is sent.
func Tool(t *model.ToolSpec) int {
	return ToolOverhead + Bytes(len(t.Name)+len(t.Description)+len(t.Parameters))
}

// Tools is the estimated token count of a request's tool schemas.
func Tools(specs []model.ToolSpec) int {
	n := 0
	for i := range specs {
		n += Tool(&specs[i])
	}
	return n
}

// System is the estimated token count of a request's system message.
func System(prompt string) int {
	if prompt == "" {
		return 0
	}
	return MessageOverhead + Text(prompt)
}

// Overhead is what a request costs besides its conversation: the system
// prompt and the tool schemas.
func Overhead(system string, specs []model.ToolSpec) int {
	return System(system) + Tools(specs)
}
