package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acpd/acpd/acp"
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

// recordPlan records and shows a plan update.
func (t *turn) recordPlan(ctx context.Context, plan []acp.PlanEntry) {
	t.rec(store.Record{Kind: store.KindPlan, Plan: plan})
	t.s.update(ctx, acp.SessionUpdate{Kind: acp.UpdatePlan, Entries: plan})
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
