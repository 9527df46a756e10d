package httptransport

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"
)

// acceptsEventStream reports whether an Accept header names
// text/event-stream. The RFD requires it; a bare */* does not count.
func acceptsEventStream(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" && params["q"] != "0" {
				return true
			}
		}
	}
	return false
}

// Response header values of every SSE stream, never modified.
var (
	sseContentType = []string{"text/event-stream"}
	sseNoStore     = []string{"no-store"}
	sseNoBuffering = []string{"no"}
	connClose      = []string{"close"}
)

var (
	sseData      = []byte("data: ")
	sseEnd       = []byte("\n\n")
	sseKeepAlive = []byte(": keepalive\n\n")
)

// serveSSE serves a connection stream or, with Acp-Session-Id, a session
// stream. A session the agent has not named yet is accepted and held: the
// SDK client opens a session's stream before its session/load, and a 404
// there would close its whole transport.
func (h *Handler) serveSSE(w http.ResponseWriter, r *http.Request) {
	if !acceptsEventStream(r.Header.Values("Accept")) {
		writeError(w, http.StatusNotAcceptable, codeInvalidRequest, "Accept must include text/event-stream")
		return
	}
	c := h.lookup(w, r)
	if c == nil {
		return
	}
	sid := r.Header.Get(HeaderSessionID)
	if len(sid) > maxIDBytes {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, fmt.Sprintf("%s header exceeds %d bytes", HeaderSessionID, maxIDBytes))
		return
	}
	if !c.sessionAllowed(sid) {
		writeError(w, http.StatusConflict, codeInvalidRequest, "this connection may not use that session")
		return
	}
	if !h.track() {
		refuseConn(w, errClosing)
		return
	}
	handedOff := false // to serveRaw, with the tracking and the stream
	defer func() {
		if !handedOff {
			h.wg.Done()
		}
	}()
	s, rd, status, msg := c.attach(sid)
	if s == nil {
		writeError(w, status, codeInvalidRequest, msg)
		return
	}
	defer func() {
		if !handedOff {
			c.detach(s, rd)
		}
	}()

	// The values are shared: a stream is held open for as long as its
	// session lives, and a slice of its own per header would be kept as
	// long.
	hd := w.Header()
	hd["Content-Type"] = sseContentType
	hd["Cache-Control"] = sseNoStore
	hd["X-Accel-Buffering"] = sseNoBuffering // nginx would buffer the stream otherwise
	if r.ProtoMajor == 1 {
		// Over HTTP/1.x the connection ends with the stream: taken over
		// below and closed after its last chunk. Said up front, or a client
		// that reads that last chunk puts the connection back in its pool
		// and may send its next request on it as the server closes it (Go's
		// transport then fails that POST with EOF; undici alike).
		hd["Connection"] = connClose
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The headers go out now: the SDK client waits for them before it
	// POSTs anything for the session.
	if rc.Flush() != nil {
		return
	}
	if r.ProtoMajor == 1 && r.ProtoMinor >= 1 {
		// The headers went out with chunked framing, which serveRaw keeps.
		if nc, brw, err := rc.Hijack(); err == nil {
			handedOff = true
			h.serveRaw(c, s, rd, sid, nc, brw.Reader)
			return
		}
	}
	// HTTP/2 (and HTTP/1.0): served here, on the handler's goroutine.
	h.beat.hold()
	defer h.beat.release()
	for {
		msgs, n, done := c.take(s, rd)
		if len(msgs) > 0 {
			err := h.writeEvents(w, rc, msgs)
			c.written(n)
			if err != nil {
				h.log.Info("sse write failed; closing the stream", "conn", c.info.ID, "session", sid, "err", err)
				return
			}
			continue
		}
		if done {
			return
		}
		select {
		case <-rd.wake:
		case <-rd.kill:
			return
		case <-r.Context().Done():
			return
		case <-h.beat.next():
			_ = rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
			if _, err := w.Write(sseKeepAlive); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// writeEvents writes one SSE event per message and flushes once. A reader
// that cannot take them within WriteTimeout fails the write.
func (h *Handler) writeEvents(w http.ResponseWriter, rc *http.ResponseController, msgs [][]byte) error {
	_ = rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
	for _, m := range msgs {
		if _, err := w.Write(sseData); err != nil {
			return err
		}
		if _, err := w.Write(m); err != nil {
			return err
		}
		if _, err := w.Write(sseEnd); err != nil {
			return err
		}
	}
	return rc.Flush()
}
