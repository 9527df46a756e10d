package httptransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/acpd/acpd/acp/httptransport"
	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

func (hs *harness) dial(t *testing.T) (*websocket.Conn, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.srv.URL, "http")+"/acp", nil)
	require.NoError(t, err)
	ws.SetReadLimit(-1)
	t.Cleanup(func() { ws.CloseNow() })
	return ws, resp
}

func wsNext(t *testing.T, ws *websocket.Conn) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	typ, b, err := ws.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), string(b))
	return m
}

func wsSend(t *testing.T, ws *websocket.Conn, typ websocket.MessageType, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, ws.Write(ctx, typ, []byte(s)))
}

// TestWebSocketFlow: initialize first, text frames each way, binary frames
// ignored, bad JSON answered in-band, close ends the ACP connection.
func TestWebSocketFlow(t *testing.T) {
	hs := newHarness(t, httptransport.Options{}, false)
	ws, resp := hs.dial(t)
	require.Regexp(t, `^[0-9a-f]{32}$`, resp.Header.Get(httptransport.HeaderConnectionID))
	require.Contains(t, resp.Header.Get("Set-Cookie"), "acp_affinity=")

	wsSend(t, ws, websocket.MessageBinary, `{"jsonrpc":"2.0","id":99,"method":"session/new"}`) // ignored
	wsSend(t, ws, websocket.MessageText, "\n  "+initBody+"\n")
	require.EqualValues(t, 0, wsNext(t, ws)["id"])
	require.Equal(t, 1, hs.h.Connections())

	wsSend(t, ws, websocket.MessageText, "{\n"+strings.TrimPrefix(newSession(1), "{")) // multi-line JSON is fine
	m := wsNext(t, ws)
	require.EqualValues(t, 1, m["id"])
	sid := m["result"].(map[string]any)["sessionId"].(string)

	wsSend(t, ws, websocket.MessageText, prompt(2, sid, "permission"))
	req := wsNext(t, ws)
	require.Equal(t, "session/request_permission", req["method"])
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req["id"],
		"result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}}})
	wsSend(t, ws, websocket.MessageText, string(answer))
	require.Equal(t, "session/update", wsNext(t, ws)["method"])
	require.EqualValues(t, 2, wsNext(t, ws)["id"])

	wsSend(t, ws, websocket.MessageText, `{"jsonrpc":`)
	require.EqualValues(t, -32700, wsNext(t, ws)["error"].(map[string]any)["code"])
	wsSend(t, ws, websocket.MessageText, `[`+newSession(3)+`]`)
	require.EqualValues(t, -32600, wsNext(t, ws)["error"].(map[string]any)["code"])

	require.NoError(t, ws.Close(websocket.StatusNormalClosure, ""))
	eventually(t, "connection ended on close", func() bool { return hs.h.Connections() == 0 && hs.served.Load() == 1 })
}

// TestWebSocketFirstMessage: anything but initialize first is closed 1002.
func TestWebSocketFirstMessage(t *testing.T) {
	hs := newHarness(t, httptransport.Options{}, false)
	ws, _ := hs.dial(t)
	wsSend(t, ws, websocket.MessageText, newSession(1))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, _, err := ws.Read(ctx)
	require.Equal(t, websocket.StatusProtocolError, websocket.CloseStatus(err), "%v", err)
	eventually(t, "no connection left", func() bool { return hs.h.Connections() == 0 })
	require.EqualValues(t, 0, hs.served.Load(), "no agent was started")
}

// TestWebSocketLimits: a frame over the size bound closes 1009; Shutdown
// closes 1001.
func TestWebSocketLimits(t *testing.T) {
	hs := newHarness(t, httptransport.Options{MaxMessageBytes: 1024}, false)
	ws, _ := hs.dial(t)
	wsSend(t, ws, websocket.MessageText, initBody)
	wsNext(t, ws)
	wsSend(t, ws, websocket.MessageText, `{"jsonrpc":"2.0","method":"x","params":"`+strings.Repeat("y", 2000)+`"}`)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, _, err := ws.Read(ctx)
	require.Equal(t, websocket.StatusMessageTooBig, websocket.CloseStatus(err), "%v", err)

	ws2, _ := hs.dial(t)
	wsSend(t, ws2, websocket.MessageText, initBody)
	wsNext(t, ws2)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), wait)
		defer scancel()
		_ = hs.h.Shutdown(sctx)
	}()
	_, _, err = ws2.Read(ctx)
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "%v", err)
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce))
}
