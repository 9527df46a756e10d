// Package httptransport carries ACP over Streamable HTTP (POST + SSE) and
// WebSocket, as the ACP "Streamable HTTP & WebSocket Transport" RFD defines
// the wire. It is frame-level: it hands each ACP connection an NDJSON
// reader and writer (what acp.NewConn takes) and routes the agent's lines
// to the right SSE stream by reading only `id`, `method`, `params.sessionId`
// and `result.sessionId`. It knows nothing else about sessions, and it does
// no authentication, Origin or Host checks: the server in front does.
package httptransport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Header names of the RFD.
const (
	HeaderConnectionID = "Acp-Connection-Id"
	HeaderSessionID    = "Acp-Session-Id"
)

// Transport names reported in ConnInfo.
const (
	TransportHTTP      = "http"
	TransportWebSocket = "websocket"
)

// maxIDBytes bounds Acp-Connection-Id, Acp-Session-Id and JSON-RPC ids, as
// the TypeScript SDK's server does; nothing legitimate comes near it.
const maxIDBytes = 1024

// ConnInfo describes one ACP connection to Options.Serve.
type ConnInfo struct {
	ID         string // the Acp-Connection-Id: 128 random bits, hex
	RemoteAddr string // of the request that opened the connection
	Transport  string // TransportHTTP or TransportWebSocket
	UserAgent  string
}

// Options configure a Handler. Serve is required; zero values of the rest
// take the defaults noted on each field.
type Options struct {
	// Serve runs one ACP connection. It is called once per new connection
	// on its own goroutine. r yields the client's messages as NDJSON lines
	// and reports io.EOF when the connection ends (DELETE, WebSocket close,
	// idle timeout, Shutdown); w takes the agent's lines and never blocks on
	// a slow client. ctx carries the values of the request that opened the
	// connection (so an auth middleware can say who it is) and is cancelled
	// when the connection ends. When Serve returns, the connection ends.
	Serve func(ctx context.Context, info ConnInfo, r io.Reader, w io.Writer) error

	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger

	// MaxMessageBytes bounds one client message (a POST body, a WebSocket
	// frame). Default 64 MiB, the stdio line limit.
	MaxMessageBytes int64
	// MaxConnBufferBytes bounds the agent output queued for one connection
	// across its streams. Default 64 MiB.
	MaxConnBufferBytes int64
	// MaxStreamBufferBytes bounds the output queued for one stream. Default
	// 16 MiB. A stream that would pass a bound is closed, never grown.
	MaxStreamBufferBytes int64
	// MaxStreams bounds the SSE streams with a reader on one connection.
	// Default 128.
	MaxStreams int
	// MaxHeldSessions bounds the session streams holding output with no
	// reader, per connection. Default 256.
	MaxHeldSessions int
	// MaxConnections bounds live ACP connections; 0 means no bound here
	// (the server bounds TCP connections).
	MaxConnections int
	// IdleTimeout ends a connection that has had no open stream and no
	// request for this long. Default 5 minutes.
	IdleTimeout time.Duration
	// DropGrace ends a Streamable HTTP connection whose connection stream
	// closed and was not opened again within this time. The client is gone:
	// the SDK's client takes that stream's end as the end of its transport
	// and reconnects, if at all, on a new connection, which must not find
	// the sessions still held for IdleTimeout. Default 10 s.
	DropGrace time.Duration
	// KeepAlive is the interval of SSE comment lines and WebSocket pings.
	// Default 15 s (below the 60 s proxy timeouts of common ingresses).
	KeepAlive time.Duration
	// WriteTimeout bounds one SSE or WebSocket write; a reader stalled for
	// longer has its stream closed. Default 60 s.
	WriteTimeout time.Duration
	// AffinityCookie names the cookie set on the response that opens a
	// connection, for load balancers that pin by cookie. Default
	// "acp_affinity"; "-" sets none.
	AffinityCookie string
	// AffinityValue is that cookie's value; default the connection id.
	AffinityValue string
	// SessionAllowed, when set, is asked before a session stream or a
	// session-scoped POST names a session the connection has not attached
	// (created, loaded or resumed) yet; false answers 409, which the SDK
	// client takes as that session failing, not the connection.
	SessionAllowed func(ctx context.Context, info ConnInfo, sessionID string) bool
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 64 << 20
	}
	if o.MaxConnBufferBytes <= 0 {
		o.MaxConnBufferBytes = 64 << 20
	}
	if o.MaxStreamBufferBytes <= 0 {
		o.MaxStreamBufferBytes = 16 << 20
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 128
	}
	if o.MaxHeldSessions <= 0 {
		o.MaxHeldSessions = 256
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 5 * time.Minute
	}
	if o.DropGrace <= 0 {
		o.DropGrace = 10 * time.Second
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 60 * time.Second
	}
	if o.AffinityCookie == "" {
		o.AffinityCookie = "acp_affinity"
	}
}

