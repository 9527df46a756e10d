package stats

import (
	"slices"

	"github.com/acpd/acpd/session/usage"
)

// Summary describes all selected turns.
type Summary struct {
	Sessions  int `json:"sessions"`
	Turns     int `json:"turns"`
	ToolCalls int `json:"toolCalls"`
	// Calls-per-turn percentiles (nearest rank) and maximum.
	P50 int `json:"p50"`
	P90 int `json:"p90"`
	P99 int `json:"p99"`
	Max int `json:"max"`
	// TurnsPast100 counts turns with more than 100 counted calls.
	TurnsPast100 int `json:"turnsPast100"`
	// Outcomes counts turns by OutcomeText.
	Outcomes map[string]int `json:"outcomes"`
	// MaxRepeatEndTurn is the distribution of MaxRepeat over the turns that
	// ended normally (end_turn): max repeat -> turns.
	MaxRepeatEndTurn map[int]int `json:"maxRepeatEndTurn"`
	// WhatIf summarises a replay.
	WhatIf *WhatIfSummary `json:"whatIf,omitempty"`
	// Usage, Summaries and Subagents add up the turns'; CachedShare is the
	// part of the input tokens served from the provider's prompt cache.
	Usage       usage.Tokens `json:"usage"`
	Summaries   usage.Tokens `json:"summaryUsage"`
	Subagents   usage.Tokens `json:"subagentUsage"`
	CachedShare float64      `json:"cachedShare"`
	// Costs adds up the turns' costs by currency (empty without prices).
	Costs map[string]float64 `json:"costs,omitempty"`
	// Decided counts the calls decided by something other than the
	// approval mode alone, by who and what ("user allow", "rules deny").
	Decided map[string]int `json:"decided,omitempty"`
	// Skipped counts transcript lines that could not be read (torn or damaged).
	Skipped int `json:"skippedLines"`
}

// WhatIfSummary counts the turns a replay changes.
type WhatIfSummary struct {
	Settings     Settings `json:"settings"`
	Changed      int      `json:"changed"`
	WouldStop    int      `json:"wouldStop"`    // turns the replay stops that did not stop so
	WouldNotStop int      `json:"wouldNotStop"` // recorded stops the replay lets through
	// Stopped, Warned and Finished count the replay's verdicts on every
	// turn (Turn.Replay).
	Stopped  int `json:"stopped"`
	Warned   int `json:"warned"`
	Finished int `json:"finished"`
}

func (rep *Report) summarise(whatIf *Settings) {
	s := &rep.Summary
	s.Turns = len(rep.Turns)
	s.Outcomes = map[string]int{}
	s.MaxRepeatEndTurn = map[int]int{}
	if whatIf != nil {
		s.WhatIf = &WhatIfSummary{Settings: *whatIf}
	}
	calls := make([]int, 0, len(rep.Turns))
	for _, t := range rep.Turns {
		calls = append(calls, t.ToolCalls)
		s.ToolCalls += t.ToolCalls
		if t.ToolCalls > 100 {
			s.TurnsPast100++
		}
		s.Outcomes[t.OutcomeText()]++
		for _, d := range t.Decided {
			if s.Decided == nil {
				s.Decided = map[string]int{}
			}
			s.Decided[d.By+" "+d.Verdict]++
		}
		if t.Outcome == "end_turn" {
			s.MaxRepeatEndTurn[t.MaxRepeat]++
		}
		if t.Run == 0 {
			// A run's usage is in its prompt turn's already.
			s.addUsage(t)
		}
		if s.WhatIf != nil {
			switch t.Replay {
			case ReplayStopped:
				s.WhatIf.Stopped++
			case ReplayWarned:
				s.WhatIf.Warned++
			case ReplayFinished:
				s.WhatIf.Finished++
			}
		}
		if t.WhatIf != nil {
			s.WhatIf.Changed++
			switch {
			case t.WhatIf.Stops:
				s.WhatIf.WouldStop++
			case t.stoppedByGuard():
				s.WhatIf.WouldNotStop++
			}
		}
	}
	for i := range rep.loose {
		t := &rep.loose[i]
		s.addUsage(t)
	}
	if s.Usage.Input > 0 {
		s.CachedShare = float64(s.Usage.Cached) / float64(s.Usage.Input)
	}
	slices.Sort(calls)
	s.P50, s.P90, s.P99 = percentile(calls, 50), percentile(calls, 90), percentile(calls, 99)
	if len(calls) > 0 {
		s.Max = calls[len(calls)-1]
	}
}

// addUsage adds a turn's usage to the summary.
func (s *Summary) addUsage(t *Turn) {
	s.Usage = s.Usage.Plus(t.Usage)
	if t.Summaries != nil {
		s.Summaries = s.Summaries.Plus(*t.Summaries)
	}
	if t.Subagents != nil {
		s.Subagents = s.Subagents.Plus(*t.Subagents)
	}
	if c := t.Cost; c != nil {
		if s.Costs == nil {
			s.Costs = map[string]float64{}
		}
		s.Costs[c.Currency] = usage.RoundCost(s.Costs[c.Currency] + c.Amount)
	}
}

// percentile is the nearest-rank percentile of sorted values (0 for none).
func percentile(sorted []int, p int) int {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n)
	return sorted[max(rank, 1)-1]
}
