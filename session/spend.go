package session

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/usage"
)

// What a turn spends: the tokens of every model request made on its behalf
// (package usage), their cost when prices are configured, and the two
// token budgets (model.maxTokensPerTurn, model.sessionTokenLimit).
// Decisions where the spec and the issue are silent:
//   - Every request is accounted, with the provider's counts when it
//     reports them and acpd's estimate (marked "estimated") when it does
//     not; reasoning streamed but not counted apart is estimated from its
//     text within the completion count, as qwen-code does.
//   - The cost of a request is computed at the prices configured when it
//     is made and recorded with it, so a session's cost (usage_update's
//     cumulative cost, replayed on load) does not change when prices do.
//   - model.maxTokensPerTurn: a request is not sent when its input and a
//     minimal answer (minAnswerRoom) would take the turn past the budget;
//     a request that is sent has its max_tokens cut to the room left, so
//     the turn never passes the budget by more than the provider's own
//     overshoot. An answer cut off at that room ends the turn the same way.
//   - Both budgets end the turn with stop reason max_tokens and a final
//     agent message naming the budget and how to raise it; the message
//     stays in the conversation (the model sees why it stopped), and the
//     session goes on. The response's _meta names the budget (acpd run
//     gives each its exit status).
//   - A subagent run's requests count towards the prompt turn's budget,
//     as its subagents'; a run that reaches it stops as a turn does, and
//     the parent's turn stops at its next request.

// minAnswerRoom is the least answer room worth a request under
// model.maxTokensPerTurn.
const minAnswerRoom = 256

// charge accounts one model request made on the turn's behalf: origin
// says whose (the turn's own, a compaction's summary, a subagent's run),
// mdl where it went, u what the provider reported (or acpd estimated:
// estimated). It adds the request to the turn's meter and its cost to the
// session's, and records it (rec carries the context figures of the turn's
// own requests; a zero rec records tokens only). Safe to call from the
// goroutines of parallel subagent runs.
func (t *turn) charge(origin usage.Origin, mdl string, u model.Usage, estimated bool, rec store.Usage) {
	s := t.s
	var cost float64
	price, priced := s.m.opts.Prices.Of(mdl)
	if priced {
		cost = price.Cost(u)
	}
	t.meter.Add(origin, u, estimated, cost)
	// A subagent run's requests are the prompt turn's too, as its
	// subagents' (a run's own record, tagged with its agent call, keeps
	// its origin within the run).
	for up := t.up; up != nil; up = up.up {
		up.meter.Add(usage.Subagent, u, estimated, cost)
	}
	if priced {
		b := s.base()
		b.costMu.Lock()
		b.cost += cost
		b.costMu.Unlock()
		rec.Cost, rec.Currency = cost, price.Currency
	}
	rec.PromptTokens, rec.CompletionTokens, rec.TotalTokens = u.PromptTokens, u.CompletionTokens, u.TotalTokens
	rec.CachedTokens, rec.CacheWriteTokens, rec.ReasoningTokens = u.CachedTokens, u.CacheWriteTokens, u.ReasoningTokens
	rec.Origin, rec.Model, rec.Estimated = string(origin), mdl, estimated
	// Not t.rec: a failed write is the turn's to report at its next step,
	// and this may run on a subagent's goroutine.
	_ = s.record(store.Record{Kind: store.KindUsage, Usage: &rec})
}

// costSoFar is the session's cumulative cost for usage_update; nil
// without prices.
func (s *Session) costSoFar() *acp.Cost {
	cur := s.m.opts.Prices.Currency()
	if cur == "" {
		return nil
	}
	s = s.base()
	s.costMu.Lock()
	defer s.costMu.Unlock()
	return &acp.Cost{Amount: s.cost, Currency: cur}
}

// TurnUsage is a turn's usage as the prompt response's _meta carries it,
// under "acpd"."usage" (acpd run's json output shows it).
type TurnUsage struct {
	usage.Tokens
	// Summaries and Subagents are the parts of the totals spent on
	// compaction summaries and subagent runs.
	Summaries *usage.Tokens `json:"summaries,omitempty"`
	Subagents *usage.Tokens `json:"subagents,omitempty"`
	Cost      *acp.Cost     `json:"cost,omitempty"`
}

// usageOf is t's usage figures.
func (t *turn) usageOf() TurnUsage {
	tu := TurnUsage{Tokens: t.meter.Total()}
	if x := t.meter.Of(usage.Summary); x.Requests > 0 {
		tu.Summaries = &x
	}
	if x := t.meter.Of(usage.Subagent); x.Requests > 0 {
		tu.Subagents = &x
	}
	if cur := t.s.m.opts.Prices.Currency(); cur != "" {
		tu.Cost = &acp.Cost{Amount: t.meter.Cost(), Currency: cur}
	}
	return tu
}

// withUsage adds the turn's usage to its response's _meta, under
// "acpd"."usage" (acpd run's json output reads it).
func (t *turn) withUsage(resp *acp.PromptResponse) *acp.PromptResponse {
	if resp == nil {
		return nil
	}
	out := *resp
	meta := acp.Meta{}
	for k, v := range resp.Meta {
		meta[k] = v
	}
	ours, _ := meta["acpd"].(map[string]any)
	merged := map[string]any{}
	for k, v := range ours {
		merged[k] = v
	}
	merged["usage"] = t.usageOf()
	meta["acpd"] = merged
	out.Meta = meta
	return &out
}

// Budgets a turn can stop at, as the response's _meta names them under
// "acpd"."budget".
const (
	BudgetTurnTokens   = "maxTokensPerTurn"
	BudgetSessionLimit = "sessionTokenLimit"
)

