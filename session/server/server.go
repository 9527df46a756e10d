// Package server is `acpd serve`: ACP over Streamable HTTP and WebSocket
// (package acp/httptransport carries the frames) with the rules that decide
// who gets in and what a client may cost. One session.Manager serves each
// ACP connection; all of them share the store, the provider and telemetry.
//
// Who gets in: loopback only unless TLS is configured; every request but
// the health check carries the bearer token (never in the URL); a browser
// is kept out by Origin and a rebound name by Host; failed authentications
// are limited per client address. What is bounded: TCP connections at the
// listener, ACP connections, sessions per connection, message size, header
// read time, idle time and SSE streams (the transport bounds buffered
// output).
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/acpd/acpd/acp/httptransport"
	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session"
)

// Paths served. Anything else is 404 (after the token check, so a scanner
// learns nothing from paths).
const (
	acpPath    = "/acp"
	healthPath = "/healthz"
)

// maxHeaderBytes bounds a request's headers: a token, cookies and the ACP
// headers fit many times over; Go's default is 1 MiB.
const maxHeaderBytes = 64 << 10

// keepAliveIdle closes an HTTP keep-alive connection unused for this long
// (the ACP connection itself has server.idleTimeout).
const keepAliveIdle = 2 * time.Minute

// Options configure a Server.
type Options struct {
	Config config.ServerConfig
	// Token is the secret every request must present.
	Token []byte
	// Session is what every connection's Manager starts from: Store,
	// Provider and Telemetry are shared by all of them.
	Session session.Options
	// Trace logs every JSON-RPC message at debug level.
	Trace   bool
	Logger  *slog.Logger
	Version string
}

// Server serves ACP on one listener.
type Server struct {
	opts   Options
	log    *slog.Logger
	tls    *tls.Config
	owners *owners
	rel    *releaser

	mu    sync.Mutex
	conns map[string]*liveConn // by ACP connection id

	transport *httptransport.Handler
	http      *http.Server
	ln        net.Listener
	limit     *limitListener
}

