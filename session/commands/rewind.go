package commands

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rewinder is what /rewind needs of its session (the session package's
// host implements it; a host without checkpoints answers an error).
type Rewinder interface {
	// Turns lists the conversation's turns not rewound, oldest first.
	Turns() ([]TurnInfo, error)
	// Rewind restores the workspace files (code) and/or the conversation
	// to their state before turn n.
	Rewind(ctx context.Context, n int, code, conversation bool) (RewindResult, error)
}

// TurnInfo is one turn of the conversation and what it changed.
type TurnInfo struct {
	N      int
	Time   time.Time
	Prompt string // the prompt's first line
	// Checkpoint is set when the turn changed the workspace (or ran a
	// command that could have); Interrupted when it never ended (a crash).
	Checkpoint, Interrupted bool
	Files                   []FileStat
}

// FileStat is one file a turn changed.
type FileStat struct {
	Path                     string
	Added, Removed           int
	Created, Deleted, Binary bool
}

// RewindResult is what a rewind did.
type RewindResult struct {
	Restored, Removed []string
	// Conflicts changed after the turns; Kept are those left as they were
	// because the user chose to keep them.
	Conflicts, Kept []string
	// Skipped lie outside the session's workspace now: left alone.
	Skipped      []string
	Conversation bool
}

const rewindUsage = "Usage: /rewind lists the turns; /rewind N restores the files and the conversation to before turn N; /rewind N code or /rewind N conversation restores only one of the two."

// rewindCmd lists the turns or rewinds to before one.
func rewindCmd(ctx context.Context, h Host, args string) (Result, error) {
	rw, ok := h.(Rewinder)
	if !ok {
		return Result{Message: "This session keeps no checkpoints."}, nil
	}
	f := strings.Fields(args)
	if len(f) == 0 {
		turns, err := rw.Turns()
		if err != nil {
			return Result{}, err
		}
		return Result{Message: listTurns(turns)}, nil
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 || len(f) > 2 {
		return Result{Message: rewindUsage}, nil
	}
	code, conv := true, true
	if len(f) == 2 {
		switch f[1] {
		case "code":
			conv = false
		case "conversation":
			code = false
		default:
			return Result{Message: rewindUsage}, nil
		}
	}
	res, err := rw.Rewind(ctx, n, code, conv)
	if ctx.Err() != nil {
		return Result{}, nil
	}
	if err != nil {
		// An error, not a message: the prompt is answered with it, so a
		// client (acpd run --rewind, a script) can tell that nothing was
		// rewound.
		return Result{}, fmt.Errorf("rewind failed: %w", err)
	}
	return Result{Message: describeRewind(n, code, res)}, nil
}

func listTurns(turns []TurnInfo) string {
	if len(turns) == 0 {
		return "No turns to rewind yet."
	}
	var b strings.Builder
	b.WriteString("Turns (/rewind N goes back to before turn N):\n")
	for _, t := range turns {
		fmt.Fprintf(&b, "%d. %s  %s\n", t.N, t.Time.Local().Format("2006-01-02 15:04:05"), firstLine(t.Prompt))
		switch {
		case !t.Checkpoint:
			b.WriteString("   no file changes\n")
		case len(t.Files) == 0:
			b.WriteString("   checkpoint, no file changed\n")
		}
		if t.Interrupted {
			b.WriteString("   (interrupted: acpd stopped during this turn)\n")
		}
		for _, f := range t.Files {
			b.WriteString("   " + f.Path + "  " + f.counts() + "\n")
		}
	}
	return b.String()
}

func (f FileStat) counts() string {
	var s string
	if f.Binary {
		s = "binary"
	} else {
		s = fmt.Sprintf("+%d −%d", f.Added, f.Removed)
	}
	switch {
	case f.Created:
		s += " (created)"
	case f.Deleted:
		s += " (deleted)"
	}
	return s
}

func describeRewind(n int, code bool, res RewindResult) string {
	var b strings.Builder
	if code {
		fmt.Fprintf(&b, "Restored the workspace to before turn %d: %d file(s) put back, %d removed.\n", n, len(res.Restored), len(res.Removed))
		for _, p := range res.Restored {
			b.WriteString("  restored " + p + "\n")
		}
		for _, p := range res.Removed {
			b.WriteString("  removed " + p + "\n")
		}
		for _, p := range res.Kept {
			b.WriteString("  kept your version of " + p + "\n")
		}
		for _, p := range res.Skipped {
			b.WriteString("  left alone (outside the workspace now) " + p + "\n")
		}
	}
	if res.Conversation {
		fmt.Fprintf(&b, "The conversation is back to before turn %d; the model will not see the rewound turns again.\n", n)
	}
	return b.String()
}

// Forker is what /fork needs of its session.
type Forker interface {
	// Fork makes a new session holding the conversation up to turn n (0:
	// every turn that ended) and returns its id.
	Fork(ctx context.Context, n int) (string, error)
}

// forkCmd copies the conversation, up to turn N, into a new session.
func forkCmd(ctx context.Context, h Host, args string) (Result, error) {
	fk, ok := h.(Forker)
	if !ok {
		return Result{Message: "This session cannot be forked."}, nil
	}
	f := strings.Fields(args)
	n := 0
	if len(f) > 1 {
		return Result{Message: "Usage: /fork [N] copies the conversation (up to turn N) into a new session."}, nil
	}
	if len(f) == 1 {
		var err error
		if n, err = strconv.Atoi(f[0]); err != nil || n < 1 {
			return Result{Message: "Usage: /fork [N] copies the conversation (up to turn N) into a new session."}, nil
		}
	}
	id, err := fk.Fork(ctx, n)
	if err != nil {
		return Result{Message: "Fork failed: " + err.Error()}, nil
	}
	what := "the conversation"
	if n > 0 {
		what = fmt.Sprintf("the conversation up to turn %d", n)
	}
	return Result{Message: fmt.Sprintf("Forked %s into session %s (same folder). Open it from the session list, or: acpd run --session %s", what, id, id)}, nil
}
