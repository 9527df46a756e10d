package headless

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
)

// runOut is what a run printed and returned.
type runOut struct {
	code           int
	stdout, stderr string
}

// decodeResult reads the json output, refusing unknown fields.
func decodeResult(t *testing.T, line string) Result {
	t.Helper()
	var r Result
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), "result line: %s", line)
	require.NotNil(t, r.ToolCalls, "toolCalls must be an array: %s", line)
	return r
}

// fakeAgent stands in for session.Manager where the real one cannot go yet
// (session/load) or where a test needs a turn that ignores cancellation.
type fakeAgent struct {
	acp.Agent // methods these tests never reach

	client      acp.Client
	loadSession bool
	loadErr     error
	// ignoreCancel makes Prompt ignore every cancellation and wait for
	// release, as a wedged turn would.
	ignoreCancel bool
	release      chan struct{}

	loaded        chan *acp.LoadSessionRequest
	promptStarted chan struct{}

	mu     sync.Mutex
	cancel context.CancelFunc
}

func newFakeAgent() *fakeAgent {
	return &fakeAgent{loaded: make(chan *acp.LoadSessionRequest, 1), promptStarted: make(chan struct{}), release: make(chan struct{})}
}

func (f *fakeAgent) Initialize(context.Context, *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	return &acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersion,
		AgentCapabilities: acp.AgentCapabilities{LoadSession: f.loadSession}}, nil
}

func (f *fakeAgent) NewSession(context.Context, *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	return &acp.NewSessionResponse{SessionID: "sess_new"}, nil
}

func (f *fakeAgent) LoadSession(ctx context.Context, req *acp.LoadSessionRequest) (*acp.LoadSessionResponse, error) {
	f.loaded <- req
	if f.loadErr != nil {
		return nil, f.loadErr
	}
	old := acp.TextBlock("old text")
	if err := f.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: req.SessionID,
		Update: acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &old}}); err != nil {
		return nil, err
	}
	return &acp.LoadSessionResponse{}, nil
}

func (f *fakeAgent) Prompt(ctx context.Context, req *acp.PromptRequest) (*acp.PromptResponse, error) {
	turnCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
	b := acp.TextBlock("new text")
	if err := f.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: req.SessionID,
		Update: acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b}}); err != nil {
		return nil, err
	}
	if f.promptStarted == nil {
		return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
	}
	close(f.promptStarted)
	if f.ignoreCancel {
		<-f.release
		return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
	}
	<-turnCtx.Done()
	return &acp.PromptResponse{StopReason: acp.StopCancelled}, nil
}

func (f *fakeAgent) Cancel(*acp.SessionIDRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cancel != nil {
		f.cancel()
	}
}

func (f *fakeAgent) Close() {}

// runInProcess drives Run against agent; signals are sent on sigs.
func runInProcess(t *testing.T, agent *fakeAgent, o Options, sigs chan os.Signal) (int, runOut) {
	t.Helper()
	var out, errOut acptest.SyncBuffer
	env := Env{Stdout: &out, Stderr: &errOut, Logger: slog.New(slog.DiscardHandler), Signals: sigs}
	newAgent := func(c acp.Client) Agent { agent.client = c; return agent }
	done := make(chan int, 1)
	go func() {
		done <- Run(t.Context(), env, o, newAgent)
	}()
	select {
	case code := <-done:
		return code, runOut{code: code, stdout: out.String(), stderr: errOut.String()}
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return; stderr: %s", errOut.String())
	}
	return 0, runOut{}
}

