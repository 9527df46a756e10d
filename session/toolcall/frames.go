package toolcall

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/store"
)

// This file is the one place that records and shows a call. Every record
// is written before the editor is told about it (a record precedes its
// session/update), so whatever an editor saw of a tool call survives a
// crash.

// open records a call's first frame, then shows it.
func (t *Turn) open(ctx context.Context, c *Call, tc acp.ToolCall) {
	if tc.Name == "" {
		// The name the call was made with: the registered name
		// (mcp__server__tool, agent), or what the model asked for.
		tc.Name = c.Name
	}
	// Every tool call is shown through here: its title (the model's
	// command, path or tool name) and its text content may carry control
	// and bidi characters that would rewrite what the user sees.
	tc.Title = display.Line(tc.Title)
	tc.Content = shownContent(tc.Content)
	t.Host.Record(store.Record{Kind: store.KindToolCall, Tool: &store.ToolCallRecord{
		ToolCallID: tc.ToolCallID, Name: c.Name, Title: tc.Title, Kind: tc.Kind, Status: tc.Status,
		Locations: tc.Locations, RawInput: rawJSON(tc.RawInput), Content: tc.Content,
	}})
	t.Host.Update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &tc})
}

// close ends a call with outcome o: it records the final frame with the
// text the model receives and the call's decision trail, then shows it.
func (t *Turn) close(ctx context.Context, c *Call, u acp.ToolCallUpdate, o Outcome) {
	c.Outcome = o
	trail := c.Trail()
	t.Host.Record(store.Record{Kind: store.KindToolResult, Tool: &store.ToolCallRecord{
		ToolCallID: u.ToolCallID, Name: c.Name, Kind: u.Kind, Status: u.Status, Locations: u.Locations,
		RawOutput: rawJSON(u.RawOutput), Content: u.Content, ModelText: o.Text,
		ResultHash: t.resultHash(u.ToolCallID, u.Status == acp.StatusFailed, o.Text),
		Decisions:  records(trail),
	}})
	if len(trail) > 0 {
		meta := make(acp.Meta, len(u.Meta)+1)
		for k, v := range u.Meta {
			meta[k] = v
		}
		meta[acp.MetaDecisions] = trailMeta(trail)
		u.Meta = meta
	}
	t.Host.Update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &u})
}

// fail shows a call that ended before it ran: a pending tool_call, then a
// failed update carrying the reason (ACP wants the tool_call first).
func (t *Turn) fail(ctx context.Context, c *Call, o Outcome) {
	t.open(ctx, c, acp.ToolCall{
		ToolCallID: c.ID, Title: c.Title, Kind: c.Kind, Status: acp.StatusPending, RawInput: c.Args, Meta: c.Meta,
	})
	t.close(ctx, c, failedUpdate(c, o.Text), o)
}

// skip shows a call that was never looked at (the turn was cancelled, a
// loop detected, a permission cancelled before it): its pending tool_call,
// then a failed update with the reason.
func (t *Turn) skip(ctx context.Context, c *Call, reason string) {
	c.Title, c.Kind = nameOr(c.Name), acp.KindOther
	if tl, ok := t.Host.Tool(c.Name); ok {
		c.Kind = tl.Kind()
	}
	c.Meta = acp.Meta{"toolName": c.Name}
	t.fail(ctx, c, skipped(reason))
}

// resultHash digests a call's result for the result signal
// (loopdetect.ResultHash), keeps it for the batch to give the guard, and
// returns it as the transcript writes it. Decision: it is computed
// whatever model.stuckSignal says, so `acpd stats --what-if --stuck-signal
// results` can replay turns recorded under "calls".
func (t *Turn) resultHash(id string, failed bool, llm string) string {
	h := loopdetect.ResultHash(failed, llm)
	t.mu.Lock()
	if t.results == nil {
		t.results = map[string]uint64{}
	}
	t.results[id] = h
	t.mu.Unlock()
	return loopdetect.FormatResultHash(h)
}

// resultOf hands out the digest resultHash kept for the call id.
func (t *Turn) resultOf(id string) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.results[id]
	delete(t.results, id)
	return h, ok
}

// rawJSON encodes a frame's rawInput/rawOutput; nil stays absent, and a
// value that cannot be encoded is dropped rather than failing the record.
func rawJSON(v any) json.RawMessage {
	switch v := v.(type) {
	case nil:
		return nil
	case json.RawMessage:
		if len(v) == 0 || !json.Valid(v) {
			return nil
		}
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// shownContent is content with its text blocks passed through
// display.Text, for the tool-call card and the permission request (the
// command or plan asked about). Diffs are left exact: they are the file.
func shownContent(cs []acp.ToolCallContent) []acp.ToolCallContent {
	var out []acp.ToolCallContent
	for i, c := range cs {
		if c.Content == nil || c.Content.Type != "text" || display.Text(c.Content.Text) == c.Content.Text {
			continue
		}
		if out == nil {
			out = slices.Clone(cs)
		}
		b := *c.Content
		b.Text = display.Text(b.Text)
		out[i].Content = &b
	}
	if out == nil {
		return cs
	}
	return out
}
