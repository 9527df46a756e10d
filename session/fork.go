package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/store"
)

// Forks. Decisions where the spec is silent:
//   - A fork copies the source's transcript records up to the end of the
//     turn it forks from (session/fork: the last turn that ended; /fork N:
//     turn N), under a new id, cwd and roots. A turn running in the source
//     is not copied; nor are the source's checkpoints: the fork's own turns
//     get their own, and a /rewind in the fork can rewind a copied turn's
//     conversation but has no files of it to restore.
//   - The records keep their times, so acpd stats counts the copied
//     requests in both sessions, as both histories hold them.
//   - session/fork activates the new session on the connection (as
//     session/resume would, without a replay: the editor already shows the
//     conversation); /fork leaves it closed, to open with session/load.

// ForkSession answers session/fork.
func (m *Manager) ForkSession(ctx context.Context, req *acp.ForkSessionRequest) (*acp.ForkSessionResponse, error) {
	if m.opts.Store == nil {
		return nil, acp.ErrMethodNotFound(acp.MethodSessionFork)
	}
	if err := store.ValidateID(req.SessionID); err != nil {
		return nil, acp.ErrInvalidParams("sessionId", err.Error())
	}
	if err := checkDirs(req.Cwd, req.AdditionalDirectories); err != nil {
		return nil, err
	}
	if err := mcp.ValidateServers(req.MCPServers); err != nil {
		return nil, err
	}
	if err := m.checkAuth(); err != nil {
		return nil, err
	}
	id, err := m.fork(req.SessionID, 0, req.Cwd, req.AdditionalDirectories)
	if err != nil {
		return nil, err
	}
	r, err := m.activate(ctx, id, req.Cwd, req.AdditionalDirectories, req.MCPServers, false)
	if err != nil {
		return nil, err
	}
	return &acp.ForkSessionResponse{SessionID: id, Modes: r.Modes, ConfigOptions: r.ConfigOptions}, nil
}

// fork writes a new session's transcript holding the conversation of src
// up to the end of turn n (0: the last turn that ended) and returns its id.
func (m *Manager) fork(src string, n int, cwd string, extra []string) (string, error) {
	st := m.opts.Store
	tr, err := st.Load(src)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", errSessionNotFound(src)
	case err != nil:
		return "", acp.ErrInternal(fmt.Sprintf("session %s: reading the transcript failed: %v", src, err))
	}
	end, err := forkEnd(tr, n)
	if err != nil {
		return "", err
	}
	w, err := st.Create(store.SessionMeta{ID: store.NewID(), Cwd: cwd, AdditionalDirectories: extra})
	if err != nil {
		return "", acp.ErrInternal("session/fork: creating the session transcript failed: " + err.Error())
	}
	id := w.ID()
	for i := range tr.Records[:end] {
		r := tr.Records[i]
		if r.Kind == store.KindMeta {
			continue
		}
		if err := w.Append(r); err != nil {
			_ = w.Close()
			_ = st.Delete(id)
			return "", storeError(id, err)
		}
	}
	if err := w.Close(); err != nil {
		_ = st.Delete(id)
		return "", storeError(id, err)
	}
	m.log.Info("session forked", "session_id", id, "from", src, "records", end)
	return id, nil
}

// forkEnd is the number of records a fork copies: those up to and
// including turn n's turn_end (n 0: the last turn_end).
func forkEnd(tr *store.Transcript, n int) (int, error) {
	turns := tr.Turns()
	if n > 0 {
		if n > len(turns) || turns[n-1].Rewound {
			return 0, acp.ErrInvalidParams("turn", fmt.Sprintf("turn %d is not in the conversation", n))
		}
	}
	turn, end := 0, -1
	for i := range tr.Records {
		r := &tr.Records[i]
		if r.Parent != "" {
			continue
		}
		switch r.Kind {
		case store.KindUser:
			if n > 0 && turn == n {
				return i, nil // turn n never ended (a crash): up to the next prompt
			}
			turn++
		case store.KindTurnEnd:
			end = i + 1
			if n > 0 && turn == n {
				return end, nil
			}
		}
	}
	if n > 0 {
		return len(tr.Records), nil
	}
	if end < 0 {
		// No turn ended yet: the settings records before the first prompt.
		for i := range tr.Records {
			if tr.Records[i].Kind == store.KindUser {
				return i, nil
			}
		}
		return len(tr.Records), nil
	}
	return end, nil
}

// Fork is /fork: a new session with the conversation up to turn n (0: all
// turns that ended), the same cwd and roots.
func (h sessionHost) Fork(_ context.Context, n int) (string, error) {
	s := h.s
	if s.m.opts.Store == nil || s.w == nil {
		return "", errors.New("forking needs a durable session (session.dataDir)")
	}
	id, err := s.m.fork(s.id, n, s.cwd, s.roots[1:])
	if err != nil {
		var ae *acp.Error
		if errors.As(err, &ae) {
			return "", errors.New(ae.Message)
		}
		return "", err
	}
	return id, nil
}
