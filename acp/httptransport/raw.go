package httptransport

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpd/acpd/acp/h2server"
)

// An event stream is taken from the HTTP server once its headers are out
// and served here, with no goroutine of its own while it is idle: over
// HTTP/1.1 the connection is hijacked from net/http (every session's
// stream is a TCP connection of its own there: the SDK's Node client
// speaks nothing else), over HTTP/2 the stream is taken from acpd's own
// server (acp/h2server), where the connection's reader serves all its
// streams. An editor keeps a stream open for every session it has, idle
// or not. A writer runs only while there is something to send, and the
// keepalive comments are written at the handler's shared clock by a few
// workers for all streams. Over HTTP/1.1 the client closing its end is
// seen by one watcher for all streams (watchClose: on Linux an epoll
// instance of its own, which over TLS watches the socket under the TLS
// connection; elsewhere a goroutine per stream parked in a read, as
// net/http's own background read would be); over HTTP/2 the connection's
// reader sees a reset or the connection's end.
type rawStream struct {
	h    *Handler
	c    *conn
	s    *stream
	rd   *reader
	sid  string
	out  sink
	left bool // gone has run; guarded by h.mu

	running atomic.Bool // a writer is running
	ping    atomic.Bool // a keepalive is due
}

// sink is where a taken stream's body goes.
type sink interface {
	// send writes one piece of the body, body[chunkRoom:]; the bytes
	// before it are room for framing.
	send(body []byte) error
	// end ends the body; drop abandons the stream (a write failed).
	end()
	drop()
}

// chunkRoom is the room send leaves before the body: a chunk size in hex
// and its CRLF.
const chunkRoom = 18

var (
	chunkEnd  = []byte("\r\n")
	lastChunk = []byte("0\r\n\r\n")
)

// h1Sink writes the body as chunks on a hijacked HTTP/1.1 connection,
// keeping the framing net/http announced in the headers.
type h1Sink struct {
	rs      *rawStream
	nc      net.Conn
	tc      *tls.Conn // nc, over TLS
	timeout time.Duration
	closed  atomic.Bool // close ran
	watch   uint64      // the close watcher's key, if it has one (under its lock)
	dropped int         // application data a TLS client sent, dropped (by one reader at a time)
}

func (k *h1Sink) send(buf []byte) error {
	var head [chunkRoom]byte
	hd := strconv.AppendInt(head[:0], int64(len(buf)-chunkRoom), 16)
	hd = append(hd, chunkEnd...)
	start := chunkRoom - len(hd)
	copy(buf[start:], hd)
	buf = append(buf, chunkEnd...)
	_ = k.nc.SetWriteDeadline(time.Now().Add(k.timeout))
	_, err := k.nc.Write(buf[start:])
	return err
}

func (k *h1Sink) end() {
	_ = k.nc.SetWriteDeadline(time.Now().Add(k.timeout))
	_, _ = k.nc.Write(lastChunk)
	k.close()
}

func (k *h1Sink) drop() { k.close() }

// close closes the connection and lets go of the stream, once, whichever
// of the close watcher (the client went away) and the writer (the stream
// is done, or a write failed) comes first.
func (k *h1Sink) close() {
	if k.closed.Swap(true) {
		return
	}
	_ = k.nc.Close()
	unwatchClose(k)
	k.rs.gone()
}

