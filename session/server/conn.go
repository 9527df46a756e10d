package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/httptransport"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/telemetry"
)

// Sessions across connections. Decisions where the RFD is silent:
//   - Every ACP connection gets its own session.Manager; they share the
//     store, the provider and telemetry. A connection reaches only the
//     sessions it created, loaded, resumed or forked: any other session id
//     is unknown to its Manager (-32602), and its events go only to the
//     connection that holds it.
//   - A session live on one connection is not taken from it: load, resume
//     and delete from another answer -32603 naming the session (the
//     transcript's lock already refuses a second writer; the message says
//     which holder), and a session stream or POST for it answers 409, which
//     the SDK client takes as that session failing, not the connection.
//   - A holder that is already ending (DELETE, WebSocket closed, its
//     connection stream gone) is waited for, up to releaseWait, before a
//     load, resume, delete or session stream of another connection is
//     answered: a reconnect right after the old connection's end finds the
//     session free.
//   - Once the holder is gone the session is free: a dropped connection's
//     running turn is cancelled (it answers `cancelled` into the void, its
//     transcript records the cancellation), its transcripts are closed, and
//     a new connection continues with session/load or session/resume. A
//     turn is not kept running for a client that may never come back: the
//     v1 RFD replays nothing emitted while disconnected, so its output
//     would reach no one.

// owners maps live session ids to the connection holding them.
type owners struct {
	mu sync.Mutex
	by map[string]string
}

func (o *owners) owner(id string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.by[id]
	return c, ok
}

func (o *owners) set(id, conn string) {
	o.mu.Lock()
	o.by[id] = conn
	o.mu.Unlock()
}

func (o *owners) drop(id, conn string) {
	o.mu.Lock()
	if o.by[id] == conn {
		delete(o.by, id)
	}
	o.mu.Unlock()
}

// connAgent is one connection's Manager with the server's rules around it:
// the session bound, the cross-connection owner table and the connection id
// on telemetry spans.
type connAgent struct {
	*session.Manager
	id     string
	max    int
	owners *owners
	log    *slog.Logger
	// await waits for an ending connection that holds a session to let go
	// of it (Server.awaitRelease).
	await func(ctx context.Context, self, sid string)
	rel   *releaser

	mu      sync.Mutex
	live    map[string]bool
	pending int // session activations under way, counted against max
}

var (
	_ acp.Agent  = (*connAgent)(nil)
	_ acp.Forker = (*connAgent)(nil)
)

// reserve claims a session slot for an activation; release undoes it and,
// with ok, records id as live.
func (a *connAgent) reserve(id string) (reserved bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if id != "" && a.live[id] {
		return false, nil // already here: load/resume of it takes no new slot
	}
	if len(a.live)+a.pending >= a.max {
		return false, &acp.Error{Code: acp.CodeInternalError,
			Message: fmt.Sprintf("this connection already has %d live sessions, the most server.maxSessionsPerConnection allows; close one with session/close first", a.max),
			Data:    map[string]any{"errorKind": "session_limit", "limit": a.max}}
	}
	a.pending++
	return true, nil
}

func (a *connAgent) release(reserved bool, id string, ok bool) {
	a.mu.Lock()
	if reserved {
		a.pending--
	}
	if ok && id != "" {
		a.live[id] = true
	}
	a.mu.Unlock()
	if ok && id != "" {
		a.owners.set(id, a.id)
		// What opening it read and built is garbage now.
		a.rel.note()
	}
}

func (a *connAgent) forget(id string) {
	a.mu.Lock()
	delete(a.live, id)
	a.mu.Unlock()
	a.owners.drop(id, a.id)
}

// ctx adds the connection id to what telemetry puts on spans.
func (a *connAgent) ctx(ctx context.Context) context.Context {
	return telemetry.WithConnection(ctx, a.id)
}

// inUse rewrites the store's "in use by another acpd process" when the
// holder is another connection of this daemon, so the client knows it may
// retry once that connection has ended.
func (a *connAgent) inUse(id string, err error) error {
	var e *acp.Error
	if !errors.As(err, &e) {
		return err
	}
	if d, ok := e.Data.(map[string]any); !ok || d["errorKind"] != "session_locked" {
		return err
	}
	if other, ok := a.owners.owner(id); ok && other != a.id {
		return &acp.Error{Code: e.Code,
			Message: fmt.Sprintf("session %s is live on another connection; it can be loaded once that connection has ended", id),
			Data:    map[string]any{"sessionId": id, "errorKind": "session_locked"}}
	}
	return err
}

