package session

import (
	"context"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/telemetry"
)

// This file connects a turn to package telemetry: the chat span around each
// model request, and what the turn's span and metrics record at its end.
// With telemetry off every call here is a no-op on a nil value.

// stream runs one model request (streamModel) inside a chat span.
func (t *turn) stream(ctx context.Context) (streamResult, error) {
	tel := t.s.m.opts.Telemetry
	if tel == nil {
		return t.streamModel(ctx)
	}
	_, chat := tel.StartChat(ctx, t.s.getModel())
	r, err := t.streamModel(ctx)
	e := telemetry.ChatEnd{FinishReason: r.finish, Err: err}
	if r.usage != nil && !r.estimated {
		e.HaveUsage, e.InputTokens, e.OutputTokens, e.CacheReadTokens = true, r.usage.PromptTokens, r.usage.CompletionTokens, r.usage.CachedTokens
		e.CacheWriteTokens = r.usage.CacheWriteTokens
	}
	chat.End(e)
	return r, err
}

// telemetryEnd is the turn's end as its span and metrics record it: the
// calls the guard counted, and the loop type and cap reason of a loop stop.
func (t *turn) telemetryEnd(resp *acp.PromptResponse, err error) telemetry.TurnEnd {
	e := telemetry.TurnEnd{ToolCalls: t.g.Total(), Err: err}
	if resp != nil {
		e.StopReason = string(resp.StopReason)
	}
	if err != nil && t.g.Detected() {
		e.LoopType, e.CapReason = string(t.g.LoopType()), string(t.g.Facts().CapReason)
	}
	return e
}
