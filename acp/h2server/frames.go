package h2server

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http2"
)

// maxWindow is the largest flow control window RFC 9113 allows.
const maxWindow = 1<<31 - 1

// maxRefused is how many streams over the bound a connection may open
// before it is ended: a client that respects SETTINGS_MAX_CONCURRENT_STREAMS
// is never refused, one that opens and resets streams to start handlers
// faster than they end is.
const maxRefused = 100

// process handles one frame on the reader goroutine. Replies (SETTINGS
// and PING acknowledgements, window updates, resets) are written before
// the next frame is read, so a peer that does not read what it asked for
// stops being read itself: nothing queues.
func (c *conn) process(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := f.ForeachSetting(c.setting); err != nil {
			return err
		}
		return c.write(func() error { return c.fr.WriteSettingsAck() })
	case *http2.MetaHeadersFrame:
		return c.headers(f)
	case *http2.DataFrame:
		return c.data(f)
	case *http2.WindowUpdateFrame:
		return c.windowUpdate(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return c.write(func() error { return c.fr.WritePing(true, f.Data) })
	case *http2.RSTStreamFrame:
		c.mu.Lock()
		st := c.streams[f.StreamID]
		if st == nil {
			idle := c.idleID(f.StreamID)
			c.mu.Unlock()
			if idle {
				return connError{http2.ErrCodeProtocol, "RST_STREAM on an idle stream"}
			}
			return nil
		}
		owed := c.removeLocked(st)
		c.mu.Unlock()
		st.ended()
		c.refund(owed)
		return nil
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return streamError{f.StreamID, http2.ErrCodeProtocol}
		}
		return nil
	case *http2.GoAwayFrame:
		// The client opens no more streams; it closes the connection
		// when it is done, or the idle timeout does.
		return nil
	case *http2.PushPromiseFrame:
		return connError{http2.ErrCodeProtocol, "PUSH_PROMISE from a client"}
	case *http2.ContinuationFrame, *http2.HeadersFrame:
		// The framer merges CONTINUATION into MetaHeadersFrame.
		return connError{http2.ErrCodeProtocol, "unexpected CONTINUATION"}
	}
	return nil // unknown frame types are ignored
}

// idleID reports whether id names a stream the client has not opened;
// called with mu held.
func (c *conn) idleID(id uint32) bool {
	return id%2 == 0 || id > c.maxID
}

func (c *conn) setting(s http2.Setting) error {
	if err := s.Valid(); err != nil {
		return err
	}
	switch s.ID {
	case http2.SettingInitialWindowSize:
		c.mu.Lock()
		defer c.mu.Unlock()
		delta := int64(s.Val) - c.initWin
		c.initWin = int64(s.Val)
		for _, st := range c.streams {
			st.sendWin += delta
			if st.sendWin > maxWindow {
				return connError{http2.ErrCodeFlowControl, "window over 2^31-1"}
			}
		}
		c.wake()
	case http2.SettingMaxFrameSize:
		c.mu.Lock()
		c.peerMax = s.Val
		c.mu.Unlock()
	case http2.SettingHeaderTableSize:
		c.wmu.Lock()
		c.henc.SetMaxDynamicTableSize(s.Val)
		c.wmu.Unlock()
	}
	return nil
}

func (c *conn) windowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.sendWin += inc
		if c.sendWin > maxWindow {
			return connError{http2.ErrCodeFlowControl, "window over 2^31-1"}
		}
		c.wake()
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if c.idleID(f.StreamID) {
			return connError{http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"}
		}
		return nil
	}
	st.sendWin += inc
	if st.sendWin > maxWindow {
		return streamError{f.StreamID, http2.ErrCodeFlowControl}
	}
	c.wake()
	return nil
}

