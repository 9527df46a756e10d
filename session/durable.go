package session

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/store"
)

// Durable sessions (Options.Store set). Decisions where the spec is silent:
//   - Durable sessions get store ids (store.NewID); in-memory ones keep sess_….
//   - session/load of a session live on this connection replays what is on
//     disk and keeps the live session (roots and MCP servers unchanged).
//   - A transcript held by another Writer (another acpd process, or another
//     connection) answers load, resume and delete with -32603 "session X is
//     in use by another acpd process" (data.errorKind "session_locked").
//   - session/delete of a malformed id is -32602; of an unknown one, {}.
//   - A failed transcript write answers the prompt (or set_mode /
//     set_config_option) -32603 naming it; see storeError.
//   - Calls are recorded (and held in the live history) under their ACP
//     toolCallIds, so a reloaded history is the live one even where a
//     provider reused or omitted its own ids.
//   - A response whose calls never ran because the turn was cancelled
//     right after it is recorded with its calls, each answered with the
//     cancellation message; a reload answers a call without a recorded
//     result (a crash) with store.InterruptedToolResult.
//   - todo_write's result is recorded (the model needs it), so a replay
//     shows it as a finished tool call next to the plan.

// closeWait bounds how long Manager.Close waits for a cancelled turn to
// answer before it closes the session's transcript regardless.
const closeWait = 5 * time.Second

// errInUse answers load, resume or delete of a session whose transcript
// another acpd process (or another connection of this one) holds.
func errInUse(id string) error {
	return &acp.Error{
		Code:    acp.CodeInternalError,
		Message: fmt.Sprintf("session %s is in use by another acpd process", id),
		Data:    map[string]any{"sessionId": id, "errorKind": "session_locked"},
	}
}

func errSessionNotFound(id string) error { return acp.ErrResourceNotFound("session:" + id) }

// LoadSession reopens a recorded session: it replays the transcript as
// session/update notifications, then answers. A session already live on
// this connection keeps running as it is (its roots and MCP servers are not
// changed); the client gets the replay of what is on disk so far.
func (m *Manager) LoadSession(ctx context.Context, req *acp.LoadSessionRequest) (*acp.LoadSessionResponse, error) {
	if m.opts.Store == nil {
		return nil, acp.ErrMethodNotFound(acp.MethodSessionLoad)
	}
	if err := mcp.ValidateServers(req.MCPServers); err != nil {
		return nil, err
	}
	return m.activate(ctx, req.SessionID, req.Cwd, req.AdditionalDirectories, req.MCPServers, true)
}

// ResumeSession reopens a recorded session without replaying it.
func (m *Manager) ResumeSession(ctx context.Context, req *acp.ResumeSessionRequest) (*acp.LoadSessionResponse, error) {
	if m.opts.Store == nil {
		return nil, acp.ErrMethodNotFound(acp.MethodSessionResume)
	}
	if err := mcp.ValidateServers(req.MCPServers); err != nil {
		return nil, err
	}
	return m.activate(ctx, req.SessionID, req.Cwd, req.AdditionalDirectories, req.MCPServers, false)
}

// activate is session/load (replay) and session/resume: it takes the
// session's transcript writer, restores mode, model, history, the pending
// loop context and the used toolCallIds, and connects MCP servers.
func (m *Manager) activate(ctx context.Context, id, cwd string, extra []string, servers []acp.MCPServer, replay bool) (*acp.LoadSessionResponse, error) {
	if err := store.ValidateID(id); err != nil {
		return nil, acp.ErrInvalidParams("sessionId", err.Error())
	}
	if err := checkDirs(cwd, extra); err != nil {
		return nil, err
	}
	if err := m.checkAuth(); err != nil {
		return nil, err
	}
	if s := m.session(id); s != nil {
		return m.reactivate(ctx, s, replay)
	}
	st := m.opts.Store
	w, tr, err := st.Resume(id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errSessionNotFound(id)
	case errors.Is(err, store.ErrLocked):
		if s := m.session(id); s != nil { // activated concurrently on this connection
			return m.reactivate(ctx, s, replay)
		}
		return nil, errInUse(id)
	case err != nil:
		m.log.Error("reading session transcript failed", "session_id", id, "err", err)
		return nil, acp.ErrInternal(fmt.Sprintf("session %s: reading the transcript failed: %v", id, err))
	}
	s := m.newSession(id, cwd, extra)
	s.w = w
	s.resumed = true
	for _, wn := range tr.Warnings {
		s.log.Warn("session transcript damaged; skipped", "line", wn.Line, "msg", wn.Msg)
	}
	if tr.CorruptLine > 0 {
		s.log.Warn("session transcript has a corrupt record; loaded the records before it", "line", tr.CorruptLine)
	}
	m.restore(s, tr)
	fail := func(err error) (*acp.LoadSessionResponse, error) {
		s.stopPrep()
		if cerr := w.Close(); cerr != nil {
			s.log.Error("closing session transcript failed", "err", cerr)
		}
		return nil, err
	}
	// Roots are per activation: a change is recorded so list and the next
	// load see the roots the session last ran with.
	if cwd != tr.Meta.Cwd || !slices.Equal(extra, tr.Meta.AdditionalDirectories) {
		meta := store.SessionMeta{ID: id, Cwd: cwd, AdditionalDirectories: extra, CreatedAt: tr.Meta.CreatedAt}
		if err := s.record(store.Record{Kind: store.KindMeta, Meta: &meta}); err != nil {
			return fail(storeError(id, err))
		}
	}
	if replay {
		if err := m.replay(ctx, id, tr); err != nil {
			return fail(err)
		}
	}
	m.connectMCP(ctx, s, servers)
	m.mu.Lock()
	m.sessions[id] = s
	m.mu.Unlock()
	s.log.Info("session activated", "cwd", cwd, "replay", replay, "records", len(tr.Records))
	s.startPrepAfterReply(ctx)
	s.announceCommands(ctx, replay)
	return &acp.LoadSessionResponse{Modes: s.modeState(), ConfigOptions: s.configOptions()}, nil
}

