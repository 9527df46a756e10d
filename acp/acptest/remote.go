package acptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// The headers of the Streamable HTTP wire.
const (
	HeaderConnectionID = "Acp-Connection-Id"
	HeaderSessionID    = "Acp-Session-Id"
)

// HTTPStream is a client of one ACP connection over Streamable HTTP, as an
// editor would speak it (the flow of the TypeScript SDK's http client):
// initialize by POST, the connection's SSE stream opened after it, a
// session's SSE stream opened when a reply names the session and before
// any message for it is posted, every other message POSTed with its
// connection and session headers, DELETE on Close.
//
// It presents the connection as newline-delimited JSON: write the
// client's lines to it and read the agent's lines from Reader — exactly
// what NewClientConn takes, so the schema-validating ClientConn runs over
// it unchanged.
type HTTPStream struct {
	url    string
	client *http.Client
	header http.Header

	ctx    context.Context
	cancel context.CancelFunc
	pr     *io.PipeReader
	pw     *io.PipeWriter
	outMu  sync.Mutex // one line at a time into pw

	mu       sync.Mutex
	connID   string
	sessions map[string]*sseOpen // by session id
	askedBy  map[string]string   // agent request id → its session id
	buf      []byte              // a partial line written so far
	err      error               // the first transport failure
	streams  sync.WaitGroup
}

// sseOpen is a session stream being opened: done closes once it answered.
type sseOpen struct {
	done chan struct{}
	err  error
}

// DialHTTP returns an HTTPStream to the /acp endpoint url; header (e.g.
// Authorization) goes on every request. client nil is http.DefaultClient.
// Nothing is sent until the first line (initialize) is written.
func DialHTTP(url string, header http.Header, client *http.Client) *HTTPStream {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	return &HTTPStream{
		url: url, client: client, header: header.Clone(),
		ctx: ctx, cancel: cancel, pr: pr, pw: pw,
		sessions: map[string]*sseOpen{}, askedBy: map[string]string{},
	}
}

// Reader yields the agent's messages, one JSON line each.
func (s *HTTPStream) Reader() io.Reader { return s.pr }

// ConnectionID is the Acp-Connection-Id initialize returned ("" before).
func (s *HTTPStream) ConnectionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connID
}

// Write takes client lines; each complete line is sent before Write
// returns, so the order of writes is the order the agent receives.
func (s *HTTPStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf = append(s.buf, p...)
	var lines [][]byte
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		if l := bytes.TrimSpace(s.buf[:i]); len(l) > 0 {
			lines = append(lines, append([]byte(nil), l...))
		}
		s.buf = s.buf[i+1:]
	}
	s.mu.Unlock()
	for _, l := range lines {
		if err := s.send(l); err != nil {
			s.fail(err)
			return 0, err
		}
	}
	return len(p), nil
}

// message is what routing needs of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string `json:"sessionId"`
	} `json:"params"`
	Result struct {
		SessionID string `json:"sessionId"`
	} `json:"result"`
}

func (s *HTTPStream) send(line []byte) error {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return fmt.Errorf("client line is not a JSON-RPC message: %w", err)
	}
	if s.ConnectionID() == "" {
		return s.initialize(line, m)
	}
	sid := m.Params.SessionID
	if m.Method == "" && len(m.ID) > 0 { // an answer to the agent's request
		s.mu.Lock()
		sid = s.askedBy[string(m.ID)]
		delete(s.askedBy, string(m.ID))
		s.mu.Unlock()
	}
	if sid != "" {
		if err := s.openSession(sid); err != nil {
			var c *conflict
			if errors.As(err, &c) && m.Method != "" && len(m.ID) > 0 {
				// As the SDK's client does: a 409 fails that session's
				// request, not the connection, and the next message for
				// the session opens its stream again.
				s.mu.Lock()
				delete(s.sessions, sid)
				s.mu.Unlock()
				return s.deliver(c.answer(m.ID), "")
			}
			return err
		}
	}
	req, err := s.request(http.MethodPost, bytes.NewReader(line))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if sid != "" {
		req.Header.Set(HeaderSessionID, sid)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST %s: %s: %s", m.Method, resp.Status, body)
	}
	return nil
}

func (s *HTTPStream) request(method string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(s.ctx, method, s.url, body)
	if err != nil {
		return nil, err
	}
	for k, v := range s.header {
		req.Header[k] = v
	}
	if id := s.ConnectionID(); id != "" {
		req.Header.Set(HeaderConnectionID, id)
	}
	return req, nil
}

func (s *HTTPStream) initialize(line []byte, m message) error {
	if m.Method != "initialize" {
		return fmt.Errorf("the first message must be initialize, not %q", m.Method)
	}
	req, err := s.request(http.MethodPost, bytes.NewReader(line))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST initialize: %s: %s", resp.Status, body)
	}
	id := resp.Header.Get(HeaderConnectionID)
	if id == "" {
		return errors.New("initialize answered without " + HeaderConnectionID)
	}
	s.mu.Lock()
	s.connID = id
	s.mu.Unlock()
	if err := s.deliver(bytes.TrimSpace(body), ""); err != nil {
		return err
	}
	ready := make(chan error, 1)
	s.stream("", ready)
	return <-ready
}

