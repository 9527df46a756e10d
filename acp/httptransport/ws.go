package httptransport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

func isWebSocketUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "websocket") {
				return true
			}
		}
	}
	return false
}

// serveWebSocket opens a connection on a WebSocket: one JSON-RPC message
// per text frame each way, the first one an initialize request.
func (h *Handler) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	c, err := h.newConn(r, TransportWebSocket)
	if err != nil {
		refuseConn(w, err)
		return
	}
	defer h.wg.Done()
	c.ws = true
	h.setConnHeaders(w, r, c)
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// Origin policy belongs to the server in front, which checks it on
		// every request; a second, different check here would refuse
		// origins the operator allowed.
		InsecureSkipVerify: true,
	})
	if err != nil {
		// Accept has answered (426, 400, ...).
		c.end("websocket upgrade failed")
		c.finishUnstarted()
		return
	}
	ws.SetReadLimit(h.opts.MaxMessageBytes)
	h.serveSocket(c, ws)
}

// finishUnstarted releases a connection whose Serve never ran.
func (c *conn) finishUnstarted() {
	c.mu.Lock()
	c.finished = true
	c.mu.Unlock()
	close(c.done)
	c.h.wg.Done()
}

func (h *Handler) serveSocket(c *conn, ws *websocket.Conn) {
	defer ws.CloseNow()
	ctx := c.ctx

	// The first message must be initialize; anything else closes the
	// socket with 1002 before an agent is started. Binary frames are
	// ignored throughout, as the RFD says.
	firstCtx, cancelFirst := context.WithTimeout(ctx, h.opts.IdleTimeout)
	var first []byte
	for {
		typ, b, err := ws.Read(firstCtx)
		if err != nil {
			cancelFirst()
			c.end("websocket closed before initialize")
			c.finishUnstarted()
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		first = b
		break
	}
	cancelFirst()
	line, err := compactLine(first)
	var m message
	if err == nil {
		m, err = parseMessage(line)
	}
	if err != nil || m.method != "initialize" || !m.isRequest() || len(m.id) > maxIDBytes {
		_ = ws.Close(websocket.StatusProtocolError, "first message must be an initialize request")
		c.end("websocket first message was not initialize")
		c.finishUnstarted()
		return
	}
	h.log.Info("acp connection opened", "conn", c.info.ID, "transport", TransportWebSocket, "remote", c.info.RemoteAddr)

	s, rd, _, _ := c.attach("") // a fresh connection: cannot fail
	c.start()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		code, reason := h.socketWriter(c, ws, s, rd)
		_ = ws.Close(code, reason)
	}()
	if err := c.in.send(ctx, line); err == nil {
		h.socketReader(c, ws)
	}
	c.end("websocket closed")
	c.detach(s, rd)
	<-writerDone
}

// socketReader hands each text frame to the agent until the socket fails.
func (h *Handler) socketReader(c *conn, ws *websocket.Conn) {
	// Not c.ctx: a cancelled read ctx makes coder/websocket drop the socket
	// without a close frame; when the connection ends the writer closes it
	// with the right code and this read fails then.
	ctx := context.Background()
	for {
		typ, b, err := ws.Read(ctx)
		if err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
				h.log.Warn("websocket message over the size bound", "conn", c.info.ID, "max_bytes", h.opts.MaxMessageBytes)
			}
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		line, err := compactLine(b)
		if err != nil {
			// Answer in-band, as stdio does; the socket stays up.
			c.mu.Lock()
			c.enqueueLocked("", errorBody(codeParseError, "invalid JSON"))
			c.mu.Unlock()
			continue
		}
		if m, err := parseMessage(line); err == nil && len(m.id) > maxIDBytes {
			_ = ws.Close(websocket.StatusPolicyViolation, fmt.Sprintf("id exceeds %d bytes", maxIDBytes))
			return
		}
		// Batches and non-objects are answered by acp.Conn itself.
		if c.in.send(ctx, line) != nil {
			return
		}
	}
}

// socketWriter sends the connection's output as text frames and pings on
// the keepalive interval. It returns the close code for the socket.
func (h *Handler) socketWriter(c *conn, ws *websocket.Conn, s *stream, rd *reader) (websocket.StatusCode, string) {
	tick := time.NewTicker(h.opts.KeepAlive)
	defer tick.Stop()
	for {
		msgs, n, done := c.take(s, rd)
		for _, m := range msgs {
			wctx, cancel := context.WithTimeout(context.Background(), h.opts.WriteTimeout)
			err := ws.Write(wctx, websocket.MessageText, m)
			cancel()
			if err != nil {
				c.written(n)
				c.end("websocket write failed")
				return websocket.StatusPolicyViolation, "client did not read"
			}
		}
		c.written(n)
		if len(msgs) > 0 {
			continue
		}
		if done {
			return h.closeCode()
		}
		select {
		case <-rd.wake:
		case <-rd.kill:
			return websocket.StatusPolicyViolation, "client did not keep up with the output"
		case <-tick.C:
			pctx, cancel := context.WithTimeout(context.Background(), h.opts.WriteTimeout)
			err := ws.Ping(pctx)
			cancel()
			if err != nil {
				c.end("websocket ping failed")
				return websocket.StatusPolicyViolation, "no pong"
			}
		}
	}
}

func (h *Handler) closeCode() (websocket.StatusCode, string) {
	h.mu.Lock()
	closing := h.closing
	h.mu.Unlock()
	if closing {
		return websocket.StatusGoingAway, "server shutting down"
	}
	return websocket.StatusNormalClosure, ""
}