func TestRunTurn_LoadSession(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		noCap   bool // the agent does not advertise loadSession
		loadErr error
		code    int
		check   func(t *testing.T, o runOut)
	}{
		{name: "agent without loadSession", noCap: true, code: 2, check: func(t *testing.T, o runOut) {
			assert.Contains(t, o.stderr, "--session sess_old: this build cannot continue sessions")
		}},
		{name: "history replay is not reported", code: 0, check: func(t *testing.T, o runOut) {
			r := decodeResult(t, strings.TrimSpace(o.stdout))
			assert.Equal(t, "sess_old", r.SessionID)
			assert.Equal(t, acp.StopEndTurn, r.StopReason)
			assert.Equal(t, "new text", r.Text)
		}},
		{name: "unknown session is a usage error", loadErr: acp.ErrResourceNotFound("sess_old"), code: 2,
			check: func(t *testing.T, o runOut) {
				r := decodeResult(t, strings.TrimSpace(o.stdout))
				require.NotNil(t, r.Error)
				assert.EqualValues(t, acp.CodeResourceNotFound, r.Error.Code)
				assert.Contains(t, o.stderr, "Resource not found: sess_old")
			}},
		{name: "agent failure is an internal error", loadErr: errors.New("disk on fire"), code: 1,
			check: func(t *testing.T, o runOut) { assert.Contains(t, o.stderr, "disk on fire") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			agent := newFakeAgent()
			agent.loadSession, agent.loadErr, agent.promptStarted = !tt.noCap, tt.loadErr, nil
			cwd := t.TempDir()
			code, o := runInProcess(t, agent, Options{Prompt: "go on", Cwd: cwd, SessionID: "sess_old", Format: FormatJSON}, nil)
			assert.Equal(t, tt.code, code, o.stderr)
			tt.check(t, o)
			if tt.noCap {
				assert.Empty(t, agent.loaded, "session/load must not be sent")
				return
			}
			req := <-agent.loaded
			assert.Equal(t, "sess_old", req.SessionID)
			assert.Equal(t, cwd, req.Cwd)
			assert.NotNil(t, req.MCPServers)
		})
	}
}

func TestRunTurn_Signals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		ignoreCancel bool
		signals      []os.Signal
		code         int
		stderr       string
	}{
		{name: "SIGINT waits for cancelled", signals: []os.Signal{os.Interrupt}, code: 130, stderr: "cancelling the turn"},
		{name: "SIGTERM exits 143", signals: []os.Signal{syscall.SIGTERM}, code: 143, stderr: "cancelling the turn"},
		{name: "second SIGINT does not wait", ignoreCancel: true, signals: []os.Signal{os.Interrupt, os.Interrupt}, code: 130,
			stderr: "again, exiting without waiting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			agent := newFakeAgent()
			agent.ignoreCancel = tt.ignoreCancel
			t.Cleanup(func() { close(agent.release) })
			sigs := make(chan os.Signal, len(tt.signals))
			go func() {
				<-agent.promptStarted
				for _, s := range tt.signals {
					sigs <- s
				}
			}()
			code, o := runInProcess(t, agent, Options{Prompt: "wait", Cwd: t.TempDir(), Format: FormatStreamJSON}, sigs)
			assert.Equal(t, tt.code, code, o.stderr)
			assert.Contains(t, o.stderr, tt.stderr)
			lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
			require.Len(t, lines, 2, o.stdout)
			assert.Contains(t, lines[0], `"new text"`)
			r := decodeResult(t, lines[1])
			assert.Equal(t, "sess_new", r.SessionID)
			assert.Equal(t, acp.StopCancelled, r.StopReason)
		})
	}
}

// BenchmarkOutput_Update is the per-notification cost of acpd run's
// client: decode, track and print one agent_message_chunk.
func BenchmarkOutput_Update(b *testing.B) {
	chunk := acp.TextBlock("a streamed chunk of assistant text, about sixty bytes long.")
	params, err := json.Marshal(&acp.SessionNotification{SessionID: "sess_1",
		Update: acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &chunk}})
	require.NoError(b, err)
	for _, format := range []string{FormatText, FormatJSON, FormatStreamJSON} {
		b.Run(format, func(b *testing.B) {
			o := NewOutput(io.Discard, io.Discard, format, "default")
			o.startTurn("")
			b.ReportAllocs()
			for b.Loop() {
				o.Update(params)
				if o.text.Len() > 1<<20 {
					o.text.Reset()
				}
			}
		})
	}
}

// steerAgent is a fakeAgent that serves _session/steering: "now" is
// injected (and delivered, echoed before the prompt answers), "late" finds
// no running turn, "/cmd" is refused; the prompt answers once all three
// have come.
type steerAgent struct {
	*fakeAgent
	mu    sync.Mutex
	reqs  []*acp.SteeringRequest
	three chan struct{}
}