// TurnMeta reads what acpd adds to a prompt response's _meta: the turn's
// usage and the budget it stopped at ("" when none). Either may be absent.
func TurnMeta(m acp.Meta) (u *TurnUsage, budget string) {
	ours, _ := m["acpd"].(map[string]any)
	if ours == nil {
		return nil, ""
	}
	budget, _ = ours["budget"].(string)
	switch v := ours["usage"].(type) {
	case TurnUsage:
		u = &v
	case nil:
	default:
		// Decoded from the wire: a generic map.
		if b, err := json.Marshal(v); err == nil {
			var tu TurnUsage
			if json.Unmarshal(b, &tu) == nil {
				u = &tu
			}
		}
	}
	return u, budget
}

// budgetStop ends a turn at a token budget.
type budgetStop struct {
	budget string // "maxTokensPerTurn" or "sessionTokenLimit"
	text   string // the final message
}

func (b *budgetStop) Error() string { return b.text }

// withinBudgets decides whether the next request of the turn may be sent,
// and the answer room model.maxTokensPerTurn leaves it (t.room).
func (t *turn) withinBudgets() error {
	s := t.s
	if lim, used := s.m.opts.SessionTokenLimit, s.used(); lim > 0 && used > lim {
		// The reference's §1.11 check and wording, with acpd's setting.
		return &budgetStop{budget: BudgetSessionLimit, text: fmt.Sprintf(
			"Session token limit exceeded: %d tokens > %d limit. Please start a new session or raise model.sessionTokenLimit (or --session-token-limit) in your acpd configuration.",
			used, lim)}
	}
	// The budget is checked against a bound of the next request's size:
	// its new part is only estimated until the provider counts it.
	next := s.cm.acct.UsedAtMost()
	t.room = 0
	b := s.m.opts.MaxTokensPerTurn
	if b <= 0 {
		return nil
	}
	spent := t.top().meter.Total().Total()
	if spent+next+minAnswerRoom > b {
		return t.turnBudgetStop(next)
	}
	t.room = b - spent - next
	return nil
}

// budgetNear tells the user, once per prompt turn and budget, that the next
// request takes a token budget past 80%: the turn (or the session, at
// model.sessionTokenLimit) will stop soon. Decision: 80% of the limit, as
// the prompt size the request will have and, for the turn's budget, what
// the turn spent plus that request's size.
func (t *turn) budgetNear(ctx context.Context) {
	s, top := t.s, t.top()
	next := s.cm.acct.UsedAtMost()
	if lim := s.m.opts.SessionTokenLimit; lim > 0 && next*5 >= lim*4 && !top.nearSession.Swap(true) {
		s.notify(ctx, notice.BudgetNear, fmt.Sprintf(
			"The conversation holds about %s of the %s tokens model.sessionTokenLimit allows; past it requests are refused. /compact, a new session or a higher limit makes room.",
			thousands(next), thousands(lim)))
	}
	if b := s.m.opts.MaxTokensPerTurn; b > 0 {
		spent := top.meter.Total().Total()
		if (spent+next)*5 >= b*4 && !top.nearTurn.Swap(true) {
			s.notify(ctx, notice.BudgetNear, fmt.Sprintf(
				"This turn has used %s of the %s tokens model.maxTokensPerTurn allows, and its next request needs about %s; the turn stops when the budget is spent.",
				thousands(spent), thousands(b), thousands(next)))
		}
	}
}

// turnBudgetStop is the stop at model.maxTokensPerTurn; next is the size
// of the request that would not fit (0: an answer was cut off at the room
// left).
func (t *turn) turnBudgetStop(next int) *budgetStop {
	b := t.s.m.opts.MaxTokensPerTurn
	spent := t.top().meter.Total().Total()
	why := "the last answer was cut off at the room left"
	if next > 0 {
		why = fmt.Sprintf("the next request would need about %s more", thousands(next))
	}
	return &budgetStop{budget: BudgetTurnTokens, text: fmt.Sprintf(
		"Token budget reached: this turn used %s of the %s tokens model.maxTokensPerTurn allows (input plus output over its model requests), and %s. "+
			"Raise model.maxTokensPerTurn (or --max-tokens-per-turn) to let a turn go further, or send another prompt to go on.",
		thousands(spent), thousands(b), why)}
}

// top is the prompt turn t works for: t, or for a subagent run's turn the
// turn whose agent call started it. The token budget is the prompt turn's,
// its subagents' requests included.
func (t *turn) top() *turn {
	for t.up != nil {
		t = t.up
	}
	return t
}

// maxTokens is the next request's max_tokens: model.maxTokens, cut to the
// room the turn's budget leaves.
func (t *turn) maxTokens() int {
	n := t.s.m.opts.MaxTokens
	if t.room > 0 && (n <= 0 || t.room < n) {
		n = t.room
	}
	return n
}

// stopForBudget ends the turn at a budget: the final message is shown,
// recorded and kept in the conversation, and the prompt answers max_tokens.
func (t *turn) stopForBudget(ctx context.Context, b *budgetStop) *acp.PromptResponse {
	t.s.log.Info("turn stopped at a token budget", "budget", b.budget, "msg", b.text)
	r := streamResult{text: b.text, msgID: newMessageID()}
	t.appendAssistant(r, nil)
	c := acp.TextBlock(b.text)
	t.s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &c, MessageID: r.msgID})
	return &acp.PromptResponse{StopReason: acp.StopMaxTokens, Meta: acp.Meta{"acpd": map[string]any{"budget": b.budget}}}
}
