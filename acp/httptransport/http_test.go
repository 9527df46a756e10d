package httptransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acpd/acpd/acp/httptransport"
	"github.com/stretchr/testify/require"
)

// TestStreamableHTTPFlow drives the SDK client's order over HTTP/1.1 and
// HTTP/2: initialize, connection GET (opened after the first POST, as the
// SDK does not wait for it), session/new, session GET, a prompt, a
// permission request answered by a POST, the client's fs read, DELETE.
func TestStreamableHTTPFlow(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "http2"}[h2], func(t *testing.T) {
			hs := newHarness(t, httptransport.Options{}, h2)
			resp := hs.post("", "", initBody)
			resp.Body.Close()
			if h2 {
				require.Equal(t, 2, resp.ProtoMajor)
			}
			require.Equal(t, http.StatusOK, resp.StatusCode)
			conn := resp.Header.Get(httptransport.HeaderConnectionID)
			require.Regexp(t, `^[0-9a-f]{32}$`, conn)
			var cookie *http.Cookie
			for _, c := range resp.Cookies() {
				if c.Name == "acp_affinity" {
					cookie = c
				}
			}
			require.NotNil(t, cookie, "affinity cookie on the initialize response")
			require.Equal(t, conn, cookie.Value)
			require.Equal(t, 1, hs.h.Connections())

			// session/new before the connection stream exists: its reply waits.
			hs.postOK(conn, "", newSession(1))
			cs := hs.openSSE(conn, "")
			m := cs.next()
			require.EqualValues(t, 1, m["id"])
			sid := m["result"].(map[string]any)["sessionId"].(string)

			ss := hs.openSSE(conn, sid)
			hs.postOK(conn, sid, prompt(2, sid, "echo hello wire"))
			var words []string
			for {
				m := ss.next()
				if m["id"] != nil {
					require.EqualValues(t, 2, m["id"])
					require.Equal(t, "end_turn", m["result"].(map[string]any)["stopReason"])
					break
				}
				require.Equal(t, "session/update", m["method"])
				words = append(words, m["params"].(map[string]any)["update"].(map[string]any)["content"].(map[string]any)["text"].(string))
			}
			require.Equal(t, []string{"hello", "wire"}, words)

			// An agent->client request goes to the session stream; the
			// answer is a POST with both headers.
			hs.postOK(conn, sid, prompt(3, sid, "permission"))
			req := ss.next()
			require.Equal(t, "session/request_permission", req["method"])
			answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req["id"],
				"result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}}})
			hs.postOK(conn, sid, string(answer))
			upd := ss.next()
			require.Contains(t, fmt.Sprint(upd["params"]), "outcome allow")
			require.EqualValues(t, 3, ss.next()["id"])

			hs.postOK(conn, sid, prompt(4, sid, "read /etc/hostname"))
			rd := ss.next()
			require.Equal(t, "fs/read_text_file", rd["method"])
			answer, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rd["id"], "result": map[string]any{"content": "from the editor"}})
			hs.postOK(conn, sid, string(answer))
			require.Contains(t, fmt.Sprint(ss.next()["params"]), "content from the editor")
			require.EqualValues(t, 4, ss.next()["id"])

			// A second reader for a stream is refused; others are unharmed.
			_, status := hs.tryOpenSSE(conn, sid)
			require.Equal(t, http.StatusConflict, status)

			resp = hs.do(http.MethodDelete, map[string]string{httptransport.HeaderConnectionID: conn}, "")
			resp.Body.Close()
			require.Equal(t, http.StatusAccepted, resp.StatusCode)
			cs.ended()
			ss.ended()
			eventually(t, "Serve returned", func() bool { return hs.served.Load() == 1 })
			require.Equal(t, 0, hs.h.Connections())
			resp = hs.post(conn, "", `{"jsonrpc":"2.0","method":"x"}`)
			resp.Body.Close()
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
		})
	}
}

