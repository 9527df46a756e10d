package acptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpd/acpd/acp"
)

// FakeClient is the editor side. Each func field handles one agent request;
// nil means the default noted on the field.
type FakeClient struct {
	// OnSessionUpdate sees every session/update (they are also recorded).
	OnSessionUpdate func(n acp.SessionNotification)
	// Default: select the first allow_once option, else the first option.
	RequestPermissionFunc func(ctx context.Context, req *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error)
	// Default: read the file from disk (line/limit honoured).
	ReadTextFileFunc func(ctx context.Context, req *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error)
	// Default: write the file to disk.
	WriteTextFileFunc func(ctx context.Context, req *acp.WriteTextFileRequest) error
	// Terminal defaults: -32601 method not found.
	CreateTerminalFunc      func(ctx context.Context, req *acp.CreateTerminalRequest) (*acp.CreateTerminalResponse, error)
	TerminalOutputFunc      func(ctx context.Context, req *acp.TerminalRequest) (*acp.TerminalOutputResponse, error)
	WaitForTerminalExitFunc func(ctx context.Context, req *acp.TerminalRequest) (*acp.TerminalExitStatus, error)
	KillTerminalFunc        func(ctx context.Context, req *acp.TerminalRequest) error
	ReleaseTerminalFunc     func(ctx context.Context, req *acp.TerminalRequest) error
	// Default: -32601 method not found (advertise elicitation with
	// InitializeWith when setting it).
	CreateElicitationFunc func(ctx context.Context, req *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error)
	// OnElicitationComplete sees every elicitation/complete notification.
	OnElicitationComplete func(n acp.CompleteElicitationNotification)
}

func (f *FakeClient) handle(ctx context.Context, method string, params json.RawMessage) (any, error) {
	dec := func(v any) error {
		if err := json.Unmarshal(params, v); err != nil {
			return acp.ErrInvalidParams("params", err.Error())
		}
		return nil
	}
	empty := struct{}{}
	switch method {
	case acp.MethodSessionRequestPermission:
		var p acp.RequestPermissionRequest
		if err := dec(&p); err != nil {
			return nil, err
		}
		if f.RequestPermissionFunc != nil {
			return f.RequestPermissionFunc(ctx, &p)
		}
		if len(p.Options) == 0 {
			return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}, nil
		}
		pick := p.Options[0]
		for _, o := range p.Options {
			if o.Kind == acp.AllowOnce {
				pick = o
				break
			}
		}
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: pick.OptionID}}, nil
	case acp.MethodFSReadTextFile:
		var p acp.ReadTextFileRequest
		if err := dec(&p); err != nil {
			return nil, err
		}
		if f.ReadTextFileFunc != nil {
			return f.ReadTextFileFunc(ctx, &p)
		}
		return readFile(&p)
	case acp.MethodFSWriteTextFile:
		var p acp.WriteTextFileRequest
		if err := dec(&p); err != nil {
			return nil, err
		}
		if f.WriteTextFileFunc != nil {
			return empty, f.WriteTextFileFunc(ctx, &p)
		}
		if err := os.WriteFile(p.Path, []byte(p.Content), 0o644); err != nil {
			return nil, err
		}
		return empty, nil
	case acp.MethodTerminalCreate:
		var p acp.CreateTerminalRequest
		if err := dec(&p); err != nil {
			return nil, err
		}
		if f.CreateTerminalFunc != nil {
			return f.CreateTerminalFunc(ctx, &p)
		}
	case acp.MethodElicitationCreate:
		var p acp.CreateElicitationRequest
		if err := dec(&p); err != nil {
			return nil, err
		}
		if f.CreateElicitationFunc != nil {
			return f.CreateElicitationFunc(ctx, &p)
		}
	case acp.MethodTerminalOutput, acp.MethodTerminalWaitForExit, acp.MethodTerminalKill, acp.MethodTerminalRelease:
		var p acp.TerminalRequest
		if err := dec(&p); err != nil {
			return nil, err
		}
		switch {
		case method == acp.MethodTerminalOutput && f.TerminalOutputFunc != nil:
			return f.TerminalOutputFunc(ctx, &p)
		case method == acp.MethodTerminalWaitForExit && f.WaitForTerminalExitFunc != nil:
			return f.WaitForTerminalExitFunc(ctx, &p)
		case method == acp.MethodTerminalKill && f.KillTerminalFunc != nil:
			return empty, f.KillTerminalFunc(ctx, &p)
		case method == acp.MethodTerminalRelease && f.ReleaseTerminalFunc != nil:
			return empty, f.ReleaseTerminalFunc(ctx, &p)
		}
	}
	return nil, acp.ErrMethodNotFound(method)
}

