package stats

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	segjson "github.com/segmentio/encoding/json"
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
	"whatif_outcome", "whatif_at_call", "whatif_why", "run", "agent", "parent_tool_call_id"}

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

func (rep *Report) writeTable(w io.Writer) error {
	const rowFmt = "%-16s  %-12s  %4s  %6s  %5s  %6s  %6s  %-32s  %9s\n"
	fmt.Fprintf(w, rowFmt, "START (UTC)", "SESSION", "TURN", "CALLS", "KEYS", "MAXREP", "STREAK", "OUTCOME", "DURATION")
	for _, t := range rep.Turns {
		fmt.Fprintf(w, rowFmt, t.Start.UTC().Format("2006-01-02 15:04"), shortID(t.Session), t.Label(),
			strconv.Itoa(t.ToolCalls), strconv.Itoa(t.DistinctKeys), strconv.Itoa(t.MaxRepeat),
			strconv.Itoa(t.MaxNameStreak), t.OutcomeText(), durationText(t))
	}
	s := &rep.Summary
	fmt.Fprintf(w, "\n%d turns in %d sessions, %d tool calls", s.Turns, s.Sessions, s.ToolCalls)
	if s.Skipped > 0 {
		fmt.Fprintf(w, " (%d damaged lines skipped)", s.Skipped)
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
		parts = append(parts, fmt.Sprintf("%d: %d", k, s.MaxRepeatEndTurn[k]))
	}
	fmt.Fprintf(w, "max repeat of one call in end_turn turns (repeat: turns): %s\n", strings.Join(parts, ", "))
	if wi := s.WhatIf; wi != nil {
		c := wi.Settings.Cap
		mode := "adaptive"
		if c.Explicit {
			mode = "explicit"
		}
		fmt.Fprintf(w, "\nwhat-if: maxToolCallsPerTurn %d (%s), skipLoopDetection %t, stuckWindow %d: %d turns would change (%d would stop, %d would go on)\n",
			c.Max, mode, wi.Settings.SkipLoopDetection, c.StuckWindow, wi.Changed, wi.WouldStop, wi.WouldNotStop)
		for _, t := range rep.Turns {
			if t.WhatIf == nil {
				continue
			}
			fmt.Fprintf(w, "  %s turn %s: %s -> %s at call %d: %s\n", shortID(t.Session), t.Label(),
				t.OutcomeText(), t.WhatIf.Outcome(), t.WhatIf.AtCall, t.WhatIf.Why)
		}
	}
	return nil
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

func joinCounts(m map[string]int) string {
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
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