// TestStatusCodes checks every refusal the RFD and the SDK define.
func TestStatusCodes(t *testing.T) {
	hs := newHarness(t, httptransport.Options{MaxMessageBytes: 4096}, false)
	conn := hs.initialize()
	long := strings.Repeat("a", 1025)
	cases := []struct {
		name   string
		method string
		hdr    map[string]string
		body   string
		status int
		code   int // JSON-RPC code in the body; 0 = not checked
	}{
		{"post text/plain", "POST", map[string]string{"Content-Type": "text/plain"}, initBody, 415, -32600},
		{"post no content type", "POST", nil, initBody, 415, -32600},
		{"post json charset", "POST", map[string]string{"Content-Type": "application/json; charset=utf-8", httptransport.HeaderConnectionID: conn}, `{"jsonrpc":"2.0","method":"x/y"}`, 202, 0},
		{"post no conn id", "POST", map[string]string{"Content-Type": "application/json"}, newSession(1), 400, -32600},
		{"post unknown conn", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: "nope"}, newSession(1), 404, -32600},
		{"post long conn id", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: long}, newSession(1), 400, -32600},
		{"post batch", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: conn}, `[` + newSession(1) + `]`, 501, -32600},
		{"post bad json", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: conn}, `{"jsonrpc":`, 400, -32700},
		{"post not object", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: conn}, `"x"`, 400, -32600},
		{"post empty", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: conn}, ``, 400, -32600},
		{"post too large", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: conn}, `{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("y", 5000) + `"}`, 413, -32600},
		{"post long id", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: conn}, `{"jsonrpc":"2.0","id":"` + long + `","method":"x"}`, 400, -32600},
		{"post session header missing", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: conn}, prompt(5, "s1", "echo x"), 400, -32600},
		{"post session header mismatch", "POST", map[string]string{"Content-Type": "application/json", httptransport.HeaderConnectionID: conn, httptransport.HeaderSessionID: "s2"}, prompt(5, "s1", "echo x"), 400, -32600},
		{"get no accept", "GET", map[string]string{httptransport.HeaderConnectionID: conn}, "", 406, -32600},
		{"get accept json", "GET", map[string]string{"Accept": "application/json", httptransport.HeaderConnectionID: conn}, "", 406, -32600},
		{"get no conn id", "GET", map[string]string{"Accept": "text/event-stream"}, "", 400, -32600},
		{"get unknown conn", "GET", map[string]string{"Accept": "text/event-stream", httptransport.HeaderConnectionID: "nope"}, "", 404, -32600},
		{"get long session id", "GET", map[string]string{"Accept": "text/event-stream", httptransport.HeaderConnectionID: conn, httptransport.HeaderSessionID: long}, "", 400, -32600},
		{"delete no conn id", "DELETE", nil, "", 400, -32600},
		{"delete unknown", "DELETE", map[string]string{httptransport.HeaderConnectionID: "nope"}, "", 404, -32600},
		{"put", "PUT", nil, "", 405, -32600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := hs.do(tc.method, tc.hdr, tc.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode, string(b))
			if tc.code != 0 {
				var m struct {
					Error struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				require.NoError(t, json.Unmarshal(b, &m), string(b))
				require.Equal(t, tc.code, m.Error.Code)
				require.NotEmpty(t, m.Error.Message)
				if tc.status == 413 {
					require.Contains(t, m.Error.Message, "4096")
				}
			}
		})
	}
	// The connection survived every refusal.
	require.Equal(t, 1, hs.h.Connections())
}

// TestSessionStreamBeforeLoad: the SDK opens a session's stream before
// session/load of a session the connection never saw. It must be held and
// receive the replay, and the load's reply must come after the replay, on
// the same stream; a failed load is answered on the connection stream and
// ends the held stream; a load with no session stream open is answered on
// the connection stream.
func TestSessionStreamBeforeLoad(t *testing.T) {
	hs := newHarness(t, httptransport.Options{}, false)
	conn := hs.initialize()
	cs := hs.openSSE(conn, "")
	old := hs.openSSE(conn, "old")
	hs.postOK(conn, "old", `{"jsonrpc":"2.0","id":7,"method":"session/load","params":{"sessionId":"old","cwd":"/tmp","mcpServers":[]}}`)
	m := old.next()
	require.Equal(t, "session/update", m["method"])
	require.Contains(t, fmt.Sprint(m["params"]), "replayed")
	m = old.next()
	require.EqualValues(t, 7, m["id"], "the reply follows the replay")
	require.Contains(t, m, "result")

	gone := hs.openSSE(conn, "gone")
	hs.postOK(conn, "gone", `{"jsonrpc":"2.0","id":8,"method":"session/load","params":{"sessionId":"gone","cwd":"/tmp","mcpServers":[]}}`)
	m = cs.next()
	require.EqualValues(t, 8, m["id"])
	require.Contains(t, m, "error")
	gone.ended()
	// A loaded session keeps its stream.
	hs.postOK(conn, "old", prompt(9, "old", "echo again"))
	require.Contains(t, fmt.Sprint(old.next()["params"]), "again")

	// No session stream open: the reply comes where the client reads.
	conn2 := hs.initialize()
	cs2 := hs.openSSE(conn2, "")
	hs.postOK(conn2, "old", `{"jsonrpc":"2.0","id":10,"method":"session/load","params":{"sessionId":"old","cwd":"/tmp","mcpServers":[]}}`)
	m = cs2.next()
	require.EqualValues(t, 10, m["id"])
	require.Contains(t, m, "result")
}