// Handler serves the /acp endpoint. It starts no goroutine until the first
// connection.
type Handler struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	conns   map[string]*conn
	closing bool

	beat beat                    // keepalive of the SSE streams
	raw  map[*rawStream]struct{} // streams taken from the HTTP server

	// wg counts Serve goroutines and stream handlers, so Shutdown can wait
	// for all of them.
	wg sync.WaitGroup
}

// NewHandler returns a Handler. It panics if opts.Serve is nil, a
// programming error.
func NewHandler(opts Options) *Handler {
	if opts.Serve == nil {
		panic("httptransport: Options.Serve is nil")
	}
	opts.setDefaults()
	h := &Handler{opts: opts, log: opts.Logger, conns: map[string]*conn{}, beat: beat{every: opts.KeepAlive}}
	h.beat.onBeat = h.rawKeepAlive
	return h
}

// Connections returns the number of live ACP connections.
func (h *Handler) Connections() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Shutdown refuses new connections, ends every connection and waits until
// every Serve has returned and every stream handler has exited, or ctx is
// done. Call it before http.Server.Shutdown, which waits for handlers and
// would wait forever for an SSE stream.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.closing = true
	conns := make([]*conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.end("server shutting down")
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// A bug here must cost one request, never the process; a panic
		// from http.ErrAbortHandler is the server's own signal.
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.Error("httptransport: panic serving request", "method", r.Method, "panic", fmt.Sprint(v))
		}
	}()
	switch r.Method {
	case http.MethodPost:
		h.servePost(w, r)
	case http.MethodGet:
		if isWebSocketUpgrade(r) {
			h.serveWebSocket(w, r)
			return
		}
		h.serveSSE(w, r)
	case http.MethodDelete:
		h.serveDelete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, codeInvalidRequest, "method "+r.Method+" is not allowed on the ACP endpoint")
	}
}

// lookup finds the connection a request names, answering 400 or 404 itself
// when it cannot.
func (h *Handler) lookup(w http.ResponseWriter, r *http.Request) *conn {
	id := r.Header.Get(HeaderConnectionID)
	switch {
	case id == "":
		writeError(w, http.StatusBadRequest, codeInvalidRequest, HeaderConnectionID+" header is required")
		return nil
	case len(id) > maxIDBytes:
		writeError(w, http.StatusBadRequest, codeInvalidRequest, fmt.Sprintf("%s header exceeds %d bytes", HeaderConnectionID, maxIDBytes))
		return nil
	}
	h.mu.Lock()
	c := h.conns[id]
	h.mu.Unlock()
	if c == nil {
		writeError(w, http.StatusNotFound, codeInvalidRequest, "unknown "+HeaderConnectionID)
		return nil
	}
	return c
}

func (h *Handler) serveDelete(w http.ResponseWriter, r *http.Request) {
	c := h.lookup(w, r)
	if c == nil {
		return
	}
	c.end("client sent DELETE")
	w.WriteHeader(http.StatusAccepted)
}

var errClosing = errors.New("server is shutting down")
var errTooManyConns = errors.New("too many connections")

// newConn registers a connection for the request r. The caller starts it.
func (h *Handler) newConn(r *http.Request, transport string) (*conn, error) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	info := ConnInfo{
		ID:         hex.EncodeToString(b[:]),
		RemoteAddr: r.RemoteAddr,
		Transport:  transport,
		UserAgent:  r.UserAgent(),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil, errClosing
	}
	if h.opts.MaxConnections > 0 && len(h.conns) >= h.opts.MaxConnections {
		return nil, errTooManyConns
	}
	c := newConnState(h, info, r)
	h.conns[info.ID] = c
	h.wg.Add(1) // for its Serve (or finishUnstarted); Done in start
	if transport == TransportWebSocket {
		h.wg.Add(1) // the socket's handler, which outlives the hijack
	}
	return c, nil
}

// track counts a stream handler for Shutdown; false once it has begun, so
// no Add can race its Wait.
func (h *Handler) track() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.wg.Add(1)
	return true
}

func (h *Handler) remove(c *conn) {
	h.mu.Lock()
	if h.conns[c.info.ID] == c {
		delete(h.conns, c.info.ID)
	}
	h.mu.Unlock()
}

// refuseConn answers a request that could not open a connection.
func refuseConn(w http.ResponseWriter, err error) {
	writeError(w, http.StatusServiceUnavailable, codeInternalError, err.Error())
}

// setConnHeaders puts the connection id and the affinity cookie on the
// response that opens a connection (the 200 of initialize or the 101).
func (h *Handler) setConnHeaders(w http.ResponseWriter, r *http.Request, c *conn) {
	w.Header().Set(HeaderConnectionID, c.info.ID)
	if h.opts.AffinityCookie == "-" {
		return
	}
	v := h.opts.AffinityValue
	if v == "" {
		v = c.info.ID
	}
	http.SetCookie(w, &http.Cookie{
		Name:     h.opts.AffinityCookie,
		Value:    v,
		Path:     "/",
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteLaxMode,
	})
}