// openSession opens sid's stream unless it is open or opening, and waits
// until the server answered its GET.
func (s *HTTPStream) openSession(sid string) error {
	s.mu.Lock()
	o, ok := s.sessions[sid]
	if !ok {
		o = &sseOpen{done: make(chan struct{})}
		s.sessions[sid] = o
		ready := make(chan error, 1)
		go func() {
			o.err = <-ready
			close(o.done)
		}()
		s.mu.Unlock()
		s.stream(sid, ready)
	} else {
		s.mu.Unlock()
	}
	<-o.done
	return o.err
}

// stream GETs the connection's (sid "") or a session's SSE stream and
// delivers its events until it ends; ready gets the GET's outcome.
func (s *HTTPStream) stream(sid string, ready chan<- error) {
	s.streams.Add(1)
	go func() {
		defer s.streams.Done()
		req, err := s.request(http.MethodGet, nil)
		if err != nil {
			ready <- err
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		if sid != "" {
			req.Header.Set(HeaderSessionID, sid)
		}
		resp, err := s.client.Do(req)
		if err != nil {
			ready <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
			err := fmt.Errorf("GET stream %q: %s: %s", sid, resp.Status, body)
			if resp.StatusCode == http.StatusConflict && sid != "" {
				err = &conflict{err: err, body: string(body)}
			}
			ready <- err
			return
		}
		ready <- nil
		err = readSSE(resp.Body, func(data []byte) error { return s.deliver(data, sid) })
		if s.ctx.Err() == nil && sid == "" {
			// The connection's stream ending is the connection ending.
			s.fail(fmt.Errorf("connection stream ended: %v", err))
		}
	}()
}

// readSSE calls f with the data of each event of r (data: lines joined by
// newlines; comments and other fields ignored).
func readSSE(r io.Reader, f func([]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if len(data) > 0 {
				if err := f(data); err != nil {
					return err
				}
				data = nil
			}
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// deliver hands one agent message to the reader, noting which session an
// agent request came for and opening the stream of a session a reply
// names.
func (s *HTTPStream) deliver(data []byte, sid string) error {
	var m message
	opens := ""
	if err := json.Unmarshal(data, &m); err == nil {
		if m.Method != "" && len(m.ID) > 0 {
			asked := m.Params.SessionID
			if asked == "" {
				asked = sid
			}
			s.mu.Lock()
			s.askedBy[string(m.ID)] = asked
			s.mu.Unlock()
		}
		if m.Method == "" && m.Result.SessionID != "" {
			opens = m.Result.SessionID
		}
	}
	s.outMu.Lock()
	_, err := s.pw.Write(append(append([]byte(nil), data...), '\n'))
	s.outMu.Unlock()
	if opens != "" {
		// As the SDK does: a session's updates may follow its
		// session/new reply at once, so its stream opens now — after the
		// reply is handed on, or an update read on the new stream could
		// overtake it when this goroutine is descheduled between the
		// two. A refusal other than 409 (which the session's next request
		// meets and answers) ends the stream: the session's messages can
		// never arrive, and a reader waiting for them must learn why
		// instead of waiting forever.
		go func() {
			err := s.openSession(opens)
			var c *conflict
			if err != nil && !errors.As(err, &c) && s.ctx.Err() == nil {
				s.fail(fmt.Errorf("session %s: %w", opens, err))
			}
		}()
	}
	return err
}

func (s *HTTPStream) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.pw.CloseWithError(err)
}

// Err is the first transport failure, if any.
func (s *HTTPStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the connection with DELETE (when it was initialized) and
// closes every stream.
func (s *HTTPStream) Close() error {
	var err error
	if s.ConnectionID() != "" {
		var req *http.Request
		if req, err = s.request(http.MethodDelete, nil); err == nil {
			var resp *http.Response
			if resp, err = s.client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					err = fmt.Errorf("DELETE: %s", resp.Status)
				}
			}
		}
	}
	s.cancel()
	s.streams.Wait()
	s.pw.CloseWithError(io.EOF)
	if err != nil && strings.Contains(err.Error(), "context canceled") {
		err = nil
	}
	return err
}

// Drop goes away as a client whose process died or whose network failed
// would: every stream is cut, and no DELETE is sent.
func (s *HTTPStream) Drop() {
	s.cancel()
	s.streams.Wait()
	s.pw.CloseWithError(io.EOF)
}

// conflict is a 409 on a session stream: that session may not be used on
// this connection now (another connection holds it).
type conflict struct {
	err  error
	body string
}

func (c *conflict) Error() string { return c.err.Error() }

// answer is the error response the request id gets in place of the agent's.
func (c *conflict) answer(id json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": -32603, "message": c.err.Error(), "data": map[string]any{"status": http.StatusConflict, "body": c.body}}})
	return b
}
