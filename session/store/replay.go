package store

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/compactwire"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/model"
)

// InterruptedToolResult is what the model is told for a tool call whose
// result was never recorded (the process died while it ran).
const InterruptedToolResult = "error: the tool call was interrupted (acpd stopped) before it finished; its outcome is unknown"

// Updates returns the session/update payloads that replay the transcript to
// a client for session/load, in order: user, agent and thought chunks,
// tool_call and tool_call_update, plan, current mode, title and usage. A
// tool call left without a result is closed with a failed
// tool_call_update at the end of its turn.
func (tr *Transcript) Updates() []acp.SessionUpdate { return tr.UpdatesFor(ReplayOptions{}) }

// ReplayOptions say what the client of a replay accepts.
type ReplayOptions struct {
	// Compaction: the client advertised session.compaction, so
	// compactions replay as compaction_update entities (package
	// compactwire), not as tool call frames.
	Compaction bool
}

// UpdatesFor is Updates for a client that accepts what o says.
func (tr *Transcript) UpdatesFor(o ReplayOptions) []acp.SessionUpdate {
	out := make([]acp.SessionUpdate, 0, len(tr.Records))
	open := map[string]bool{} // tool calls shown but not finished
	var openOrder []string
	cost := &acp.Cost{} // nil-safe running total; shown once a record has a currency
	closeOpen := func() {
		for _, id := range openOrder {
			if !open[id] {
				continue
			}
			delete(open, id)
			out = append(out, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
				ToolCallID: id, Status: acp.StatusFailed,
				Content: []acp.ToolCallContent{acp.TextContent("interrupted: acpd stopped before this tool call finished")},
			}})
		}
		openOrder = openOrder[:0]
	}
	gone := tr.rewound()
	for i := range tr.Records {
		r := &tr.Records[i]
		if gone != nil && gone[i] {
			continue // rewound: the conversation goes on as if it never happened
		}
		// A subagent run's records replay as the editor saw them live: its
		// tool calls (and compactions) nested under the agent call by
		// _meta, its text and usage not at all (they were never shown), a
		// mode change as the session's. Its loop stop is not the session's
		// turn ending, so it closes nothing.
		var meta acp.Meta
		if r.Parent != "" {
			switch r.Kind {
			case KindToolCall, KindToolResult, KindCompaction:
				meta = acp.Meta{acp.MetaParentToolCallID: r.Parent}
			case KindMode:
			default:
				continue
			}
		}
		switch r.Kind {
		case KindUser:
			closeOpen()
			id := tr.messageID(i)
			for j := range r.Prompt {
				out = append(out, acp.SessionUpdate{Kind: acp.UpdateUserMessageChunk, Content: &r.Prompt[j], MessageID: id})
			}
		case KindSteer:
			// A message added to a running turn shows where it landed:
			// after the results it followed, inside the turn.
			id := tr.messageID(i)
			for j := range r.Prompt {
				out = append(out, acp.SessionUpdate{Kind: acp.UpdateUserMessageChunk, Content: &r.Prompt[j], MessageID: id})
			}
		case KindText, KindReasoning:
			if r.Text == "" {
				continue
			}
			kind := acp.UpdateAgentMessageChunk
			if r.Kind == KindReasoning {
				kind = acp.UpdateAgentThoughtChunk
			}
			b := acp.TextBlock(r.Text)
			out = append(out, acp.SessionUpdate{Kind: kind, Content: &b, MessageID: tr.messageID(i)})
		case KindToolCall:
			t := *r.Tool
			// Transcripts written before titles were escaped when shown
			// still hold them raw.
			t.Title = display.Line(t.Title)
			if !open[t.ToolCallID] {
				open[t.ToolCallID] = true
				openOrder = append(openOrder, t.ToolCallID)
			}
			out = append(out, acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &acp.ToolCall{
				ToolCallID: t.ToolCallID, Title: t.Title, Name: t.Name, Kind: t.Kind, Status: t.Status,
				Content: t.Content, Locations: t.Locations, RawInput: rawAny(t.RawInput), RawOutput: rawAny(t.RawOutput),
				Meta: meta,
			}})
		case KindToolResult:
			t := *r.Tool
			t.Title = display.Line(t.Title)
			if open[t.ToolCallID] {
				delete(open, t.ToolCallID)
				u := &acp.ToolCallUpdate{
					ToolCallID: t.ToolCallID, Kind: t.Kind, Status: t.Status,
					Content: t.Content, Locations: t.Locations, RawOutput: rawAny(t.RawOutput), Meta: meta,
				}
				if t.Title != "" {
					u.Title = &t.Title
				}
				out = append(out, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: u})
				continue
			}
			// A result without a frame (the frame record was skipped as
			// damaged, or the host records results only): show it whole.
			out = append(out, acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &acp.ToolCall{
				ToolCallID: t.ToolCallID, Title: t.Title, Name: t.Name, Kind: t.Kind, Status: t.Status,
				Content: t.Content, Locations: t.Locations, RawInput: rawAny(t.RawInput), RawOutput: rawAny(t.RawOutput),
				Meta: meta,
			}})
		case KindPlan:
			out = append(out, acp.SessionUpdate{Kind: acp.UpdatePlan, Entries: r.Plan})
		case KindMode:
			out = append(out, acp.SessionUpdate{Kind: acp.UpdateCurrentMode, CurrentModeID: r.ModeID})
		case KindTitle:
			out = append(out, acp.SessionUpdate{Kind: acp.UpdateSessionInfo, Title: &r.Title})
		case KindUsage:
			// The cost, as usage_update carried it, is the session's so far.
			if r.Usage.Currency != "" {
				cost = &acp.Cost{Amount: cost.Amount + r.Usage.Cost, Currency: r.Usage.Currency}
			}
			if r.Usage.Size > 0 {
				u := acp.SessionUpdate{Kind: acp.UpdateUsage, Used: r.Usage.Used, Size: r.Usage.Size}
				if cost.Currency != "" {
					u.Cost = cost
				}
				out = append(out, u)
			}
		case KindTurnEnd, KindLoopStop:
			closeOpen()
		case KindCompaction:
			if c := r.Compaction; c.ToolCallID != "" && c.Title != "" {
				out = append(out, compactwire.Replay(o.Compaction, c.ToolCallID, c.Title, c.Detail, c.Summary, meta)...)
			}
		}
	}
	closeOpen()
	return out
}

