package httptransport

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// An HTTP/1.1 event stream is taken from net/http once its headers are
// out (Hijack) and served here, without the goroutine net/http keeps per
// connection and the read and write buffers it holds for it: over
// HTTP/1.1 every session's stream is a TCP connection of its own (the
// SDK's Node client speaks nothing else), and an editor keeps one open for
// every session it has, idle or not. What is left per idle stream is one
// goroutine parked in a read, which sees the client close its end as
// net/http's own background read would; a writer runs only while there is
// something to send, and the keepalive comments are written at the
// handler's shared clock by a few workers for all streams. The body keeps the chunked framing net/http announced in
// the headers.
type rawStream struct {
	h   *Handler
	c   *conn
	s   *stream
	rd  *reader
	sid string
	nc  net.Conn

	running atomic.Bool // a writer is running
	ping    atomic.Bool // a keepalive is due
}

var (
	chunkEnd  = []byte("\r\n")
	lastChunk = []byte("0\r\n\r\n")
)

// serveRaw takes over the stream s on its hijacked connection nc: the
// caller's tracking (Handler.wg) and attachment pass to it. It returns at
// once.
func (h *Handler) serveRaw(c *conn, s *stream, rd *reader, sid string, nc net.Conn) {
	rs := &rawStream{h: h, c: c, s: s, rd: rd, sid: sid, nc: nc}
	h.mu.Lock()
	if h.raw == nil {
		h.raw = map[*rawStream]struct{}{}
	}
	h.raw[rs] = struct{}{}
	h.mu.Unlock()
	h.beat.hold()
	c.mu.Lock()
	rd.start = rs.start
	// Anything queued, or a close, while the handler still held the
	// stream is taken now.
	pending := s.rd != rd || len(s.q) > 0 || s.closed
	c.mu.Unlock()
	if pending {
		rs.start()
	}
	go rs.watch()
}

// watch waits for the client to close its end (a client sends nothing on
// an event stream) or for the writer to close the connection, then lets
// go of the stream.
func (rs *rawStream) watch() {
	var b [1]byte
	for {
		if _, err := rs.nc.Read(b[:]); err != nil {
			break
		}
	}
	rs.h.mu.Lock()
	delete(rs.h.raw, rs)
	rs.h.mu.Unlock()
	rs.h.beat.release()
	rs.c.detach(rs.s, rs.rd)
	_ = rs.nc.Close()
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
// is done (closed and drained, or detached) or a failed write closes the
// connection, which ends watch.
func (rs *rawStream) write() {
	for {
		msgs, n, done := rs.c.take(rs.s, rs.rd)
		ping := rs.ping.Swap(false)
		if len(msgs) > 0 || ping {
			err := rs.send(msgs, ping && len(msgs) == 0)
			rs.c.written(n)
			if err != nil {
				rs.h.log.Info("sse write failed; closing the stream", "conn", rs.c.info.ID, "session", rs.sid, "err", err)
				_ = rs.nc.Close()
				rs.running.Store(false)
				return
			}
			continue
		}
		if done {
			_ = rs.nc.SetWriteDeadline(time.Now().Add(rs.h.opts.WriteTimeout))
			_, _ = rs.nc.Write(lastChunk)
			_ = rs.nc.Close()
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

// send writes msgs as SSE events, or a keepalive comment, in one chunk.
func (rs *rawStream) send(msgs [][]byte, keepAlive bool) error {
	size := 0
	for _, m := range msgs {
		size += len(sseData) + len(m) + len(sseEnd)
	}
	if keepAlive {
		size = len(sseKeepAlive)
	}
	buf := make([]byte, 0, size+24)
	buf = strconv.AppendInt(buf, int64(size), 16)
	buf = append(buf, chunkEnd...)
	if keepAlive {
		buf = append(buf, sseKeepAlive...)
	}
	for _, m := range msgs {
		buf = append(buf, sseData...)
		buf = append(buf, m...)
		buf = append(buf, sseEnd...)
	}
	buf = append(buf, chunkEnd...)
	_ = rs.nc.SetWriteDeadline(time.Now().Add(rs.h.opts.WriteTimeout))
	_, err := rs.nc.Write(buf)
	return err
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
