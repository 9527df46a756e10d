package toolcall

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
	"github.com/acpd/acpd/session/turnguard"
)

func execHost(mode Mode) (*fakeHost, *echoTool) {
	e := &echoTool{name: "run", conf: tools.Confirmation{Kind: tools.ConfirmExec, Label: "run"}}
	return &fakeHost{tools: tools.NewRegistry(e), mode: mode}, e
}

// A deny is refused without a request, whatever allowed it before or
// would have asked after: the model reads the reason, the trail says who.
func TestDeny_WinsWithoutRequest(t *testing.T) {
	h, e := execHost(ModeDefault)
	allow := deciderFunc{"hook", func(*Call) Decision { return Decision{Verdict: Allow, Reason: "hook said yes"} }}
	deny := deciderFunc{"rules", func(*Call) Decision { return Decision{Verdict: Deny, Reason: `denied by rule "Bash(run:*)"`} }}
	b := batch(t, newTurn(h, allow, deny), "run", `{"arg":"x"}`)
	assert.Empty(t, h.asked)
	assert.Empty(t, e.ran)
	assert.Equal(t, `denied by rule "Bash(run:*)"`, b.Messages()[0].Content)
	c := b.Calls[0]
	assert.Equal(t, loopdetect.TerminalError, c.Outcome.Terminal)
	assert.Equal(t, loopdetect.ExecutionNotStarted, c.Outcome.Execution)
	assert.Equal(t, ErrTypeDenied, c.Outcome.ErrType)
	want := []store.Decision{{By: "hook", Verdict: "allow", Reason: "hook said yes"}, {By: "rules", Verdict: "deny", Reason: `denied by rule "Bash(run:*)"`}}
	assert.Equal(t, want, h.result(t, "c0").Decisions)
	u := h.final(t, "c0")
	assert.Equal(t, acp.StatusFailed, u.Status)
	assert.Equal(t, `denied by rule "Bash(run:*)"`, u.Content[0].Content.Text)
	assert.Equal(t, []map[string]any{{"by": "hook", "verdict": "allow", "reason": "hook said yes"},
		{"by": "rules", "verdict": "deny", "reason": `denied by rule "Bash(run:*)"`}}, u.Meta[acp.MetaDecisions])
}

// An allow does not skip a question another decider wants asked; the
// ask's reason and the user's answer are in the trail.
func TestAsk_BeatsAllow(t *testing.T) {
	h, e := execHost(ModeYolo)
	ask := deciderFunc{"sandbox", func(*Call) Decision { return Decision{Verdict: Ask, Reason: "reaches a host not allowed"} }}
	b := batch(t, newTurn(h, ask), "run", `{"arg":"x"}`)
	require.Len(t, h.asked, 1)
	// The request says why it is asked.
	req := h.asked[0]
	assert.Equal(t, "reaches a host not allowed", req.ToolCall.Content[len(req.ToolCall.Content)-1].Content.Text)
	assert.Equal(t, []map[string]any{{"by": "sandbox", "verdict": "ask", "reason": "reaches a host not allowed"}}, req.Meta[acp.MetaDecisions])
	assert.Equal(t, []string{"x"}, e.ran)
	assert.Equal(t, "ran x", b.Messages()[0].Content)
	assert.Equal(t, []store.Decision{{By: "sandbox", Verdict: "ask", Reason: "reaches a host not allowed"}, {By: ByUser, Verdict: "allow", Reason: "Allow"}},
		h.result(t, "c0").Decisions)
}

// The approval mode's allow alone leaves no trail: nothing recorded,
// nothing in the frames.
func TestPlainAllow_NoTrail(t *testing.T) {
	h, _ := execHost(ModeYolo)
	batch(t, newTurn(h), "run", `{"arg":"x"}`)
	assert.Nil(t, h.result(t, "c0").Decisions)
	assert.NotContains(t, h.final(t, "c0").Meta, acp.MetaDecisions)
}

// A stop refuses the call and skips the rest of the batch.
func TestStop_EndsBatch(t *testing.T) {
	h, e := execHost(ModeYolo)
	stop := deciderFunc{"hook", func(c *Call) Decision {
		if c.Args.(map[string]any)["arg"] == "a" {
			return Decision{Verdict: Stop, Reason: "stopped by the hook"}
		}
		return Decision{}
	}}
	b := batch(t, newTurn(h, stop), "run", `{"arg":"a"}`, `{"arg":"b"}`)
	assert.True(t, b.Stop)
	assert.Empty(t, e.ran)
	assert.Equal(t, "stopped by the hook", b.Messages()[0].Content)
	assert.Equal(t, loopdetect.PermissionCancelSkipMessage, b.Messages()[1].Content)
}

