package acptest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// WSStream is a client of one ACP connection over WebSocket: one JSON-RPC
// message per text frame each way. Like HTTPStream it presents the
// connection as newline-delimited JSON (write client lines, read agent
// lines from Reader), for NewClientConn.
type WSStream struct {
	conn   *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	pr     *io.PipeReader
	pw     *io.PipeWriter
	done   chan struct{}

	mu  sync.Mutex
	buf []byte
}

// DialWS opens a WebSocket to the /acp endpoint url (http:// or ws://);
// header (e.g. Authorization) goes on the upgrade request. It returns the
// upgrade's response too (its Acp-Connection-Id, its cookies).
func DialWS(ctx context.Context, url string, header http.Header) (*WSStream, *http.Response, error) {
	return DialWSClient(ctx, url, header, nil)
}

// DialWSClient is DialWS through hc (nil: the default client), e.g. one
// that trusts a test certificate for a wss:// daemon.
func DialWSClient(ctx context.Context, url string, header http.Header, hc *http.Client) (*WSStream, *http.Response, error) {
	url = strings.Replace(url, "http", "ws", 1)
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header.Clone(), HTTPClient: hc})
	if err != nil {
		return nil, resp, err
	}
	// Agent messages are as large as stdio lines may be.
	conn.SetReadLimit(64 << 20)
	cctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &WSStream{conn: conn, ctx: cctx, cancel: cancel, pr: pr, pw: pw, done: make(chan struct{})}
	go s.read()
	return s, resp, nil
}

func (s *WSStream) read() {
	defer close(s.done)
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
			s.pw.CloseWithError(fmt.Errorf("websocket: %w", err))
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		if _, err := s.pw.Write(append(bytes.TrimSpace(data), '\n')); err != nil {
			return
		}
	}
}

// Reader yields the agent's messages, one JSON line each.
func (s *WSStream) Reader() io.Reader { return s.pr }

// Write takes client lines and sends each complete one as a text frame.
func (s *WSStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := bytes.TrimSpace(s.buf[:i])
		if len(line) > 0 {
			if err := s.conn.Write(s.ctx, websocket.MessageText, line); err != nil {
				return 0, err
			}
		}
		s.buf = s.buf[i+1:]
	}
}

// Close closes the socket normally, which ends the ACP connection.
func (s *WSStream) Close() error {
	err := s.conn.Close(websocket.StatusNormalClosure, "")
	s.cancel()
	<-s.done
	return err
}

// Drop cuts the socket without a close frame, as a client whose process
// died would.
func (s *WSStream) Drop() {
	_ = s.conn.CloseNow()
	s.cancel()
	<-s.done
}
