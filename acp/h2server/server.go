// Package h2server serves HTTP/2 connections (RFC 9113) to an
// http.Handler, for `acpd serve`. It exists for one reason: an event
// stream a handler hands over (ResponseWriter.TakeStream) is then served
// without the handler's goroutine and without the per-stream buffers,
// request and timers net/http's HTTP/2 server keeps for as long as a
// stream is open. An idle stream costs a small struct; the connection's
// one reader goroutine sees the client reset it or go away.
//
// Frames and HPACK are golang.org/x/net/http2's Framer (headers decoded
// with a bound on the header list, CONTINUATION merged and bounded).
// Everything else is here: stream states, flow control both ways, the
// concurrency bound, timeouts and GOAWAY on shutdown. Ordinary requests
// run the handler on a goroutine of their own, as net/http does; server
// push, priorities (ignored, as RFC 9113 allows) and extended CONNECT are
// not offered.
package h2server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"net/http"
)

// Preface is what a client sends first on an HTTP/2 connection.
const Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Windows this server grants. A stream's body is buffered up to its window
// until the handler reads it; the connection's window bounds the sum over
// its streams.
const (
	streamWindow = 256 << 10
	connWindow   = 1 << 20
	// maxFrame is the largest frame accepted (the protocol's minimum
	// maximum: nothing acpd receives needs bigger frames).
	maxFrame = 16 << 10
	// flushAt bounds what a handler's writes collect before they go out.
	flushAt = 16 << 10
)

// Server serves HTTP/2 connections handed to ServeConn. The zero value is
// not usable: Handler is required, the rest have defaults.
type Server struct {
	Handler http.Handler
	// MaxConcurrentStreams is announced to the peer, which must not open
	// more streams at once; a stream beyond it is refused. Streams the
	// peer reset count until their handler has returned. Default 250.
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a request's decoded headers; a longer one
	// gets 431. Default 64 KiB.
	MaxHeaderListSize uint32
	// HeaderTimeout bounds the wait for the client's preface and
	// SETTINGS. Default 10 s.
	HeaderTimeout time.Duration
	// IdleTimeout closes a connection with no open stream for this long.
	// Default 2 minutes.
	IdleTimeout time.Duration
	// WriteTimeout bounds one frame write, and a response's wait for flow
	// control window; a peer that does not read or never opens its
	// window loses the stream, or the connection. Default 60 s.
	WriteTimeout time.Duration
	Logger       *slog.Logger

	mu       sync.Mutex
	conns    map[*conn]struct{}
	shutdown bool
	wg       sync.WaitGroup
}

func (s *Server) maxStreams() uint32 {
	if s.MaxConcurrentStreams == 0 {
		return 250
	}
	return s.MaxConcurrentStreams
}

