package acp_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
)

// closingAgent's CloseSession cancels the running prompt and returns at
// once; the prompt answers `cancelled` only after the close handler has
// returned: the worst order for a Conn that writes answers as handlers end.
type closingAgent struct {
	*testAgent
	running chan struct{}
	cancel  chan struct{}
	closed  chan struct{}
}

func (a *closingAgent) Initialize(ctx context.Context, req *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	r, err := a.testAgent.Initialize(ctx, req)
	r.AgentCapabilities.SessionCapabilities.Close = &acp.Capability{}
	return r, err
}

func (a *closingAgent) Prompt(ctx context.Context, req *acp.PromptRequest) (*acp.PromptResponse, error) {
	close(a.running)
	<-a.cancel
	<-a.closed
	return &acp.PromptResponse{StopReason: acp.StopCancelled}, nil
}

func (a *closingAgent) CloseSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	close(a.cancel)
	defer close(a.closed)
	return &acp.Empty{}, nil
}

// TestConn_CloseAnswersAfterTheRunningPrompt: ACP's session/close acts as
// session/cancel first, so the Conn writes the close answer only after the
// session's running prompt has answered.
func TestConn_CloseAnswersAfterTheRunningPrompt(t *testing.T) {
	ctx := withTimeout(t)
	ag := &closingAgent{running: make(chan struct{}), cancel: make(chan struct{}), closed: make(chan struct{})}
	cc := acptest.Pipe(t, func(c acp.Client) acp.Agent {
		ag.testAgent = newTestAgent(c).(*testAgent)
		return ag
	}, nil)
	_, err := cc.Initialize(ctx)
	require.NoError(t, err)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)
	done := make(chan *acp.PromptResponse, 1)
	go func() {
		r, err := cc.Prompt(ctx, sid, "hold")
		assert.NoError(t, err)
		done <- r
	}()
	select {
	case <-ag.running:
	case <-ctx.Done():
		t.Fatal("prompt never ran")
	}
	require.NoError(t, cc.Call(ctx, acp.MethodSessionClose, acp.SessionIDRequest{SessionID: sid}, nil))
	lines := cc.Lines()
	require.NotEmpty(t, lines)
	assert.Contains(t, string(lines[len(lines)-1]), `"result":{}`, "the close answer is last")
	assert.Contains(t, string(lines[len(lines)-2]), `"stopReason":"cancelled"`, "the prompt answered first")
	r := <-done
	require.NotNil(t, r)
	assert.Equal(t, acp.StopCancelled, r.StopReason)
	assert.False(t, bytes.Contains(lines[len(lines)-1], []byte("stopReason")))
}

// hookAgent's Prompt registers an AfterReply hook that sends an update: the
// update must reach the wire after the prompt's answer.
type hookAgent struct {
	*testAgent
	client acp.Client
	hooked chan bool
}

func (a *hookAgent) Prompt(ctx context.Context, req *acp.PromptRequest) (*acp.PromptResponse, error) {
	a.hooked <- acp.AfterReply(ctx, func() {
		title := "after the answer"
		_ = a.client.SessionUpdate(context.Background(), &acp.SessionNotification{
			SessionID: req.SessionID, Update: acp.SessionUpdate{Kind: acp.UpdateSessionInfo, Title: &title},
		})
	})
	return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
}

// TestConn_AfterReplyRunsOnceTheAnswerIsWritten: the session host holds its
// turn through AfterReply, so a next turn's updates cannot overtake the
// previous prompt's answer.
func TestConn_AfterReplyRunsOnceTheAnswerIsWritten(t *testing.T) {
	ctx := withTimeout(t)
	ag := &hookAgent{hooked: make(chan bool, 1)}
	cc := acptest.Pipe(t, func(c acp.Client) acp.Agent {
		ag.testAgent = newTestAgent(c).(*testAgent)
		ag.client = c
		return ag
	}, nil)
	_, err := cc.Initialize(ctx)
	require.NoError(t, err)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)
	_, err = cc.Prompt(ctx, sid, "go")
	require.NoError(t, err)
	require.True(t, <-ag.hooked, "a request context accepts hooks")
	_, err = cc.WaitUpdates(ctx, 1)
	require.NoError(t, err)
	lines := cc.Lines()
	answer, update := -1, -1
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"stopReason":"end_turn"`)) {
			answer = i
		}
		if bytes.Contains(l, []byte("after the answer")) {
			update = i
		}
	}
	require.GreaterOrEqual(t, answer, 0)
	assert.Greater(t, update, answer)
	assert.False(t, acp.AfterReply(context.Background(), func() {}), "outside a request there is nothing to wait for")
}

// slowInitAgent takes its time to initialize; NewSession reports whether
// Initialize had returned by the time it was called.
type slowInitAgent struct {
	*testAgent
	initDone atomic.Bool
	sawInit  chan bool
}

func (a *slowInitAgent) Initialize(ctx context.Context, req *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	// Room for a request read meanwhile to be dispatched, as it would be
	// if initialize ran on a goroutine of its own.
	time.Sleep(100 * time.Millisecond)
	a.initDone.Store(true)
	return a.testAgent.Initialize(ctx, req)
}

func (a *slowInitAgent) NewSession(ctx context.Context, req *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	a.sawInit <- a.initDone.Load()
	return a.testAgent.NewSession(ctx, req)
}

// TestConn_InitializeAnsweredOnTheReadLoop: initialize is answered before
// the next message is read, so a client that pipelines session/new behind
// it gets the initialize answer first and the agent sees the two in order.
func TestConn_InitializeAnsweredOnTheReadLoop(t *testing.T) {
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { outR.Close(); outW.Close() })
	ag := &slowInitAgent{sawInit: make(chan bool, 1)}
	conn := acp.NewConn(inR, outW, acp.Options{})
	ag.testAgent = newTestAgent(conn).(*testAgent)
	served := make(chan error, 1)
	go func() { served <- conn.Serve(context.Background(), ag) }()
	_, err = inW.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}` + "\n")
	require.NoError(t, err)
	br := bufio.NewReader(outR)
	first, err := br.ReadString('\n')
	require.NoError(t, err)
	second, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(first, `{"id":1,"result":`), "initialize answered first: %s", first)
	assert.True(t, strings.HasPrefix(second, `{"id":2,"result":`), second)
	assert.True(t, <-ag.sawInit, "session/new was dispatched while initialize was still running")
	require.NoError(t, inW.Close())
	require.NoError(t, <-served)
}
