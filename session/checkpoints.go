package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/checkpoint"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/shellline"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/tools"
)

// Checkpoints (package checkpoint) guard durable sessions only: a rewind
// must name turns that the transcript still has after a restart. Decisions
// where the spec is silent:
//   - Turn N is the session's N-th prompt, counting every prompt recorded
//     (rewound ones too), so a turn's number never changes.
//   - The checkpoint is taken right before the call runs, after the user
//     approved it: a rejected edit leaves nothing to undo.
//   - A call whose checkpoint cannot be written does not run; the model is
//     told why (a failed capture is never replaced by a stale one).
//   - Edits to files outside the tree snapshot's reach (ignored, over the
//     size bound) made after a shell command in the same turn are captured
//     when the file tools touch them, which may be after that command ran.

// checkpoints returns the manager's checkpoint store, opened at first use
// (nil for in-memory sessions).
func (m *Manager) checkpoints() (*checkpoint.Store, error) {
	if m.opts.Store == nil {
		return nil, nil
	}
	return m.cpOnce()
}

// beginCheckpoint starts the turn's checkpoint: written at the first
// mutating call.
func (t *turn) beginCheckpoint(blocks []acp.ContentBlock) {
	s := t.s
	cs, err := s.m.checkpoints()
	if err != nil {
		s.log.Error("checkpoint store", "err", err)
		t.cpErr = err
		return
	}
	if cs == nil {
		return
	}
	t.cp = cs.Begin(s.id, s.turnNo, store.TitleFromPrompt(blocks), s.roots)
}

// endCheckpoint records the state after the turn.
func (t *turn) endCheckpoint() {
	if t.cp == nil {
		return
	}
	if err := t.cp.End(); err != nil {
		t.s.log.Error("recording the state after the turn failed; a rewind of it will not detect later changes", "err", err)
	}
	if limit := t.s.m.opts.CheckpointMaxBytes; limit > 0 && t.cp.Taken() {
		cs, _ := t.s.m.checkpoints()
		res, err := cs.Prune(limit)
		if err != nil {
			t.s.log.Warn("pruning the checkpoint store", "err", err)
		}
		if len(res.Removed) > 0 {
			t.s.log.Info("checkpoint store over session.checkpointMaxBytes: removed the oldest sessions' checkpoints",
				"sessions", len(res.Removed), "freed_bytes", res.Freed, "total_bytes", res.Total)
		}
	}
}

// Checkpoint records what call c may change before it runs: the
// before-images of the files an edit names, or the whole workspace before
// a shell command that is not read-only or an MCP tool. It returns the
// text the model gets when the checkpoint failed and the call must not run.
// The calls the session runs itself are not checkpointed: an agent call's
// own calls are, one by one, and a plan's approval changes nothing.
func (t *turn) Checkpoint(c *toolcall.Call) string {
	if c.Body != nil {
		return ""
	}
	call, conf := c.Run, c.Confirm
	top := t
	for top.up != nil {
		top = top.up
	}
	if top.cpErr != nil {
		return "Not run: acpd could not open its checkpoint store, so this change could not be undone: " + top.cpErr.Error()
	}
	rec := top.cp
	if rec == nil {
		return ""
	}
	var err error
	switch {
	case conf.Kind == tools.ConfirmEdit:
		var paths []string
		for _, l := range call.Locations() {
			paths = append(paths, l.Path)
		}
		if len(paths) == 0 {
			err = rec.Tree()
		} else {
			err = rec.Files(paths)
		}
	case conf.Kind == tools.ConfirmExec && conf.Shell != shellline.ReadOnly, conf.Kind == tools.ConfirmMCP:
		err = rec.Tree()
	default:
		return ""
	}
	if err != nil {
		t.s.log.Error("checkpoint failed; the call does not run", "err", err)
		return "Not run: acpd could not record a checkpoint to undo this change: " + err.Error()
	}
	return ""
}

// countTurns is the number of prompts a transcript holds.
func countTurns(tr *store.Transcript) int {
	n := 0
	for i := range tr.Records {
		if r := &tr.Records[i]; r.Kind == store.KindUser && r.Parent == "" {
			n++
		}
	}
	return n
}

// Turns lists the session's live turns with what each changed.
func (h sessionHost) Turns() ([]commands.TurnInfo, error) {
	s := h.s
	st := s.m.opts.Store
	if st == nil || s.w == nil {
		return nil, errors.New("checkpoints need a durable session (session.dataDir)")
	}
	cs, err := s.m.checkpoints()
	if err != nil {
		return nil, err
	}
	tr, err := st.Load(s.id)
	if err != nil {
		return nil, err
	}
	var out []commands.TurnInfo
	for _, ti := range tr.Turns() {
		if ti.Rewound {
			continue
		}
		info := commands.TurnInfo{N: ti.N, Time: ti.T, Prompt: ti.Prompt}
		cp, err := cs.Load(s.id, ti.N)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			info.Checkpoint = true
			info.Interrupted = !cp.Ended
			chs, err := cs.Changes(cp)
			if err != nil {
				return nil, err
			}
			for _, c := range chs {
				info.Files = append(info.Files, commands.FileStat{
					Path: c.Path, Added: c.Added, Removed: c.Removed, Created: c.Created, Deleted: c.Deleted, Binary: c.Binary,
				})
			}
		}
		out = append(out, info)
	}
	return out, nil
}