func (s *Server) maxHeaders() uint32 {
	if s.MaxHeaderListSize == 0 {
		return 64 << 10
	}
	return s.MaxHeaderListSize
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (s *Server) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// errClosed is what a write on a closed stream or connection returns.
var errClosed = errors.New("h2server: stream closed")

// ServeConn serves one connection until it ends, then closes it. With
// prefaceRead the client's preface has been read from nc already.
func (s *Server) ServeConn(nc net.Conn, prefaceRead bool) {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	c := newConn(s, nc)
	c.prefaceRead = prefaceRead
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	c.serve()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown sends every connection GOAWAY, closes those with no stream open
// and waits until the rest have ended, or ctx is done (then they are
// closed).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		// Each on its own: a client that does not read holds its GOAWAY
		// in a write for up to WriteTimeout, which must hold neither the
		// others nor ctx (Close below ends that write).
		go c.goAwayGraceful()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close closes every connection at once.
func (s *Server) Close() {
	s.mu.Lock()
	s.shutdown = true
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
}

// frameReader is what the framer reads from. A frame, once its first
// byte is in, must be whole (with the CONTINUATION frames of a header
// block) within timeout: a client that starts a frame and stalls is cut
// off, while a connection that is quiet between frames (an open event
// stream) has no deadline.
type frameReader struct {
	nc      net.Conn
	timeout time.Duration
	inFrame bool
}

func (r *frameReader) Read(p []byte) (int, error) {
	n, err := r.nc.Read(p)
	if n > 0 && !r.inFrame {
		r.inFrame = true
		_ = r.nc.SetReadDeadline(time.Now().Add(r.timeout))
	}
	return n, err
}

// frameDone lifts the deadline after a frame.
func (r *frameReader) frameDone() {
	if r.inFrame {
		r.inFrame = false
		_ = r.nc.SetReadDeadline(time.Time{})
	}
}

// conn is one HTTP/2 connection.
type conn struct {
	srv    *Server
	nc     net.Conn
	fr     *http2.Framer
	remote string
	tls    *tls.ConnectionState
	ctx    context.Context
	cancel context.CancelFunc
	log    *slog.Logger

	prefaceRead bool
	in          frameReader

	// wmu serialises frame writes and guards the header encoder.
	wmu  sync.Mutex
	henc *hpack.Encoder
	hbuf []byte
	werr error

	mu        sync.Mutex
	streams   map[uint32]*stream // open and half-closed streams
	maxID     uint32             // highest stream id the client opened
	handlers  int                // handler goroutines running
	sendWin   int64              // connection send window
	initWin   int64              // the peer's initial stream window
	peerMax   uint32             // the peer's SETTINGS_MAX_FRAME_SIZE
	recvWin   int64              // what the peer may still send on the connection
	winCh     chan struct{}      // closed when a window grows or a stream ends
	goingAway bool               // GOAWAY sent: no new streams
	closed    bool
	refused   int // streams refused over the bound
	idle      *time.Timer
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, remote: nc.RemoteAddr().String(), log: s.log(),
		streams: map[uint32]*stream{}, sendWin: 65535, initWin: 65535, peerMax: 16384,
		recvWin: 65535, winCh: make(chan struct{})}
	if tc, ok := nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		c.tls = &st
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.fr = http2.NewFramer(nc, &c.in)
	c.in = frameReader{nc: nc, timeout: orDefault(s.HeaderTimeout, 10*time.Second)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = s.maxHeaders()
	c.fr.SetMaxReadFrameSize(maxFrame)
	c.henc = hpack.NewEncoder((*appender)(&c.hbuf))
	return c
}

// appender lets the header encoder append to a byte slice.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}

// connError ends the connection with GOAWAY and code.
type connError struct {
	code http2.ErrCode
	why  string
}

func (e connError) Error() string { return "connection error " + e.code.String() + ": " + e.why }

// streamError resets one stream.
type streamError struct {
	id   uint32
	code http2.ErrCode
}

func (e streamError) Error() string { return "stream error " + e.code.String() }

func (c *conn) serve() {
	defer c.teardown()
	if err := c.write(func() error {
		return c.fr.WriteSettings(
			http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.srv.maxStreams()},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
			http2.Setting{ID: http2.SettingMaxFrameSize, Val: maxFrame},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.srv.maxHeaders()},
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		)
	}); err != nil {
		return
	}
	if err := c.write(func() error { return c.fr.WriteWindowUpdate(0, connWindow-65535) }); err != nil {
		return
	}
	c.mu.Lock()
	c.recvWin = connWindow
	c.mu.Unlock()
	_ = c.nc.SetReadDeadline(time.Now().Add(orDefault(c.srv.HeaderTimeout, 10*time.Second)))
	if !c.prefaceRead {
		var pre [len(Preface)]byte
		if _, err := io.ReadFull(c.nc, pre[:]); err != nil || string(pre[:]) != Preface {
			return
		}
	}
	f, err := c.fr.ReadFrame()
	c.in.frameDone()
	if err != nil {
		c.fail(err)
		return
	}
	if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
		c.goAway(http2.ErrCodeProtocol)
		return
	}
	if err := c.process(f); err != nil {
		c.fail(err)
		return
	}
	c.armIdle()
	for {
		f, err := c.fr.ReadFrame()
		c.in.frameDone()
		if err == nil {
			err = c.process(f)
		}
		if err != nil && !c.fail(err) {
			return
		}
	}
}

// fail handles an error from reading or processing a frame; it reports
// whether the connection lives on (a stream error).
func (c *conn) fail(err error) bool {
	var se http2.StreamError
	var ce http2.ConnectionError
	var me streamError
	var mc connError
	switch {
	case errors.As(err, &me):
		c.reset(me.id, me.code)
		return true
	case errors.As(err, &se):
		// A malformed request's headers were decoded: its id is used.
		c.mu.Lock()
		if se.StreamID%2 == 1 && se.StreamID > c.maxID {
			c.maxID = se.StreamID
		}
		c.mu.Unlock()
		c.reset(se.StreamID, se.Code)
		return true
	case errors.As(err, &mc):
		c.log.Debug("http2 connection error", "remote", c.remote, "err", err)
		c.goAway(mc.code)
	case errors.As(err, &ce):
		c.log.Debug("http2 connection error", "remote", c.remote, "err", err, "detail", c.fr.ErrorDetail())
		c.goAway(http2.ErrCode(ce))
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.goAway(http2.ErrCodeFrameSize)
	}
	return false
}

// write writes frames under the write lock with the write timeout; a
// failed write closes the connection.
func (c *conn) write(f func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(orDefault(c.srv.WriteTimeout, 60*time.Second)))
	if err := f(); err != nil {
		c.werr = err
		_ = c.nc.Close()
		return err
	}
	return nil
}