// reactivate answers load or resume of a session live on this connection.
func (m *Manager) reactivate(ctx context.Context, s *Session, replay bool) (*acp.LoadSessionResponse, error) {
	if replay {
		tr, err := m.opts.Store.Load(s.id)
		if err != nil {
			s.log.Error("reading session transcript failed", "err", err)
			return nil, acp.ErrInternal(fmt.Sprintf("session %s: reading the transcript failed: %v", s.id, err))
		}
		if err := m.replay(ctx, s.id, tr); err != nil {
			return nil, err
		}
	}
	s.announceCommands(ctx, replay)
	return &acp.LoadSessionResponse{Modes: s.modeState(), ConfigOptions: s.configOptions()}, nil
}

// replay sends the transcript as session/update notifications. They go out
// on the request's goroutine, so they reach the wire before the response.
func (m *Manager) replay(ctx context.Context, id string, tr *store.Transcript) error {
	m.mu.Lock()
	caps := m.clientCaps
	m.mu.Unlock()
	for _, u := range tr.UpdatesFor(store.ReplayOptions{Compaction: caps.Compaction()}) {
		if err := m.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: id, Update: u}); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return acp.ErrInternal(fmt.Sprintf("session %s: replaying the transcript failed: %v", id, err))
		}
	}
	return nil
}

// restore gives a new Session the state its transcript implies.
func (m *Manager) restore(s *Session, tr *store.Transcript) {
	if tr.ModeID != "" {
		if validMode(tr.ModeID) {
			s.mode = tr.ModeID
		} else {
			s.log.Warn("recorded approval mode is unknown; using the default", "mode", tr.ModeID)
		}
	}
	if tr.ModelID != "" {
		if slices.Contains(m.opts.Models, tr.ModelID) {
			s.model = tr.ModelID
		} else {
			s.log.Warn("recorded model is not offered by this configuration; using the default", "model", tr.ModelID, "default", m.opts.Model)
		}
	}
	if tr.ThoughtLevel != "" {
		if slices.Contains(m.levelsOf(s.model), tr.ThoughtLevel) {
			s.thought = tr.ThoughtLevel
		} else {
			s.log.Warn("recorded thinking level is not offered by the model; using its default", "level", tr.ThoughtLevel, "model", s.model)
		}
	}
	s.history = tr.Messages(s.userMessage)
	s.turnNo = countTurns(tr)
	// The repeated-failure stop records no message: its stop text is
	// already in the history, as in the live session.
	s.pendingLoopContext = tr.PendingLoop != nil && tr.PendingLoop.Message != ""
	s.title = tr.Title
	for i := range tr.Records {
		r := &tr.Records[i]
		// Every toolCallId is the session's, a subagent run's included; the
		// run's usage and compactions were of its own conversation.
		sub := r.Parent != ""
		if r.Kind == store.KindUsage && r.Usage != nil {
			if !sub && r.Usage.Size > 0 {
				s.lastUsed = int(r.Usage.Used)
			}
			s.cost += r.Usage.Cost // a subagent run's cost is the session's
		}
		if r.Tool != nil {
			s.noteToolCallID(r.Tool.ToolCallID)
		}
		for _, c := range r.ToolCalls {
			s.noteToolCallID(c.ID)
		}
		if c := r.Compaction; c != nil {
			if c.ToolCallID != "" {
				s.noteToolCallID(c.ToolCallID)
			}
			if sub {
				continue
			}
			s.cm.last = &CompactionInfo{Method: c.Method, Trigger: c.Trigger, Before: c.Before, After: c.After, At: r.T, Detail: c.Detail}
		}
	}
}