// rawAny keeps absent raw JSON absent (a nil RawMessage in an `any` would
// not be omitted by omitempty).
func rawAny(m json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	return m
}

// Messages rebuilds the conversation to send to the model. toUser converts
// a recorded prompt (the host's own conversion, e.g. embedding resources);
// nil, or an error from it, uses a plain conversion. Consecutive text,
// reasoning and tool_calls records fold into one assistant message; tool
// results follow as tool messages, and a call whose result is missing gets
// InterruptedToolResult so the history stays valid for the provider. After
// a loop stop, the stop's message leads the next user message; if no prompt
// followed, Transcript.PendingLoop still holds it.
func (tr *Transcript) Messages(toUser func([]acp.ContentBlock) (model.Message, error)) []model.Message {
	var (
		out      []model.Message
		asst     *model.Message // the assistant message being folded
		awaiting []model.ToolCall
		answered = map[string]bool{}
		loopNote string
		respDone bool // asst already holds tool calls: new text starts a new response
		// turnStart and turnNote undo a refused turn: ACP leaves the prompt
		// and everything after it out of the next prompt.
		turnStart = -1
		turnNote  string
		flushAsst = func() {
			if asst != nil {
				out = append(out, *asst)
				asst = nil
			}
			respDone = false
		}
	)
	closeCalls := func() {
		flushAsst()
		for _, c := range awaiting {
			if !answered[c.ID] {
				out = append(out, model.Message{Role: model.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: InterruptedToolResult})
			}
		}
		awaiting = nil
		clear(answered)
	}
	gone := tr.rewound()
	for i := range tr.Records {
		r := &tr.Records[i]
		if r.Parent != "" || (gone != nil && gone[i]) {
			continue // a subagent run's own conversation, or a rewound turn
		}
		switch r.Kind {
		case KindText, KindReasoning:
			if respDone || asst == nil {
				closeCalls()
				asst = &model.Message{Role: model.RoleAssistant}
			}
			if r.Kind == KindText {
				asst.Content += r.Text
			} else {
				asst.Reasoning += r.Text
				asst.Thinking = append(asst.Thinking, r.Thinking...)
			}
		case KindToolCalls:
			if asst == nil {
				closeCalls()
				asst = &model.Message{Role: model.RoleAssistant}
			}
			for _, c := range r.ToolCalls {
				mc := model.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Invalid: c.Invalid, Thinking: c.Thinking}
				if len(mc.Arguments) == 0 {
					mc.Arguments = json.RawMessage("{}")
				}
				asst.ToolCalls = append(asst.ToolCalls, mc)
				awaiting = append(awaiting, mc)
			}
			respDone = true
		case KindToolResult:
			flushAsst()
			id := r.Tool.ToolCallID
			if answered[id] || !awaitingHas(awaiting, id) {
				continue // providers reject a tool message that answers no call
			}
			answered[id] = true
			out = append(out, model.Message{Role: model.RoleTool, ToolCallID: id, Name: r.Tool.Name, Content: r.Tool.ModelText})
		case KindUser:
			closeCalls()
			turnStart, turnNote = len(out), loopNote
			msg := userMessage(toUser, r.Prompt)
			if loopNote != "" {
				msg.Content = loopNote + "\n\n" + msg.Content
				loopNote = ""
			}
			out = append(out, msg)
		case KindReminder:
			closeCalls()
			out = append(out, model.Message{Role: model.RoleUser, Content: r.Text})
		case KindSteer:
			// Converted as a prompt is, so the message is the one the
			// model read in the turn: the provider's cache still matches.
			closeCalls()
			out = append(out, userMessage(toUser, r.Prompt))
		case KindLoopStop:
			closeCalls()
			loopNote = r.Loop.Message
		case KindCompaction:
			// Recorded before a model request, when every call is answered.
			closeCalls()
			compacted, moved, ok := r.Compaction.Apply(out)
			if !ok {
				continue // does not fit this history: keep it whole
			}
			out = compacted
			if turnStart >= 0 {
				turnStart = max(moved(turnStart), -1)
			}
		case KindTurnEnd:
			closeCalls()
			if r.StopReason == acp.StopRefusal && turnStart >= 0 {
				out, loopNote = out[:turnStart], turnNote
			}
			turnStart = -1
		}
	}
	closeCalls()
	return out
}