// A decider's new input is what runs and what the frames show; the
// deciders after it judge the new call; input that does not build is
// refused naming whose it was.
func TestInput_Rewritten(t *testing.T) {
	h, e := execHost(ModeYolo)
	rewrite := deciderFunc{"hook", func(c *Call) Decision {
		if c.Args.(map[string]any)["arg"] == "bad-later" {
			return Decision{Input: json.RawMessage(`{"arg":"bad"}`)}
		}
		return Decision{Input: json.RawMessage(`{"arg":"safe"}`), Reason: "rewritten"}
	}}
	var seen []string
	after := deciderFunc{"rules", func(c *Call) Decision {
		seen = append(seen, c.Title)
		return Decision{}
	}}
	b := batch(t, newTurn(h, rewrite, after), "run", `{"arg":"rm"}`, `{"arg":"bad-later"}`)
	assert.Equal(t, []string{"safe"}, e.ran)
	assert.Equal(t, []string{"run safe"}, seen)
	assert.Equal(t, "ran safe", b.Messages()[0].Content)
	var rec store.ToolCallRecord
	for _, r := range h.records {
		if r.Kind == store.KindToolCall && r.Tool.ToolCallID == "c0" {
			rec = *r.Tool
		}
	}
	assert.JSONEq(t, `{"arg":"safe"}`, string(rec.RawInput))
	assert.Equal(t, `The arguments hook gave for "run" are not valid: invalid parameters for run: params/arg: bad`, b.Messages()[1].Content)
	assert.Equal(t, tools.ErrTypeInvalidParams, b.Calls[1].Outcome.ErrType)
}

// A reviewer's context reaches the model after the result, and its deny
// marks the result failed with its reason.
func TestReviewer(t *testing.T) {
	h, _ := execHost(ModeYolo)
	r := &reviewer{}
	b := batch(t, newTurn(h, r), "run", `{"arg":"a"}`, `{"arg":"b"}`)
	assert.Equal(t, "ran a\n\nformatted a", b.Messages()[0].Content)
	assert.Equal(t, "ran b\n\nb is not allowed here", b.Messages()[1].Content)
	assert.Equal(t, acp.StatusFailed, h.final(t, "c1").Status)
	assert.Equal(t, []store.Decision{{By: ApprovalName, Verdict: "allow", Reason: "approval mode yolo"}, {By: "post", Verdict: "deny", Reason: "b is not allowed here", After: true}},
		h.result(t, "c1").Decisions)
}

type reviewer struct{ deciderFunc }

func (*reviewer) Name() string                           { return "post" }
func (*reviewer) Decide(context.Context, *Call) Decision { return Decision{} }
func (*reviewer) Review(_ context.Context, c *Call) Decision {
	if c.Result.LLMContent == "ran a" {
		return Decision{Context: "formatted a"}
	}
	return Decision{Verdict: Deny, Reason: "b is not allowed here"}
}

// An after-batch stage adds what the model reads after the results.
func TestAfterBatch_Appends(t *testing.T) {
	h, _ := execHost(ModeYolo)
	b := batch(t, newTurn(h, steer{}), "run", `{"arg":"a"}`)
	require.Len(t, b.Appended, 1)
	assert.Equal(t, model.Message{Role: model.RoleUser, Content: "steer after 1 calls"}, b.Appended[0].Message)
}

type steer struct{}

func (steer) Name() string                           { return "steer" }
func (steer) Decide(context.Context, *Call) Decision { return Decision{} }
func (steer) AfterBatch(_ context.Context, b *Batch) {
	b.Appended = append(b.Appended, Appended{Message: model.Message{Role: model.RoleUser, Content: fmt.Sprintf("steer after %d calls", len(b.Calls))}})
}

// Every allowed answer reaches the granters with the option chosen: an
// "always" is a grant for whoever keeps it.
func TestGranter_GetsTheOption(t *testing.T) {
	h, _ := execHost(ModeDefault)
	h.answer = choose(OptProceedAlwaysUser)
	g := &granter{}
	tc := newTurn(h, g)
	batch(t, tc, "run", `{"arg":"a"}`)
	require.Len(t, g.got, 1)
	assert.Nil(t, h.asked[0].Meta, "the approval mode's own question, as acpd always asked it")
	assert.Empty(t, h.asked[0].ToolCall.Content)
	assert.Equal(t, acp.AllowAlways, g.got[0].Option.Kind)
	assert.Equal(t, OptProceedAlwaysUser, g.got[0].Option.OptionID)
	// The session's grants took it too: the same label runs unasked.
	h.answer = nil
	batch(t, tc, "run", `{"arg":"b"}`)
	assert.Len(t, h.asked, 1)
	last := h.records[len(h.records)-1].Tool
	assert.Equal(t, []store.Decision{{By: GrantsName, Verdict: "allow", Reason: "always allowed in this session: run"}}, last.Decisions)
}

type granter struct{ got []Answer }

func (*granter) Name() string                                 { return "rules" }
func (*granter) Decide(context.Context, *Call) Decision       { return Decision{} }
func (g *granter) Grant(_ context.Context, _ *Call, a Answer) { g.got = append(g.got, a) }

// §7.4: an invalid-params error found after the turn was cancelled is not
// counted; three of them do not latch the guard.
func TestInvalidParamsNotCountedWhenCancelled(t *testing.T) {
	h, _ := execHost(ModeYolo)
	tr := newTurn(h)
	tr.Guard = turnguard.New(loopdetect.Cap{Max: 100}, true, loopdetect.FailureModeOff, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range tr.Prepare([]model.ToolCall{
		{ID: "1", Name: "missing_tool", Arguments: []byte(`{}`)},
		{ID: "2", Name: "missing_tool", Arguments: []byte(`{}`)},
		{ID: "3", Name: "missing_tool", Arguments: []byte(`{}`)},
	}) {
		tr.run(ctx, c)
	}
	assert.False(t, tr.Guard.Detected())
	// Had any been counted, the threshold of 3 would be reached by two more.
	assert.False(t, tr.Guard.RecordInvalidParams("missing_tool", "x"))
	assert.False(t, tr.Guard.RecordInvalidParams("missing_tool", "x"))
}
