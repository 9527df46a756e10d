package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a Hooks that records what it saw and acts as told.
type recorder struct {
	mu      sync.Mutex
	seen    []Message
	verdict func(m *Message) Verdict
}

func (r *recorder) see(m *Message) Verdict {
	r.mu.Lock()
	c := *m
	c.Line, c.ID, c.Params, c.Result, c.Error = bytes.Clone(m.Line), bytes.Clone(m.ID), bytes.Clone(m.Params), bytes.Clone(m.Result), bytes.Clone(m.Error)
	r.seen = append(r.seen, c)
	f := r.verdict
	r.mu.Unlock()
	if f != nil {
		return f(m)
	}
	return Verdict{}
}

func (r *recorder) FromEditor(m *Message) Verdict { return r.see(m) }
func (r *recorder) FromAgent(m *Message) Verdict  { return r.see(m) }

// pipes runs a proxy; the test writes as the editor and as the agent and
// reads what each receives.
type pipes struct {
	p                     *Proxy
	editorW, agentW       io.WriteCloser
	editorGot, agentGot   *bufio.Reader
	editorDone, agentDone chan error
}

func newPipes(t *testing.T, h Hooks, opts Options) *pipes {
	t.Helper()
	eInR, eInW := io.Pipe()
	eOutR, eOutW := io.Pipe()
	aInR, aInW := io.Pipe()
	aOutR, aOutW := io.Pipe()
	p := New(eInR, eOutW, aOutR, aInW, h, opts)
	x := &pipes{p: p, editorW: eInW, agentW: aOutW, editorGot: bufio.NewReaderSize(eOutR, 1<<16), agentGot: bufio.NewReaderSize(aInR, 1<<16),
		editorDone: make(chan error, 1), agentDone: make(chan error, 1)}
	go func() { x.editorDone <- p.Pump(context.Background(), Editor) }()
	go func() { x.agentDone <- p.Pump(context.Background(), Agent) }()
	t.Cleanup(func() { eInW.Close(); aOutW.Close(); eOutR.Close(); aInR.Close() })
	return x
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := r.ReadString('\n')
		ch <- l
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("nothing relayed")
	}
	return ""
}

func write(t *testing.T, w io.Writer, s string) {
	t.Helper()
	go func() { _, _ = io.WriteString(w, s) }()
}

// TestRelayIsByteForByte: whatever a hook does not act on passes unchanged,
// in both directions: odd spacing, key order, unknown and `_` methods,
// $/cancel_request, _meta, escapes, ids of every kind, invalid lines.
func TestRelayIsByteForByte(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	x := newPipes(t, rec, Options{})
	lines := []string{
		`{"params":{"sessionId":"s","_meta":{"x":[1,2,{"y":null}]}},"method":"session/prompt","id":-7,"jsonrpc":"2.0"}`,
		`{ "jsonrpc" : "2.0" , "id" : "a\"b" , "method" : "_zed/custom" , "params" : { } }`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":18446744073709551616}}`,
		`{"jsonrpc":"2.0","method":"unknown/thing","params":"\u2028 \ud83d\ude00 <&>"}`,
		`not json at all`,
		`[{"jsonrpc":"2.0","id":1,"method":"batch"}]`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
	}
	for _, l := range lines {
		write(t, x.editorW, l+"\n")
		assert.Equal(t, l+"\n", readLine(t, x.agentGot))
		write(t, x.agentW, l+"\n")
		assert.Equal(t, l+"\n", readLine(t, x.editorGot))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.seen, 2*len(lines))
	m := rec.seen[0]
	assert.Equal(t, Request, m.Kind)
	assert.Equal(t, "session/prompt", m.Method)
	assert.Equal(t, "-7", string(m.ID))
	assert.Equal(t, `{"sessionId":"s","_meta":{"x":[1,2,{"y":null}]}}`, string(m.Params))
	assert.Equal(t, "_zed/custom", rec.seen[2].Method)
	assert.Equal(t, `"a\"b"`, string(rec.seen[2].ID))
	assert.Equal(t, Notification, rec.seen[4].Kind)
	assert.Equal(t, Other, rec.seen[8].Kind)
	assert.Equal(t, Other, rec.seen[10].Kind)
	assert.Equal(t, Response, rec.seen[12].Kind)
}

// TestBigLines: lines of several MiB pass whole, in both directions, and a
// line over MaxInspectBytes is streamed on without a hook.
func TestBigLines(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	x := newPipes(t, rec, Options{MaxInspectBytes: 12 << 20})
	big := `{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("x", 8<<20) + `"}}`
	write(t, x.agentW, big+"\n")
	assert.Equal(t, big+"\n", readLine(t, x.editorGot))
	huge := `{"jsonrpc":"2.0","id":3,"method":"fs/write_text_file","params":{"content":"` + strings.Repeat("y", 20<<20) + `"}}`
	write(t, x.editorW, huge+"\n")
	assert.Equal(t, huge+"\n", readLine(t, x.agentGot))
	write(t, x.editorW, `{"jsonrpc":"2.0","id":4,"method":"next"}`+"\n")
	assert.Equal(t, `{"jsonrpc":"2.0","id":4,"method":"next"}`+"\n", readLine(t, x.agentGot))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.seen, 2, "the over-size line bypasses the hook")
	assert.Equal(t, "session/update", rec.seen[0].Method)
	assert.Equal(t, "next", rec.seen[1].Method)
}

