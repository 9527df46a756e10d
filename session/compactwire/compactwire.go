// Package compactwire shows a compaction of a session's conversation to the
// client, live and on session/load: as ACP's compaction_update and
// compaction_summary_chunk when the client advertised session.compaction,
// else as the "think" tool call acpd has always shown (a client without the
// capability sees exactly what it saw before).
//
// Decisions where ACP is silent:
//   - The compactionId is the id the tool call frame would have had
//     (compact…, unique in the session), so the transcript needs no new
//     field and a replay gives the same id as the live session.
//   - The summary is what the compaction keeps of the conversation: the
//     model's summary for a summarising compaction, and the one-line
//     account ("Replaced 3 old tool results with stubs.") for stubs and
//     dropped turns, which have no summary text. It is streamed once the
//     compaction succeeded, one chunk per paragraph, so a summary that
//     fails validation never reaches the client half-written.
//   - A compaction cut short by session/cancel is `cancelled`; any other
//     end without a new history is `failed`, with the reason as `error`.
package compactwire

import (
	"strings"

	"github.com/acpd/acpd/acp"
)

// ToolName is the tool_call `name` of the frame that shows a compaction to
// a client without session.compaction.
const ToolName = "compact"

// Send delivers one session/update of the session.
type Send func(u acp.SessionUpdate)

// Compaction is one compaction being shown.
type Compaction struct {
	send Send
	wire bool // compaction_update (true) or the tool call frame
	id   string
}

// Start announces a compaction: id is unique in the session, title says
// what is being compacted, meta goes on the tool call frame.
func Start(send Send, wire bool, id, title string, meta acp.Meta) *Compaction {
	c := &Compaction{send: send, wire: wire, id: id}
	if wire {
		send(acp.SessionUpdate{Kind: acp.UpdateCompaction, Compaction: &acp.CompactionUpdate{CompactionID: id, Status: acp.CompactionInProgress}})
		return c
	}
	send(acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &acp.ToolCall{
		ToolCallID: id, Title: title, Name: ToolName, Kind: acp.KindThink, Status: acp.StatusInProgress, Meta: meta,
	}})
	return c
}

// Fail ends the compaction without a new history: title is the frame's new
// title, reason why; cancelled when session/cancel cut it short.
func (c *Compaction) Fail(title, reason string, cancelled bool) {
	if c.wire {
		st := acp.CompactionFailed
		if cancelled {
			st = acp.CompactionCancelled
		}
		c.send(acp.SessionUpdate{Kind: acp.UpdateCompaction, Compaction: &acp.CompactionUpdate{CompactionID: c.id, Status: st, Error: reason}})
		return
	}
	c.send(acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
		ToolCallID: c.id, Title: &title, Status: acp.StatusFailed, Content: []acp.ToolCallContent{acp.TextContent(reason)},
	}})
}

// Complete ends the compaction with its new history: title is the frame's
// new title, detail the account of what was done, summary the model's
// summary ("" when the compaction made none).
func (c *Compaction) Complete(title, detail, summary string) {
	if !c.wire {
		c.send(acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
			ToolCallID: c.id, Title: &title, Status: acp.StatusCompleted, Content: []acp.ToolCallContent{acp.TextContent(detail)},
		}})
		return
	}
	for _, u := range completed(c.id, detail, summary) {
		c.send(u)
	}
}

// completed is the summary chunks and the completed update of a
// compaction on the wire.
func completed(id, detail, summary string) []acp.SessionUpdate {
	text := summary
	if strings.TrimSpace(text) == "" {
		text = detail
	}
	var out []acp.SessionUpdate
	for _, p := range Paragraphs(text) {
		b := acp.TextBlock(p)
		out = append(out, acp.SessionUpdate{Kind: acp.UpdateCompactionChunk, CompactionID: id, Content: &b})
	}
	return append(out, acp.SessionUpdate{Kind: acp.UpdateCompaction, Compaction: &acp.CompactionUpdate{CompactionID: id, Status: acp.CompactionCompleted}})
}

// Replay is how a recorded compaction is shown on session/load: the
// completed tool call frame, or its compaction_update entity with its
// summary chunks, at the place it happened.
func Replay(wire bool, id, title, detail, summary string, meta acp.Meta) []acp.SessionUpdate {
	if wire {
		first := acp.SessionUpdate{Kind: acp.UpdateCompaction, Compaction: &acp.CompactionUpdate{CompactionID: id, Status: acp.CompactionInProgress}}
		return append([]acp.SessionUpdate{first}, completed(id, detail, summary)...)
	}
	tc := &acp.ToolCall{ToolCallID: id, Title: title, Name: ToolName, Kind: acp.KindThink, Status: acp.StatusCompleted, Meta: meta}
	if detail != "" {
		tc.Content = []acp.ToolCallContent{acp.TextContent(detail)}
	}
	return []acp.SessionUpdate{{Kind: acp.UpdateToolCall, ToolCall: tc}}
}

// Paragraphs splits text into its paragraphs, each with the blank lines
// that follow it, so that they concatenate back to text.
func Paragraphs(text string) []string {
	var out []string
	for text != "" {
		i := strings.Index(text, "\n\n")
		if i < 0 {
			out = append(out, text)
			break
		}
		j := i + 2
		for j < len(text) && text[j] == '\n' {
			j++
		}
		out = append(out, text[:j])
		text = text[j:]
	}
	return out
}
