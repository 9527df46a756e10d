package h2server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Stream is one request's stream. Once taken from its ResponseWriter
// (TakeStream) it is all an open event stream costs: the handler has
// returned, its request is gone.
type Stream struct {
	c  *conn
	id uint32

	// Guarded by c.mu.
	closed     bool  // the connection forgot it
	remoteDone bool  // END_STREAM received
	localDone  bool  // END_STREAM sent
	sendWin    int64 // what we may send
	recvWin    int64 // what the client may send
	declLen    int64 // the request's Content-Length, or -1
	gotLen     int64
	body       *body
	cancel     context.CancelFunc // the request's context; nil once the handler returned
	gone       func()             // set by TakeStream
}

type stream = Stream

// ended runs once, after the connection forgot the stream.
func (st *Stream) ended() {
	c := st.c
	c.mu.Lock()
	cancel, gone := st.cancel, st.gone
	st.cancel, st.gone = nil, nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if gone != nil {
		gone()
	}
}

// errWindow ends a stream whose peer kept its window shut too long.
var errWindow = errors.New("h2server: the peer did not open its flow control window in time")

// writeData sends p, split by the windows and the peer's frame size, and
// END_STREAM with its last frame when end is set. The wait for window
// ends at deadline (zero: the server's WriteTimeout); then the stream is
// reset, or the connection closed when its own window is the one shut.
func (st *Stream) writeData(p []byte, end bool, deadline time.Time) error {
	c := st.c
	if deadline.IsZero() {
		deadline = time.Now().Add(orDefault(c.srv.WriteTimeout, 60*time.Second))
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		c.mu.Lock()
		var n int64
		for {
			if st.closed || c.closed || st.localDone {
				c.mu.Unlock()
				return errClosed
			}
			n = min(int64(len(p)), int64(c.peerMax), c.sendWin, st.sendWin)
			if n > 0 || len(p) == 0 {
				break
			}
			ch := c.winCh
			connShut := c.sendWin <= 0
			c.mu.Unlock()
			if timer == nil {
				timer = time.NewTimer(time.Until(deadline))
			}
			select {
			case <-ch:
			case <-timer.C:
				if connShut {
					_ = c.nc.Close()
				} else {
					c.reset(st.id, http2.ErrCodeCancel)
				}
				return errWindow
			}
			c.mu.Lock()
		}
		n = max(n, 0)
		c.sendWin -= n
		st.sendWin -= n
		last := end && n == int64(len(p))
		if last {
			st.localDone = true
		}
		c.mu.Unlock()
		chunk := p[:n]
		if err := c.write(func() error { return c.fr.WriteData(st.id, last, chunk) }); err != nil {
			return err
		}
		p = p[n:]
		if last {
			c.localEnd(st)
			return nil
		}
		if len(p) == 0 && !end {
			return nil
		}
	}
}

// localEnd follows our END_STREAM: the stream is closed if the client's
// side is. Otherwise it stays half-closed until the client ends its side
// or resets it, and what the client still sends is checked (its length,
// its window) and discarded; it no longer keeps the connection from the
// idle timeout.
func (c *conn) localEnd(st *Stream) {
	c.mu.Lock()
	if !st.remoteDone {
		c.armIdleLocked()
		c.mu.Unlock()
		return
	}
	owed := c.removeLocked(st)
	c.mu.Unlock()
	st.ended()
	c.refund(owed)
}

// Send writes p as body bytes of a taken stream, by deadline.
func (st *Stream) Send(p []byte, deadline time.Time) error {
	return st.writeData(p, false, deadline)
}

// End ends a taken stream's body.
func (st *Stream) End(deadline time.Time) {
	if st.writeData(nil, true, deadline) != nil {
		st.Reset()
	}
}

// Reset abandons a taken stream (RST_STREAM CANCEL).
func (st *Stream) Reset() {
	st.c.reset(st.id, http2.ErrCodeCancel)
}

// body is a request's body: what DATA frames brought, until the handler
// reads it; reading gives the window back.
type body struct {
	st   *Stream
	cond sync.Cond // L is the connection's mu
	buf  []byte
	eof  bool
	err  error
	// unacked was read and not yet given back.
	unacked int64
}

var errBodyClosed = errors.New("h2server: read on a closed body")

func (b *body) Read(p []byte) (int, error) {
	c := b.st.c
	c.mu.Lock()
	for len(b.buf) == 0 && !b.eof && b.err == nil {
		b.cond.Wait()
	}
	if len(b.buf) == 0 || len(p) == 0 {
		err := b.err
		if err == nil && b.eof {
			err = io.EOF
		}
		c.mu.Unlock()
		return 0, err
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	if len(b.buf) == 0 {
		b.buf = nil
	}
	// The window goes back in pieces of some size, or when the handler
	// has caught up, not a frame per small read.
	b.unacked += int64(n)
	if b.unacked < ackAt && len(b.buf) > 0 {
		c.mu.Unlock()
		return n, nil
	}
	give := b.unacked
	b.unacked = 0
	open := !b.st.closed && !b.st.remoteDone
	if open {
		b.st.recvWin += give
	}
	c.recvWin += give
	c.mu.Unlock()
	_ = c.write(func() error {
		if err := c.fr.WriteWindowUpdate(0, uint32(give)); err != nil || !open {
			return err
		}
		return c.fr.WriteWindowUpdate(b.st.id, uint32(give))
	})
	return n, nil
}

// ackAt is the most read before window goes back.
const ackAt = 16 << 10

// Close drops what is buffered; what comes later is discarded.
func (b *body) Close() error {
	c := b.st.c
	c.mu.Lock()
	owed := int64(len(b.buf)) + b.unacked
	b.buf, b.unacked = nil, 0
	if b.err == nil {
		b.err = errBodyClosed
	}
	c.mu.Unlock()
	c.refund(owed)
	return nil
}

// run runs a request's handler on its own goroutine.
func (c *conn) run(w *responseWriter, req *http.Request, h http.Handler) {
	defer func() {
		c.mu.Lock()
		c.handlers--
		cancel := w.st.cancel
		w.st.cancel = nil
		c.armIdleLocked()
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				c.log.Error("http2 handler panicked", "remote", c.remote, "panic", fmt.Sprint(p))
			}
			c.reset(w.st.id, http2.ErrCodeInternal)
		}
	}()
	h.ServeHTTP(w, req)
	w.finish()
	if w.st.body != nil {
		_ = w.st.body.Close()
	}
}

