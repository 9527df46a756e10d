package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/httptransport"
	"github.com/acpd/acpd/session"
)

// Which connection may use which session is decided here, in use, for
// every method that names a session and for both transports: the HTTP
// transport asks before a session stream or a session-scoped POST names a
// session its connection has not attached (sessionAllowed: 409), and a
// connection's agent (connAgent) asks for every request and notification
// that names one — all a WebSocket connection has, and the body of every
// HTTP POST. Decisions where the RFD is silent:
//   - Every ACP connection gets its own session.Manager; they share the
//     store, the provider and telemetry. A connection reaches only the
//     sessions it created, loaded, resumed or forked: any other session id
//     is unknown to its Manager (-32602), and its events go only to the
//     connection that holds it.
//   - A session live on one connection is that connection's alone: no other
//     may prompt, cancel, configure or close it, take it over (load,
//     resume, delete) or read it (fork: the copy would carry the holder's
//     conversation to a connection that cannot see it) while it holds it.
//     A request answers -32603 with errorKind "session_locked" naming the
//     session, a session/cancel is dropped, and over HTTP a session stream
//     or POST for it answers 409, which the SDK client takes as that
//     session failing, not the connection.
//   - A subagent's child session (`<parent>~<toolCallId>`) is its root
//     session's: the connection holding the parent may cancel the child;
//     any other is refused as for the parent (a session/cancel dropped, a
//     request answered "session_locked"), never told it does not exist.
//   - A holder that is already ending (DELETE, WebSocket closed, its
//     connection stream gone) is waited for, up to releaseWait, before
//     another connection's request is decided: a reconnect right after the
//     old connection's end finds the session free.
//   - A session no connection holds is free to any connection with the
//     token, which owns the data folder. Once its holder is gone a session
//     is free: a dropped connection's running turn is cancelled (it answers
//     `cancelled` into the void, its transcript records the cancellation),
//     its transcripts are closed, and a new connection continues with
//     session/load or session/resume. A turn is not kept running for a
//     client that may never come back: the v1 RFD replays nothing emitted
//     while disconnected, so its output would reach no one.

// use decides whether connection conn may use session sid, after waiting
// for a holder that is ending to let go of it.
func (s *Server) use(ctx context.Context, conn, sid string) error {
	s.awaitRelease(ctx, conn, sid)
	return s.decide(conn, sid)
}

// decide is use without the wait, for session/cancel, which is handled on
// the connection's read loop and must not block.
func (s *Server) decide(conn, sid string) error {
	if other, ok := s.owners.owner(session.RootID(sid)); ok && other != conn {
		return errLiveElsewhere(sid)
	}
	return nil
}

func errLiveElsewhere(sid string) error {
	return &acp.Error{Code: acp.CodeInternalError,
		Message: fmt.Sprintf("session %s is live on another connection; it can be used once that connection has ended", sid),
		Data:    map[string]any{"sessionId": sid, "errorKind": "session_locked"}}
}

// sessionAllowed is use for the HTTP transport.
func (s *Server) sessionAllowed(ctx context.Context, info httptransport.ConnInfo, sessionID string) bool {
	return s.use(ctx, info.ID, sessionID) == nil
}

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

// releaseWait bounds how long a request waits for an ending connection to
// let go of a session (its turn cancelled, its transcript closed).
const releaseWait = 10 * time.Second

// awaitRelease waits, when session sid is held by another connection that
// is already ending, until that connection has let go of it. A client that
// reconnects right after ending its old connection (the SDK's http client
// sends the DELETE without waiting for it) then finds the session free
// instead of refused. A holder that is not ending is not waited for.
func (s *Server) awaitRelease(ctx context.Context, self, sid string) {
	other, ok := s.owners.owner(session.RootID(sid))
	if !ok || other == self {
		return
	}
	s.mu.Lock()
	lc := s.conns[other]
	s.mu.Unlock()
	if lc == nil || lc.ending.Err() == nil {
		return
	}
	t := time.NewTimer(releaseWait)
	defer t.Stop()
	select {
	case <-lc.done:
	case <-t.C:
	case <-ctx.Done():
	}
}
