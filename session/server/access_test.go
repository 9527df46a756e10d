package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model/modeltest"
)

// wsConn is an ACP connection over WebSocket.
type wsConn struct {
	t   *testing.T
	ctx context.Context
	ws  *websocket.Conn
	id  int
	// seen collects every message read that is not the awaited reply.
	seen []map[string]any
}

// dialWS connects and initializes with the client capabilities caps.
func dialWS(t *testing.T, d *daemon, caps map[string]any) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.url, "http"), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + d.token}}})
	require.NoError(t, err)
	t.Cleanup(func() { ws.CloseNow() })
	c := &wsConn{t: t, ctx: ctx, ws: ws}
	init := map[string]any{"protocolVersion": 1}
	if caps != nil {
		init["clientCapabilities"] = caps
	}
	c.call("initialize", init)
	return c
}

func (c *wsConn) send(msg map[string]any) {
	c.t.Helper()
	b, err := json.Marshal(msg)
	require.NoError(c.t, err)
	require.NoError(c.t, c.ws.Write(c.ctx, websocket.MessageText, b))
}

// call sends a request and returns its reply.
func (c *wsConn) call(method string, params any) map[string]any {
	c.t.Helper()
	c.id++
	c.send(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	for {
		_, data, err := c.ws.Read(c.ctx)
		require.NoError(c.t, err, method)
		var m map[string]any
		require.NoError(c.t, json.Unmarshal(data, &m))
		if id, ok := m["id"].(float64); ok && int(id) == c.id && m["method"] == nil {
			return m
		}
		c.seen = append(c.seen, m)
	}
}

// sessionMethods are the methods that name a session, with their params
// for session sid.
func sessionMethods(sid, cwd string) []struct {
	method string
	params map[string]any
} {
	return []struct {
		method string
		params map[string]any
	}{
		{"session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "steal"}}}},
		{"_session/steering", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "steer it"}}}},
		{"session/fork", map[string]any{"sessionId": sid, "cwd": cwd}},
		{"session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}},
		{"session/resume", map[string]any{"sessionId": sid, "cwd": cwd}},
		{"session/set_mode", map[string]any{"sessionId": sid, "modeId": "default"}},
		{"session/set_config_option", map[string]any{"sessionId": sid, "configId": "mode", "value": "default"}},
		{"session/close", map[string]any{"sessionId": sid}},
		{"session/delete", map[string]any{"sessionId": sid}},
	}
}

// TestServeSessionAccess: while connection A (HTTP/2) holds a session with
// a turn running, no other connection may touch it by any method, over
// either transport: a WebSocket connection gets "session_locked" for every
// request naming it — session/fork included, which used to copy A's
// conversation to it — and its session/cancel is dropped; an HTTP/1.1
// connection gets 409 for every POST naming it and for its stream. A's
// turn ends as if nothing had happened, and nothing of A's reaches the
// others. Once A has ended, the session is free: the WebSocket connection
// forks it.
func TestServeSessionAccess(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 1)
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(gate) }) }
	ms := modeltest.NewServer(t)
	ms.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-gate
		return modeltest.Response{Text: "the secret plan"}, true
	})
	d := startDaemon(t, ms.BaseURL(), "", nil)
	t.Cleanup(openGate) // runs before the daemon's stop, which waits for the turn
	cwd := t.TempDir()

	a := connect(t, d, h2c())
	var ns struct{ Result struct{ SessionID string } }
	require.NoError(t, json.Unmarshal(a.call("", "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}), &ns))
	sid := ns.Result.SessionID
	require.NotEmpty(t, sid)
	a.stream(sid)
	promptID := a.nextID.Add(1)
	resp := a.post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"my secret prompt"}]}}`, promptID, sid))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	select {
	case <-started:
	case <-time.After(wait):
		t.Fatal("the turn never reached the model")
	}

	c := dialWS(t, d, nil)
	for _, m := range sessionMethods(sid, t.TempDir()) {
		r := c.call(m.method, m.params)
		e, _ := r["error"].(map[string]any)
		require.NotNil(t, e, "%s over WebSocket of a session live on another connection: %v", m.method, r)
		assert.EqualValues(t, -32603, e["code"], m.method)
		assert.Equal(t, "session_locked", e["data"].(map[string]any)["errorKind"], m.method)
		assert.Contains(t, e["message"], "session "+sid+" is live on another connection", m.method)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": sid}})

	b := connect(t, d, h1())
	for _, m := range sessionMethods(sid, t.TempDir()) {
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": m.method, "params": m.params})
		require.NoError(t, err)
		req := b.request(http.MethodPost, strings.NewReader(string(body)), sid)
		req.Header.Set("Content-Type", "application/json")
		code, _ := status(t, b.hc, req)
		assert.Equal(t, http.StatusConflict, code, "%s over HTTP", m.method)
	}
	req := b.request(http.MethodPost, strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid)), sid)
	req.Header.Set("Content-Type", "application/json")
	code, _ := status(t, b.hc, req)
	assert.Equal(t, http.StatusConflict, code, "session/cancel over HTTP")
	req = b.request(http.MethodGet, nil, sid)
	req.Header.Set("Accept", "text/event-stream")
	code, _ = status(t, b.hc, req)
	assert.Equal(t, http.StatusConflict, code, "the session's stream over HTTP")

	// A's turn was neither cancelled nor disturbed.
	openGate()
	var done struct{ Result struct{ StopReason string } }
	raw := a.await(func(m map[string]json.RawMessage) bool { return string(m["id"]) == fmt.Sprint(promptID) })
	require.NoError(t, json.Unmarshal(raw, &done), string(raw))
	assert.Equal(t, "end_turn", done.Result.StopReason, string(raw))

	// Nothing of A's session reached the WebSocket connection.
	r := c.call("session/list", map[string]any{})
	require.NotNil(t, r["result"], "session/list names no session and is answered: %v", r)
	for _, m := range c.seen {
		b, _ := json.Marshal(m)
		assert.NotContains(t, string(b), "secret", "the other connection saw A's conversation: %s", b)
	}

	// A ends; its session is free, and the WebSocket connection may fork
	// it now.
	code, _ = status(t, a.hc, a.request(http.MethodDelete, nil, ""))
	require.Equal(t, http.StatusAccepted, code)
	r = c.call("session/fork", map[string]any{"sessionId": sid, "cwd": t.TempDir()})
	require.NotNil(t, r["result"], "a fork of a session nobody holds: %v", r)
	assert.NotEqual(t, sid, r["result"].(map[string]any)["sessionId"])
}