// watchRead is the portable close watcher: a goroutine parked in a read
// until the client closes its end (a client sends nothing on an event
// stream; what it does send is dropped) or the connection is closed.
func (k *h1Sink) watchRead() {
	var b [1]byte
	for {
		// A deadline left by the epoll watcher's reads of a TLS stream
		// (it hands its streams here should it fail) is not a close.
		_ = k.nc.SetReadDeadline(time.Time{})
		if _, err := k.nc.Read(b[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
	}
	k.close()
}

// h2Sink writes the body as DATA frames on a taken HTTP/2 stream.
type h2Sink struct {
	st      *h2server.Stream
	timeout time.Duration
}

func (k h2Sink) send(buf []byte) error {
	return k.st.Send(buf[chunkRoom:], time.Now().Add(k.timeout))
}

func (k h2Sink) end()  { k.st.End(time.Now().Add(k.timeout)) }
func (k h2Sink) drop() { k.st.Reset() }

// streamTaker is a ResponseWriter of acpd's HTTP/2 server.
type streamTaker interface {
	TakeStream(gone func()) *h2server.Stream
}

// serveRaw takes over the stream s on its hijacked connection nc: the
// caller's tracking (Handler.wg) and attachment pass to it. It returns at
// once.
func (h *Handler) serveRaw(c *conn, s *stream, rd *reader, sid string, nc net.Conn) {
	rs := &rawStream{h: h, c: c, s: s, rd: rd, sid: sid}
	k := &h1Sink{rs: rs, nc: nc, timeout: h.opts.WriteTimeout}
	k.tc, _ = nc.(*tls.Conn)
	rs.out = k
	h.beat.hold()
	h.addRaw(rs)
	h.startPending(rs)
	k.watchClose()
}

// serveTaken takes over the stream s on the HTTP/2 stream of t, as
// serveRaw does.
func (h *Handler) serveTaken(c *conn, s *stream, rd *reader, sid string, t streamTaker) {
	rs := &rawStream{h: h, c: c, s: s, rd: rd, sid: sid}
	h.beat.hold()
	st := t.TakeStream(rs.gone)
	if st == nil {
		rs.gone() // ended already
		return
	}
	rs.out = h2Sink{st: st, timeout: h.opts.WriteTimeout}
	h.addRaw(rs)
	h.startPending(rs)
}

// addRaw lists rs for the keepalives, unless it has ended already.
func (h *Handler) addRaw(rs *rawStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rs.left {
		return
	}
	if h.raw == nil {
		h.raw = map[*rawStream]struct{}{}
	}
	h.raw[rs] = struct{}{}
}

// startPending hands rs the stream's wake-ups and starts a writer for
// anything queued, or a close, while the handler still held the stream.
func (h *Handler) startPending(rs *rawStream) {
	c, s, rd := rs.c, rs.s, rs.rd
	c.mu.Lock()
	rd.start = rs.start
	pending := s.rd != rd || len(s.q) > 0 || s.closed
	c.mu.Unlock()
	if pending {
		rs.start()
	}
}

// gone lets go of a stream that has ended.
func (rs *rawStream) gone() {
	rs.h.mu.Lock()
	delete(rs.h.raw, rs)
	rs.left = true
	rs.h.mu.Unlock()
	rs.h.beat.release()
	rs.c.detach(rs.s, rs.rd)
	rs.h.wg.Done()
}

// start runs a writer unless one runs. Called with the connection's lock
// held (as wake is), so it only starts a goroutine.
func (rs *rawStream) start() {
	if rs.running.CompareAndSwap(false, true) {
		go rs.write()
	}
}

// write sends what is queued until nothing is, then ends; a stream that
// is done (closed and drained, or detached) or a failed write is ended
// (its sink lets go of it).
func (rs *rawStream) write() {
	for {
		msgs, n, done := rs.c.take(rs.s, rs.rd)
		ping := rs.ping.Swap(false)
		if len(msgs) > 0 || ping {
			err := rs.send(msgs, ping && len(msgs) == 0)
			rs.c.written(n)
			if err != nil {
				rs.h.log.Info("sse write failed; closing the stream", "conn", rs.c.info.ID, "session", rs.sid, "err", err)
				rs.out.drop()
				rs.running.Store(false)
				return
			}
			continue
		}
		if done {
			rs.out.end()
			rs.running.Store(false)
			return
		}
		rs.running.Store(false)
		// Work that came between the take and the store found the writer
		// still running and started none: look once more.
		if !rs.more() || !rs.running.CompareAndSwap(false, true) {
			return
		}
	}
}

func (rs *rawStream) more() bool {
	if rs.ping.Load() {
		return true
	}
	rs.c.mu.Lock()
	defer rs.c.mu.Unlock()
	return rs.s.rd != rs.rd || len(rs.s.q) > 0 || rs.s.closed
}

// send writes msgs as SSE events, or a keepalive comment, in one piece.
func (rs *rawStream) send(msgs [][]byte, keepAlive bool) error {
	size := 0
	for _, m := range msgs {
		size += len(sseData) + len(m) + len(sseEnd)
	}
	if keepAlive {
		size = len(sseKeepAlive)
	}
	buf := make([]byte, chunkRoom, chunkRoom+size+len(chunkEnd))
	if keepAlive {
		buf = append(buf, sseKeepAlive...)
	}
	for _, m := range msgs {
		buf = append(buf, sseData...)
		buf = append(buf, m...)
		buf = append(buf, sseEnd...)
	}
	return rs.out.send(buf)
}

// keepAliveWorkers bounds the goroutines that write one beat's keepalives.
// A goroutine per stream would do, but a thousand goroutines started at
// once leave a thousand stacks in the runtime's free list for as long as
// the process lives; a stalled client holds up only its worker's share,
// for at most WriteTimeout.
const keepAliveWorkers = 4

// rawKeepAlive gives every hijacked stream its keepalive at a beat.
func (h *Handler) rawKeepAlive() {
	h.mu.Lock()
	streams := make([]*rawStream, 0, len(h.raw))
	for rs := range h.raw {
		streams = append(streams, rs)
	}
	h.mu.Unlock()
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(streams) {
				return
			}
			rs := streams[i]
			rs.ping.Store(true) // a running writer sends it
			if rs.running.CompareAndSwap(false, true) {
				rs.write()
			}
		}
	}
	var wg sync.WaitGroup
	for range min(keepAliveWorkers, len(streams)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}
