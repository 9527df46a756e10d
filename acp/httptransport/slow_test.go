package httptransport_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acpd/acpd/acp/httptransport"
	"github.com/stretchr/testify/require"
)

// smallBufListener shrinks the kernel send buffer of every accepted
// connection, so a client that stops reading stalls the server's writes
// after a few KiB instead of megabytes.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestStalledReaderClosed: a session stream whose client stops reading
// while the agent floods it is closed (its response ends), the queue stays
// within its bound, and the connection and its other streams go on.
func TestStalledReaderClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts httptransport.Options
	}{
		{"queue bound", httptransport.Options{MaxStreamBufferBytes: 16 << 10}},
		{"write timeout", httptransport.Options{WriteTimeout: 200 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, tc.opts, false)
			hs.srv.Close()
			hs.srv = httptest.NewUnstartedServer(hs.h)
			hs.srv.Listener = smallBufListener{hs.srv.Listener}
			hs.srv.Start()
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetReadBuffer(4096)
				}
				return c, err
			}}
			t.Cleanup(tr.CloseIdleConnections)
			hs.client = &http.Client{Transport: tr}

			conn := hs.initialize()
			cs := hs.openSSE(conn, "")
			hs.postOK(conn, "", newSession(1))
			sid := cs.next()["result"].(map[string]any)["sessionId"].(string)
			// Open the session stream and never read it.
			stalled := hs.do(http.MethodGet, map[string]string{"Accept": "text/event-stream",
				httptransport.HeaderConnectionID: conn, httptransport.HeaderSessionID: sid}, "")
			require.Equal(t, http.StatusOK, stalled.StatusCode)
			defer stalled.Body.Close()
			hs.postOK(conn, sid, prompt(2, sid, "flood 2000"))
			// The stream ends: a new reader for it is accepted once the old
			// one is gone (409 while it still holds the stream).
			eventually(t, "stalled stream closed", func() bool {
				s, status := hs.tryOpenSSE(conn, sid)
				if s != nil {
					s.resp.Body.Close()
				}
				return status == http.StatusOK
			})
			require.Equal(t, 1, hs.h.Connections())
			hs.postOK(conn, "", newSession(3))
			require.EqualValues(t, 3, cs.next()["id"])
		})
	}
}