func (a *connAgent) NewSession(ctx context.Context, req *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	r, err := a.reserve("")
	if err != nil {
		return nil, err
	}
	resp, err := a.Manager.NewSession(a.ctx(ctx), req)
	id := ""
	if err == nil {
		id = resp.SessionID
	}
	a.release(r, id, err == nil)
	return resp, err
}

func (a *connAgent) LoadSession(ctx context.Context, req *acp.LoadSessionRequest) (*acp.LoadSessionResponse, error) {
	a.await(ctx, a.id, req.SessionID)
	r, err := a.reserve(req.SessionID)
	if err != nil {
		return nil, err
	}
	resp, err := a.Manager.LoadSession(a.ctx(ctx), req)
	a.release(r, req.SessionID, err == nil)
	return resp, a.inUse(req.SessionID, err)
}

func (a *connAgent) ResumeSession(ctx context.Context, req *acp.ResumeSessionRequest) (*acp.LoadSessionResponse, error) {
	a.await(ctx, a.id, req.SessionID)
	r, err := a.reserve(req.SessionID)
	if err != nil {
		return nil, err
	}
	resp, err := a.Manager.ResumeSession(a.ctx(ctx), req)
	a.release(r, req.SessionID, err == nil)
	return resp, a.inUse(req.SessionID, err)
}

func (a *connAgent) ForkSession(ctx context.Context, req *acp.ForkSessionRequest) (*acp.ForkSessionResponse, error) {
	r, err := a.reserve("")
	if err != nil {
		return nil, err
	}
	resp, err := a.Manager.ForkSession(a.ctx(ctx), req)
	id := ""
	if err == nil {
		id = resp.SessionID
	}
	a.release(r, id, err == nil)
	return resp, err
}

func (a *connAgent) CloseSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	resp, err := a.Manager.CloseSession(ctx, req)
	if err == nil {
		a.forget(req.SessionID)
	}
	return resp, err
}

func (a *connAgent) DeleteSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	a.await(ctx, a.id, req.SessionID)
	resp, err := a.Manager.DeleteSession(ctx, req)
	if err == nil {
		a.forget(req.SessionID)
	}
	return resp, a.inUse(req.SessionID, err)
}

func (a *connAgent) Prompt(ctx context.Context, req *acp.PromptRequest) (*acp.PromptResponse, error) {
	return a.Manager.Prompt(a.ctx(ctx), req)
}

// serveConn runs one ACP connection: a Manager of its own over the
// transport's reader and writer, until the connection ends.
func (s *Server) serveConn(ctx context.Context, info httptransport.ConnInfo, r io.Reader, w io.Writer) error {
	start := time.Now()
	log := s.log.With("conn_id", info.ID)
	log.Info("ACP connection opened", "remote", info.RemoteAddr, "transport", info.Transport, "user_agent", info.UserAgent)
	lc := s.addConn(ctx, info.ID)
	opts := s.opts.Session
	opts.Logger = log
	conn := acp.NewConn(r, w, acp.Options{Logger: log, Trace: s.opts.Trace, MaxLineBytes: int(s.opts.Config.MaxMessageBytes)})
	a := &connAgent{Manager: session.NewManager(conn, opts), id: info.ID, max: s.opts.Config.MaxSessionsPerConnection,
		owners: s.owners, log: log, await: s.awaitRelease, rel: s.rel, live: map[string]bool{}}
	err := conn.Serve(ctx, a)
	// Close cancels what still runs and closes every transcript, so the
	// sessions are free for the next connection.
	a.Manager.Close()
	a.mu.Lock()
	ids := make([]string, 0, len(a.live))
	for id := range a.live {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for _, id := range ids {
		a.owners.drop(id, a.id)
	}
	s.dropConn(info.ID, lc)
	log.Info("ACP connection closed", "remote", info.RemoteAddr, "duration", time.Since(start).Round(time.Millisecond).String(), "sessions", len(ids))
	return err
}

// sessionAllowed answers the transport before a connection names a
// session it has not attached: no when another connection holds it (one
// that is ending is waited for first).
func (s *Server) sessionAllowed(ctx context.Context, info httptransport.ConnInfo, sessionID string) bool {
	s.awaitRelease(ctx, info.ID, sessionID)
	other, ok := s.owners.owner(sessionID)
	return !ok || other == info.ID
}
