package acp_test

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/stretchr/testify/require"
)

// testAgent is a minimal agent for exercising the connection. Prompt text
// selects the behaviour: "echo <s>" streams s in chunks, "permission" runs a
// tool call behind a permission request, "block" waits for cancellation and
// returns ctx.Err(), "panic" panics, "nil" returns a nil response.
type testAgent struct {
	client acp.Client

	mu    sync.Mutex
	seq   int
	turns map[string]context.CancelFunc
}

func newTestAgent(c acp.Client) acp.Agent {
	return &testAgent{client: c, turns: map[string]context.CancelFunc{}}
}

func (a *testAgent) Initialize(ctx context.Context, req *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	return &acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersion,
		AgentInfo:       &acp.Implementation{Name: "test-agent", Version: "0.0.1"},
	}, nil
}

func (a *testAgent) Authenticate(ctx context.Context, req *acp.AuthenticateRequest) (*acp.Empty, error) {
	return nil, nil
}

func (a *testAgent) NewSession(ctx context.Context, req *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	return &acp.NewSessionResponse{SessionID: "s" + strconv.Itoa(a.seq)}, nil
}

func (a *testAgent) LoadSession(ctx context.Context, req *acp.LoadSessionRequest) (*acp.LoadSessionResponse, error) {
	return nil, acp.ErrResourceNotFound(req.SessionID)
}

func (a *testAgent) ResumeSession(ctx context.Context, req *acp.ResumeSessionRequest) (*acp.LoadSessionResponse, error) {
	return nil, acp.ErrResourceNotFound(req.SessionID)
}

func (a *testAgent) ListSessions(ctx context.Context, req *acp.ListSessionsRequest) (*acp.ListSessionsResponse, error) {
	return &acp.ListSessionsResponse{}, nil
}

func (a *testAgent) CloseSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	a.Cancel(req)
	return &acp.Empty{}, nil
}

func (a *testAgent) DeleteSession(ctx context.Context, req *acp.SessionIDRequest) (*acp.Empty, error) {
	return &acp.Empty{}, nil
}

func (a *testAgent) SetSessionMode(ctx context.Context, req *acp.SetSessionModeRequest) (*acp.Empty, error) {
	return nil, acp.ErrInvalidParams("modeId", "unknown mode "+req.ModeID)
}

func (a *testAgent) SetSessionConfigOption(ctx context.Context, req *acp.SetSessionConfigOptionRequest) (*acp.SetSessionConfigOptionResponse, error) {
	return &acp.SetSessionConfigOptionResponse{}, nil
}

func (a *testAgent) Prompt(ctx context.Context, req *acp.PromptRequest) (*acp.PromptResponse, error) {
	text := ""
	if len(req.Prompt) > 0 {
		text = req.Prompt[0].Text
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	a.turns[req.SessionID] = cancel
	a.mu.Unlock()
	chunk := func(s string) error {
		b := acp.TextBlock(s)
		return a.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: req.SessionID, Update: acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b}})
	}
	switch {
	case strings.HasPrefix(text, "echo "):
		for _, w := range strings.SplitAfter(strings.TrimPrefix(text, "echo "), " ") {
			if err := chunk(w); err != nil {
				return nil, err
			}
		}
		return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
	case text == "permission":
		tc := &acp.ToolCall{ToolCallID: "t1", Title: "touch file", Kind: acp.KindEdit, Status: acp.StatusPending,
			Locations: []acp.ToolCallLocation{{Path: "/tmp/x"}}}
		if err := a.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: req.SessionID, Update: acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: tc}}); err != nil {
			return nil, err
		}
		resp, err := a.client.RequestPermission(ctx, &acp.RequestPermissionRequest{
			SessionID: req.SessionID,
			ToolCall:  acp.ToolCallUpdate{ToolCallID: "t1"},
			Options: []acp.PermissionOption{
				{OptionID: "allow", Name: "Allow", Kind: acp.AllowOnce},
				{OptionID: "reject", Name: "Reject", Kind: acp.RejectOnce},
			},
		})
		status := acp.StatusCompleted
		stop := acp.StopEndTurn
		if err != nil || resp.Outcome.Outcome == "cancelled" {
			status, stop = acp.StatusFailed, acp.StopCancelled
		} else if resp.Outcome.OptionID != "allow" {
			status = acp.StatusFailed
		}
		// Sent with the (possibly cancelled) turn ctx on purpose: final
		// updates after a cancel must still be written.
		if err := a.client.SessionUpdate(ctx, &acp.SessionNotification{SessionID: req.SessionID, Update: acp.SessionUpdate{
			Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{ToolCallID: "t1", Status: status}}}); err != nil {
			return nil, err
		}
		return &acp.PromptResponse{StopReason: stop}, nil
	case text == "block":
		if err := chunk("waiting"); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, ctx.Err()
	case text == "panic":
		panic("boom")
	case text == "nil":
		return nil, nil
	}
	return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
}

func (a *testAgent) Cancel(req *acp.SessionIDRequest) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.turns[req.SessionID]; c != nil {
		c()
	}
}

// startOSPipe serves a testAgent over real os.Pipe pairs and returns the
// client ends; cleanup closes stdin and checks Serve returns promptly.
func startOSPipe(t *testing.T) (io.WriteCloser, io.Reader) {
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	stdoutR, stdoutW, err := os.Pipe()
	require.NoError(t, err)
	conn := acp.NewConn(stdinR, stdoutW, acp.Options{})
	done := make(chan error, 1)
	go func() { done <- conn.Serve(context.Background(), newTestAgent(conn)) }()
	t.Cleanup(func() {
		_ = stdinW.Close()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Error("Serve did not return after stdin EOF")
		}
		_ = stdoutW.Close()
		_ = stdoutR.Close()
	})
	return stdinW, stdoutR
}