// TestHeldSessionOverflow: output for a session nobody reads is bounded;
// past the bound it is dropped and the next GET says so with 409 (the SDK
// fails that session until it loads it again), once.
func TestHeldSessionOverflow(t *testing.T) {
	hs := newHarness(t, httptransport.Options{MaxStreamBufferBytes: 8 << 10}, false)
	conn := hs.initialize()
	cs := hs.openSSE(conn, "")
	hs.postOK(conn, "", newSession(1))
	sid := cs.next()["result"].(map[string]any)["sessionId"].(string)
	hs.postOK(conn, sid, prompt(2, sid, "flood 40"))
	eventually(t, "the flood ended", func() bool { return hs.prompts.Load() == 1 })
	_, status := hs.tryOpenSSE(conn, sid)
	require.Equal(t, http.StatusConflict, status)
	hs.openSSE(conn, sid) // told once; a fresh stream afterwards
	require.Equal(t, 1, hs.h.Connections())
}

// TestIdleTimeout: a connection with no stream and no request ends.
func TestIdleTimeout(t *testing.T) {
	hs := newHarness(t, httptransport.Options{IdleTimeout: 50 * time.Millisecond}, false)
	conn := hs.initialize()
	eventually(t, "idle connection ended", func() bool { return hs.h.Connections() == 0 && hs.served.Load() == 1 })
	resp := hs.post(conn, "", newSession(1))
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	// An open stream keeps a connection alive past the timeout.
	conn = hs.initialize()
	cs := hs.openSSE(conn, "")
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, 1, hs.h.Connections())
	hs.postOK(conn, "", newSession(1))
	require.EqualValues(t, 1, cs.next()["id"])
}

// TestDropGrace: a Streamable HTTP connection whose connection stream
// closes ends once DropGrace has passed without a new one, cancelling the
// turn it runs, long before its idle timeout; a stream opened again within
// the grace keeps it.
func TestDropGrace(t *testing.T) {
	hs := newHarness(t, httptransport.Options{DropGrace: 500 * time.Millisecond, IdleTimeout: time.Hour}, false)
	conn := hs.initialize()
	cs := hs.openSSE(conn, "")
	hs.postOK(conn, "", newSession(1))
	sid := cs.next()["result"].(map[string]any)["sessionId"].(string)
	ss := hs.openSSE(conn, sid)
	hs.postOK(conn, sid, prompt(2, sid, "permission"))
	require.Equal(t, "session/request_permission", ss.next()["method"], "the turn waits for the client")
	cs.resp.Body.Close() // the client goes away without DELETE
	eventually(t, "the dropped connection ended", func() bool { return hs.h.Connections() == 0 && hs.served.Load() == 1 })
	require.EqualValues(t, 1, hs.prompts.Load(), "its turn was ended")

	conn = hs.initialize()
	cs = hs.openSSE(conn, "")
	cs.resp.Body.Close()
	eventually(t, "the stream opened again", func() bool {
		// 409 until the server has seen the old reader go.
		_, status := hs.tryOpenSSE(conn, "")
		return status == http.StatusOK
	})
	time.Sleep(time.Second)
	require.Equal(t, 1, hs.h.Connections(), "a connection stream opened again within the grace")
	hs.postOK(conn, "", newSession(3))
}

// TestKeepAlive: an idle stream carries comment lines.
func TestKeepAlive(t *testing.T) {
	hs := newHarness(t, httptransport.Options{KeepAlive: 20 * time.Millisecond}, false)
	conn := hs.initialize()
	cs := hs.openSSE(conn, "")
	select {
	case e := <-cs.events:
		require.Equal(t, ": keepalive", e)
	case <-time.After(wait):
		t.Fatal("no keepalive")
	}
}

// TestSessionAllowed: the server's hook can refuse a session with 409.
func TestSessionAllowed(t *testing.T) {
	hs := newHarness(t, httptransport.Options{SessionAllowed: func(_ context.Context, _ httptransport.ConnInfo, sid string) bool {
		return sid != "foreign"
	}}, false)
	conn := hs.initialize()
	_, status := hs.tryOpenSSE(conn, "foreign")
	require.Equal(t, http.StatusConflict, status)
	resp := hs.post(conn, "foreign", prompt(3, "foreign", "echo x"))
	resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	hs.openSSE(conn, "mine")
}

// TestShutdown ends open streams and connections.
func TestShutdown(t *testing.T) {
	hs := newHarness(t, httptransport.Options{}, false)
	conn := hs.initialize()
	cs := hs.openSSE(conn, "")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, hs.h.Shutdown(ctx))
	cs.ended()
	require.Equal(t, 0, hs.h.Connections())
	resp := hs.post("", "", initBody)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}
