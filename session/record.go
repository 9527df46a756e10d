package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
)

// This file records a durable session's turns in its transcript. Every
// record is written before the client is told about it (a record precedes
// its session/update), so whatever an editor saw of a tool call survives a
// crash; assistant text and reasoning are recorded once their response is
// complete, so a response cut off by a crash is absent, never partial.

// storeError is the -32603 answer of a prompt whose transcript could not be
// written. The turn stops at its next step: carrying on would run tools and
// model requests that a reload could not show.
func storeError(id string, err error) error {
	return &acp.Error{
		Code:    acp.CodeInternalError,
		Message: fmt.Sprintf("session %s: writing the transcript failed: %v", id, err),
		Data:    map[string]any{"sessionId": id, "errorKind": "transcript_write_failed"},
	}
}

// record appends rec when the session is durable. A failure is logged at
// error level and returned for the caller to answer.
func (s *Session) record(rec store.Record) error {
	if s.w == nil {
		return nil
	}
	if s.parent != nil {
		rec.Parent = s.runID // the record belongs to the subagent run
	}
	if err := s.w.Append(rec); err != nil {
		s.log.Error("transcript write failed", "kind", string(rec.Kind), "err", err)
		return err
	}
	return nil
}

// rec records within a turn, keeping the turn's first failure.
func (t *turn) rec(rec store.Record) {
	if err := t.s.record(rec); err != nil {
		t.setRecErr(err)
	}
}

// setRecErr keeps the turn's first transcript failure.
func (t *turn) setRecErr(err error) {
	t.mu.Lock()
	if t.recErr == nil {
		t.recErr = err
	}
	t.mu.Unlock()
}

// end closes a durable turn with a turn_end record (fsynced) and turns a
// transcript failure into the prompt's answer. A loop stop or model error
// keeps its own answer; the failure is in the log.
func (t *turn) end(resp *acp.PromptResponse, err error) (*acp.PromptResponse, error) {
	var stop acp.StopReason
	var msg string
	if resp != nil {
		stop = resp.StopReason
	}
	if err != nil {
		msg = err.Error()
		var ae *acp.Error
		if errors.As(err, &ae) {
			msg = ae.Message
		}
	} else if t.recErr != nil {
		msg = "transcript write failed: " + t.recErr.Error()
	}
	if e := t.s.w.EndTurn(stop, msg); e != nil {
		t.s.log.Error("transcript turn end failed", "err", e)
		if t.recErr == nil {
			t.recErr = e
		}
	}
	if err == nil && t.recErr != nil {
		return nil, storeError(t.s.id, t.recErr)
	}
	return resp, err
}

// open records a tool call's first frame, then shows it.
func (t *turn) open(ctx context.Context, p pcall, tc acp.ToolCall) {
	if tc.Name == "" {
		// The name the call was made with: the registered name
		// (mcp__server__tool, agent), or what the model asked for.
		tc.Name = p.Name
	}
	// Every tool call is shown through here: its title (the model's
	// command, path or tool name) and its text content may carry control
	// and bidi characters that would rewrite what the user sees.
	tc.Title = display.Line(tc.Title)
	tc.Content = shownContent(tc.Content)
	t.rec(store.Record{Kind: store.KindToolCall, Tool: &store.ToolCallRecord{
		ToolCallID: tc.ToolCallID, Name: p.Name, Title: tc.Title, Kind: tc.Kind, Status: tc.Status,
		Locations: tc.Locations, RawInput: rawJSON(tc.RawInput), Content: tc.Content,
	}})
	t.s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &tc})
}

// close records a tool call's outcome with the text the model receives
// (llm), then shows the final frame.
func (t *turn) close(ctx context.Context, p pcall, u acp.ToolCallUpdate, llm string) {
	t.rec(store.Record{Kind: store.KindToolResult, Tool: &store.ToolCallRecord{
		ToolCallID: u.ToolCallID, Name: p.Name, Kind: u.Kind, Status: u.Status, Locations: u.Locations,
		RawOutput: rawJSON(u.RawOutput), Content: u.Content, ModelText: llm,
		ResultHash: t.resultHash(u.ToolCallID, u.Status == acp.StatusFailed, llm),
	}})
	t.s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &u})
}

// resultHash digests a call's result for the result signal
// (loopdetect.ResultHash), keeps it for the batch loop to give the guard
// (resultOf), and returns it as the transcript writes it. Decision: it is
// computed whatever model.stuckSignal says, so `acpd stats --what-if
// --stuck-signal results` can replay turns recorded under "calls".
func (t *turn) resultHash(id string, failed bool, llm string) string {
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
func (t *turn) resultOf(id string) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.results[id]
	delete(t.results, id)
	return h, ok
}

// recordPlan records and shows a plan update.
func (t *turn) recordPlan(ctx context.Context, plan []acp.PlanEntry) {
	t.rec(store.Record{Kind: store.KindPlan, Plan: plan})
	t.s.update(ctx, acp.SessionUpdate{Kind: acp.UpdatePlan, Entries: plan})
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

// recordedCalls is a response's calls as recorded: the history's calls
// (historyCalls), so tool_result records (keyed by toolCallId) answer them
// and a reload rebuilds the live history. Arguments that are not JSON are
// kept as a JSON string.
func recordedCalls(calls []model.ToolCall) []store.ToolCall {
	out := make([]store.ToolCall, 0, len(calls))
	for _, c := range calls {
		args := c.Arguments
		if len(args) > 0 && !json.Valid(args) {
			args, _ = json.Marshal(string(args))
		}
		out = append(out, store.ToolCall{ID: c.ID, Name: c.Name, Arguments: args, Invalid: c.Invalid, Thinking: c.Thinking})
	}
	return out
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
