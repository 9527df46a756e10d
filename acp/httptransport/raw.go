package httptransport

import (
	"bufio"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// An HTTP/1.1 event stream is taken from net/http once its headers are out
// (Hijack) and served here. Over HTTP/1.1 every open stream is a TCP
// connection of its own (the SDK's Node client speaks nothing else) and an
// editor keeps one open for every session it has, idle or not; left to
// net/http, each kept the connection's goroutine, its background reader and
// about 10 KB of buffers: 37.6 KB a session in all, 45.5 over TLS, against
// a target of 32 (docs/benchmarks.md). Taken over, an idle stream keeps one
// goroutine parked in a read (watch), which sees the client close its end;
// a writer runs only while there is something to send, and the keepalive
// comments of all streams are written at the handler's shared clock by a
// few workers. Over HTTP/2 a stream stays with net/http (serveSSE): all of
// a connection's streams share one TCP connection there.
type rawStream struct {
	h       *Handler
	c       *conn
	s       *stream
	rd      *reader
	sid     string
	nc      net.Conn
	timeout time.Duration
	left    bool // gone has run; guarded by h.mu

	closed  atomic.Bool // close ran
	running atomic.Bool // a writer is running
	ping    atomic.Bool // a keepalive is due
}

// chunkRoom is the room a body piece leaves before its bytes: a chunk
// size in hex and its CRLF, written in place so a chunk is one write.
const chunkRoom = 18

var (
	chunkEnd  = []byte("\r\n")
	lastChunk = []byte("0\r\n\r\n")
)

// serveRaw takes over the stream s on its hijacked connection nc, whose
// reader br holds what net/http read past the request: the caller's
// tracking (Handler.wg) and attachment pass to it. It returns at once.
func (h *Handler) serveRaw(c *conn, s *stream, rd *reader, sid string, nc net.Conn, br *bufio.Reader) {
	rs := &rawStream{h: h, c: c, s: s, rd: rd, sid: sid, nc: nc, timeout: h.opts.WriteTimeout}
	h.beat.hold()
	h.addRaw(rs)
	h.startPending(rs)
	if br.Buffered() > 0 {
		// The client sent more behind its GET; see watch.
		rs.close()
		return
	}
	go rs.watch()
}

// watch waits for the client to close its end of the connection. A client
// has nothing to send on an event stream (the response said Connection:
// close, so no request may follow), so anything it does send ends the
// stream too, and what a client sends costs nothing to keep. Over TLS the
// read goes through crypto/tls, which answers a KeyUpdate itself.
func (rs *rawStream) watch() {
	var b [1]byte
	_, _ = rs.nc.Read(b[:])
	rs.close()
}

// close closes the connection and lets go of the stream, once, whichever
// of the watcher (the client went away) and the writer (the stream is
// done, or a write failed) comes first.
func (rs *rawStream) close() {
	if rs.closed.Swap(true) {
		return
	}
	_ = rs.nc.Close()
	rs.gone()
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
// is done (closed and drained, or detached) or a failed write is closed.
func (rs *rawStream) write() {
	for {
		msgs, n, done := rs.c.take(rs.s, rs.rd)
		ping := rs.ping.Swap(false)
		if len(msgs) > 0 || ping {
			err := rs.send(msgs, ping && len(msgs) == 0)
			rs.c.written(n)
			if err != nil {
				rs.h.log.Info("sse write failed; closing the stream", "conn", rs.c.info.ID, "session", rs.sid, "err", err)
				rs.close()
				rs.running.Store(false)
				return
			}
			continue
		}
		if done {
			_ = rs.write1(lastChunk)
			rs.close()
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

// send writes msgs as SSE events, or a keepalive comment, as one chunk in
// one write.
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
	var head [chunkRoom]byte
	hd := strconv.AppendInt(head[:0], int64(size), 16)
	hd = append(hd, chunkEnd...)
	start := chunkRoom - len(hd)
	copy(buf[start:], hd)
	return rs.write1(append(buf, chunkEnd...)[start:])
}

// write1 writes b within the write timeout. The deadline is cleared
// after it: over TLS the watcher's read answers a client's KeyUpdate with
// a write of its own, which a deadline long past would fail, and with it
// every write after. That answer waits at most until the next write sets
// a deadline again (a keepalive, every KeepAlive).
func (rs *rawStream) write1(b []byte) error {
	_ = rs.nc.SetWriteDeadline(time.Now().Add(rs.timeout))
	_, err := rs.nc.Write(b)
	_ = rs.nc.SetWriteDeadline(time.Time{})
	return err
}

// keepAliveWorkers bounds the goroutines that write one beat's keepalives.
// A goroutine per stream would do, but a thousand goroutines started at
// once leave a thousand stacks in the runtime's free list for as long as
// the process lives; a stalled client holds up only its worker's share,
// for at most WriteTimeout.
const keepAliveWorkers = 4

// rawKeepAlive gives every taken stream its keepalive at a beat.
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