func readFile(p *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
	b, err := os.ReadFile(p.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, acp.ErrResourceNotFound(p.Path)
	}
	if err != nil {
		return nil, err
	}
	if p.Line == nil && p.Limit == nil {
		return &acp.ReadTextFileResponse{Content: string(b)}, nil
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	start := 0
	if p.Line != nil && *p.Line > 1 {
		start = min(*p.Line-1, len(lines))
	}
	end := len(lines)
	if p.Limit != nil {
		end = min(start+*p.Limit, end)
	}
	return &acp.ReadTextFileResponse{Content: string(bytes.Join(lines[start:end], nil))}, nil
}

// ClientConn is the client end of a Pipe: it sends requests to the agent,
// answers the agent's requests through its FakeClient, records updates, and
// checks every line the agent writes with a Transcript (failing the test on
// a violation).
type ClientConn struct {
	t  testing.TB
	fc *FakeClient
	tr *Transcript
	w  io.Writer

	wmu sync.Mutex // guards w

	mu       sync.Mutex
	seq      int
	pending  map[string]chan rpcResult
	handlers map[string]context.CancelFunc // agent request id -> cancel
	updates  []acp.SessionNotification
	lines    [][]byte
	changed  chan struct{} // closed and replaced on every update

	readDone chan struct{}
}

type rpcResult struct {
	result json.RawMessage
	err    *acp.Error
}

// Pipe starts a real acp.Conn serving the agent built by newAgent over an
// in-memory io.Pipe pair and returns the connected client. Cleanup closes the
// client's side (EOF for the agent) and waits for Serve to return.
func Pipe(t testing.TB, newAgent func(client acp.Client) acp.Agent, fc *FakeClient) *ClientConn {
	t.Helper()
	if fc == nil {
		fc = &FakeClient{}
	}
	v, err := DefaultValidator()
	if err != nil {
		t.Fatalf("acptest: schema: %v", err)
	}
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	logDone := new(atomic.Bool)
	logger := slog.New(slog.NewTextHandler(testWriter{t, logDone}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	conn := acp.NewConn(agentIn, agentOut, acp.Options{Logger: logger})
	ag := newAgent(conn)
	served := make(chan error, 1)
	go func() { served <- conn.Serve(context.Background(), ag) }()

	cc := newClientConn(t, fc, NewTranscript(v), clientIn, clientOut)
	t.Cleanup(func() {
		_ = clientOut.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("acptest: Serve: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("acptest: Serve did not return after EOF")
		}
		_ = agentOut.Close()
		<-cc.readDone
		logDone.Store(true)
	})
	return cc
}

// NewClientConn connects a ClientConn to an agent's stdout (r) and stdin (w),
// e.g. a child process. The caller closes w to end the session.
func NewClientConn(t testing.TB, fc *FakeClient, r io.Reader, w io.Writer) *ClientConn {
	v, err := DefaultValidator()
	if err != nil {
		t.Fatalf("acptest: schema: %v", err)
	}
	if fc == nil {
		fc = &FakeClient{}
	}
	return newClientConn(t, fc, NewTranscript(v), r, w)
}

func newClientConn(t testing.TB, fc *FakeClient, tr *Transcript, r io.Reader, w io.Writer) *ClientConn {
	cc := &ClientConn{
		t: t, fc: fc, tr: tr, w: w,
		pending:  map[string]chan rpcResult{},
		handlers: map[string]context.CancelFunc{},
		changed:  make(chan struct{}),
		readDone: make(chan struct{}),
	}
	go cc.readLoop(r)
	return cc
}

// testWriter forwards logs to t until the test's cleanup has run; later
// writes (from goroutines outliving Serve's grace period) are dropped,
// because t.Log after the test panics.
type testWriter struct {
	t    testing.TB
	done *atomic.Bool
}

func (w testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (cc *ClientConn) readLoop(r io.Reader) {
	defer close(cc.readDone)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			cc.handleLine(bytes.TrimRight(line, "\n"))
		}
		if err != nil {
			cc.mu.Lock()
			for id, ch := range cc.pending {
				ch <- rpcResult{err: &acp.Error{Code: acp.CodeInternalError, Message: "connection closed"}}
				delete(cc.pending, id)
			}
			cc.mu.Unlock()
			return
		}
	}
}

func (cc *ClientConn) handleLine(line []byte) {
	if err := cc.tr.AgentLine(line); err != nil {
		cc.t.Errorf("acptest: agent line violates ACP: %v\n%s", err, truncate(line))
	}
	cc.mu.Lock()
	cc.lines = append(cc.lines, append([]byte(nil), line...))
	cc.mu.Unlock()
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *acp.Error      `json:"error"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return
	}
	switch {
	case env.Method == acp.MethodSessionUpdate:
		var n acp.SessionNotification
		if err := json.Unmarshal(env.Params, &n); err != nil {
			cc.t.Errorf("acptest: decode session/update: %v", err)
			return
		}
		cc.mu.Lock()
		cc.updates = append(cc.updates, n)
		close(cc.changed)
		cc.changed = make(chan struct{})
		cc.mu.Unlock()
		if cc.fc.OnSessionUpdate != nil {
			cc.fc.OnSessionUpdate(n)
		}
	case env.Method == acp.MethodElicitationComplete:
		var n acp.CompleteElicitationNotification
		if err := json.Unmarshal(env.Params, &n); err != nil {
			cc.t.Errorf("acptest: decode elicitation/complete: %v", err)
			return
		}
		if cc.fc.OnElicitationComplete != nil {
			cc.fc.OnElicitationComplete(n)
		}
	case env.Method == acp.MethodCancelRequest:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(env.Params, &p)
		cc.mu.Lock()
		if cancel := cc.handlers[string(p.RequestID)]; cancel != nil {
			cancel()
		}
		cc.mu.Unlock()
	case env.Method != "" && env.ID != nil:
		ctx, cancel := context.WithCancel(context.Background())
		id := string(env.ID)
		cc.mu.Lock()
		cc.handlers[id] = cancel
		cc.mu.Unlock()
		go func() {
			defer cancel()
			res, err := cc.fc.handle(ctx, env.Method, env.Params)
			cc.mu.Lock()
			delete(cc.handlers, id)
			cc.mu.Unlock()
			cc.reply(env.ID, res, err)
		}()
	case env.Method == "" && env.ID != nil:
		cc.mu.Lock()
		ch := cc.pending[string(env.ID)]
		delete(cc.pending, string(env.ID))
		cc.mu.Unlock()
		if ch != nil {
			ch <- rpcResult{result: env.Result, err: env.Error}
		}
	}
}

func (cc *ClientConn) reply(id json.RawMessage, res any, err error) {
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if err != nil {
		var ae *acp.Error
		if !errors.As(err, &ae) {
			code := acp.CodeInternalError
			if errors.Is(err, context.Canceled) {
				code = acp.CodeRequestCancelled
			}
			ae = &acp.Error{Code: code, Message: err.Error()}
		}
		msg["error"] = ae
	} else {
		if res == nil {
			res = struct{}{}
		}
		msg["result"] = res
	}
	b, merr := json.Marshal(msg)
	if merr != nil {
		cc.t.Errorf("acptest: marshal reply: %v", merr)
		return
	}
	_ = cc.write(b)
}

func (cc *ClientConn) write(b []byte) error {
	cc.tr.ClientLine(b)
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	_, err := cc.w.Write(append(b, '\n'))
	return err
}

// Call sends a request and decodes its result into out (which may be nil).
// A JSON-RPC error comes back as *acp.Error.
func (cc *ClientConn) Call(ctx context.Context, method string, params, out any) error {
	cc.mu.Lock()
	cc.seq++
	id := strconv.Itoa(cc.seq)
	ch := make(chan rpcResult, 1)
	cc.pending[id] = ch
	cc.mu.Unlock()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": cc.seq, "method": method, "params": params})
	if err != nil {
		return err
	}
	if err := cc.write(b); err != nil {
		return err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if string(r.result) == "null" {
			return fmt.Errorf("acptest: %s answered with a null result", method)
		}
		if out != nil {
			return json.Unmarshal(r.result, out)
		}
		return nil
	case <-ctx.Done():
		cc.mu.Lock()
		delete(cc.pending, id)
		cc.mu.Unlock()
		return ctx.Err()
	}
}

// Notify sends a notification.
func (cc *ClientConn) Notify(method string, params any) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		return err
	}
	return cc.write(b)
}

// Initialize sends initialize with full client capabilities (fs read and
// write, terminal).
func (cc *ClientConn) Initialize(ctx context.Context) (*acp.InitializeResponse, error) {
	return cc.InitializeWith(ctx, acp.ClientCapabilities{
		FS:       acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
		Terminal: true,
	})
}

// InitializeWith sends initialize advertising exactly caps; the transcript
// then holds the agent to them (no fs/* or terminal/* unless advertised).
func (cc *ClientConn) InitializeWith(ctx context.Context, caps acp.ClientCapabilities) (*acp.InitializeResponse, error) {
	var r acp.InitializeResponse
	err := cc.Call(ctx, acp.MethodInitialize, acp.InitializeRequest{
		ProtocolVersion:    acp.ProtocolVersion,
		ClientCapabilities: caps,
		ClientInfo:         &acp.Implementation{Name: "acptest", Version: "1"},
	}, &r)
	return &r, err
}

// End runs the transcript's end-of-connection checks (every terminal the
// client created was released). Call it when the agent has nothing left to
// write, e.g. after the last prompt answered.
func (cc *ClientConn) End() error { return cc.tr.End() }

// WaitClosed blocks until the agent's output has ended (EOF) and every line
// it wrote has been checked, or until timeout. Call it before a test ends
// when the agent may still be writing, e.g. after signalling the process.
func (cc *ClientConn) WaitClosed(timeout time.Duration) bool {
	select {
	case <-cc.readDone:
		return true
	case <-time.After(timeout):
		return false
	}
}

// NewSession creates a session rooted at cwd (which must be absolute).
func (cc *ClientConn) NewSession(ctx context.Context, cwd string) (string, error) {
	var r acp.NewSessionResponse
	err := cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: cwd, MCPServers: []acp.MCPServer{}}, &r)
	return r.SessionID, err
}

// Prompt sends a text prompt and waits for the turn to end.
func (cc *ClientConn) Prompt(ctx context.Context, sessionID, text string) (*acp.PromptResponse, error) {
	var r acp.PromptResponse
	err := cc.Call(ctx, acp.MethodSessionPrompt, acp.PromptRequest{SessionID: sessionID, Prompt: []acp.ContentBlock{acp.TextBlock(text)}}, &r)
	return &r, err
}

// Cancel sends session/cancel.
func (cc *ClientConn) Cancel(sessionID string) error {
	return cc.Notify(acp.MethodSessionCancel, acp.SessionIDRequest{SessionID: sessionID})
}

// Updates returns the session/update notifications received so far.
func (cc *ClientConn) Updates() []acp.SessionNotification {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return append([]acp.SessionNotification(nil), cc.updates...)
}

// WaitUpdates waits until at least n updates have arrived.
func (cc *ClientConn) WaitUpdates(ctx context.Context, n int) ([]acp.SessionNotification, error) {
	for {
		cc.mu.Lock()
		got, ch := len(cc.updates), cc.changed
		cc.mu.Unlock()
		if got >= n {
			return cc.Updates(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return cc.Updates(), fmt.Errorf("got %d of %d updates: %w", got, n, ctx.Err())
		}
	}
}

// Lines returns every line the agent has written so far.
func (cc *ClientConn) Lines() [][]byte {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return append([][]byte(nil), cc.lines...)
}

// AgentText concatenates the agent_message_chunk text of a session.
func AgentText(updates []acp.SessionNotification, sessionID string) string {
	var b bytes.Buffer
	for _, u := range updates {
		if u.SessionID == sessionID && u.Update.Kind == acp.UpdateAgentMessageChunk && u.Update.Content != nil {
			b.WriteString(u.Update.Content.Text)
		}
	}
	return b.String()
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}
