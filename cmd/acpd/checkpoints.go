package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/session/checkpoint"
	"github.com/acpd/acpd/session/display"
)

// checkpointsFlags are acpd checkpoints' own flags.
type checkpointsFlags struct {
	session, show string
	prune         bool
}

var _ = addCommand(func(a *app) *cobra.Command {
	o := &checkpointsFlags{}
	cmd := &cobra.Command{
		Use:   "checkpoints [--session ID [--show N]] [--prune]",
		Short: "list the turns' checkpoints, show one's diff (--show N), prune them to session.checkpointMaxBytes (--prune)",
		Long: `Reads the checkpoints acpd keeps under session.dataDir/checkpoints (see
/rewind): without flags one line per session (checkpointed turns, size, last
change); with --session the session's checkpoints with the files each turn
changed (+added −removed lines); with --show N also turn N's unified diff.
--prune applies session.checkpointMaxBytes now (sessions open in a running
acpd are left alone). Restoring is /rewind, or acpd run --session ID --rewind N.`,
		Args: noArgs,
	}
	f := cmd.Flags()
	f.StringVar(&o.session, "session", "", "the session whose checkpoints to list, by `id` (default: every session, one line each)")
	f.StringVar(&o.show, "show", "", "with --session: print turn `N`'s changes as a unified diff")
	f.BoolVar(&o.prune, "prune", false, "remove the least recently written sessions' checkpoints until the store fits session.checkpointMaxBytes")
	cmd.RunE = a.action(func(ctx context.Context, a *app) int { return cmdCheckpoints(ctx, a, o) })
	return cmd
})

func cmdCheckpoints(_ context.Context, a *app, cpOpts *checkpointsFlags) int {
	if cpOpts.show != "" && cpOpts.session == "" {
		return a.badUsage("--show needs --session")
	}
	var show int
	if cpOpts.show != "" {
		var err error
		if show, err = strconv.Atoi(cpOpts.show); err != nil || show < 1 {
			return a.badUsage(fmt.Sprintf("--show must be a turn number (1 or more), got %q", cpOpts.show))
		}
	}
	dir := filepath.Join(a.cfg.Session.DataDir, "checkpoints")
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) && !cpOpts.prune {
		fmt.Fprintf(a.stdout, "No checkpoints yet in %s.\n", a.cfg.Session.DataDir)
		return exitOK
	}
	st, err := checkpoint.Open(a.cfg.Session.DataDir)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd checkpoints: %v\n", err)
		return exitError
	}
	switch {
	case cpOpts.prune:
		if a.cfg.Session.CheckpointMaxBytes == 0 {
			fmt.Fprintln(a.stdout, "session.checkpointMaxBytes is 0 (no bound): nothing to prune.")
			return exitOK
		}
		res, err := st.Prune(int64(a.cfg.Session.CheckpointMaxBytes))
		if err != nil {
			fmt.Fprintf(a.stderr, "acpd checkpoints: --prune: %v\n", err)
			return exitError
		}
		fmt.Fprintf(a.stdout, "Removed the checkpoints of %d session(s), %d bytes; the store holds %d bytes (bound %d).\n",
			len(res.Removed), res.Freed, res.Total, a.cfg.Session.CheckpointMaxBytes)
		for _, id := range res.Removed {
			fmt.Fprintln(a.stdout, "  "+id)
		}
		if res.InUseSkips > 0 {
			fmt.Fprintf(a.stdout, "%d session(s) in use by a running acpd were left alone.\n", res.InUseSkips)
		}
		return exitOK
	case cpOpts.session == "":
		return listCheckpointSessions(a, st)
	}
	return listSessionCheckpoints(a, st, cpOpts.session, show)
}

func listCheckpointSessions(a *app, st *checkpoint.Store) int {
	ids, err := st.Sessions()
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd checkpoints: %v\n", err)
		return exitError
	}
	if len(ids) == 0 {
		fmt.Fprintf(a.stdout, "No checkpoints yet in %s.\n", a.cfg.Session.DataDir)
		return exitOK
	}
	fmt.Fprintf(a.stdout, "%-28s %6s %12s  %s\n", "SESSION", "TURNS", "BYTES", "LAST")
	for _, id := range ids {
		cps, err := st.List(id)
		if err != nil {
			fmt.Fprintf(a.stderr, "acpd checkpoints: %s: %v\n", id, err)
			continue
		}
		var size int64
		if fi, err := os.Stat(filepath.Join(st.Dir(), id+".pack")); err == nil {
			size = fi.Size()
		}
		last := "-"
		if len(cps) > 0 {
			last = cps[len(cps)-1].Time.Local().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(a.stdout, "%-28s %6d %12d  %s\n", id, len(cps), size, last)
	}
	return exitOK
}

func listSessionCheckpoints(a *app, st *checkpoint.Store, id string, show int) int {
	cps, err := st.List(id)
	if err != nil {
		fmt.Fprintf(a.stderr, "acpd checkpoints: --session %s: %v\n", id, err)
		return exitUsage
	}
	if len(cps) == 0 {
		fmt.Fprintf(a.stderr, "acpd checkpoints: --session %s: no checkpoints (unknown session, or its turns changed no files)\n", id)
		return exitUsage
	}
	found := false
	for _, cp := range cps {
		if show > 0 && cp.Turn != show {
			continue
		}
		found = true
		chs, err := st.Changes(cp)
		if err != nil {
			fmt.Fprintf(a.stderr, "acpd checkpoints: turn %d: %v\n", cp.Turn, err)
			return exitError
		}
		mark := ""
		switch {
		case cp.Rewound != nil:
			mark = "  (rewound)"
		case !cp.Ended:
			mark = "  (interrupted)"
		}
		// The prompt, the workspace's file names and their contents are not
		// acpd's: shown on a terminal, a carriage return or an escape
		// sequence in them could rewrite what the listing says.
		fmt.Fprintf(a.stdout, "%d. %s  %s%s\n", cp.Turn, cp.Time.Local().Format("2006-01-02 15:04:05"), display.Line(cp.Prompt), mark)
		for _, c := range chs {
			counts := fmt.Sprintf("+%d −%d", c.Added, c.Removed)
			if c.Binary {
				counts = "binary"
			}
			switch {
			case c.Created:
				counts += " (created)"
			case c.Deleted:
				counts += " (deleted)"
			}
			fmt.Fprintf(a.stdout, "   %s  %s\n", display.Line(c.Path), counts)
		}
		if show > 0 {
			for _, c := range chs {
				fmt.Fprint(display.Writer(a.stdout), c.Unified())
			}
		}
	}
	if !found {
		fmt.Fprintf(a.stderr, "acpd checkpoints: --show %d: turn %d of session %s has no checkpoint\n", show, show, id)
		return exitUsage
	}
	return exitOK
}
