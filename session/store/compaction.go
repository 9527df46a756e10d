package store

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/acpd/acpd/session/model"
)

// Compaction records that the model's history was compacted: what the
// history became, expressed against the history rebuilt from the records
// before it, so a reload (Transcript.Messages) restores exactly the
// compacted view the live session had. The editor's replay is not
// affected: it still shows the whole conversation, plus one finished
// "Compacting conversation" tool call per compaction (Title, Detail).
//
// Applying it: first every tool result named in Stubs gets the stub text in
// place of its content; then, when Cut > 0, the messages before Cut are
// replaced by Head, followed by the message at Pinned (the current prompt,
// kept verbatim although it lies before Cut) when Pinned ≥ 0.
type Compaction struct {
	// Method is "stub", "summary" or "drop": the last stage that ran.
	Method string `json:"method"`
	// Trigger is "auto", "overflow" (the provider refused the request as
	// too long) or "manual".
	Trigger string `json:"trigger,omitempty"`
	Stubs   []Stub `json:"stubs,omitempty"`
	Cut     int    `json:"cut,omitempty"`
	// Pinned is the index of a message before Cut kept after Head; -1 none.
	Pinned int           `json:"pinned"`
	Head   []HeadMessage `json:"head,omitempty"`
	// Summary is the summary text when Method is "summary" (also in Head).
	Summary string `json:"summary,omitempty"`
	// Before and After are the request's tokens before and after.
	Before int    `json:"before"`
	After  int    `json:"after"`
	Title  string `json:"title,omitempty"`
	Detail string `json:"detail,omitempty"`
	// ToolCallID is the id of the compaction's tool call frame.
	ToolCallID string `json:"toolCallId,omitempty"`
}

// Stub replaces one tool result's content with StubText of the call it
// answers; Tokens is the estimated size of the content it replaced.
type Stub struct {
	ToolCallID string `json:"toolCallId"`
	Tokens     int    `json:"tokens"`
}

// StubPrefix starts every stub that replaces an old tool result.
const StubPrefix = "[acpd: the output of "

const stubSuffix = " tokens) was removed to fit the model's context window. Run the tool again if you need it.]"

// MaxStubArgs bounds the arguments a stub repeats.
const MaxStubArgs = 200

// StubTextLen is len(AppendStubText(nil, name, args, tokens)), without
// building the text.
func StubTextLen(name string, args []byte, tokens int) int {
	n := len(StubPrefix) + len(name) + 1 + len(" (about ") + len(stubSuffix) + 1
	if len(args) > MaxStubArgs {
		n += MaxStubArgs + len("…")
	} else {
		n += len(args)
	}
	for tokens >= 10 {
		tokens /= 10
		n++
	}
	if tokens < 0 {
		n++
	}
	return n
}

// AppendStubText appends the text that replaces the result of the call
// name(args), of about tokens tokens: one line naming the call and the size
// dropped, telling the model to run it again if it needs it.
func AppendStubText(b []byte, name string, args []byte, tokens int) []byte {
	b = append(b, StubPrefix...)
	b = append(b, name...)
	b = append(b, ' ')
	if len(args) > MaxStubArgs {
		b = append(b, args[:MaxStubArgs]...)
		b = append(b, "…"...)
	} else {
		b = append(b, args...)
	}
	b = append(b, " (about "...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	return append(b, stubSuffix...)
}

// HeadMessage is a message a compaction puts at the start of the history.
type HeadMessage struct {
	Role model.Role `json:"role"`
	Text string     `json:"text"`
}

func (c *Compaction) validate() error {
	switch c.Method {
	case "stub", "summary", "drop":
	default:
		return fmt.Errorf("method: unknown method %q", c.Method)
	}
	if c.Cut < 0 {
		return errors.New("cut: negative")
	}
	if c.Pinned >= 0 && c.Pinned >= c.Cut {
		return fmt.Errorf("pinned: %d is not before cut %d", c.Pinned, c.Cut)
	}
	for i, h := range c.Head {
		if h.Role != model.RoleUser && h.Role != model.RoleAssistant {
			return fmt.Errorf("head[%d].role: %q is not user or assistant", i, h.Role)
		}
	}
	for i, s := range c.Stubs {
		if s.ToolCallID == "" {
			return fmt.Errorf("stubs[%d].toolCallId: empty", i)
		}
	}
	return nil
}

// Apply returns msgs compacted as c says, and where the message at index i
// of msgs is now (-1: summarised or dropped). msgs itself is not changed.
// ok is false when c does not fit msgs (Cut beyond its end, or a cut that
// would separate a tool call from its result); msgs is then returned as is.
func (c *Compaction) Apply(msgs []model.Message) (out []model.Message, moved func(int) int, ok bool) {
	same := func(i int) int { return i }
	if c.Cut > len(msgs) || (c.Cut > 0 && c.Cut < len(msgs) && msgs[c.Cut].Role == model.RoleTool) {
		return msgs, same, false
	}
	stubs := make(map[string]int, len(c.Stubs))
	for _, s := range c.Stubs {
		stubs[s.ToolCallID] = s.Tokens
	}
	if c.Cut == 0 {
		out = make([]model.Message, len(msgs))
		copy(out, msgs)
		stubAll(out, stubs)
		return out, same, true
	}
	out = make([]model.Message, 0, len(c.Head)+1+len(msgs)-c.Cut)
	for _, h := range c.Head {
		out = append(out, model.Message{Role: h.Role, Content: h.Text})
	}
	base := len(out)
	pinned := c.Pinned >= 0 && c.Pinned < len(msgs)
	if pinned {
		out = append(out, msgs[c.Pinned])
		base++
	}
	out = append(out, msgs[c.Cut:]...)
	stubAll(out, stubs)
	cut, pin, head := c.Cut, c.Pinned, len(c.Head)
	return out, func(i int) int {
		switch {
		case pinned && i == pin:
			return head
		case i >= cut:
			return base + i - cut
		}
		return -1
	}, true
}

func stubAll(msgs []model.Message, stubs map[string]int) {
	if len(stubs) == 0 {
		return
	}
	asst := -1
	for i := range msgs {
		switch msgs[i].Role {
		case model.RoleAssistant:
			asst = i
			continue
		case model.RoleTool:
		default:
			continue
		}
		tokens, ok := stubs[msgs[i].ToolCallID]
		if !ok {
			continue
		}
		name, args := msgs[i].Name, []byte(nil)
		if asst >= 0 {
			for _, c := range msgs[asst].ToolCalls {
				if c.ID == msgs[i].ToolCallID {
					name, args = c.Name, c.Arguments
					break
				}
			}
		}
		msgs[i].Content = string(AppendStubText(nil, name, args, tokens))
	}
}