// New checks the options (the address rule, the certificate) without
// binding anything.
func New(opts Options) (*Server, error) {
	c := opts.Config
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if len(opts.Token) < MinTokenLen {
		return nil, fmt.Errorf("server: a token of at least %d characters is required", MinTokenLen)
	}
	if err := CheckAddress(c.Listen, c.TLSCert != ""); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, owners: &owners{by: map[string]string{}}, conns: map[string]*liveConn{}, rel: newReleaser()}
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("server.tlsCert/tlsKey: %w", err)
		}
		// Otherwise crypto/tls's defaults. The hybrid post-quantum key
		// exchange (X25519MLKEM768, preferred by default) adds to a
		// handshake's garbage, about 45 KB with the rest, not to what a
		// connection keeps (the releaser returns that garbage); leaving it
		// out would open traffic recorded today to a quantum computer
		// later. Session tickets stay on: their keys are the Config's, and
		// a client that resumes (Node's https agent does) makes a
		// handshake without the certificate and its signature.
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	s.transport = httptransport.NewHandler(httptransport.Options{
		Serve:           s.serveConn,
		Logger:          opts.Logger,
		MaxMessageBytes: int64(c.MaxMessageBytes),
		MaxStreams:      c.MaxStreams,
		MaxConnections:  c.MaxConnections,
		IdleTimeout:     c.IdleTimeout,
		SessionAllowed:  s.sessionAllowed,
	})
	mux := http.NewServeMux()
	mux.Handle(acpPath, s.transport)
	mux.HandleFunc(healthPath, func(w http.ResponseWriter, r *http.Request) { s.health(w, r, true) })
	g := &guard{
		log:       opts.Logger,
		token:     newTokenCheck(opts.Token),
		limiter:   newFailLimiter(c.AuthFailuresPerMinute),
		origins:   c.AllowedOrigins,
		hosts:     listenHosts(c),
		maxBody:   int64(c.MaxMessageBytes),
		logRefuse: throttle{every: time.Second},
		liveConn:  s.isConn,
		next:      mux,
	}
	g.health = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.health(w, r, false) })
	var protos http.Protocols
	protos.SetHTTP1(true)
	if s.tls != nil {
		protos.SetHTTP2(true)
	} else {
		// h2c with prior knowledge, on loopback only (CheckAddress): the
		// RFD asks for HTTP/2, and the Go and curl clients speak it there.
		protos.SetUnencryptedHTTP2(true)
	}
	s.http = &http.Server{
		Handler:   g,
		Protocols: &protos,
		TLSConfig: s.tls,
		HTTP2: &http.HTTP2Config{
			// One SSE stream per session plus the connection's and the
			// POSTs in flight ride one HTTP/2 connection.
			MaxConcurrentStreams: max(250, c.MaxStreams+64),
			// RFC 9113's initial frame size rather than Go's 1 MiB: the
			// framer reads a whole frame into a buffer of its size, and no
			// ACP message needs frames larger than this (a body spans
			// several).
			MaxReadFrameSize: 16 << 10,
			// A connection on which nothing arrives for this long gets a
			// PING: a client that vanished without a FIN (a laptop that
			// slept) is let go of, and its sessions with it, in under a
			// minute rather than when TCP gives up.
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
		// Bounds the TLS handshake too. The listener closes a connection
		// that has not authenticated within the same time, whatever it is
		// doing (limitListener).
		ReadHeaderTimeout: c.HeaderTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		// No ReadTimeout or WriteTimeout: either would cut SSE streams and
		// WebSockets, which live for hours. Bodies are bounded in size
		// (maxBody) and the transport bounds each write.
		IdleTimeout:    keepAliveIdle,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// listenHosts are the names Host may carry besides IP literals and
// localhost: the listen host when it is a name, and server.allowedHosts.
func listenHosts(c config.ServerConfig) []string {
	hosts := append([]string{}, c.AllowedHosts...)
	if h, _, err := net.SplitHostPort(c.Listen); err == nil && h != "" {
		if net.ParseIP(h) == nil {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// Listen binds the listener; Serve then serves it. Separate so the caller
// can announce the bound address (port 0 picks one) before serving.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.opts.Config.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.opts.Config.Listen, err)
	}
	var refuseLog throttle
	refuseLog.every = 5 * time.Second
	s.limit = &limitListener{Listener: ln, max: s.opts.Config.MaxTCPConnections, preAuth: s.opts.Config.HeaderTimeout,
		onRefuse: func(remote net.Addr, evicted bool) {
			if ok, _ := refuseLog.allow(time.Now()); ok {
				msg := "connection refused: server.maxTcpConnections reached and every open connection has authenticated"
				if evicted {
					msg = "unauthenticated connection closed: server.maxTcpConnections reached and a new one came"
				}
				s.log.Warn(msg, "remote", remote.String(), "limit", s.opts.Config.MaxTCPConnections,
					"refused_total", s.limit.refused.Load(), "evicted_total", s.limit.evicted.Load())
			}
		},
		// A connection's set-up is a burst's work like a session's opening
		// (releaser): over HTTP/1.1 every session's stream is a connection
		// of its own, and a client reconnecting its streams opens no
		// session.
		onAccept: s.rel.note,
	}
	s.ln = s.limit
	return nil
}

// Addr is the bound address (after Listen).
func (s *Server) Addr() net.Addr { return s.limit.Addr() }

// URL is the ACP endpoint's URL (after Listen).
func (s *Server) URL() string {
	scheme := "http"
	if s.tls != nil {
		scheme = "https"
	}
	return scheme + "://" + s.Addr().String() + acpPath
}

// Serve serves until ctx is done, then ends every connection (running turns
// are cancelled, transcripts closed) and returns nil.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil {
		return errors.New("server: Serve before Listen")
	}
	errc := make(chan error, 1)
	go func() {
		if s.tls != nil {
			// ServeTLS sets up ALPN for h2 from Protocols.
			errc <- s.http.ServeTLS(s.ln, "", "")
			return
		}
		errc <- s.http.Serve(s.ln)
	}()
	s.log.Info("serving ACP over HTTP", "url", s.URL(), "tls", s.tls != nil,
		"max_connections", s.opts.Config.MaxConnections, "max_tcp_connections", s.opts.Config.MaxTCPConnections)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// The transport first: SSE handlers never end by themselves, so
	// http.Server.Shutdown would wait for them forever.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	terr := s.transport.Shutdown(sctx)
	herr := s.http.Shutdown(sctx)
	if herr != nil {
		_ = s.http.Close()
	}
	<-errc
	if err := errors.Join(terr, herr); err != nil {
		s.log.Warn("shutdown did not finish in time", "err", err)
	}
	return nil
}

// liveConn is a connection being served: ending is its context, cancelled
// once the transport ends it; done closes when it has let go of its
// sessions.
type liveConn struct {
	ending context.Context
	done   chan struct{}
}

func (s *Server) addConn(ctx context.Context, id string) *liveConn {
	lc := &liveConn{ending: ctx, done: make(chan struct{})}
	s.mu.Lock()
	s.conns[id] = lc
	s.mu.Unlock()
	return lc
}

func (s *Server) dropConn(id string, lc *liveConn) {
	s.mu.Lock()
	if s.conns[id] == lc {
		delete(s.conns, id)
	}
	s.mu.Unlock()
	close(lc.done)
}

func (s *Server) isConn(id string) bool {
	if id == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id] != nil
}

// health answers GET /healthz. Without credentials it says only "up" (204,
// no body), on every address: a load balancer's probe needs no secret, and
// an empty answer tells a stranger nothing a refused request would not.
// Authenticated (the guard checked the token), it adds the version and the
// live connection count.
func (s *Server) health(w http.ResponseWriter, r *http.Request, authed bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if !authed {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok", "version": s.opts.Version, "connections": s.transport.Connections()})
}