// ListSessions pages through the recorded sessions, most recent first.
func (m *Manager) ListSessions(_ context.Context, req *acp.ListSessionsRequest) (*acp.ListSessionsResponse, error) {
	st := m.opts.Store
	if st == nil {
		return nil, acp.ErrMethodNotFound(acp.MethodSessionList)
	}
	if req.Cwd != "" && !filepath.IsAbs(req.Cwd) {
		return nil, acp.ErrInvalidParams("cwd", "cwd must be an absolute path: "+req.Cwd)
	}
	infos, next, err := st.List(store.ListOptions{Cwd: req.Cwd, Cursor: req.Cursor})
	if errors.Is(err, store.ErrInvalidCursor) {
		return nil, acp.ErrInvalidParams("cursor", "Invalid cursor: "+req.Cursor)
	}
	if err != nil {
		m.log.Error("listing sessions failed", "err", err)
		return nil, acp.ErrInternal("session/list: " + err.Error())
	}
	out := &acp.ListSessionsResponse{Sessions: make([]acp.SessionInfo, 0, len(infos)), NextCursor: next}
	for _, in := range infos {
		out.Sessions = append(out.Sessions, acp.SessionInfo{
			SessionID:             in.ID,
			Cwd:                   in.Cwd,
			AdditionalDirectories: in.AdditionalDirectories,
			Title:                 in.Title,
			UpdatedAt:             in.UpdatedAt.UTC().Format(time.RFC3339Nano),
		})
	}
	return out, nil
}

// CloseSession behaves as session/cancel, waits for the turn to answer,
// then frees the session: MCP servers stop and the transcript is closed
// (fsynced, unlocked); it stays on disk for a later load.
func (m *Manager) CloseSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	s := m.session(req.SessionID)
	if s == nil {
		return nil, errUnknownSession(req.SessionID)
	}
	m.forget(s)
	if err := s.shutdown(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, acp.ErrInternal(fmt.Sprintf("session %s: closing the transcript failed: %v", s.id, err))
	}
	return &acp.Empty{}, nil
}

// DeleteSession closes the session if it is live, then removes its
// transcript. An unknown id succeeds, as the spec asks.
func (m *Manager) DeleteSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	st := m.opts.Store
	if st == nil {
		return nil, acp.ErrMethodNotFound(acp.MethodSessionDelete)
	}
	if err := store.ValidateID(req.SessionID); err != nil {
		return nil, acp.ErrInvalidParams("sessionId", err.Error())
	}
	if s := m.session(req.SessionID); s != nil {
		m.forget(s)
		if err := s.shutdown(ctx); err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if err := st.Delete(req.SessionID); err != nil {
		if errors.Is(err, store.ErrLocked) {
			return nil, errInUse(req.SessionID)
		}
		m.log.Error("deleting session failed", "session_id", req.SessionID, "err", err)
		return nil, acp.ErrInternal(fmt.Sprintf("session %s: deleting the transcript failed: %v", req.SessionID, err))
	}
	m.log.Info("session deleted", "session_id", req.SessionID)
	return &acp.Empty{}, nil
}

// Close cancels every running turn, waits up to closeWait for each to
// answer, stops MCP servers and closes every transcript (fsync). The
// connection's own shutdown cancels request contexts too; Close also covers
// turns started in-process.
func (m *Manager) Close() {
	m.mu.Lock()
	ss := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		ss = append(ss, s)
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			if err := s.shutdown(ctx); err != nil && ctx.Err() != nil {
				s.log.Warn("turn did not end in time; its transcript closes when it does", "wait", closeWait)
			}
		})
	}
	wg.Wait()
}

// forget removes s from the live sessions.
func (m *Manager) forget(s *Session) {
	m.mu.Lock()
	if m.sessions[s.id] == s {
		delete(m.sessions, s.id)
	}
	m.mu.Unlock()
}

// shutdown refuses new prompts, cancels the admitted ones, waits for the
// running turn to answer (its turn_end is then recorded) and frees the
// session. When ctx ends first, the session is freed once the turn ends.
func (s *Session) shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancelTurn()
	if err := s.acquire(ctx); err != nil {
		go func() {
			_ = s.acquire(context.Background())
			_ = s.free()
			s.release()
		}()
		return err
	}
	defer s.release()
	return s.free()
}

// free stops the MCP servers and closes the transcript, once.
func (s *Session) free() error {
	s.freeOnce.Do(func() {
		s.stopPrep()
		s.stopCommands()
		s.closeMCP()
		s.rootCache.Close()
		if cs, err := s.m.checkpoints(); err == nil && cs != nil && s.parent == nil {
			if err := cs.Release(s.id); err != nil {
				s.log.Warn("closing the checkpoint pack", "err", err)
			}
		}
		if err := s.sandbox.Close(); err != nil {
			s.log.Warn("removing the sandbox temp folder", "err", err)
		}
		s.sessionEnd()
		if s.w != nil {
			if err := s.w.Close(); err != nil {
				s.log.Error("closing session transcript failed", "err", err)
				s.freeErr = err
			}
		}
	})
	return s.freeErr
}