func awaitingHas(calls []model.ToolCall, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}

// userMessage converts a recorded prompt with the host's toUser, or
// plainly when there is none or it fails.
func userMessage(toUser func([]acp.ContentBlock) (model.Message, error), prompt []acp.ContentBlock) model.Message {
	if toUser != nil {
		if msg, err := toUser(prompt); err == nil {
			return msg
		}
	}
	return plainUserMessage(prompt)
}

// plainUserMessage converts a prompt without host policy: text as is,
// embedded text resources and links as tagged text, images attached.
func plainUserMessage(blocks []acp.ContentBlock) model.Message {
	msg := model.Message{Role: model.RoleUser}
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "resource_link":
			parts = append(parts, "@"+b.URI)
		case "resource":
			if b.Resource != nil && b.Resource.Text != nil {
				parts = append(parts, "<resource uri=\""+b.Resource.URI+"\">\n"+*b.Resource.Text+"\n</resource>")
			}
		case "image":
			msg.Images = append(msg.Images, model.Image{MimeType: b.MimeType, Data: b.Data})
		}
	}
	msg.Content = strings.Join(parts, "\n")
	return msg
}

// messageID is the messageId of record i's chunks: the one recorded, or,
// for a transcript written before messages had ids, one made from the
// record's place (the same at every load); a response's text after its
// reasoning shares the reasoning's.
func (tr *Transcript) messageID(i int) string {
	r := &tr.Records[i]
	if r.MessageID != "" {
		return r.MessageID
	}
	if r.Kind == KindText && i > 0 && tr.Records[i-1].Kind == KindReasoning && tr.Records[i-1].MessageID == "" {
		i--
	}
	return fmt.Sprintf("msg_r%d", i)
}
