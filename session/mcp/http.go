package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// closeDeleteTimeout bounds the DELETE that ends an HTTP session.
const closeDeleteTimeout = 5 * time.Second

// httpTransport is MCP's streamable HTTP transport as a client: every
// message is a POST to the one endpoint, answered with a JSON body or an
// SSE stream that carries the answer (and whatever the server sends first).
// acpd opens no standalone GET stream: it needs nothing a server would push
// there.
type httpTransport struct {
	url    string
	client *http.Client
	rpc    *rpc

	// life is cancelled by close: requests in flight end with it.
	life   context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	sessionID string
	version   string // the protocol version header, set after initialize
	lost      bool   // the server answered 404 for the session
}

func newHTTPTransport(url string, client *http.Client, c *rpc) *httpTransport {
	life, cancel := context.WithCancel(context.Background())
	return &httpTransport{url: url, client: client, rpc: c, life: life, cancel: cancel}
}

func (t *httpTransport) initialized(version string) {
	t.mu.Lock()
	t.version = version
	t.mu.Unlock()
}

// headers adds the session id and protocol version once known.
func (t *httpTransport) headers(req *http.Request) (sessionID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", t.sessionID)
	}
	if t.version != "" {
		req.Header.Set("MCP-Protocol-Version", t.version)
	}
	return t.sessionID
}

func (t *httpTransport) send(ctx context.Context, data []byte, id int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.life, cancel)()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	sent := t.headers(req)
	resp, err := t.client.Do(req)
	if err != nil {
		if t.life.Err() != nil {
			return errClosed
		}
		return fmt.Errorf("POST %s: %w", t.url, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if err := t.checkStatus(resp, sent); err != nil {
		return err
	}
	if got := resp.Header.Get("Mcp-Session-Id"); got != "" {
		t.mu.Lock()
		switch t.sessionID {
		case "":
			t.sessionID = got
		case got:
		default:
			t.mu.Unlock()
			return fmt.Errorf("the server changed the session id from %q to %q", t.sessionID, got)
		}
		t.mu.Unlock()
	}
	if id == 0 {
		// A notification or a reply: 202 with no body is the answer.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMessage))
		return nil
	}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ctype {
	case "application/json":
		return t.readJSON(resp.Body, id)
	case "text/event-stream":
		return t.readEvents(ctx, resp.Body, id)
	default:
		return fmt.Errorf("the server answered with content type %q, want application/json or text/event-stream", resp.Header.Get("Content-Type"))
	}
}

// checkStatus maps an HTTP failure as the SDK did: a JSON-RPC error in the
// body is the answer; 404 for a known session means the server lost it (the
// connection is over and the server is restarted); 429 and 5xx are
// failures of this request only; any other status ends the connection.
func (t *httpTransport) checkStatus(resp *http.Response, sessionID string) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if m, err := decodeMessage(body); err == nil && m.Error != nil {
		return m.Error
	}
	status := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	switch {
	case resp.StatusCode == http.StatusNotFound && sessionID != "":
		t.mu.Lock()
		t.lost = true
		t.mu.Unlock()
		err := fmt.Errorf("%w: the server no longer knows the session (%s)", errConnClosed, status)
		t.rpc.fail(err)
		return err
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("the server answered %s", status)
	default:
		err := fmt.Errorf("%w: the server answered %s", errConnClosed, status)
		t.rpc.fail(err)
		return err
	}
}

// readJSON reads the answer as a single JSON message (MCP has no batches
// since 2025-06-18).
func (t *httpTransport) readJSON(body io.Reader, id int64) error {
	data, err := io.ReadAll(io.LimitReader(body, maxMessage+1))
	if err != nil {
		return t.readErr(err)
	}
	if len(data) > maxMessage {
		return fmt.Errorf("the server sent a message longer than %d MiB", maxMessage>>20)
	}
	m, err := decodeMessage(data)
	if err != nil {
		return err
	}
	t.rpc.deliver(m)
	if got, _ := requestID(m.ID); m.Method != "" || got != id {
		return errors.New("the server's JSON answer is not the response to the request")
	}
	return nil
}

// readEvents reads an SSE stream until the answer to id has come, handing
// every message on it to the rpc.
func (t *httpTransport) readEvents(ctx context.Context, body io.Reader, id int64) error {
	r := bufio.NewReaderSize(body, 64<<10)
	var data []byte
	var event string
	hasData := false
	for {
		line, err := readLine(r, maxMessage)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return errors.New("the server's event stream ended before the response")
			}
			return t.readErr(err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			// A blank line dispatches the event.
			if hasData && (event == "" || event == "message") {
				m, err := decodeMessage(data)
				if err != nil {
					return err
				}
				t.rpc.deliver(m)
				if got, _ := requestID(m.ID); m.Method == "" && got == id {
					return nil
				}
			}
			data, event, hasData = data[:0], "", false
			continue
		}
		if line[0] == ':' {
			continue // a comment, often a keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
			if len(data) > maxMessage {
				return fmt.Errorf("the server sent an event longer than %d MiB", maxMessage>>20)
			}
		case "event":
			event = string(value)
		}
	}
}

func (t *httpTransport) readErr(err error) error {
	if t.life.Err() != nil {
		return errClosed
	}
	return fmt.Errorf("reading the server's answer: %w", err)
}

// close deletes the session (unless the server already lost it) and ends
// every request in flight.
func (t *httpTransport) close() error {
	defer t.cancel()
	t.mu.Lock()
	id, lost := t.sessionID, t.lost
	t.mu.Unlock()
	if id == "" || lost {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeDeleteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.url, nil)
	if err != nil {
		return err
	}
	t.headers(req)
	resp, err := t.client.Do(req)
	if err != nil {
		// The session ends with the server either way; nothing to report.
		t.rpc.log.Debug("mcp session delete failed", "err", unwrapURLError(err))
		return nil
	}
	resp.Body.Close()
	return nil
}

// unwrapURLError drops the "Post "url": " prefix net/http adds, which the
// callers already say.
func unwrapURLError(err error) error {
	if s := err.Error(); strings.Contains(s, "\": ") {
		if inner := errors.Unwrap(err); inner != nil {
			return inner
		}
	}
	return err
}
