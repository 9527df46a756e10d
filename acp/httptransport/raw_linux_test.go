package httptransport_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/httptransport"
)

// rawGET opens a session stream on a TCP connection of its own (TLS if the
// server speaks it), as the SDK's Node client does, with nothing of Go's
// HTTP client around it (no goroutine on the client side), and reads its
// response headers.
func rawGET(t *testing.T, hs *harness, conn, sid string) (net.Conn, *bufio.Reader) {
	t.Helper()
	if hs.srv.TLS != nil {
		s := tlsGET(t, hs, conn, sid)
		return s.tc, s.br
	}
	nc, err := net.Dial("tcp", hs.srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	_, err = fmt.Fprintf(nc, "GET /acp HTTP/1.1\r\nHost: acpd\r\nAccept: text/event-stream\r\n%s: %s\r\n%s: %s\r\n\r\n",
		httptransport.HeaderConnectionID, conn, httptransport.HeaderSessionID, sid)
	require.NoError(t, err)
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return nc, br
}

// TestHTTP1Stream_NoGoroutineWhenIdle: on Linux an idle HTTP/1.1 stream,
// over TCP or TLS, holds no goroutine (one watcher sees every client
// close); a client that sends on its stream has it dropped and keeps the
// stream, which still carries keepalives; a client that closes its end is
// let go of, by the watcher too; once the server has ended the others,
// the watcher holds none.
func TestHTTP1Stream_NoGoroutineWhenIdle(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[tls], func(t *testing.T) {
			// Registered first, run last: after the harness's Shutdown.
			t.Cleanup(func() {
				eventually(t, "streams left with the watcher", func() bool { return httptransport.WatchedStreams() == 0 })
			})
			opts := httptransport.Options{KeepAlive: 200 * time.Millisecond}
			if tls {
				noGoroutineWhenIdle(t, newTLS1Harness(t, opts))
			} else {
				noGoroutineWhenIdle(t, newHarness(t, opts, false))
			}
		})
	}
}

func noGoroutineWhenIdle(t *testing.T, hs *harness) {
	conn := hs.initialize()
	first, _ := rawGET(t, hs, conn, "s0") // starts the watcher, if not yet
	// settled waits for net/http's goroutine of each hijacked connection,
	// which exits just after its handler returns, to be gone.
	settled := func(limit int) int {
		n := runtime.NumGoroutine()
		for deadline := time.Now().Add(wait); n > limit && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
			n = runtime.NumGoroutine()
		}
		return n
	}
	before := runtime.NumGoroutine()
	for {
		time.Sleep(20 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n >= before {
			break
		}
		before = n
	}
	const streams = 40
	for i := 1; i <= streams; i++ {
		rawGET(t, hs, conn, fmt.Sprintf("s%d", i))
	}
	// A keepalive beat may have a few workers running at the moment.
	after := settled(before + 4)
	require.LessOrEqual(t, after, before+4, "goroutines with %d more idle streams", streams)

	// Bytes from the client are dropped; the stream stays and is written.
	_, err := first.Write([]byte(strings.Repeat("unexpected\n", 1000)))
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	_, status := hs.tryOpenSSE(conn, "s0")
	require.Equal(t, http.StatusConflict, status, "the stream keeps its reader")

	nc, br := rawGET(t, hs, conn, "live")
	_, err = nc.Write([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(wait)))
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, ": keepalive") {
			break
		}
	}

	watched := httptransport.WatchedStreams()
	require.NoError(t, first.Close())
	eventually(t, "the closed stream let go of", func() bool {
		s, status := hs.tryOpenSSE(conn, "s0")
		if s != nil {
			s.resp.Body.Close()
		}
		return status == http.StatusOK
	})
	// The check's own stream (closed as it is found open) comes and goes.
	eventually(t, "the watcher let go of the closed stream", func() bool { return httptransport.WatchedStreams() == watched-1 })
}