func (f *steerAgent) Steer(_ context.Context, req *acp.SteeringRequest) (*acp.SteeringResponse, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	if len(f.reqs) == 3 {
		close(f.three)
	}
	f.mu.Unlock()
	switch req.Prompt[0].Text {
	case "now":
		return &acp.SteeringResponse{Outcome: acp.SteerInjected, Meta: acp.Meta{"messageId": "msg_now"}}, nil
	case "late":
		return &acp.SteeringResponse{Outcome: acp.SteerPromptRequired, Reason: acp.SteerReasonNoRunningTurn}, nil
	}
	return nil, acp.ErrInvalidParams("prompt[0].text", "/cmd is a command and cannot run inside a turn")
}

func (f *steerAgent) Prompt(ctx context.Context, req *acp.PromptRequest) (*acp.PromptResponse, error) {
	b := acp.TextBlock("working")
	if err := f.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: req.SessionID,
		Update: acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b}}); err != nil {
		return nil, err
	}
	<-f.three
	steer := acp.TextBlock("now")
	if err := f.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: req.SessionID,
		Update: acp.SessionUpdate{Kind: acp.UpdateUserMessageChunk, Content: &steer, MessageID: "msg_now"}}); err != nil {
		return nil, err
	}
	return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
}

// TestRun_SteeringLines: each input line after the prompt is sent as a
// steering request asking promptRequired, in order, once the turn runs; the
// result says what became of each — delivered, undelivered (no running
// turn, refused) — with the content of those the model never read, and a
// malformed line is reported on stderr by its number.
func TestRun_SteeringLines(t *testing.T) {
	t.Parallel()
	agent := &steerAgent{fakeAgent: newFakeAgent(), three: make(chan struct{})}
	agent.promptStarted = nil
	input := strings.Join([]string{
		`{"type":"user","content":"now"}`,
		`{"type":"user","content":`,
		`{"type":"user","message":{"role":"user","content":"late"}}`,
		`{"type":"user","content":[{"type":"text","text":"/cmd"}]}`,
	}, "\n") + "\n"
	pr, pw := io.Pipe()
	defer pw.Close() // the input stays open: its end is not the turn's
	go func() { _, _ = io.WriteString(pw, input) }()
	var out, errOut acptest.SyncBuffer
	env := Env{Stdout: &out, Stderr: &errOut, Logger: slog.New(slog.DiscardHandler)}
	code := Run(t.Context(), env, Options{Prompt: "go", Cwd: t.TempDir(), Format: FormatJSON, Input: NewInput(pr)},
		func(c acp.Client) Agent { agent.client = c; return agent })
	require.Equal(t, 0, code, errOut.String())

	agent.mu.Lock()
	defer agent.mu.Unlock()
	require.Len(t, agent.reqs, 3)
	for i, want := range []string{"now", "late", "/cmd"} {
		assert.Equal(t, want, agent.reqs[i].Prompt[0].Text, "in input order")
		assert.True(t, agent.reqs[i].PromptRequired(), "a line never starts a turn of its own")
		assert.Equal(t, "sess_new", agent.reqs[i].SessionID)
	}
	r := decodeResult(t, strings.TrimSpace(out.String()))
	require.Len(t, r.Steers, 3)
	assert.Equal(t, SteerSummary{Line: 1, Outcome: "injected", MessageID: "msg_now", Delivered: true}, r.Steers[0])
	assert.Equal(t, SteerSummary{Line: 3, Outcome: "promptRequired"}, r.Steers[1])
	assert.Equal(t, 4, r.Steers[2].Line)
	require.NotNil(t, r.Steers[2].Error)
	assert.EqualValues(t, acp.CodeInvalidParams, r.Steers[2].Error.Code)
	require.Len(t, r.Undelivered, 2)
	assert.Equal(t, UndeliveredSteer{Line: 3, Reason: UndeliveredNoRunningTurn, Prompt: []acp.ContentBlock{acp.TextBlock("late")}}, r.Undelivered[0])
	assert.Equal(t, UndeliveredSteer{Line: 4, Reason: UndeliveredRefused, Prompt: []acp.ContentBlock{acp.TextBlock("/cmd")}}, r.Undelivered[1])
	assert.Contains(t, errOut.String(), "acpd run: input line 2: not valid JSON")
}