// goAway tells the peer the connection ends with code, and closes it.
func (c *conn) goAway(code http2.ErrCode) {
	c.mu.Lock()
	last := c.maxID
	c.goingAway = true
	c.mu.Unlock()
	_ = c.write(func() error { return c.fr.WriteGoAway(last, code, nil) })
	if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		// Let the GOAWAY reach the peer before the reset a close with
		// unread input would send.
		_ = tc.CloseWrite()
		_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, 1<<20))
	}
	_ = c.nc.Close()
}

// goAwayGraceful refuses new streams and ends the connection once the open
// ones have ended.
func (c *conn) goAwayGraceful() {
	c.mu.Lock()
	if c.goingAway || c.closed {
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	last := c.maxID
	quiet := !c.busyLocked()
	c.mu.Unlock()
	_ = c.write(func() error { return c.fr.WriteGoAway(last, http2.ErrCodeNo, nil) })
	if quiet {
		_ = c.nc.Close()
	}
}

// teardown ends every stream of a connection that is gone.
func (c *conn) teardown() {
	_ = c.nc.Close()
	c.cancel()
	c.mu.Lock()
	c.closed = true
	streams := make([]*stream, 0, len(c.streams))
	for _, st := range c.streams {
		streams = append(streams, st)
		// As a reset does: a handler waiting in its body's Read gets an
		// error instead of waiting for DATA that can no longer come.
		c.removeLocked(st)
	}
	if c.idle != nil {
		c.idle.Stop()
	}
	c.wake()
	c.mu.Unlock()
	for _, st := range streams {
		st.ended()
	}
}

// wake wakes every writer waiting on a window; called with mu held.
func (c *conn) wake() {
	close(c.winCh)
	c.winCh = make(chan struct{})
}

// armIdle starts the idle timer when no stream is open; called without mu.
func (c *conn) armIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armIdleLocked()
}

// busyLocked reports whether the connection has a handler running or a
// stream whose response is not complete. A stream half-closed by our
// END_STREAM, whose client never ends its request body, does not count:
// it would keep the connection from the idle timeout for ever. Called
// with mu held.
func (c *conn) busyLocked() bool {
	if c.handlers > 0 {
		return true
	}
	for _, st := range c.streams {
		if !st.localDone {
			return true
		}
	}
	return false
}

func (c *conn) armIdleLocked() {
	if c.closed || c.busyLocked() {
		return
	}
	if c.goingAway {
		_ = c.nc.Close()
		return
	}
	d := orDefault(c.srv.IdleTimeout, 2*time.Minute)
	if c.idle == nil {
		c.idle = time.AfterFunc(d, c.idleFire)
	} else {
		c.idle.Reset(d)
	}
}

func (c *conn) idleFire() {
	c.mu.Lock()
	quiet := !c.busyLocked()
	c.mu.Unlock()
	if quiet {
		c.goAwayGraceful()
	}
}

// reset sends RST_STREAM and forgets the stream.
func (c *conn) reset(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	st := c.streams[id]
	owed := int64(0)
	if st != nil {
		owed = c.removeLocked(st)
	}
	c.mu.Unlock()
	if st != nil {
		st.ended()
	}
	_ = c.write(func() error { return c.fr.WriteRSTStream(id, code) })
	c.refund(owed)
}

// removeLocked forgets st: it is closed. It returns the connection window
// to give back for data the handler will never read. Called with mu held.
func (c *conn) removeLocked(st *stream) (owed int64) {
	if c.streams[st.id] != st {
		return 0
	}
	delete(c.streams, st.id)
	st.closed = true
	if st.body != nil {
		owed = int64(len(st.body.buf)) + st.body.unacked
		st.body.buf, st.body.unacked = nil, 0
		if st.body.err == nil {
			st.body.err = errClosed
		}
		st.body.cond.Broadcast()
	}
	c.wake()
	c.armIdleLocked()
	return owed
}

// refund gives n bytes of connection window back to the peer.
func (c *conn) refund(n int64) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	c.recvWin += n
	c.mu.Unlock()
	_ = c.write(func() error { return c.fr.WriteWindowUpdate(0, uint32(n)) })
}

// TLSNextProto is what http.Server.TLSNextProto takes to hand this server
// its HTTP/2 connections: "h2" after TLS ALPN, and "unencrypted_http2"
// for h2c with prior knowledge, which net/http recognises by the preface
// (already read then) when its Protocols allow unencrypted HTTP/2. With
// the map set, net/http's own HTTP/2 server is never configured.
func (s *Server) TLSNextProto() map[string]func(*http.Server, *tls.Conn, http.Handler) {
	return map[string]func(*http.Server, *tls.Conn, http.Handler){
		"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { s.ServeConn(c, false) },
		"unencrypted_http2": func(_ *http.Server, c *tls.Conn, _ http.Handler) {
			nc, ok := c.NetConn().(interface{ UnencryptedNetConn() net.Conn })
			if !ok {
				_ = c.Close()
				return
			}
			s.ServeConn(nc.UnencryptedNetConn(), true)
		},
	}
}