// responseWriter is a handler's http.ResponseWriter. Writes collect until
// Flush, flushAt bytes or the handler's return.
type responseWriter struct {
	st         *Stream
	req        *http.Request
	hdr        http.Header
	status     int
	sentHeader bool
	flushed    bool // some body went out
	taken      bool
	buf        []byte
	deadline   time.Time
}

func (w *responseWriter) Header() http.Header {
	if w.hdr == nil {
		w.hdr = make(http.Header)
	}
	return w.hdr
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 || w.taken {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("h2server: invalid WriteHeader code %d", code))
	}
	if code < 200 {
		if code != http.StatusSwitchingProtocols {
			_ = w.writeHeaders(code, false)
		}
		return
	}
	w.status = code
}

// bodyless reports whether the response may carry no body.
func (w *responseWriter) bodyless() bool {
	return w.status == http.StatusNoContent || w.status == http.StatusNotModified || w.req.Method == http.MethodHead
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.taken {
		return 0, errClosed
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.bodyless() {
		if w.req.Method == http.MethodHead {
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= flushAt {
		if err := w.flush(false); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (w *responseWriter) WriteString(s string) (int, error) {
	return w.Write([]byte(s))
}

func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is what http.ResponseController.Flush calls.
func (w *responseWriter) FlushError() error {
	if w.taken {
		return errClosed
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.flush(false)
}

// SetWriteDeadline bounds the writes that follow (http.ResponseController).
func (w *responseWriter) SetWriteDeadline(t time.Time) error {
	w.deadline = t
	return nil
}

func (w *responseWriter) flush(end bool) error {
	if !w.sentHeader {
		if !w.flushed && end && !w.bodyless() && w.hdr.Get("Content-Length") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(len(w.buf)))
		}
		if len(w.buf) > 0 && w.hdr.Get("Content-Type") == "" {
			w.Header().Set("Content-Type", http.DetectContentType(w.buf))
		}
		w.sentHeader = true
		if err := w.writeHeaders(w.status, end && len(w.buf) == 0); err != nil {
			return err
		}
		if end && len(w.buf) == 0 {
			w.st.c.localEnd(w.st)
			return nil
		}
	}
	if len(w.buf) == 0 && !end {
		return nil
	}
	w.flushed = true
	err := w.st.writeData(w.buf, end, w.deadline)
	if cap(w.buf) > 2*flushAt {
		w.buf = nil
	} else {
		w.buf = w.buf[:0]
	}
	return err
}

// finish ends the response when the handler returns.
func (w *responseWriter) finish() {
	if w.taken {
		return
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.flush(true) != nil {
		w.st.c.reset(w.st.id, http2.ErrCodeCancel)
	}
	w.buf = nil
}

// Headers a response must not carry over HTTP/2.
// Built on first use: a package-level map is built by package
// initialization, on every start of acpd.
var respConnHeaders = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true,
		"transfer-encoding": true, "upgrade": true}
})

// writeHeaders sends a HEADERS frame (and CONTINUATION frames if the
// block is bigger than the peer takes in one).
func (w *responseWriter) writeHeaders(code int, end bool) error {
	st := w.st
	c := st.c
	c.mu.Lock()
	if st.closed || c.closed {
		c.mu.Unlock()
		return errClosed
	}
	if end {
		st.localDone = true
	}
	frameMax := int(c.peerMax)
	c.mu.Unlock()
	return c.write(func() error {
		c.hbuf = c.hbuf[:0]
		enc := func(k, v string) { _ = c.henc.WriteField(hpack.HeaderField{Name: k, Value: v}) }
		enc(":status", strconv.Itoa(code))
		for k, vs := range w.hdr {
			lk := strings.ToLower(k)
			if respConnHeaders()[lk] || strings.HasPrefix(lk, ":") {
				continue
			}
			for _, v := range vs {
				enc(lk, v)
			}
		}
		block := c.hbuf
		first := true
		for first || len(block) > 0 {
			n := min(len(block), frameMax)
			chunk := block[:n]
			block = block[n:]
			var err error
			if first {
				err = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: chunk,
					EndStream: end, EndHeaders: len(block) == 0})
			} else {
				err = c.fr.WriteContinuation(st.id, len(block) == 0, chunk)
			}
			if err != nil {
				return err
			}
			first = false
		}
		return nil
	})
}

// TakeStream hands the response's stream to the caller, its headers sent
// and what was written flushed: the handler may return and the stream
// stays open, served by the caller through Send, End and Reset. gone is
// called once when the stream ends, whatever ends it (End, Reset, the
// client resetting it, the connection closing). It returns nil, and gone
// is never called, when the stream has ended already.
func (w *responseWriter) TakeStream(gone func()) *Stream {
	if w.taken || w.bodyless() {
		return nil
	}
	if w.FlushError() != nil {
		return nil
	}
	c := w.st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.st.closed || w.st.localDone {
		return nil
	}
	w.taken = true
	w.st.gone = gone
	return w.st
}
