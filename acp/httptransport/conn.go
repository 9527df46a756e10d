package httptransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// conn is one ACP connection: the agent's input pipe, its output router
// and the streams the output is queued on.
type conn struct {
	h    *Handler
	info ConnInfo
	ws   bool // WebSocket: one stream, no routing

	ctx    context.Context
	cancel context.CancelFunc
	in     *inbox

	mu       sync.Mutex
	streams  map[string]*stream // "" is the connection stream
	readers  int                // streams with a reader attached
	buffered int64              // output queued or being written, all streams
	partial  []byte             // an agent line not yet ended by '\n'
	pending  map[string]pending // client request id -> where its reply goes
	attached map[string]bool    // sessions the agent confirmed for this connection
	initKey  string             // id of the initialize whose reply a POST waits for
	initCh   chan []byte
	active   int // open readers + requests being handled (idle clock)
	idleAt   time.Time
	idle     *time.Timer
	drop     *time.Timer // runs once the connection stream lost its reader (HTTP)
	ended    bool        // end was called: no new input
	finished bool        // Serve returned: streams drain and close

	endOnce sync.Once
	done    chan struct{} // closed once Serve has returned
}

// pending is a client request awaiting its reply.
type pending struct {
	session string // the Acp-Session-Id it was POSTed with
	method  string
}

// stream is the output queue of the connection or of one session.
type stream struct {
	key    string
	q      [][]byte
	bytes  int64 // queued, not yet taken by a reader
	rd     *reader
	lost   bool // output was dropped while no reader: the next GET gets 409
	closed bool // the connection finished: the reader drains and returns
}

// reader is one attached consumer of a stream (an SSE GET or the WebSocket
// writer).
type reader struct {
	wake chan struct{} // cap 1: something to do
	kill chan struct{} // closed: stop now, the queue was dropped
	// start, for a stream served on a hijacked connection (rawStream),
	// runs its writer in place of a wake: nothing waits on wake there.
	// Called with the connection's lock held.
	start func()
}

func newConnState(h *Handler, info ConnInfo, r *http.Request) *conn {
	// The connection outlives the request that opened it but keeps its
	// values (who authenticated, trace ids).
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	c := &conn{
		h: h, info: info,
		ctx: ctx, cancel: cancel,
		in:       newInbox(),
		streams:  map[string]*stream{},
		pending:  map[string]pending{},
		attached: map[string]bool{},
		done:     make(chan struct{}),
		idleAt:   time.Now(),
	}
	c.streams[""] = &stream{}
	c.idle = time.AfterFunc(h.opts.IdleTimeout, c.idleCheck)
	return c
}

// start runs Options.Serve for the connection.
func (c *conn) start() {
	go func() {
		defer c.h.wg.Done()
		defer c.finish()
		defer func() {
			if v := recover(); v != nil {
				c.h.log.Error("httptransport: panic in Serve", "conn", c.info.ID, "panic", fmt.Sprint(v))
			}
		}()
		if err := c.h.opts.Serve(c.ctx, c.info, c.in, (*connWriter)(c)); err != nil {
			c.h.log.Info("acp connection ended with an error", "conn", c.info.ID, "err", err)
		}
	}()
}

// end stops the connection: new requests get 404, the agent's reader gets
// EOF and its context is cancelled. Streams close once Serve returns.
func (c *conn) end(reason string) {
	c.endOnce.Do(func() {
		c.h.log.Info("acp connection ending", "conn", c.info.ID, "transport", c.info.Transport, "reason", reason)
		c.h.remove(c)
		c.mu.Lock()
		c.ended = true
		if c.drop != nil {
			c.drop.Stop()
		}
		c.mu.Unlock()
		c.idle.Stop()
		c.in.Close()
		c.cancel()
	})
}

// finish runs when Serve has returned.
func (c *conn) finish() {
	c.end("agent connection returned")
	c.mu.Lock()
	c.finished = true
	for _, s := range c.streams {
		s.closed = true
		if s.rd != nil {
			wake(s.rd)
		}
	}
	c.mu.Unlock()
	close(c.done)
}

// busy and idleDone bracket anything that keeps the connection alive.
func (c *conn) busy() {
	c.mu.Lock()
	c.active++
	c.mu.Unlock()
}

func (c *conn) idleDone() {
	c.mu.Lock()
	c.idleDoneLocked()
	c.mu.Unlock()
}

func (c *conn) idleDoneLocked() {
	c.active--
	if c.active == 0 && !c.ended {
		c.idleAt = time.Now()
		c.idle.Reset(c.h.opts.IdleTimeout)
	}
}

func (c *conn) idleCheck() {
	c.mu.Lock()
	left := c.h.opts.IdleTimeout - time.Since(c.idleAt)
	active, ended := c.active, c.ended
	if active == 0 && !ended && left > 0 {
		c.idle.Reset(left)
	}
	c.mu.Unlock()
	if active == 0 && !ended && left <= 0 {
		c.end("idle timeout")
	}
}

