package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
)

// maxMessage bounds one message from a server (a stdio line, a JSON body, an
// SSE event): what the official SDK allowed, so a server that worked before
// still works, and a runaway server cannot make the daemon buffer without
// end.
const maxMessage = 16 << 20

// errConnClosed marks errors of a connection that has ended: the child
// exited or broke the protocol, or the HTTP server lost the session. A call
// that fails with it is retried on a restarted server; any other error is an
// answer.
var errConnClosed = errors.New("connection closed")

// rpcError is a JSON-RPC error object: an answer from the server.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("error %d", e.Code)
	}
	return fmt.Sprintf("%s (code %d)", e.Message, e.Code)
}

// JSON-RPC codes acpd sends.
const (
	codeMethodNotFound = -32601
)

// message is any JSON-RPC 2.0 message, as read or written.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// decodeMessage parses one message; anything that is not a JSON object
// with a method or an id is a protocol violation.
func decodeMessage(data []byte) (*message, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("the server sent %s, not a JSON-RPC message", preview(data))
	}
	var m message
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("the server sent invalid JSON (%v): %s", err, preview(data))
	}
	if m.Method == "" && len(m.ID) == 0 {
		return nil, fmt.Errorf("the server sent a message with neither method nor id: %s", preview(data))
	}
	return &m, nil
}

// preview is the start of data for an error message.
func preview(data []byte) string {
	const n = 120
	if len(data) > n {
		return strconv.Quote(string(data[:n])) + "…"
	}
	return strconv.Quote(string(data))
}

// transport carries encoded messages to one server. Whatever the server
// sends comes back through the rpc it was made for (deliver, fail).
type transport interface {
	// send delivers one message. For a request (id != 0) an HTTP transport
	// also reads the server's answer before it returns; stdio answers
	// arrive through the read loop.
	send(ctx context.Context, data []byte, id int64) error
	// initialized tells the transport the negotiated protocol version.
	initialized(version string)
	// close ends the connection: a stdio child is stopped, an HTTP session
	// deleted. It returns the child's exit status, if any.
	close() error
}

// rpc is one JSON-RPC connection to a server: it numbers requests, routes
// answers to their callers and answers the server's own requests.
type rpc struct {
	t   transport
	log *slog.Logger

	mu      sync.Mutex
	next    int64
	pending map[int64]chan *message

	done      chan struct{} // closed when the connection ends
	doneOnce  sync.Once
	err       error // why it ended; read after done is closed
	closeOnce sync.Once
	closeErr  error
}

func newRPC(log *slog.Logger) *rpc {
	return &rpc{log: log, pending: map[int64]chan *message{}, done: make(chan struct{})}
}

// closedError is why a connection ended; it reads as the cause alone
// ("exit status 3") and matches errConnClosed.
type closedError struct{ cause error }

func (e *closedError) Error() string   { return e.cause.Error() }
func (e *closedError) Unwrap() []error { return []error{errConnClosed, e.cause} }

// fail ends the connection with err; later calls keep the first reason.
func (c *rpc) fail(err error) {
	c.doneOnce.Do(func() {
		if !errors.Is(err, errConnClosed) {
			err = &closedError{cause: err}
		}
		c.err = err
		close(c.done)
	})
}

// wait blocks until the connection ends and says why.
func (c *rpc) wait() error {
	<-c.done
	return c.err
}

// close ends the connection from our side and stops the transport.
func (c *rpc) close() error {
	c.closeOnce.Do(func() {
		c.fail(errClosed)
		c.closeErr = c.t.close()
	})
	return c.closeErr
}

// call sends a request and decodes its result into out.
func (c *rpc) call(ctx context.Context, method string, params, out any) error {
	c.mu.Lock()
	c.next++
	id := c.next
	ch := make(chan *message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	data, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", id, method, params})
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case <-c.done:
		return c.err
	default:
	}
	if err := c.t.send(ctx, data, id); err != nil {
		if ctx.Err() != nil {
			c.cancelled(id)
			return ctx.Err()
		}
		return err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return m.Error
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(m.Result, out); err != nil {
			return fmt.Errorf("%s: the server's result does not decode: %v", method, err)
		}
		return nil
	case <-ctx.Done():
		c.cancelled(id)
		return ctx.Err()
	case <-c.done:
		return c.err
	}
}

// cancelled tells the server that the caller gave up on request id, as MCP
// asks, without waiting: the caller has already returned.
func (c *rpc) cancelled(id int64) {
	select {
	case <-c.done:
		return
	default:
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), exitReportWait)
		defer cancel()
		err := c.notify(ctx, "notifications/cancelled", map[string]any{"requestId": id, "reason": "the call was cancelled"})
		if err != nil {
			c.log.Debug("mcp cancel notification not sent", "err", err)
		}
	}()
}

// notify sends a notification.
func (c *rpc) notify(ctx context.Context, method string, params any) error {
	data, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params})
	if err != nil {
		return err
	}
	return c.t.send(ctx, data, 0)
}

// deliver routes one message from the server: an answer to its caller, a
// request to its handler; notifications need nothing from acpd (a changed
// tool list is read again only when the server restarts, as before).
func (c *rpc) deliver(m *message) {
	switch {
	case m.Method != "" && len(m.ID) > 0:
		go c.answer(m)
	case m.Method != "":
		c.log.Debug("mcp notification", "method", m.Method)
	default:
		id, ok := requestID(m.ID)
		c.mu.Lock()
		ch := c.pending[id]
		c.mu.Unlock()
		if !ok || ch == nil {
			c.log.Debug("mcp answer to no pending request", "id", string(m.ID))
			return
		}
		select {
		case ch <- m:
		default: // a second answer to the same id
		}
	}
}

// requestID reads back an id acpd issued (a number; some servers echo it
// as a string).
func requestID(raw json.RawMessage) (int64, bool) {
	s := string(bytes.Trim(raw, `"`))
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// answer replies to a request from the server. acpd offers no sampling,
// elicitation or roots to MCP servers: ping is answered, roots/list gets an
// empty list (acpd advertises the roots capability, as before), anything
// else is -32601.
func (c *rpc) answer(m *message) {
	reply := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *rpcError       `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: m.ID}
	switch m.Method {
	case "ping":
		reply.Result = struct{}{}
	case "roots/list":
		reply.Result = map[string]any{"roots": []any{}}
	default:
		reply.Error = &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q is not supported by this client", m.Method)}
	}
	data, err := json.Marshal(reply)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultConnectTimeout)
	defer cancel()
	if err := c.t.send(ctx, data, 0); err != nil {
		c.log.Debug("mcp reply not sent", "method", m.Method, "err", err)
	}
}