// Rewind restores the workspace (code) and/or the conversation to before
// turn n. Files changed since are listed and the user is asked before they
// are replaced; rejecting keeps them.
func (h sessionHost) Rewind(ctx context.Context, n int, code, conversation bool) (commands.RewindResult, error) {
	s := h.s
	var res commands.RewindResult
	turns, err := h.Turns()
	if err != nil {
		return res, err
	}
	found := false
	var ns []string
	for _, ti := range turns {
		found = found || ti.N == n
		ns = append(ns, strconv.Itoa(ti.N))
	}
	if !found {
		// Said without pointing at /rewind: the client may be acpd run,
		// where the turns are listed by acpd checkpoints.
		if len(ns) == 0 {
			return res, fmt.Errorf("turn %d is not in the conversation, which has no turns to rewind", n)
		}
		return res, fmt.Errorf("turn %d is not in the conversation, whose turns are %s", n, strings.Join(ns, ", "))
	}
	cs, err := s.m.checkpoints()
	if err != nil {
		return res, err
	}
	if code {
		plan, err := cs.PlanRewind(s.id, n, s.roots)
		if err != nil {
			return res, err
		}
		keep := map[string]bool{}
		if conflicts := plan.Conflicts(); len(conflicts) > 0 {
			res.Conflicts = conflicts
			s.notify(ctx, notice.RewindConflict, fmt.Sprintf("rewinding to before turn %d: %d file(s) changed since the turn: %s",
				n, len(conflicts), strings.Join(conflicts, ", ")))
			replace, err := s.askRewindConflicts(ctx, n, conflicts)
			if err != nil {
				return res, err
			}
			if !replace {
				for _, p := range conflicts {
					keep[p] = true
				}
				res.Kept = conflicts
			}
		}
		if err := cs.Apply(plan, keep); err != nil {
			return res, fmt.Errorf("restoring the files: %w", err)
		}
		for _, c := range plan.Changes {
			switch {
			case keep[c.Path], c.To.Type == checkpoint.TypeDir:
			case c.To.Type == checkpoint.TypeAbsent:
				res.Removed = append(res.Removed, c.Path)
			default:
				res.Restored = append(res.Restored, c.Path)
			}
		}
		res.Skipped = plan.Skipped
	}
	if conversation {
		if err := s.rewindConversation(ctx, n, code); err != nil {
			return res, err
		}
		if err := cs.MarkRewound(s.id, n, time.Now().UTC()); err != nil {
			s.log.Error("marking rewound checkpoints", "err", err)
		}
		res.Conversation = true
	}
	return res, nil
}

// rewindConversation records the rewind and rebuilds the model's history
// from the transcript, as a reload would; the editor gets the replay of
// the conversation as it now stands.
func (s *Session) rewindConversation(ctx context.Context, n int, code bool) error {
	if err := s.record(store.Record{Kind: store.KindRewind, Rewind: &store.Rewind{Turn: n, Code: code}}); err != nil {
		return storeError(s.id, err)
	}
	if err := s.w.Sync(); err != nil {
		return storeError(s.id, err)
	}
	tr, err := s.m.opts.Store.Load(s.id)
	if err != nil {
		return acp.ErrInternal(fmt.Sprintf("session %s: reading the transcript failed: %v", s.id, err))
	}
	s.history = tr.Messages(s.userMessage)
	s.pendingLoopContext = tr.PendingLoop != nil && tr.PendingLoop.Message != ""
	s.cm.acct.Reset()
	s.lastUsed = 0
	for _, u := range tr.Updates() {
		u.Meta = acp.Meta{"acpd.replay": "rewind"}
		s.update(ctx, u)
	}
	return nil
}

// askRewindConflicts asks whether to replace the files changed since the
// turns; false keeps them.
func (s *Session) askRewindConflicts(ctx context.Context, n int, conflicts []string) (bool, error) {
	id := "rewind_" + randomHex(6)
	title := fmt.Sprintf("Rewind to before turn %d: replace %d file(s) changed since", n, len(conflicts))
	shown := make([]string, len(conflicts))
	for i, c := range conflicts {
		shown[i] = display.Line(c) // a workspace file name may hold any byte but NUL and /
	}
	text := "These files changed after the turns being rewound; replacing them loses those changes:\n" + strings.Join(shown, "\n")
	locs := make([]acp.ToolCallLocation, 0, len(conflicts))
	for _, p := range conflicts {
		locs = append(locs, acp.ToolCallLocation{Path: p})
	}
	return toolcall.AskAside(ctx, asker{s}, toolcall.Aside{
		Card:    acp.ToolCall{ToolCallID: id, Title: title, Kind: acp.KindEdit, Content: []acp.ToolCallContent{acp.TextContent(text)}, Locations: locs},
		Allow:   acp.PermissionOption{OptionID: toolcall.OptProceedOnce, Name: "Replace them", Kind: acp.AllowOnce},
		Reject:  acp.PermissionOption{OptionID: toolcall.OptCancel, Name: "Keep my versions", Kind: acp.RejectOnce},
		Meta:    acp.Meta{acp.MetaPermission: acp.PermissionRewindConflict},
		Allowed: "Replaced.",
		Kept:    "Kept the changed files.",
	})
}

// asker is a session as toolcall.AskAside asks through it.
type asker struct{ s *Session }

func (a asker) Update(ctx context.Context, u acp.SessionUpdate) { a.s.update(ctx, u) }

func (a asker) RequestPermission(ctx context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
	r.SessionID = a.s.id
	return a.s.m.client.RequestPermission(ctx, r)
}