// TestVerdictsAndPending: Drop and Replace, lines of the proxy's own, and
// the editor's requests still waiting for an answer.
func TestVerdictsAndPending(t *testing.T) {
	t.Parallel()
	rec := &recorder{verdict: func(m *Message) Verdict {
		switch {
		case m.From == Agent && m.Kind == Response && string(m.ID) == `"drop"`:
			return Verdict{Action: Drop}
		case m.From == Agent && m.Kind == Response && string(m.ID) == "2":
			return Verdict{Action: Replace, Line: []byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"mine"}}`)}
		}
		return Verdict{}
	}}
	x := newPipes(t, rec, Options{})
	for _, id := range []string{"1", "2", `"drop"`, `"s"`} {
		write(t, x.editorW, `{"jsonrpc":"2.0","id":`+id+`,"method":"m"}`+"\n")
		readLine(t, x.agentGot)
	}
	assert.Equal(t, [][]byte{[]byte("1"), []byte("2"), []byte(`"drop"`), []byte(`"s"`)}, x.p.Pending())

	write(t, x.agentW, `{"jsonrpc":"2.0","id":"drop","result":{}}`+"\n"+`{"jsonrpc":"2.0","id":2,"result":{}}`+"\n")
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"mine"}}`+"\n", readLine(t, x.editorGot))
	x.p.Send(Editor, []byte(`{"jsonrpc":"2.0","id":"s","result":null}`))
	assert.Equal(t, `{"jsonrpc":"2.0","id":"s","result":null}`+"\n", readLine(t, x.editorGot))
	require.NoError(t, x.p.Flush(context.Background(), Editor))
	assert.Equal(t, [][]byte{[]byte("1"), []byte(`"drop"`)}, x.p.Pending(), "dropped answers leave the request pending")

	x.p.Send(Agent, []byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}`))
	assert.Equal(t, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}`+"\n", readLine(t, x.agentGot))

	x.editorW.Close()
	select {
	case err := <-x.editorDone:
		assert.NoError(t, err, "EOF ends the pump without an error")
	case <-time.After(5 * time.Second):
		t.Fatal("the editor pump did not end at EOF")
	}
}

func TestField(t *testing.T) {
	t.Parallel()
	obj := []byte(` {"a" : [1, {"b": "}"}], "s":"x\"y", "n": -1.5e3 , "o":{"p":true},"a":2 ,"esc\u0061":"z"}`)
	assert.Equal(t, "2", string(Field(obj, "a")), "the last of a repeated key wins")
	assert.Equal(t, `x"y`, String(Field(obj, "s")))
	assert.Equal(t, "-1.5e3", string(Field(obj, "n")))
	assert.Equal(t, `{"p":true}`, string(Field(obj, "o")))
	assert.Equal(t, `"z"`, string(Field(obj, "esca")))
	assert.Nil(t, Field(obj, "missing"))
	assert.Nil(t, Field([]byte(`[1,2]`), "a"))
	assert.Nil(t, Field([]byte(`{"a":`), "a"))
	assert.Equal(t, "s1", IDKey([]byte(`"1"`)))
	assert.Equal(t, "n1", IDKey([]byte(`1`)))
	assert.Equal(t, "", IDKey([]byte(`null`)))
}

// BenchmarkRelay is the proxy's cost per relayed line, hook included,
// for a typical streamed update (~200 bytes) and a tool call frame.
func BenchmarkRelay(b *testing.B) {
	lines := map[string]string{
		"message_chunk": `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a streamed chunk of assistant text, about sixty bytes long."}}}}`,
		"tool_call":     `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"ReadFile: src/main.go","kind":"read","status":"in_progress","rawInput":{"file_path":"/work/src/main.go"},"_meta":{"toolName":"read_file"}}}}`,
	}
	for name, line := range lines {
		b.Run(name, func(b *testing.B) {
			var in bytes.Buffer
			for range 1000 {
				in.WriteString(line)
				in.WriteByte('\n')
			}
			data := in.Bytes()
			p := New(nil, io.Discard, nil, io.Discard, &recorder{verdict: func(*Message) Verdict { return Verdict{} }}, Options{})
			p.hooks = nopHooks{}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				p.in[Agent] = bytes.NewReader(data)
				_ = p.Pump(context.Background(), Agent)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/line")
		})
	}
}

type nopHooks struct{}

func (nopHooks) FromEditor(*Message) Verdict { return Verdict{} }
func (nopHooks) FromAgent(*Message) Verdict  { return Verdict{} }
