// Package stats reads session transcripts and describes every prompt turn
// the way the adaptive cap's design document did for three turns: tool
// calls, distinct (tool, args) keys, the highest repeat of one key, the
// longest same-name streak, the outcome (with the loop type and the cap
// rule that fired) and the duration. It can also replay the daemon's loop
// guard — package loopdetect's own CapTracker.RecordBatch, batch by batch
// as the daemon counts — over each recorded turn under other settings and
// report the turns whose outcome would change. `acpd stats` is its
// command-line face.
//
// It reads through store.Scanner: read-only, no locks, safe while daemons
// write the same files.
package stats

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/session/store"
)

// Options select the turns and the replay.
type Options struct {
	// DataDir is session.dataDir (transcripts are in DataDir/sessions).
	DataDir string
	// MissingOK reads a DataDir that does not exist as one holding no
	// sessions (the default folder before anything ran) instead of an error.
	MissingOK bool
	// Sessions keeps only these session ids (none: every session).
	Sessions []string
	// Since keeps turns that started at or after it (zero: all).
	Since time.Time
	// Cwd keeps sessions whose working directory is Cwd or inside it.
	Cwd string
	// Agent keeps the turns of this agent (Turn.AgentName: "acpd" for
	// acpd's own prompt turns, a subagent's name, or the name `acpd guard`
	// recorded for the agent it watched).
	Agent string
	// WhatIf, when set, replays every turn under these settings.
	WhatIf *Settings
	// Workers read sessions in parallel; 0 means GOMAXPROCS.
	Workers int
}

// Report is what Collect returns: the turns (oldest first) and a summary.
// The turns point into per-session blocks, so a large history is held once.
type Report struct {
	Turns   []*Turn `json:"turns"`
	Summary Summary `json:"summary"`
	// loose is each session's usage recorded outside a turn (a /compress
	// summary), counted in the summary only.
	loose []Turn
}

// Collect reads the transcripts in opts.DataDir and describes their turns.
func Collect(opts Options) (*Report, error) {
	// A data folder that does not exist is most likely a mistyped
	// --data-dir or ACPD_DATA_DIR: say so rather than report zero turns.
	// (A data folder without a sessions folder is a daemon that has not
	// recorded a session yet: zero turns, no error.)
	if fi, err := os.Stat(opts.DataDir); errors.Is(err, fs.ErrNotExist) && opts.MissingOK {
		// Fresh install: nothing has run yet; zero turns below.
	} else if err != nil {
		return nil, fmt.Errorf("session.dataDir: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("session.dataDir: %s is not a folder", opts.DataDir)
	}
	// acpd's own transcripts, then those `acpd guard` keeps for the agents
	// it watched (store.GuardDir): one list, each id with its folder.
	ids, err := store.SessionIDs(opts.DataDir)
	if err != nil {
		return nil, err
	}
	dirs := make([]string, len(ids))
	for i := range dirs {
		dirs[i] = opts.DataDir
	}
	guardDir := filepath.Join(opts.DataDir, store.GuardDir)
	gids, err := store.SessionIDs(guardDir)
	if err != nil {
		return nil, err
	}
	for _, id := range gids {
		ids = append(ids, id)
		dirs = append(dirs, guardDir)
	}
	if len(opts.Sessions) > 0 {
		// Each is a full id or a unique prefix (the table's short ids). A
		// session asked for that is not there is a mistake (a typo,
		// another data folder), not an empty answer.
		want := map[string]bool{}
		for _, s := range opts.Sessions {
			id, err := store.MatchID(ids, s)
			if errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("--session: no session %q in %s", s, opts.DataDir)
			}
			if err != nil {
				return nil, fmt.Errorf("--session: %w", err)
			}
			want[id] = true
		}
		n := 0
		for i, id := range ids {
			if want[id] {
				ids[n], dirs[n] = id, dirs[i]
				n++
			}
		}
		ids, dirs = ids[:n], dirs[:n]
	}
	cwd := ""
	if opts.Cwd != "" {
		abs, err := filepath.Abs(opts.Cwd)
		if err != nil {
			return nil, fmt.Errorf("--cwd: %w", err)
		}
		cwd = filepath.Clean(abs)
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	type result struct {
		turns   []Turn
		loose   Turn // usage recorded outside any turn (/compress)
		skipped int
		err     error
	}
	results := make([]result, len(ids))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(len(ids), 1)) {
		wg.Go(func() {
			r := newReader(opts.WhatIf)
			for i := range next {
				turns, loose, skipped, err := r.session(dirs[i], ids[i])
				if (cwd != "" && !within(loose.Cwd, cwd)) || (!opts.Since.IsZero() && loose.Start.Before(opts.Since)) ||
					(opts.Agent != "" && loose.AgentName() != opts.Agent) {
					loose = Turn{}
				}
				if opts.Agent != "" {
					turns = slices.DeleteFunc(turns, func(t Turn) bool { return t.AgentName() != opts.Agent })
				}
				if cwd != "" {
					turns = slices.DeleteFunc(turns, func(t Turn) bool { return !within(t.Cwd, cwd) })
				}
				if !opts.Since.IsZero() {
					turns = slices.DeleteFunc(turns, func(t Turn) bool { return t.Start.Before(opts.Since) })
				}
				results[i] = result{turns, loose, skipped, err}
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()

	// A session acpd guard watched whose agent was an acpd keeping its
	// transcripts in this same folder (acpd guard -- acpd) is recorded
	// twice, by the guard and by that acpd; the acpd's own transcript is
	// the fuller record (its subagent runs, compactions, costs), so the
	// guard's is left out and the turn counted once.
	own := map[string]bool{}
	for i, id := range ids {
		if dirs[i] == opts.DataDir {
			own[id] = true
		}
	}
	for i := range results {
		r := &results[i]
		if dirs[i] != guardDir || r.err != nil {
			continue
		}
		watched := r.loose.AgentSession
		for _, t := range r.turns {
			watched = cmp.Or(watched, t.AgentSession)
		}
		if own[watched] {
			*r = result{}
		}
	}
	rep := &Report{}
	n := 0
	for _, r := range results {
		n += len(r.turns)
	}
	rep.Turns = make([]*Turn, 0, n)
	sessions := 0
	for i := range results {
		r := &results[i]
		if r.err != nil {
			if errors.Is(r.err, store.ErrNotFound) {
				continue // deleted while we read
			}
			return nil, fmt.Errorf("session %s: %w", ids[i], r.err)
		}
		rep.Summary.Skipped += r.skipped
		rep.loose = append(rep.loose, r.loose)
		if len(r.turns) > 0 {
			sessions++
		}
		for j := range r.turns {
			rep.Turns = append(rep.Turns, &r.turns[j])
		}
	}
	slices.SortStableFunc(rep.Turns, func(a, b *Turn) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Session, b.Session); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Turn, b.Turn); c != 0 {
			return c
		}
		return cmp.Compare(a.Run, b.Run)
	})
	rep.Summary.Sessions = sessions
	rep.summarise(opts.WhatIf)
	return rep, nil
}

// within reports whether dir is root or inside it.
func within(dir, root string) bool {
	dir = filepath.Clean(dir)
	if dir == root || root == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(dir, root+string(filepath.Separator))
}
