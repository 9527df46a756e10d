package acp_test

import (
	"bytes"
	"context"
	"testing"

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
