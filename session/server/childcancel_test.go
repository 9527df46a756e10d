package server_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model/modeltest"
)

// await reads until a message satisfies match and returns it; every
// message read is kept in seen.
func (c *wsConn) await(what string, match func(map[string]any) bool) map[string]any {
	c.t.Helper()
	for _, m := range c.seen {
		if match(m) {
			return m
		}
	}
	for {
		_, data, err := c.ws.Read(c.ctx)
		require.NoError(c.t, err, "waiting for %s", what)
		var m map[string]any
		require.NoError(c.t, json.Unmarshal(data, &m))
		c.seen = append(c.seen, m)
		if match(m) {
			return m
		}
	}
}

// subagentEnd matches the subagent_update that ends child id.
func subagentEnd(id string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		p, _ := m["params"].(map[string]any)
		u, _ := p["update"].(map[string]any)
		st, _ := u["state"].(map[string]any)
		return u["sessionUpdate"] == "subagent_update" && u["sessionId"] == id && st != nil && st["state"] != "running"
	}
}

// TestServeChildCancel: a subagent's child session belongs to its parent's
// connection. session/cancel naming the child from the connection holding
// the parent cancels that child alone — its sibling and the parent's turn
// go on; from another connection it is dropped as for any session live
// elsewhere (and a request naming the child answers session_locked), and
// the child it named runs to its end.
func TestServeChildCancel(t *testing.T) {
	gate := make(chan struct{})
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(gate) }) }
	started := make(chan string, 4)
	ms := modeltest.NewServer(t)
	ms.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		first := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				first = m.Text()
				break
			}
		}
		switch {
		case strings.Contains(first, "TASK-ONE"), strings.Contains(first, "TASK-TWO"):
			started <- first
			<-gate
			return modeltest.Response{Text: "child done"}, true
		case r.Messages[len(r.Messages)-1].Role == "tool":
			return modeltest.Response{Text: "the parent goes on"}, true
		}
		return modeltest.Response{ToolCalls: []modeltest.ToolCall{
			{ID: "call_one", Name: "agent", Arguments: `{"description":"one","prompt":"TASK-ONE"}`},
			{ID: "call_two", Name: "agent", Arguments: `{"description":"two","prompt":"TASK-TWO"}`},
		}}, true
	})
	d := startDaemon(t, ms.BaseURL(), "", nil)
	t.Cleanup(openGate)

	a := dialWS(t, d, map[string]any{"subagents": map[string]any{}})
	ns := a.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}})
	sid, _ := ns["result"].(map[string]any)["sessionId"].(string)
	require.NotEmpty(t, sid, "%v", ns)
	a.send(map[string]any{"jsonrpc": "2.0", "id": 100, "method": "session/prompt",
		"params": map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "run two children"}}}})
	for range 2 {
		select {
		case <-started:
		case <-a.ctx.Done():
			t.Fatal("the children never reached the model")
		}
	}
	one, two := sid+"~call_one", sid+"~call_two"

	// Another connection: refused as for the parent.
	b := dialWS(t, d, nil)
	b.send(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": one}})
	r := b.call("_session/steering", map[string]any{"sessionId": one, "prompt": []any{map[string]any{"type": "text", "text": "x"}}})
	e, _ := r["error"].(map[string]any)
	require.NotNil(t, e, "%v", r)
	assert.Equal(t, "session_locked", e["data"].(map[string]any)["errorKind"], "%v", r)
	// The log line is written by the daemon and copied from its stderr pipe
	// by another goroutine: it may trail the refusal's answer.
	dropped := func() bool {
		s := d.stderr.String()
		return strings.Contains(s, "session/cancel for a session live on another connection dropped") && strings.Contains(s, one)
	}
	assert.Eventually(t, dropped, 10*time.Second, 10*time.Millisecond, "the dropped cancel is logged: %s", d.stderr.String())

	// The parent's connection: the child alone.
	a.send(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": two}})
	end := a.await("the end of child two", subagentEnd(two))
	st := end["params"].(map[string]any)["update"].(map[string]any)["state"].(map[string]any)
	assert.Equal(t, "cancelled", st["stopReason"], "%v", st)
	for _, m := range a.seen {
		assert.False(t, subagentEnd(one)(m), "child one ended before its model answered: %v", m)
	}

	openGate()
	end = a.await("the end of child one", subagentEnd(one))
	st = end["params"].(map[string]any)["update"].(map[string]any)["state"].(map[string]any)
	assert.Equal(t, "end_turn", st["stopReason"], "the other connection's cancel did nothing: %v", st)
	done := a.await("the prompt's answer", func(m map[string]any) bool { id, _ := m["id"].(float64); return id == 100 })
	res, _ := done["result"].(map[string]any)
	require.NotNil(t, res, "%v", done)
	assert.Equal(t, "end_turn", res["stopReason"])
}
