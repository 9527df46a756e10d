package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/store"
)

// seedLongSession records a session of n records through the store: turns
// of user, reasoning, text, tool_calls, tool_call, tool_result, turn_end.
func seedLongSession(tb testing.TB, st *store.Store, cwd string, n int) string {
	tb.Helper()
	w, err := st.Create(store.SessionMeta{Cwd: cwd})
	require.NoError(tb, err)
	for i := 1; i < n; {
		id := fmt.Sprintf("call_%d", i)
		args := json.RawMessage(fmt.Sprintf(`{"file_path":"/w/file_%d.go"}`, i))
		for _, rec := range []store.Record{
			{Kind: store.KindUser, Prompt: []acp.ContentBlock{acp.TextBlock(fmt.Sprintf("prompt %d: please look at the file and fix it", i))}},
			{Kind: store.KindReasoning, Text: "Let me read the file first, then decide what to change."},
			{Kind: store.KindText, Text: "I will read the file."},
			{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{{ID: id, Name: "read_file", Arguments: args}}},
			{Kind: store.KindToolCall, Tool: &store.ToolCallRecord{ToolCallID: id, Name: "read_file", Title: "read_file", Kind: acp.KindRead, Status: acp.StatusInProgress, RawInput: args}},
			{Kind: store.KindToolResult, Tool: &store.ToolCallRecord{ToolCallID: id, Name: "read_file", Status: acp.StatusCompleted,
				Content: []acp.ToolCallContent{acp.TextContent("package main\n\nfunc main() {}\n")}, ModelText: "package main\n\nfunc main() {}\n"}},
			{Kind: store.KindTurnEnd, StopReason: acp.StopEndTurn},
		} {
			if i >= n {
				break
			}
			require.NoError(tb, w.Append(rec))
			i++
		}
	}
	require.NoError(tb, w.Close())
	return w.ID()
}

// countClient discards updates, counting them.
type countClient struct {
	recClient
	n atomic.Int64
}

func (c *countClient) SessionUpdate(context.Context, *acp.SessionNotification) error {
	c.n.Add(1)
	return nil
}

// BenchmarkLoad5000 loads a 5,000-record session: "host" calls
// Manager.LoadSession with a client that discards the replay; "pipe" sends
// session/load through a real acp.Conn over an in-memory pipe to a client
// that only reads lines (acptest.Pipe's schema check of every line would
// dominate the figure).
// Each iteration also closes the session so the next one can load it.
func BenchmarkLoad5000(b *testing.B) {
	dir, cwd := b.TempDir(), b.TempDir()
	st, err := store.Open(dir, store.Options{})
	require.NoError(b, err)
	sid := seedLongSession(b, st, cwd, 5000)
	opts := Options{Provider: &scriptProvider{}, Model: "m", Store: st}
	req := &acp.LoadSessionRequest{SessionID: sid, Cwd: cwd, MCPServers: []acp.MCPServer{}}

	b.Run("host", func(b *testing.B) {
		c := &countClient{}
		m := NewManager(c, opts)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.LoadSession(b.Context(), req); err != nil {
				b.Fatal(err)
			}
			if _, err := m.CloseSession(b.Context(), &acp.SessionIDRequest{SessionID: sid}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(c.n.Load())/float64(b.N), "updates/op")
	})
	b.Run("wire", func(b *testing.B) {
		agentIn, clientOut := io.Pipe()
		clientIn, agentOut := io.Pipe()
		conn := acp.NewConn(agentIn, agentOut, acp.Options{})
		m := NewManager(conn, opts)
		served := make(chan error, 1)
		go func() { served <- conn.Serve(context.Background(), m) }()
		b.Cleanup(func() {
			m.Close()
			_ = clientOut.Close()
			<-served
			_ = agentOut.Close()
		})
		br := bufio.NewReaderSize(clientIn, 1<<20)
		seq := 0
		// call writes one request and reads lines up to its response,
		// returning how many lines came before it.
		call := func(method string, params any) int {
			seq++
			line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": seq, "method": method, "params": params})
			require.NoError(b, err)
			_, err = clientOut.Write(append(line, '\n'))
			require.NoError(b, err)
			want := fmt.Appendf(nil, `"id":%d,`, seq)
			for n := 0; ; n++ {
				l, err := br.ReadBytes('\n')
				require.NoError(b, err)
				if bytes.Contains(l, want) && !bytes.Contains(l, []byte(`"method"`)) {
					require.NotContains(b, string(l), `"error"`)
					return n
				}
			}
		}
		call(acp.MethodInitialize, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersion})
		lines := 0
		b.ReportAllocs()
		for b.Loop() {
			lines += call(acp.MethodSessionLoad, req)
			call(acp.MethodSessionClose, &acp.SessionIDRequest{SessionID: sid})
		}
		b.ReportMetric(float64(lines)/float64(b.N), "updates/op")
	})
}
