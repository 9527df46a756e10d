package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/store"
)

var sessionsOpts struct {
	cwd, format string
}

func sessionsCommand() command {
	return command{
		summary: "list the stored sessions, newest first, with the ids acpd run --session and acpd stats --session take",
		run:     cmdSessions,
		flags: func(fs *flag.FlagSet) {
			sessionsOpts.cwd, sessionsOpts.format = "", "table"
			fs.StringVar(&sessionsOpts.cwd, "cwd", "", "only sessions whose working directory is this folder")
			fs.StringVar(&sessionsOpts.format, "format", "table", "output format: table or json")
		},
		help: func(w io.Writer, fs *flag.FlagSet) {
			fmt.Fprint(w, `Usage: acpd sessions [flags]

Lists the sessions stored in session.dataDir, most recently updated first: the full id, when it was last
updated, its working directory and its title. Continue one with acpd run --session ID (or from the editor's
session list); read its turns with acpd stats --session ID. A unique prefix of an id works in both.

Flags:
`)
			fs.PrintDefaults()
		},
	}
}

func cmdSessions(_ context.Context, a *app) int {
	if f := sessionsOpts.format; f != "table" && f != "json" {
		fmt.Fprintf(a.stderr, "acpd sessions: --format must be table or json, got %q\n", f)
		return exitUsage
	}
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
				fmt.Fprintf(a.stderr, "acpd sessions: --cwd: %v\n", err)
				return exitUsage
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
	if sessionsOpts.format == "json" {
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
