package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// nopAgent answers nothing; benchmarks only use the Client side.
type nopAgent struct{ Agent }

func (nopAgent) Cancel(*SessionIDRequest) {}

// BenchmarkSessionUpdateThroughput writes agent_message_chunk notifications
// through a real os.Pipe drained by a reader goroutine.
func BenchmarkSessionUpdateThroughput(b *testing.B) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	drained := make(chan int)
	go func() {
		n := 0
		br := bufio.NewReaderSize(stdoutR, 1<<20)
		for {
			if _, err := br.ReadSlice('\n'); err != nil && err != bufio.ErrBufferFull {
				drained <- n
				return
			}
			n++
		}
	}()
	c := NewConn(stdinR, stdoutW, Options{})
	served := make(chan error, 1)
	go func() { served <- c.Serve(context.Background(), nopAgent{}) }()
	<-c.ready
	block := TextBlock("Hello, this is a streamed token chunk. ")
	n := &SessionNotification{SessionID: "sess_0123456789", Update: SessionUpdate{Kind: UpdateAgentMessageChunk, Content: &block, MessageID: "msg_1"}}
	ctx := b.Context()
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if err := c.SessionUpdate(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "notifications/s")
	_ = stdinW.Close()
	<-served
	_ = stdoutW.Close()
	if got := <-drained; got < b.N {
		b.Fatalf("reader saw %d of %d lines", got, b.N)
	}
}

// BenchmarkDecodePrompt1MiB reads a session/prompt line with a 1 MiB text
// block through the stream and decodes its params, as the dispatcher does.
func BenchmarkDecodePrompt1MiB(b *testing.B) {
	text := strings.Repeat("abcdefghij\\n", (1<<20)/12)
	line := []byte(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"` + text + `"}]}}` + "\n")
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		c := NewConn(strings.NewReader(string(line)), io.Discard, Options{})
		var msg json.RawMessage
		if err := c.stream.ReadObject(&msg); err != nil {
			b.Fatal(err)
		}
		var p PromptRequest
		if err := DecodeParams(MethodSessionPrompt, c.stream.cur.params, &p); err != nil {
			b.Fatal(err)
		}
		if len(p.Prompt) != 1 {
			b.Fatal("prompt not decoded")
		}
	}
}
