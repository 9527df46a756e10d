package httptransport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testConn is a connection whose agent reads nothing and waits for the end;
// the tests write its output directly.
func testConn(t testing.TB, opts Options) (*Handler, *conn, io.Writer) {
	t.Helper()
	opts.Serve = func(ctx context.Context, _ ConnInfo, _ io.Reader, _ io.Writer) error {
		<-ctx.Done()
		return nil
	}
	h := NewHandler(opts)
	c, err := h.newConn(httptest.NewRequest(http.MethodPost, "/acp", nil), TransportHTTP)
	require.NoError(t, err)
	c.start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, h.Shutdown(ctx))
	})
	return h, c, (*connWriter)(c)
}

func update(sid, text string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"text":"` + text + `"}}}` + "\n"
}

func queued(c *conn, key string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	if s := c.streams[key]; s != nil {
		for _, m := range s.q {
			out = append(out, string(m))
		}
	}
	return out
}

// TestWriteSplitsAndRoutes: lines split across writes and several lines in
// one write are reassembled and routed by sessionId and reply id.
func TestWriteSplitsAndRoutes(t *testing.T) {
	_, c, w := testConn(t, Options{})
	c.mu.Lock()
	c.pending[`5`] = pending{session: "a", method: "session/prompt"}
	c.pending[`6`] = pending{session: "a", method: "session/load"}
	c.mu.Unlock()
	u := update("a", "x")
	_, err := w.Write([]byte(u[:20]))
	require.NoError(t, err)
	_, err = w.Write([]byte(u[20:] + `{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}` + "\r\n" +
		`{"jsonrpc":"2.0","id":6,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"b"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"acpd-out-1","method":"fs/read_text_file","params":{"sessionId":"b","path":"/x"}}` + "\n" + `not json` + "\n"))
	require.NoError(t, err)
	require.Equal(t, []string{strings.TrimSpace(u), `{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}`}, queued(c, "a"))
	require.Equal(t, []string{`{"jsonrpc":"2.0","id":6,"result":{}}`, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"b"}}`, `not json`}, queued(c, ""))
	require.Equal(t, []string{`{"jsonrpc":"2.0","id":"acpd-out-1","method":"fs/read_text_file","params":{"sessionId":"b","path":"/x"}}`}, queued(c, "b"))
	require.True(t, c.isAttached("a"), "a successful load attaches")
	require.True(t, c.isAttached("b"), "a result.sessionId attaches")
}

// TestSlowReaderClosed: a reader that does not take its queue past the
// stream bound loses its stream; memory stays bounded.
func TestSlowReaderClosed(t *testing.T) {
	h, c, w := testConn(t, Options{MaxStreamBufferBytes: 200})
	s, rd, status, _ := c.attach("a")
	require.Zero(t, status)
	killed := false
	for i := 0; i < 10 && !killed; i++ {
		_, err := w.Write([]byte(update("a", strings.Repeat("y", 60+i))))
		require.NoError(t, err)
		select {
		case <-rd.kill:
			killed = true
		default:
		}
	}
	require.True(t, killed, "slow reader not closed")
	_, _, done := c.take(s, rd)
	require.True(t, done)
	c.mu.Lock()
	require.LessOrEqual(t, c.buffered, int64(200))
	c.mu.Unlock()
	// The client knows (its stream ended): a new GET is accepted.
	_, _, status, _ = c.attach("a")
	require.Zero(t, status)
	require.Equal(t, 1, h.Connections())
}

// TestConnStreamOverflowEndsConnection: losing connection-stream messages
// (replies) ends the connection.
func TestConnStreamOverflowEndsConnection(t *testing.T) {
	h, c, w := testConn(t, Options{MaxConnBufferBytes: 300})
	for i := range 20 {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + strings.Repeat("1", i+1) + `,"result":{}}` + "\n"))
	}
	<-c.done
	require.Equal(t, 0, h.Connections())
}

// TestHeldSessionsBounded: output for more reader-less sessions than the
// bound is dropped and the late GET answered 409 once.
func TestHeldSessionsBounded(t *testing.T) {
	_, c, w := testConn(t, Options{MaxHeldSessions: 2})
	for _, sid := range []string{"a", "b", "c"} {
		_, _ = w.Write([]byte(update(sid, "x")))
	}
	require.Len(t, queued(c, "a"), 1)
	require.Len(t, queued(c, "c"), 0)
	_, _, status, _ := c.attach("c")
	require.Equal(t, http.StatusConflict, status)
	_, _, status, _ = c.attach("c")
	require.Zero(t, status)
}

// TestMaxStreams bounds readers per connection.
func TestMaxStreams(t *testing.T) {
	_, c, _ := testConn(t, Options{MaxStreams: 2})
	_, _, st, _ := c.attach("")
	require.Zero(t, st)
	_, _, st, _ = c.attach("a")
	require.Zero(t, st)
	_, _, st, _ = c.attach("b")
	require.Equal(t, http.StatusTooManyRequests, st)
}

// TestWebSocketWithoutHijack: an upgrade on a ResponseWriter that cannot
// hijack (HTTP/2) is answered, never panics, and leaves no connection.
func TestWebSocketWithoutHijack(t *testing.T) {
	h := NewHandler(Options{Serve: func(context.Context, ConnInfo, io.Reader, io.Writer) error { return nil }})
	r := httptest.NewRequest(http.MethodGet, "/acp", nil)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.GreaterOrEqual(t, rec.Code, 400)
	require.Equal(t, 0, h.Connections())
}

// TestConnectionIDs are distinct 128-bit hex strings.
func TestConnectionIDs(t *testing.T) {
	h := NewHandler(Options{Serve: func(context.Context, ConnInfo, io.Reader, io.Writer) error { return nil }})
	seen := map[string]bool{}
	for range 100 {
		c, err := h.newConn(httptest.NewRequest(http.MethodPost, "/acp", nil), TransportHTTP)
		require.NoError(t, err)
		require.Regexp(t, `^[0-9a-f]{32}$`, c.info.ID)
		require.False(t, seen[c.info.ID])
		seen[c.info.ID] = true
		c.idle.Stop()
	}
}
