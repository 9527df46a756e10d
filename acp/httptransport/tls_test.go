package httptransport_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/httptransport"
)

// newTLS1Harness serves over TLS speaking HTTP/1.1 only, as the SDK's
// Node client does over https: every stream is a TLS connection of its
// own.
func newTLS1Harness(t *testing.T, opts httptransport.Options) *harness {
	hs := newHarness(t, opts, false)
	hs.srv.Close()
	hs.srv = httptest.NewUnstartedServer(hs.h)
	hs.srv.StartTLS() // EnableHTTP2 unset
	hs.client = hs.srv.Client()
	return hs
}

// tlsStream is a session stream on a TLS 1.3 connection of its own, with
// nothing of Go's HTTP client around it.
type tlsStream struct {
	t   *testing.T
	tc  *tls.Conn
	raw *heldConn
	br  *bufio.Reader
}

// heldConn holds back what is written while hold is set, to send it in one
// piece: records that reach the server together are read together.
type heldConn struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	buf  []byte
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *heldConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = false
	// tls.Conn.CloseWrite leaves an expired write deadline behind.
	if err := c.Conn.SetWriteDeadline(time.Time{}); err != nil {
		return err
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = nil
	return err
}

// dialTLS makes the TLS 1.3 connection of a stream.
func dialTLS(t *testing.T, hs *harness) *tlsStream {
	t.Helper()
	nc, err := net.Dial("tcp", hs.srv.Listener.Addr().String())
	require.NoError(t, err)
	raw := &heldConn{Conn: nc}
	cfg := hs.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "127.0.0.1"
	cfg.MinVersion = tls.VersionTLS13
	cfg.NextProtos = []string{"http/1.1"}
	tc := tls.Client(raw, cfg)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, tc.Handshake())
	return &tlsStream{t: t, tc: tc, raw: raw, br: bufio.NewReader(tc)}
}

// get sends the stream's GET (one record) without reading the response.
func (s *tlsStream) get(conn, sid string) {
	_, err := s.tc.Write(fmt.Appendf(nil, "GET /acp HTTP/1.1\r\nHost: acpd\r\nAccept: text/event-stream\r\n%s: %s\r\n%s: %s\r\n\r\n",
		httptransport.HeaderConnectionID, conn, httptransport.HeaderSessionID, sid))
	require.NoError(s.t, err)
}

func (s *tlsStream) headers() {
	s.t.Helper()
	require.NoError(s.t, s.tc.SetReadDeadline(time.Now().Add(wait)))
	resp, err := http.ReadResponse(s.br, nil)
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, resp.StatusCode)
}

// tlsGET opens a session stream over TLS and reads its response headers.
func tlsGET(t *testing.T, hs *harness, conn, sid string) *tlsStream {
	s := dialTLS(t, hs)
	s.get(conn, sid)
	s.headers()
	return s
}

// send writes raw bytes under the TLS connection.
func (s *tlsStream) send(b []byte) {
	s.t.Helper()
	_, err := s.raw.Conn.Write(b)
	require.NoError(s.t, err)
}

// held reports whether the session's stream is still held by its reader:
// a second one is refused.
func held(hs *harness, conn, sid string) bool {
	s, status := hs.tryOpenSSE(conn, sid)
	if s != nil {
		s.resp.Body.Close()
	}
	require.Contains(hs.t, []int{http.StatusOK, http.StatusConflict}, status)
	return status == http.StatusConflict
}

// letGo waits for the session's stream to be let go of.
func letGo(t *testing.T, hs *harness, conn, sid string) {
	t.Helper()
	eventually(t, "the stream of "+sid+" was not let go of", func() bool { return !held(hs, conn, sid) })
}

// noKeepAlive: no keepalive comes within a test, so a close is seen by the
// watcher alone, never by a failed keepalive write.
const noKeepAlive = time.Hour

// TestTLSStream_ClientEnds: every way a TLS stream's client can end it lets
// go of the stream, well before any keepalive would have found out: a
// close_notify alone (the TCP connection stays open), the end of the TCP
// connection without one, both, a reset, bytes that are no TLS record, and
// data, which a client has no reason to send on an event stream.
func TestTLSStream_ClientEnds(t *testing.T) {
	ends := map[string]func(t *testing.T, s *tlsStream){
		"close_notify": func(t *testing.T, s *tlsStream) { require.NoError(t, s.tc.CloseWrite()) },
		"fin":          func(t *testing.T, s *tlsStream) { require.NoError(t, s.raw.Conn.(*net.TCPConn).CloseWrite()) },
		"close":        func(t *testing.T, s *tlsStream) { require.NoError(t, s.tc.Close()) },
		"reset": func(t *testing.T, s *tlsStream) {
			require.NoError(t, s.raw.Conn.(*net.TCPConn).SetLinger(0))
			require.NoError(t, s.raw.Conn.Close())
		},
		"data": func(t *testing.T, s *tlsStream) {
			_, err := s.tc.Write([]byte("x"))
			require.NoError(t, err)
		},
		"not_tls": func(t *testing.T, s *tlsStream) { s.send([]byte("GET / HTTP/1.1\r\n\r\n")) },
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			hs := newTLS1Harness(t, httptransport.Options{KeepAlive: noKeepAlive})
			conn := hs.initialize()
			s := tlsGET(t, hs, conn, name)
			require.True(t, held(hs, conn, name))
			end(t, s)
			letGo(t, hs, conn, name)
		})
	}
}

// TestTLSStream_BufferedAtHandOver: what the client sent right behind its
// GET may be read before the stream is taken over, into net/http's reader
// or crypto/tls's buffers: a close_notify there ends the stream, and so
// does data.
func TestTLSStream_BufferedAtHandOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  int
		close bool
	}{
		{name: "data_and_close_notify", data: 3, close: true},
		{name: "much_data_and_close_notify", data: 20 << 10, close: true},
		{name: "close_notify", close: true},
		{name: "data", data: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newTLS1Harness(t, httptransport.Options{KeepAlive: noKeepAlive})
			conn := hs.initialize()
			s := dialTLS(t, hs)
			s.raw.hold = true
			s.get(conn, tc.name)
			if tc.data > 0 {
				_, err := s.tc.Write(bytes.Repeat([]byte("x"), tc.data))
				require.NoError(t, err)
			}
			if tc.close {
				require.NoError(t, s.tc.CloseWrite())
			}
			require.NoError(t, s.raw.release())
			s.headers()
			letGo(t, hs, conn, tc.name)
		})
	}
}

// TestTLSStream_ServerEnds: the server ending its streams (Shutdown) ends
// them for the client with the body's last chunk and a close_notify.
func TestTLSStream_ServerEnds(t *testing.T) {
	hs := newTLS1Harness(t, httptransport.Options{KeepAlive: noKeepAlive})
	conn := hs.initialize()
	var streams []*tlsStream
	for i := range 5 {
		streams = append(streams, tlsGET(t, hs, conn, fmt.Sprint("s", i)))
	}
	done := make(chan error, 1)
	go func() { done <- hs.h.Shutdown(t.Context()) }()
	for _, s := range streams {
		require.NoError(t, s.tc.SetReadDeadline(time.Now().Add(wait)))
		rest, err := io.ReadAll(s.br)
		require.NoError(t, err)
		require.Equal(t, "0\r\n\r\n", string(rest))
	}
	require.NoError(t, <-done)
}
