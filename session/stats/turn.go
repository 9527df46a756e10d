package stats

import (
	"strconv"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/usage"
)

// Turn is one prompt turn of one session.
type Turn struct {
	Session string `json:"session"`
	Turn    int    `json:"turn"` // 1-based, in the session's order
	// A subagent run is a turn of its own, linked to the prompt turn it ran
	// in (Turn): Run is its 1-based number within that turn (0 for the
	// prompt turn itself) and ParentToolCallID the agent call that started
	// it. Agent is the agent that ran the turn when it is not acpd's own
	// prompt loop: a subagent's name, or the agent `acpd guard` watched (its
	// agentInfo name), whose own session id is AgentSession.
	Run              int       `json:"run,omitempty"`
	Agent            string    `json:"agent,omitempty"`
	AgentSession     string    `json:"agentSession,omitempty"`
	ParentToolCallID string    `json:"parentToolCallId,omitempty"`
	Cwd              string    `json:"cwd"`
	Start            time.Time `json:"start"`
	// Duration is from the prompt record to the turn_end record (0 for a
	// turn that never ended).
	Duration time.Duration `json:"-"`
	// ToolCalls counts the calls the daemon's guard counted: every call the
	// model asked for, less provider replays answered as duplicates.
	ToolCalls    int `json:"toolCalls"`
	DistinctKeys int `json:"distinctKeys"`
	// MaxRepeat is the highest count of one (tool, args) repeat key, and
	// MaxRepeatTool that key's tool.
	MaxRepeat     int    `json:"maxRepeat"`
	MaxRepeatTool string `json:"maxRepeatTool,omitempty"`
	// MaxNameStreak is the longest run of consecutive calls to one tool.
	MaxNameStreak int    `json:"maxNameStreak"`
	StreakTool    string `json:"streakTool,omitempty"`
	// Outcome is the stop reason (end_turn, cancelled, max_tokens, refusal,
	// …), "loop" for a loop stop, "error" for another error, "incomplete"
	// for a turn without a turn_end record (running, or acpd died).
	Outcome   string `json:"outcome"`
	LoopType  string `json:"loopType,omitempty"`
	CapReason string `json:"capReason,omitempty"`
	// WhatIf is set when a replay changes the outcome; Replay is the
	// replay's verdict on every turn (ReplayStopped, ReplayWarned or
	// ReplayFinished; "" without a replay).
	WhatIf *Change `json:"whatIf,omitempty"`
	Replay string  `json:"replay,omitempty"`

	// Usage is the tokens of every model request made for the turn, as
	// the provider reported them (or acpd estimated them, counted in
	// Usage.Estimated): its own, its compactions' summaries and its
	// subagents' runs, the last two also apart.
	Usage     usage.Tokens  `json:"usage"`
	Summaries *usage.Tokens `json:"summaryUsage,omitempty"`
	Subagents *usage.Tokens `json:"subagentUsage,omitempty"`
	// Cost is the turn's cost at the prices configured when it ran; nil
	// when none were.
	Cost *Cost `json:"cost,omitempty"`
	// Decided lists, in order, the calls something other than the
	// approval mode alone decided: refused by a decider, allowed by one
	// (an "always" grant, a rule, the sandbox), or asked about and
	// answered by the user.
	Decided []Decided `json:"decided,omitempty"`
}

// Decided is the decision that decided one call: the user's answer when
// the call was asked about, else the strictest decider's.
type Decided struct {
	ToolCallID string `json:"toolCallId"`
	Tool       string `json:"tool"`
	By         string `json:"by"`
	Verdict    string `json:"verdict"`
	Reason     string `json:"reason,omitempty"`
}

// Refused reports a call that did not run because a decider or the user
// refused it.
func (d Decided) Refused() bool { return d.Verdict == "deny" || d.Verdict == "stop" }

// verdictRank orders the recorded verdicts from the mildest.
var verdictRank = map[string]int{"abstain": 0, "allow": 1, "ask": 2, "deny": 3, "stop": 4}

// decided is the deciding decision of a recorded trail.
func decided(tc *store.ToolCallRecord) Decided {
	var win *store.Decision
	for i := range tc.Decisions {
		d := &tc.Decisions[i]
		switch {
		case d.After:
		case d.By == "user":
			win = d
		case win != nil && win.By == "user":
		case win == nil || verdictRank[d.Verdict] > verdictRank[win.Verdict]:
			win = d
		}
	}
	if win == nil {
		return Decided{ToolCallID: tc.ToolCallID, Tool: tc.Name}
	}
	return Decided{ToolCallID: tc.ToolCallID, Tool: tc.Name, By: win.By, Verdict: win.Verdict, Reason: win.Reason}
}

// Cost is an amount in a currency.
type Cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// addUsage adds one usage record; sub: a subagent run's, counted as the
// turn's subagents'. A record without token counts only reports the
// context window's fill (after a compaction) and is no request.
func (t *Turn) addUsage(u *store.Usage, sub bool) {
	if u.PromptTokens == 0 && u.CompletionTokens == 0 && !u.Estimated {
		return
	}
	mu := model.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
	t.Usage.Add(mu, u.Estimated)
	var part **usage.Tokens
	switch {
	case sub || usage.Origin(u.Origin) == usage.Subagent:
		part = &t.Subagents
	case usage.Origin(u.Origin) == usage.Summary:
		part = &t.Summaries
	}
	if part != nil {
		if *part == nil {
			*part = &usage.Tokens{}
		}
		(*part).Add(mu, u.Estimated)
	}
	if u.Currency != "" {
		if t.Cost == nil {
			t.Cost = &Cost{Currency: u.Currency}
		}
		if t.Cost.Currency == u.Currency {
			t.Cost.Amount = usage.RoundCost(t.Cost.Amount + u.Cost)
		}
	}
}

// Label names the turn in a session: "3", or "3.1" for the first subagent
// run of turn 3.
func (t *Turn) Label() string {
	if t.Run == 0 {
		return strconv.Itoa(t.Turn)
	}
	return strconv.Itoa(t.Turn) + "." + strconv.Itoa(t.Run)
}

// AgentName is the agent that ran the turn: Agent, or "acpd" for acpd's
// own prompt turns.
func (t *Turn) AgentName() string {
	if t.Agent == "" {
		return "acpd"
	}
	return t.Agent
}

// OutcomeText is the outcome with the loop type and cap reason:
// "end_turn", "turn_tool_call_cap/stuck", "global_tool_call_duplicate".
func (t *Turn) OutcomeText() string {
	if t.Outcome != "loop" {
		return t.Outcome
	}
	if t.CapReason != "" {
		return t.LoopType + "/" + t.CapReason
	}
	return t.LoopType
}

// durationMillis is a Turn's duration for json and csv.
func (t *Turn) durationMillis() int64 { return t.Duration.Milliseconds() }

// MarshalJSON adds durationMs.
func (t Turn) MarshalJSON() ([]byte, error) {
	type plain Turn
	return segjson.Marshal(struct {
		plain
		DurationMs int64 `json:"durationMs"`
	}{plain(t), t.durationMillis()})
}