// dropCheck ends the connection when its connection stream is still
// without a reader DropGrace after it lost one.
func (c *conn) dropCheck() {
	c.mu.Lock()
	s := c.streams[""]
	gone := !c.ended && (s == nil || s.rd == nil)
	c.mu.Unlock()
	if gone {
		c.end("connection stream closed and not reopened")
	}
}

// errEnded reports a message for a connection that has ended.
var errEnded = errors.New("connection ended")

// inbox is the agent's reader: each send hands over one line. Unbuffered,
// so a POST is answered 202 only once the agent has taken its message and
// a client cannot queue unbounded input.
type inbox struct {
	ch        chan []byte
	done      chan struct{}
	cur       []byte
	closeOnce sync.Once
}

func newInbox() *inbox {
	return &inbox{ch: make(chan []byte), done: make(chan struct{})}
}

func (b *inbox) Read(p []byte) (int, error) {
	if len(b.cur) == 0 {
		select {
		case <-b.done:
			return 0, io.EOF
		default:
		}
		select {
		case line := <-b.ch:
			b.cur = line
		case <-b.done:
			return 0, io.EOF
		}
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

// Close makes Read return io.EOF; acp.Conn calls it on shutdown too.
func (b *inbox) Close() error {
	b.closeOnce.Do(func() { close(b.done) })
	return nil
}

func (b *inbox) send(ctx context.Context, line []byte) error {
	select {
	case <-b.done:
		return errEnded
	default:
	}
	select {
	case b.ch <- line:
		return nil
	case <-b.done:
		return errEnded
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connWriter is the agent's writer.
type connWriter conn

// Write splits p into lines and routes each; it never blocks on a client.
func (cw *connWriter) Write(p []byte) (int, error) {
	c := (*conn)(cw)
	n := len(p)
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return 0, errEnded
	}
	if len(c.partial) > 0 {
		p = append(c.partial, p...)
		c.partial = nil
	}
	c.mu.Unlock()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.mu.Lock()
			if int64(len(p)) > c.h.opts.MaxConnBufferBytes {
				c.h.log.Error("agent wrote an unterminated line over the buffer bound; dropped", "conn", c.info.ID, "bytes", len(p))
			} else {
				c.partial = append([]byte(nil), p...)
			}
			c.mu.Unlock()
			break
		}
		c.route(p[:i])
		p = p[i+1:]
	}
	return n, nil
}

// route queues one agent line on the stream it belongs to.
func (c *conn) route(raw []byte) {
	line := bytes.TrimSpace(raw)
	if len(line) == 0 {
		return
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		// A CR would end an SSE line; compact JSON has none.
		if b, err := compactLine(line); err == nil {
			line = b[:len(b)-1]
		}
	}
	out := append([]byte(nil), line...) // the caller owns raw
	m, err := parseMessage(out)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.enqueueLocked("", out)
		return
	}
	if m.isResponse() && c.initKey != "" && m.id == c.initKey {
		c.initKey = ""
		c.initCh <- out // cap 1, one send
		return
	}
	if c.ws {
		c.enqueueLocked("", out)
		return
	}
	target := ""
	switch {
	case m.isResponse():
		p, ok := c.pending[m.id]
		if ok {
			delete(c.pending, m.id)
			// Session-scoped replies follow their session's updates on its
			// stream, keeping their order. session/load is answered on the
			// connection stream, as the SDK's own server does, unless it
			// succeeded and the session's stream is open: then the reply
			// must come after the replay, which went to that stream, or a
			// client takes the load as done with part of the conversation
			// still to come.
			if p.session != "" && p.method != "session/load" {
				target = p.session
			}
			if p.session != "" && p.method == "session/load" && !m.isError {
				if st := c.streams[p.session]; st != nil && st.rd != nil {
					target = p.session
				}
			}
			if p.session != "" && (p.method == "session/load" || p.method == "session/resume") {
				if m.isError {
					c.dropUnattachedLocked(p.session)
				} else {
					c.attached[p.session] = true
				}
			}
		}
		if m.resultSID != "" && !m.isError {
			c.attached[m.resultSID] = true
		}
	case m.hasMethod && m.sessionID != "":
		target = m.sessionID
	}
	c.enqueueLocked(target, out)
}

// dropUnattachedLocked ends the stream of a session whose load or resume
// failed, so a GET held for it does not stay open for nothing.
func (c *conn) dropUnattachedLocked(sid string) {
	if c.attached[sid] {
		return
	}
	s := c.streams[sid]
	if s == nil {
		return
	}
	c.buffered -= s.bytes
	s.q, s.bytes = nil, 0
	if s.rd != nil {
		close(s.rd.kill)
		c.detachLocked(s)
	}
	delete(c.streams, sid)
}

func (c *conn) heldLocked() int {
	n := 0
	for k, s := range c.streams {
		if k != "" && s.rd == nil && (len(s.q) > 0 || s.lost) {
			n++
		}
	}
	return n
}

