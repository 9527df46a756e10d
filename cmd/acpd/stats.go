package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/stats"
)

// statsFlags are acpd stats' own flags; the what-if settings are the loop
// guard's configuration flags (--max-tool-calls-per-turn, --loop-detection,
// --stuck-window, --stuck-signal, --loop-recovery), plus --explicit.
type statsFlags struct {
	session, since, cwd, agent string
	format                     outputFormat
	explicit                   bool
}

var _ = addCommand(func(a *app) *cobra.Command {
	o := &statsFlags{}
	cmd := &cobra.Command{
		Use:   "stats [flags]",
		Short: "one row per prompt turn from the recorded transcripts, a summary, and a what-if replay of the loop guard",
		Long: `Reads the session transcripts in session.dataDir (read-only; safe while acpd
runs) and prints one row per prompt turn, acpd's own and those of the agents
acpd guard watched (AGENT): tool calls, distinct (tool, args) calls, the
highest repeat of one call, the longest same-tool streak, the outcome (loop
type and cap reason for loop stops) and the duration; then a summary.

What-if replay: given any of the loop protection flags below or --explicit,
the loop guard is re-run over every recorded turn, batch by batch as the
daemon counts (with each call's recorded result for --stuck-signal results),
with the configuration changed by those flags; the turns whose outcome would
change are listed with the call at which they would stop, warn or go on and
why, and every turn is counted as stopped, warned or finished. A cap given on
this command line is adaptive unless --explicit.`,
		Args: noArgs,
	}
	f := cmd.Flags()
	f.StringVar(&o.session, "session", "", "only these sessions (comma-separated `ids`)")
	f.StringVar(&o.since, "since", "", "only turns started since a `time`: RFC 3339, YYYY-MM-DD, or an age such as 36h or 7d")
	f.StringVar(&o.cwd, "cwd", "", "only sessions whose working directory is this `folder` or inside it")
	f.StringVar(&o.agent, "agent", "", "only turns of this agent: acpd, or the `name` of an agent acpd guard watched")
	outputFormatFlags(f, &o.format, stats.FormatTable, stats.FormatJSON, stats.FormatCSV)
	f.BoolVar(&o.explicit, "explicit", false, "what-if: make the cap a hard cap (default: adaptive, unless a config file or the environment sets it)")
	_ = cmd.MarkFlagDirname("cwd")
	addConfigFlags(f, config.GroupLoop)
	cmd.RunE = a.action(func(ctx context.Context, a *app) int { return cmdStats(ctx, a, o) })
	return cmd
})

func cmdStats(_ context.Context, a *app, statsOpts *statsFlags) int {
	// The default data folder does not exist until acpd first records a
	// session: that is "nothing yet", not an error. One the user named
	// (flag, variable, file) must exist: a typo should not read as empty.
	o := stats.Options{DataDir: a.cfg.Session.DataDir, Cwd: statsOpts.cwd, Agent: statsOpts.agent,
		MissingOK: a.src.Of("session.dataDir").Kind == config.SourceDefault}
	if statsOpts.session != "" {
		for _, s := range strings.Split(statsOpts.session, ",") {
			if s = strings.TrimSpace(s); s != "" {
				o.Sessions = append(o.Sessions, s)
			}
		}
	}
	if statsOpts.since != "" {
		t, err := parseSince(statsOpts.since, time.Now())
		if err != nil {
			return a.badUsage("--since: " + err.Error())
		}
		o.Since = t
	}
	whatIf := statsOpts.explicit
	a.flags.Visit(func(f *pflag.Flag) {
		if _, ok := f.Annotations[annotConfig]; ok {
			whatIf = true // the loop guard's flags are the only configuration flags of stats
		}
	})
	if whatIf {
		m := a.cfg.Model
		k := a.src.Of("model.maxToolCallsPerTurn").Kind
		o.WhatIf = &stats.Settings{
			Cap: loopdetect.Cap{Max: m.MaxToolCallsPerTurn, StuckWindow: m.StuckWindow,
				Explicit: statsOpts.explicit || k == config.SourceFile || k == config.SourceEnv,
				Signal:   loopdetect.StuckSignal(m.StuckSignal), Recovery: loopdetect.LoopRecovery(m.LoopRecovery)},
			SkipLoopDetection: m.SkipLoopDetection,
		}
	}
	// The turns kept for the table are most of the live heap (~200 bytes
	// each); a soft limit makes the collector work harder near it rather
	// than let the heap double, so 1,000,000 tool calls in 100,000 turns
	// stay well under 100 MB (README, Benchmarks).
	debug.SetMemoryLimit(64 << 20)
	rep, err := stats.Collect(o)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd stats: %v\n", err)
		if strings.Contains(err.Error(), "--session") {
			return exitUsage
		}
		return exitError
	}
	if len(rep.Turns) == 0 && statsOpts.format.v == stats.FormatTable && o.Sessions == nil && o.Since.IsZero() && o.Cwd == "" && o.Agent == "" {
		if _, err := os.Stat(o.DataDir); err != nil {
			fmt.Fprintf(a.stdout, "No turns recorded yet: acpd keeps its sessions in %s, which does not exist until the first session runs.\n", o.DataDir)
			return exitOK
		}
		fmt.Fprintf(a.stdout, "No turns recorded yet in %s.\n", o.DataDir)
		return exitOK
	}
	if err := rep.Write(a.stdout, statsOpts.format.v); err != nil {
		fmt.Fprintf(a.stderr, "acpd stats: %v\n", err)
		return exitError
	}
	return exitOK
}

// parseSince reads an RFC 3339 time, a date (midnight UTC), or an age
// before now (a Go duration, or N followed by d for days).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			// An age past what a Duration holds (about 292 years) would
			// wrap around; it means every turn.
			if n > int(math.MaxInt64/int64(24*time.Hour)) {
				return time.Time{}, nil
			}
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("want an RFC 3339 time, YYYY-MM-DD, or an age such as 36h or 7d, got %q", s)
}
