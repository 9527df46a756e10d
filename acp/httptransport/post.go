package httptransport

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"
)

// readBody reads a POST body up to the message bound. It answers the
// request itself and returns nil when the body cannot be used.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) []byte {
	max := h.opts.MaxMessageBytes
	if r.ContentLength > max {
		h.tooLarge(w)
		return nil
	}
	var b bytes.Buffer
	if r.ContentLength > 0 {
		b.Grow(int(r.ContentLength))
	}
	_, err := b.ReadFrom(http.MaxBytesReader(w, r.Body, max))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		h.tooLarge(w)
		return nil
	case err != nil:
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "reading the request body failed")
		return nil
	}
	return b.Bytes()
}

func (h *Handler) tooLarge(w http.ResponseWriter) {
	writeError(w, http.StatusRequestEntityTooLarge, codeInvalidRequest,
		fmt.Sprintf("message exceeds the maximum size of %d bytes", h.opts.MaxMessageBytes))
}

func isJSONContentType(v string) bool {
	mt, _, err := mime.ParseMediaType(v)
	return err == nil && mt == "application/json"
}

func (h *Handler) servePost(w http.ResponseWriter, r *http.Request) {
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, codeInvalidRequest, "Content-Type must be application/json")
		return
	}
	body := h.readBody(w, r)
	if body == nil {
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "the request body is empty")
		return
	}
	if body[0] == '[' {
		writeError(w, http.StatusNotImplemented, codeInvalidRequest, "batch requests are not supported")
		return
	}
	line, err := compactLine(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeParseError, "the request body is not valid JSON")
		return
	}
	m, err := parseMessage(line)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "message must be a JSON object")
		return
	}
	if len(m.id) > maxIDBytes {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, fmt.Sprintf("id exceeds %d bytes", maxIDBytes))
		return
	}
	if !validID(m.id) {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "id must be a string, an integer or null")
		return
	}
	if r.Header.Get(HeaderConnectionID) == "" {
		if m.method == "initialize" && m.isRequest() {
			h.initialize(w, r, line, m)
			return
		}
		writeError(w, http.StatusBadRequest, codeInvalidRequest, HeaderConnectionID+" header is required (only an initialize request opens a connection)")
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
	if m.hasMethod && m.sessionID != "" {
		// The RFD requires the header on session-scoped messages; one that
		// disagrees with the body would route replies to the wrong stream.
		if sid == "" {
			writeError(w, http.StatusBadRequest, codeInvalidRequest, HeaderSessionID+" header is required: params.sessionId names a session")
			return
		}
		if sid != m.sessionID {
			writeError(w, http.StatusBadRequest, codeInvalidRequest, HeaderSessionID+" header does not match params.sessionId")
			return
		}
	}
	if !c.sessionAllowed(sid) {
		writeError(w, http.StatusConflict, codeInvalidRequest, "this connection may not use that session")
		return
	}
	c.busy()
	defer c.idleDone()
	if m.isRequest() {
		c.mu.Lock()
		c.pending[m.id] = pending{session: sid, method: m.method}
		c.mu.Unlock()
	}
	if err := c.in.send(r.Context(), line); err != nil {
		if m.isRequest() {
			c.mu.Lock()
			delete(c.pending, m.id)
			c.mu.Unlock()
		}
		if errors.Is(err, errEnded) {
			writeError(w, http.StatusNotFound, codeInvalidRequest, "unknown "+HeaderConnectionID)
		}
		return // else the client went away
	}
	w.WriteHeader(http.StatusAccepted)
}

// initialize opens a connection and answers the POST with the agent's
// initialize response, taken from the agent's output before routing.
func (h *Handler) initialize(w http.ResponseWriter, r *http.Request, line []byte, m message) {
	c, err := h.newConn(r, TransportHTTP)
	if err != nil {
		refuseConn(w, err)
		return
	}
	c.mu.Lock()
	c.initKey = m.id
	c.initCh = make(chan []byte, 1)
	c.active++ // until answered
	c.mu.Unlock()
	c.start()
	defer c.idleDone()
	if err := c.in.send(r.Context(), line); err != nil {
		c.end("initialize not delivered")
		writeError(w, http.StatusServiceUnavailable, codeInternalError, "the agent did not take the initialize request")
		return
	}
	var resp []byte
	t := time.NewTimer(h.opts.WriteTimeout)
	defer t.Stop()
	select {
	case resp = <-c.initCh:
	case <-t.C:
		c.end("agent did not answer initialize")
		writeError(w, http.StatusGatewayTimeout, codeInternalError, "the agent did not answer initialize in time")
		return
	case <-c.done:
		writeError(w, http.StatusInternalServerError, codeInternalError, "the agent ended before answering initialize")
		return
	case <-r.Context().Done():
		c.end("client left during initialize")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	rm, _ := parseMessage(resp)
	if rm.isError {
		// A failed initialize opens nothing: the client may try again.
		c.end("initialize failed")
	} else {
		h.setConnHeaders(w, r, c)
		h.log.Info("acp connection opened", "conn", c.info.ID, "transport", TransportHTTP, "remote", c.info.RemoteAddr)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp)
}