func (c *conn) data(f *http2.DataFrame) error {
	id := f.StreamID
	n := int64(f.Length)
	data := f.Data()
	c.mu.Lock()
	if n > c.recvWin {
		c.mu.Unlock()
		return connError{http2.ErrCodeFlowControl, "DATA beyond the connection window"}
	}
	c.recvWin -= n
	st := c.streams[id]
	if st == nil || st.remoteDone {
		idle := st == nil && c.idleID(id)
		c.mu.Unlock()
		if idle {
			return connError{http2.ErrCodeProtocol, "DATA on an idle stream"}
		}
		c.refund(n)
		return streamError{id, http2.ErrCodeStreamClosed}
	}
	if n > st.recvWin {
		c.mu.Unlock()
		c.refund(n)
		return streamError{id, http2.ErrCodeFlowControl}
	}
	st.recvWin -= n
	st.gotLen += int64(len(data))
	if st.declLen >= 0 && st.gotLen > st.declLen {
		c.mu.Unlock()
		c.refund(n)
		return streamError{id, http2.ErrCodeProtocol}
	}
	// Padding, and data no handler will read, give their window back now.
	owed := n - int64(len(data))
	if b := st.body; b != nil && b.err == nil {
		b.buf = append(b.buf, data...)
		b.cond.Broadcast()
	} else {
		owed = n
	}
	var ended bool
	if f.StreamEnded() {
		if st.declLen >= 0 && st.gotLen != st.declLen {
			c.mu.Unlock()
			c.refund(owed)
			return streamError{id, http2.ErrCodeProtocol}
		}
		ended = c.remoteEndLocked(st)
	}
	streamOpen := !st.remoteDone
	if streamOpen {
		st.recvWin += owed
	}
	c.mu.Unlock()
	if ended {
		st.ended()
	}
	if owed > 0 {
		c.refund(owed)
		if streamOpen {
			_ = c.write(func() error { return c.fr.WriteWindowUpdate(id, uint32(owed)) })
		}
	}
	return nil
}

// remoteEndLocked records the client's END_STREAM; it reports whether
// that closed the stream (the caller then calls st.ended without mu).
func (c *conn) remoteEndLocked(st *stream) bool {
	st.remoteDone = true
	if st.body != nil {
		st.body.eof = true
		st.body.cond.Broadcast()
	}
	if st.localDone {
		c.removeLocked(st)
		return true
	}
	return false
}

func (c *conn) headers(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 != 1 {
		return connError{http2.ErrCodeProtocol, "HEADERS on an even stream"}
	}
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		// Trailers: they end the body, and carry no pseudo-header.
		if st.remoteDone {
			// Closed both ways (our END_STREAM is out, the stream is being
			// forgotten) or half-closed: as for a stream already forgotten.
			closed := st.localDone
			c.mu.Unlock()
			if closed {
				return connError{http2.ErrCodeStreamClosed, "HEADERS on a closed stream"}
			}
			return streamError{id, http2.ErrCodeStreamClosed}
		}
		if !f.StreamEnded() || len(f.PseudoFields()) > 0 || (st.declLen >= 0 && st.gotLen != st.declLen) {
			c.mu.Unlock()
			return streamError{id, http2.ErrCodeProtocol}
		}
		ended := c.remoteEndLocked(st)
		c.mu.Unlock()
		if ended {
			st.ended()
		}
		return nil
	}
	if id <= c.maxID {
		c.mu.Unlock()
		return connError{http2.ErrCodeStreamClosed, "HEADERS on a closed stream"}
	}
	c.maxID = id
	if c.goingAway {
		c.mu.Unlock()
		return nil // past our GOAWAY: not processed, as it said
	}
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.mu.Unlock()
		return streamError{id, http2.ErrCodeProtocol}
	}
	max := int(c.srv.maxStreams())
	if len(c.streams) >= max || c.handlers >= max {
		c.refused++
		refused := c.refused
		c.mu.Unlock()
		if refused > maxRefused {
			return connError{http2.ErrCodeEnhanceYourCalm, "too many streams over the bound"}
		}
		return streamError{id, http2.ErrCodeRefusedStream}
	}
	c.mu.Unlock()

	req, handler, err := c.newRequest(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	req = req.WithContext(ctx)
	st := &stream{c: c, id: id, declLen: req.ContentLength, recvWin: streamWindow, remoteDone: f.StreamEnded(), cancel: cancel}
	if !st.remoteDone {
		st.body = &body{st: st}
		st.body.cond.L = &c.mu
		req.Body = st.body
	} else {
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	c.mu.Lock()
	st.sendWin = c.initWin
	c.streams[id] = st
	c.handlers++
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	w := &responseWriter{st: st, req: req}
	go c.run(w, req, handler)
	return nil
}

// Request headers that are HTTP/1.1 connection matters, which HTTP/2
// forbids (RFC 9113 section 8.2.2).
var connHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}