func (c *conn) enqueueLocked(key string, line []byte) {
	if c.finished {
		return
	}
	o := &c.h.opts
	s := c.streams[key]
	if s == nil {
		s = &stream{key: key}
		if c.heldLocked() >= o.MaxHeldSessions {
			c.h.log.Warn("too many sessions with output and no reader; dropping this session's output", "conn", c.info.ID, "session", key, "max", o.MaxHeldSessions)
			s.lost = true
			c.streams[key] = s
			return
		}
		c.streams[key] = s
	}
	if s.lost && s.rd == nil {
		return
	}
	n := int64(len(line))
	// A message alone in its queue is always taken, so one larger than a
	// bound still goes through; the bound holds for everything queued
	// behind it.
	over := len(s.q) > 0 && (s.bytes+n > o.MaxStreamBufferBytes || c.buffered+n > o.MaxConnBufferBytes)
	if over {
		c.overflowLocked(s)
		return
	}
	s.q = append(s.q, line)
	s.bytes += n
	c.buffered += n
	if s.rd != nil {
		wake(s.rd)
	}
}

// overflowLocked closes a stream whose reader does not keep up.
func (c *conn) overflowLocked(s *stream) {
	c.buffered -= s.bytes
	s.q, s.bytes = nil, 0
	if s.key == "" {
		// Losing connection-stream messages (replies) breaks the
		// connection; the SDK treats that stream's end as fatal anyway.
		c.h.log.Warn("connection stream output over its bound; ending the connection", "conn", c.info.ID)
		if s.rd != nil {
			close(s.rd.kill)
			c.detachLocked(s)
		}
		s.lost = true
		go c.end("client did not read its connection stream")
		return
	}
	c.h.log.Warn("session stream output over its bound; closing the stream", "conn", c.info.ID, "session", s.key, "reader", s.rd != nil)
	if s.rd != nil {
		// The reader's response ends: the client sees the stream close and
		// fails that session's pending requests.
		close(s.rd.kill)
		c.detachLocked(s)
		return
	}
	s.lost = true
}

func wake(rd *reader) {
	if rd.start != nil {
		rd.start()
		return
	}
	select {
	case rd.wake <- struct{}{}:
	default:
	}
}

// attach makes rd the reader of stream key. It fails with the HTTP status
// to answer.
func (c *conn) attach(key string) (*stream, *reader, int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return nil, nil, http.StatusNotFound, "unknown " + HeaderConnectionID
	}
	s := c.streams[key]
	if s != nil && s.rd != nil {
		return nil, nil, http.StatusConflict, "this stream already has a reader"
	}
	if s != nil && s.lost {
		if key == "" {
			return nil, nil, http.StatusConflict, "the connection stream lost messages"
		}
		// Told once: the session must be loaded again to be in sync.
		s.lost = false
		return nil, nil, http.StatusConflict, "messages for this session were dropped while it had no reader; load the session again"
	}
	if c.readers >= c.h.opts.MaxStreams {
		return nil, nil, http.StatusTooManyRequests, fmt.Sprintf("too many open streams on this connection (max %d)", c.h.opts.MaxStreams)
	}
	if s == nil {
		s = &stream{key: key}
		c.streams[key] = s
	}
	rd := &reader{wake: make(chan struct{}, 1), kill: make(chan struct{})}
	s.rd = rd
	if key == "" && c.drop != nil {
		c.drop.Stop()
	}
	c.readers++
	c.active++
	if len(s.q) > 0 || s.closed {
		wake(rd)
	}
	return s, rd, 0, ""
}

// detach ends rd's hold on s, if it still has it.
func (c *conn) detach(s *stream, rd *reader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.rd == rd {
		c.detachLocked(s)
	}
}

func (c *conn) detachLocked(s *stream) {
	wake(s.rd) // a reader waiting elsewhere (the WebSocket writer) sees it
	s.rd = nil
	c.readers--
	c.idleDoneLocked()
	if s.key == "" && !c.ws && !c.ended {
		if c.drop == nil {
			c.drop = time.AfterFunc(c.h.opts.DropGrace, c.dropCheck)
		} else {
			c.drop.Reset(c.h.opts.DropGrace)
		}
	}
	if s.key != "" && len(s.q) == 0 && !s.lost && c.streams[s.key] == s {
		delete(c.streams, s.key) // nothing held: forget it
	}
}

// take removes the queued messages of s for rd. done reports that the
// stream is closed and drained, or rd was detached.
func (c *conn) take(s *stream, rd *reader) (msgs [][]byte, n int64, done bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.rd != rd {
		return nil, 0, true
	}
	msgs, n = s.q, s.bytes
	s.q, s.bytes = nil, 0
	return msgs, n, len(msgs) == 0 && s.closed
}

// written releases n bytes a reader has finished writing.
func (c *conn) written(n int64) {
	c.mu.Lock()
	c.buffered -= n
	c.mu.Unlock()
}

// isAttached reports whether the agent confirmed session sid here.
func (c *conn) isAttached(sid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attached[sid]
}

// sessionAllowed asks Options.SessionAllowed about a session not attached.
func (c *conn) sessionAllowed(sid string) bool {
	f := c.h.opts.SessionAllowed
	if f == nil || sid == "" || c.isAttached(sid) {
		return true
	}
	return f(c.ctx, c.info, sid)
}
