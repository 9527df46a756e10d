package stats

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/usage"
)

// Formats Write accepts.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatCSV   = "csv"
)

// Write prints the report in format (table, json or csv).
func (rep *Report) Write(w io.Writer, format string) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var err error
	switch format {
	case FormatTable, "":
		err = rep.writeTable(bw)
	case FormatJSON:
		err = rep.writeJSON(bw)
	case FormatCSV:
		err = rep.writeCSV(bw)
	default:
		return fmt.Errorf("unknown format %q: want table, json or csv", format)
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

func (rep *Report) writeJSON(w io.Writer) error {
	enc := segjson.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

var csvHeader = []string{"session", "turn", "cwd", "start", "tool_calls", "distinct_keys", "max_repeat",
	"max_repeat_tool", "max_name_streak", "streak_tool", "outcome", "loop_type", "cap_reason", "duration_ms",
	"whatif_outcome", "whatif_at_call", "whatif_why", "run", "agent", "parent_tool_call_id",
	"requests", "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "estimated_requests",
	"summary_input_tokens", "summary_output_tokens", "subagent_input_tokens", "subagent_output_tokens", "cost", "currency", "agent_session", "replay", "whatif_warned_at",
	"cache_write_input_tokens"}

func (rep *Report) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	row := make([]string, len(csvHeader))
	for _, t := range rep.Turns {
		row = append(row[:0], t.Session, strconv.Itoa(t.Turn), t.Cwd, t.Start.UTC().Format(time.RFC3339Nano),
			strconv.Itoa(t.ToolCalls), strconv.Itoa(t.DistinctKeys), strconv.Itoa(t.MaxRepeat), t.MaxRepeatTool,
			strconv.Itoa(t.MaxNameStreak), t.StreakTool, t.Outcome, t.LoopType, t.CapReason,
			strconv.FormatInt(t.durationMillis(), 10))
		if c := t.WhatIf; c != nil {
			row = append(row, c.Outcome(), strconv.Itoa(c.AtCall), c.Why)
		} else {
			row = append(row, "", "", "")
		}
		row = append(row, strconv.Itoa(t.Run), t.Agent, t.ParentToolCallID)
		u := t.Usage
		row = append(row, strconv.Itoa(u.Requests), strconv.Itoa(u.Input), strconv.Itoa(u.Cached), strconv.Itoa(u.Output),
			strconv.Itoa(u.Reasoning), strconv.Itoa(u.Estimated))
		for _, p := range []*usage.Tokens{t.Summaries, t.Subagents} {
			if p == nil {
				p = &usage.Tokens{}
			}
			row = append(row, strconv.Itoa(p.Input), strconv.Itoa(p.Output))
		}
		if c := t.Cost; c != nil {
			row = append(row, strconv.FormatFloat(c.Amount, 'f', 6, 64), c.Currency)
		} else {
			row = append(row, "", "")
		}
		row = append(row, t.AgentSession, t.Replay)
		if c := t.WhatIf; c != nil && c.WarnedAt > 0 {
			row = append(row, strconv.Itoa(c.WarnedAt))
		} else {
			row = append(row, "")
		}
		row = append(row, strconv.Itoa(u.CacheWrite))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// shortID keeps a table narrow: session ids are 26 characters.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// shortName keeps an agent's name to its column.
func shortName(s string) string {
	if len(s) > 12 {
		return s[:11] + "…"
	}
	return s
}

func (rep *Report) writeTable(w io.Writer) error {
	const rowFmt = "%-16s  %-12s  %4s  %-12s  %6s  %5s  %6s  %6s  %-32s  %9s  %7s  %7s  %7s  %7s  %s\n"
	fmt.Fprintf(w, rowFmt, "START (UTC)", "SESSION", "TURN", "AGENT", "CALLS", "KEYS", "MAXREP", "STREAK", "OUTCOME", "DURATION",
		"IN", "CACHED", "OUT", "REASON", "COST")
	for _, t := range rep.Turns {
		u := t.Usage
		in := compact(u.Input)
		if u.Estimated > 0 {
			in = "~" + in // some of it estimated: the provider reported no usage
		}
		fmt.Fprintf(w, rowFmt, t.Start.UTC().Format("2006-01-02 15:04"), shortID(t.Session), t.Label(), display.Line(shortName(t.AgentName())),
			strconv.Itoa(t.ToolCalls), strconv.Itoa(t.DistinctKeys), strconv.Itoa(t.MaxRepeat),
			strconv.Itoa(t.MaxNameStreak), t.OutcomeText(), durationText(t),
			in, compact(u.Cached), compact(u.Output), compact(u.Reasoning), costText(t.Cost))
	}
	s := &rep.Summary
	fmt.Fprintf(w, "\n%d turns in %d sessions, %d tool calls", s.Turns, s.Sessions, s.ToolCalls)
	if s.Skipped > 0 {
		fmt.Fprintf(w, " (%d damaged lines skipped)", s.Skipped)
	}
	u := s.Usage
	fmt.Fprintf(w, "\ntokens: %d requests, input %d (%d cached, %.1f%%", u.Requests, u.Input, u.Cached, 100*s.CachedShare)
	if u.CacheWrite > 0 {
		// Providers that bill cache writes (Anthropic) report them apart.
		fmt.Fprintf(w, "; %d written to the cache", u.CacheWrite)
	}
	fmt.Fprintf(w, "), output %d (%d reasoning)", u.Output, u.Reasoning)
	if u.Estimated > 0 {
		fmt.Fprintf(w, "; %d requests estimated", u.Estimated)
	}
	for _, part := range []struct {
		name string
		t    usage.Tokens
	}{{"summaries", s.Summaries}, {"subagents", s.Subagents}} {
		if part.t.Requests > 0 {
			fmt.Fprintf(w, "; %s: %d requests, input %d, output %d", part.name, part.t.Requests, part.t.Input, part.t.Output)
		}
	}
	for _, cur := range slices.Sorted(maps.Keys(s.Costs)) {
		fmt.Fprintf(w, "\ncost: %s", costText(&Cost{Amount: s.Costs[cur], Currency: cur}))
	}
	fmt.Fprintf(w, "\ncalls per turn: p50 %d, p90 %d, p99 %d, max %d; %d turns past 100 calls\n",
		s.P50, s.P90, s.P99, s.Max, s.TurnsPast100)
	fmt.Fprintf(w, "outcomes: %s\n", joinCounts(s.Outcomes))
	reps := make([]int, 0, len(s.MaxRepeatEndTurn))
	for k := range s.MaxRepeatEndTurn {
		reps = append(reps, k)
	}
	slices.Sort(reps)
	parts := make([]string, 0, len(reps))
	for _, k := range reps {
		n := plural(s.MaxRepeatEndTurn[k], "turn")
		if k == 0 {
			parts = append(parts, "no call in "+n)
			continue
		}
		parts = append(parts, fmt.Sprintf("%d× in %s", k, n))
	}
	if len(parts) == 0 {
		parts = append(parts, "no such turn")
	}
	fmt.Fprintf(w, "turns that ended normally, by the most one call repeated: %s\n", strings.Join(parts, ", "))
	if len(s.Decided) > 0 {
		fmt.Fprintf(w, "decided calls (decider verdict: calls): %s\n", joinCountsSep(s.Decided, ": "))
		for _, t := range rep.Turns {
			for _, d := range t.Decided {
				if d.Refused() {
					// The reason may quote the model's command or a rule.
					fmt.Fprintf(w, "  %s turn %s: %s refused by %s: %s\n", shortID(t.Session), t.Label(),
						display.Line(d.Tool), display.Line(d.By), display.Line(d.Reason))
				}
			}
		}
	}
	if wi := s.WhatIf; wi != nil {
		c := wi.Settings.Cap
		mode := "adaptive"
		if c.Explicit {
			mode = "explicit"
		}
		signal, recovery := c.Signal, c.Recovery
		if signal == "" {
			signal = loopdetect.SignalCalls
		}
		if recovery == "" {
			recovery = loopdetect.RecoveryStop
		}
		fmt.Fprintf(w, "\nwhat-if: maxToolCallsPerTurn %d (%s), skipLoopDetection %t, stuckWindow %d, stuckSignal %s, loopRecovery %s: %d turns would change (%d would stop, %d would go on)\n",
			c.Max, mode, wi.Settings.SkipLoopDetection, c.StuckWindow, signal, recovery, wi.Changed, wi.WouldStop, wi.WouldNotStop)
		fmt.Fprintf(w, "replayed: %d stopped, %d warned and went on, %d finished as recorded\n", wi.Stopped, wi.Warned, wi.Finished)
		for _, t := range rep.Turns {
			if t.WhatIf == nil {
				continue
			}
			// Why may quote the repeated call: the model's tool and arguments.
			fmt.Fprintf(w, "  %s turn %s: %s -> %s at call %d: %s\n", shortID(t.Session), t.Label(),
				t.OutcomeText(), t.WhatIf.Outcome(), t.WhatIf.AtCall, display.Line(t.WhatIf.Why))
		}
	}
	return nil
}

// compact writes a token count in a narrow column: 950, 12.3k, 1.26M.
func compact(n int) string {
	switch {
	case n < 1000:
		return strconv.Itoa(n)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + "M"
}

// costText is an amount with its currency, to four decimals (a turn
// often costs less than a cent); "-" without prices.
func costText(c *Cost) string {
	if c == nil {
		return "-"
	}
	return strconv.FormatFloat(c.Amount, 'f', 4, 64) + " " + c.Currency
}

func durationText(t *Turn) string {
	if t.Outcome == "incomplete" {
		return "-"
	}
	d := t.Duration
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	default:
		return d.Round(time.Second).String()
	}
}

func joinCounts(m map[string]int) string { return joinCountsSep(m, " ") }

// joinCountsSep is joinCounts with sep between a key and its count (keys
// that hold a space need another).
func joinCountsSep(m map[string]int, sep string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+sep+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, ", ")
}

// plural is "1 turn", "2 turns".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