// newRequest builds the request of a HEADERS frame, or the stream error a
// malformed one is.
func (c *conn) newRequest(f *http2.MetaHeadersFrame) (*http.Request, http.Handler, error) {
	malformed := streamError{f.StreamID, http2.ErrCodeProtocol}
	method, path, scheme, authority := f.PseudoValue("method"), f.PseudoValue("path"), f.PseudoValue("scheme"), f.PseudoValue("authority")
	if f.PseudoValue("protocol") != "" {
		return nil, nil, malformed // extended CONNECT is not offered
	}
	handler := c.srv.Handler
	if method == http.MethodConnect {
		if path != "" || scheme != "" || authority == "" {
			return nil, nil, malformed
		}
		handler = http.HandlerFunc(refuseConnect)
		path = "/"
	} else if method == "" || path == "" || (scheme != "http" && scheme != "https") {
		return nil, nil, malformed
	}
	if f.Truncated {
		handler = http.HandlerFunc(headersTooLarge)
	}
	regular := f.RegularFields()
	h := make(http.Header, len(regular))
	var cookies []string
	for _, hf := range regular {
		if hf.Name == "cookie" {
			cookies = append(cookies, hf.Value)
			continue
		}
		k := http.CanonicalHeaderKey(hf.Name)
		h[k] = append(h[k], hf.Value)
	}
	if len(cookies) > 0 {
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	for _, k := range connHeaders {
		if _, ok := h[k]; ok {
			return nil, nil, malformed
		}
	}
	if te := h["Te"]; len(te) > 1 || (len(te) == 1 && te[0] != "trailers") {
		return nil, nil, malformed
	}
	host := authority
	if host == "" {
		host = h.Get("Host")
	}
	var u *url.URL
	if path == "*" && method == http.MethodOptions {
		u = &url.URL{Path: "*"}
	} else {
		if path[0] != '/' {
			return nil, nil, malformed
		}
		var err error
		if u, err = url.ParseRequestURI(path); err != nil {
			return nil, nil, malformed
		}
	}
	cl := int64(-1)
	if vs := h["Content-Length"]; len(vs) > 0 {
		for _, v := range vs[1:] {
			if v != vs[0] {
				return nil, nil, malformed
			}
		}
		n, err := strconv.ParseUint(vs[0], 10, 63)
		if err != nil {
			return nil, nil, malformed
		}
		cl = int64(n)
		if cl > 0 && f.StreamEnded() {
			// A body declared and none sent: malformed (RFC 9113
			// section 8.1.1), not a request with an empty body.
			return nil, nil, malformed
		}
	}
	req := &http.Request{Method: method, URL: u, Proto: "HTTP/2.0", ProtoMajor: 2, Header: h, Host: host,
		RemoteAddr: c.remote, RequestURI: path, TLS: c.tls, ContentLength: cl}
	return req, handler, nil
}

func refuseConnect(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", "GET, POST, DELETE, HEAD")
	w.WriteHeader(http.StatusMethodNotAllowed)
}

func headersTooLarge(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
}
