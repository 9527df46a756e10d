package agentguard

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpd/acpd/acp/proxy"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/store"
)

// BenchmarkGuardLine is the guard's cost per relayed line, hooks, counting
// and the transcript included: one 1,000-call prompt turn of an agent that
// sends, per call, a tool_call with its input, an in_progress and a
// completed tool_call_update (the latter with 600 bytes of output), and a
// message chunk, then answers the prompt. Reported per line (ns/line) and
// per turn (ns/op). Reproduce with
//
//	go test -run '^$' -bench GuardLine -benchmem ./session/agentguard
func BenchmarkGuardLine(b *testing.B) {
	const calls = 1000
	var turn bytes.Buffer
	out := strings.Repeat("x", 600)
	lines := 0
	for i := range calls {
		id := fmt.Sprintf("call_%d", i)
		fmt.Fprintf(&turn, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":%q,"title":"ReadFile: src/file%d.go","kind":"read","status":"pending","rawInput":{"file_path":"/work/src/file%d.go","offset":0,"limit":200},"_meta":{"toolName":"read_file"}}}}`+"\n", id, i, i)
		fmt.Fprintf(&turn, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":%q,"status":"in_progress"}}}`+"\n", id)
		fmt.Fprintf(&turn, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":%q,"status":"completed","content":[{"type":"content","content":{"type":"text","text":%q}}]}}}`+"\n", id, out)
		turn.WriteString(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Reading the next file to find where the guard is set up."}}}}` + "\n")
		lines += 4
	}
	answer := []byte(`{"jsonrpc":"2.0","id":"p","result":{"stopReason":"end_turn"}}` + "\n")
	lines++

	st, err := store.Open(filepath.Join(b.TempDir(), store.GuardDir), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	e := NewEngine(Options{Cap: loopdetect.DefaultCap(), SkipLoopDetection: true, Store: st,
		Logger: slog.New(slog.DiscardHandler), Cwd: b.TempDir(), AgentName: "bench"})
	editorR, editorW := io.Pipe()
	agentR, agentW := io.Pipe()
	answered := make(chan struct{}, 1)
	p := proxy.New(editorR, answerWatch{answered}, agentR, io.Discard, e, proxy.Options{})
	e.Bind(p)
	defer e.Close()
	go func() { _ = p.Pump(context.Background(), proxy.Editor) }()
	go func() { _ = p.Pump(context.Background(), proxy.Agent) }()
	defer editorW.Close()
	defer agentW.Close()
	send := func(w io.Writer, line string) {
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			b.Fatal(err)
		}
	}
	send(editorW, `{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	send(agentW, `{"jsonrpc":"2.0","id":"n","result":{"sessionId":"s1"}}`)

	data := append(turn.Bytes(), answer...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		send(editorW, `{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go"}]}}`)
		if _, err := agentW.Write(data); err != nil {
			b.Fatal(err)
		}
		<-answered
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}

// answerWatch is the editor's side of the benchmark: it signals the
// prompt's answer.
type answerWatch struct{ answered chan struct{} }

func (w answerWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"id":"p"`)) {
		w.answered <- struct{}{}
	}
	return len(p), nil
}
