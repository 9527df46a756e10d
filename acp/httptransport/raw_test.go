package httptransport_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/httptransport"
)

// TestHTTP1Stream_ClientCloses: over HTTP/1.1 a stream is served on its
// connection taken from net/http. A client that closes its session stream
// lets go of it at once: the same session's stream opens again (no 409
// while the server still thinks the old reader is there) and carries the
// session's next messages; Shutdown then ends both streams.
func TestHTTP1Stream_ClientCloses(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[tls], func(t *testing.T) {
			if tls {
				clientCloses(t, newTLS1Harness(t, httptransport.Options{}))
			} else {
				clientCloses(t, newHarness(t, httptransport.Options{}, false))
			}
		})
	}
}

func clientCloses(t *testing.T, hs *harness) {
	conn := hs.initialize()
	cs := hs.openSSE(conn, "")
	hs.postOK(conn, "", newSession(1))
	sid := cs.next()["result"].(map[string]any)["sessionId"].(string)

	ss := hs.openSSE(conn, sid)
	require.Equal(t, 1, ss.resp.ProtoMajor)
	hs.postOK(conn, sid, prompt(2, sid, "echo first"))
	for ss.next()["id"] == nil {
	}
	require.NoError(t, ss.resp.Body.Close())
	ss.ended()

	// Well before the first keepalive (15 s), which a server that only
	// learnt of the close by writing would need.
	var again *sse
	for deadline := time.Now().Add(3 * time.Second); again == nil; {
		s, status := hs.tryOpenSSE(conn, sid)
		if status == http.StatusOK {
			again = s
			break
		}
		require.Equal(t, http.StatusConflict, status)
		require.True(t, time.Now().Before(deadline), "the closed stream was not let go of")
		time.Sleep(5 * time.Millisecond)
	}
	hs.postOK(conn, sid, prompt(3, sid, "echo second"))
	m := again.next()
	for m["id"] == nil {
		m = again.next()
	}
	require.EqualValues(t, 3, m["id"])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, hs.h.Shutdown(ctx), "Shutdown waits for the taken-over streams, which end")
	cs.ended()
	again.ended()
}

// TestHTTP1Stream_ClientSends: a client has nothing to send on an event
// stream (its response said Connection: close), so bytes it sends after
// the GET end the stream like a close would, whether they came with the
// GET or later: what a client sends is never kept.
func TestHTTP1Stream_ClientSends(t *testing.T) {
	for _, withGET := range []bool{false, true} {
		t.Run(map[bool]string{false: "later", true: "with_get"}[withGET], func(t *testing.T) {
			hs := newHarness(t, httptransport.Options{KeepAlive: noKeepAlive}, false)
			conn := hs.initialize()
			nc, err := net.Dial("tcp", hs.srv.Listener.Addr().String())
			require.NoError(t, err)
			t.Cleanup(func() { nc.Close() })
			get := fmt.Sprintf("GET /acp HTTP/1.1\r\nHost: acpd\r\nAccept: text/event-stream\r\n%s: %s\r\n%s: s1\r\n\r\n",
				httptransport.HeaderConnectionID, conn, httptransport.HeaderSessionID)
			if withGET {
				get += "GET / HTTP/1.1\r\n\r\n"
			}
			_, err = io.WriteString(nc, get)
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			if !withGET {
				require.True(t, held(hs, conn, "s1"))
				_, err = io.WriteString(nc, "x")
				require.NoError(t, err)
			}
			letGo(t, hs, conn, "s1")
		})
	}
}
