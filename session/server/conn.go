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

// connAgent is one connection's Manager with the server's rules around it:
// which sessions it may use (Server.use), the session bound and the
// connection id on telemetry spans. It wraps the Manager method by method
// rather than embedding it: a method the Manager gains (and the connection
// dispatches by interface) is not served here until a method below says
// which session it touches.
type connAgent struct {
	m   *session.Manager
	s   *Server
	id  string
	max int
	log *slog.Logger

	mu      sync.Mutex
	live    map[string]bool
	pending int // session activations under way, counted against max
}

var (
	_ acp.Agent    = (*connAgent)(nil)
	_ acp.Forker   = (*connAgent)(nil)
	_ acp.Logouter = (*connAgent)(nil)
	_ acp.Steerer  = (*connAgent)(nil)
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
		a.s.owners.set(id, a.id)
		// What opening it read and built is garbage now.
		a.s.rel.note()
	}
}

func (a *connAgent) forget(id string) {
	a.mu.Lock()
	delete(a.live, id)
	a.mu.Unlock()
	a.s.owners.drop(id, a.id)
}

// ctx adds the connection id to what telemetry puts on spans.
func (a *connAgent) ctx(ctx context.Context) context.Context {
	return telemetry.WithConnection(ctx, a.id)
}

// inUse rewrites the store's "in use by another acpd process" when the
// holder is another connection of this daemon (it took the session
// between the decision and the activation), so the client knows it may
// retry once that connection has ended.
func (a *connAgent) inUse(id string, err error) error {
	var e *acp.Error
	if !errors.As(err, &e) {
		return err
	}
	if d, ok := e.Data.(map[string]any); !ok || d["errorKind"] != "session_locked" {
		return err
	}
	if a.s.decide(a.id, id) != nil {
		return errLiveElsewhere(id)
	}
	return err
}

// Methods that name no session.

func (a *connAgent) Initialize(ctx context.Context, req *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	return a.m.Initialize(ctx, req)
}

func (a *connAgent) Authenticate(ctx context.Context, req *acp.AuthenticateRequest) (*acp.Empty, error) {
	return a.m.Authenticate(ctx, req)
}

func (a *connAgent) Logout(ctx context.Context, req *acp.LogoutRequest) (*acp.Empty, error) {
	return a.m.Logout(ctx, req)
}

// ListSessions lists the data folder's sessions, whoever holds them: the
// token owns the folder, and a client reconnecting looks its sessions up.
func (a *connAgent) ListSessions(ctx context.Context, req *acp.ListSessionsRequest) (*acp.ListSessionsResponse, error) {
	return a.m.ListSessions(ctx, req)
}

func (a *connAgent) NewSession(ctx context.Context, req *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	r, err := a.reserve("")
	if err != nil {
		return nil, err
	}
	resp, err := a.m.NewSession(a.ctx(ctx), req)
	id := ""
	if err == nil {
		id = resp.SessionID
	}
	a.release(r, id, err == nil)
	return resp, err
}

// Methods that name a session: each asks Server.use first.

func (a *connAgent) LoadSession(ctx context.Context, req *acp.LoadSessionRequest) (*acp.LoadSessionResponse, error) {
	if err := a.s.use(ctx, a.id, req.SessionID); err != nil {
		return nil, err
	}
	r, err := a.reserve(req.SessionID)
	if err != nil {
		return nil, err
	}
	resp, err := a.m.LoadSession(a.ctx(ctx), req)
	a.release(r, req.SessionID, err == nil)
	return resp, a.inUse(req.SessionID, err)
}

func (a *connAgent) ResumeSession(ctx context.Context, req *acp.ResumeSessionRequest) (*acp.LoadSessionResponse, error) {
	if err := a.s.use(ctx, a.id, req.SessionID); err != nil {
		return nil, err
	}
	r, err := a.reserve(req.SessionID)
	if err != nil {
		return nil, err
	}
	resp, err := a.m.ResumeSession(a.ctx(ctx), req)
	a.release(r, req.SessionID, err == nil)
	return resp, a.inUse(req.SessionID, err)
}

func (a *connAgent) ForkSession(ctx context.Context, req *acp.ForkSessionRequest) (*acp.ForkSessionResponse, error) {
	if err := a.s.use(ctx, a.id, req.SessionID); err != nil {
		return nil, err
	}
	r, err := a.reserve("")
	if err != nil {
		return nil, err
	}
	resp, err := a.m.ForkSession(a.ctx(ctx), req)
	id := ""
	if err == nil {
		id = resp.SessionID
	}
	a.release(r, id, err == nil)
	return resp, err
}

func (a *connAgent) CloseSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	if err := a.s.use(ctx, a.id, req.SessionID); err != nil {
		return nil, err
	}
	resp, err := a.m.CloseSession(ctx, req)
	if err == nil {
		a.forget(req.SessionID)
	}
	return resp, err
}

func (a *connAgent) DeleteSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	if err := a.s.use(ctx, a.id, req.SessionID); err != nil {
		return nil, err
	}
	resp, err := a.m.DeleteSession(ctx, req)
	if err == nil {
		a.forget(req.SessionID)
	}
	return resp, a.inUse(req.SessionID, err)
}

func (a *connAgent) SetSessionMode(ctx context.Context, req *acp.SetSessionModeRequest) (*acp.Empty, error) {
	if err := a.s.use(ctx, a.id, req.SessionID); err != nil {
		return nil, err
	}
	return a.m.SetSessionMode(ctx, req)
}

func (a *connAgent) SetSessionConfigOption(ctx context.Context, req *acp.SetSessionConfigOptionRequest) (*acp.SetSessionConfigOptionResponse, error) {
	if err := a.s.use(ctx, a.id, req.SessionID); err != nil {
		return nil, err
	}
	return a.m.SetSessionConfigOption(ctx, req)
}

func (a *connAgent) Prompt(ctx context.Context, req *acp.PromptRequest) (*acp.PromptResponse, error) {
	if err := a.s.use(ctx, a.id, req.SessionID); err != nil {
		return nil, err
	}
	return a.m.Prompt(a.ctx(ctx), req)
}

// Steer is _session/steering: the session's running turn, like a prompt.
func (a *connAgent) Steer(ctx context.Context, req *acp.SteeringRequest) (*acp.SteeringResponse, error) {
	if err := a.s.use(ctx, a.id, req.SessionID); err != nil {
		return nil, err
	}
	return a.m.Steer(a.ctx(ctx), req)
}

func (a *connAgent) Cancel(req *acp.SessionIDRequest) {
	if err := a.s.decide(a.id, req.SessionID); err != nil {
		a.log.Warn("session/cancel for a session live on another connection dropped", "session_id", req.SessionID)
		return
	}
	a.m.Cancel(req)
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
	a := &connAgent{m: session.NewManager(conn, opts), s: s, id: info.ID, max: s.opts.Config.MaxSessionsPerConnection,
		log: log, live: map[string]bool{}}
	err := conn.Serve(ctx, a)
	// Close cancels what still runs and closes every transcript, so the
	// sessions are free for the next connection.
	a.m.Close()
	a.mu.Lock()
	ids := make([]string, 0, len(a.live))
	for id := range a.live {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for _, id := range ids {
		s.owners.drop(id, a.id)
	}
	s.dropConn(info.ID, lc)
	log.Info("ACP connection closed", "remote", info.RemoteAddr, "duration", time.Since(start).Round(time.Millisecond).String(), "sessions", len(ids))
	return err
}
