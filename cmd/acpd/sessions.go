package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/store"
)

// sessionsFlags are acpd sessions' own flags.
type sessionsFlags struct {
	cwd    string
	format outputFormat
}

var _ = addCommand(func(a *app) *cobra.Command {
	o := &sessionsFlags{}
	cmd := &cobra.Command{
		Use:   "sessions [flags]",
		Short: "list the stored sessions, newest first, with the ids acpd run --session and acpd stats --session take",
		Long: `Lists the sessions stored in session.dataDir, most recently updated first: the
full id, when it was last updated, its working directory and its title.
Continue one with acpd run --session ID (or from the editor's session list);
read its turns with acpd stats --session ID. A unique prefix of an id works in
both.`,
		Args: noArgs,
	}
	cmd.Flags().StringVar(&o.cwd, "cwd", "", "only sessions whose working directory is this `folder`")
	_ = cmd.MarkFlagDirname("cwd")
	outputFormatFlags(cmd.Flags(), &o.format, "table", "json")
	cmd.RunE = a.action(func(ctx context.Context, a *app) int { return cmdSessions(ctx, a, o) })
	return cmd
})

func cmdSessions(_ context.Context, a *app, sessionsOpts *sessionsFlags) int {
	dir := a.cfg.Session.DataDir
	var all []store.SessionInfo
	_, statErr := os.Stat(dir)
	if statErr != nil && (a.src.Of("session.dataDir").Kind != config.SourceDefault || !errors.Is(statErr, fs.ErrNotExist)) {
		// A folder the user named must exist; the default one appears
		// with the first session.
		fmt.Fprintf(a.stderr, "acpd sessions: session.dataDir: %v\n", statErr)
		return exitError
	}
	if statErr == nil {
		// Opening reconciles the index with the transcripts, so the list
		// is right even after a crash or another daemon's writes.
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			fmt.Fprintf(a.stderr, "acpd sessions: session.dataDir: %v\n", err)
			return exitError
		}
		cwd := ""
		if sessionsOpts.cwd != "" {
			if cwd, err = filepath.Abs(sessionsOpts.cwd); err != nil {
				return a.badUsage("--cwd: " + err.Error())
			}
		}
		for cursor := ""; ; {
			page, next, err := st.List(store.ListOptions{Cwd: cwd, Cursor: cursor, Limit: store.MaxPageSize})
			if err != nil {
				fmt.Fprintf(a.stderr, "acpd sessions: %v\n", err)
				return exitError
			}
			all = append(all, page...)
			if cursor = next; cursor == "" {
				break
			}
		}
	}
	if sessionsOpts.format.v == "json" {
		if all == nil {
			all = []store.SessionInfo{}
		}
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"sessions": all}); err != nil {
			return exitError
		}
		return exitOK
	}
	if len(all) == 0 {
		fmt.Fprintf(a.stdout, "No sessions recorded yet in %s.\n", dir)
		return exitOK
	}
	const rowFmt = "%-26s  %-16s  %s\n"
	fmt.Fprintf(a.stdout, rowFmt, "SESSION", "UPDATED (UTC)", "CWD / TITLE")
	for _, s := range all {
		where := s.Cwd
		if t := strings.Join(strings.Fields(s.Title), " "); t != "" {
			where += "  " + t
		}
		fmt.Fprintf(a.stdout, rowFmt, s.ID, s.UpdatedAt.UTC().Format("2006-01-02 15:04"), display.Line(where))
	}
	return exitOK
}
