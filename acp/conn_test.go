package acp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func withTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConn_PromptStreamsUpdatesBeforeResponse(t *testing.T) {
	ctx := withTimeout(t)
	cc := acptest.Pipe(t, newTestAgent, nil)
	init, err := cc.Initialize(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, init.ProtocolVersion)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)
	resp, err := cc.Prompt(ctx, sid, "echo hello big world")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	// The response is read after the updates, so they are all here.
	assert.Equal(t, "hello big world", acptest.AgentText(cc.Updates(), sid))
}

func TestConn_PermissionAllowed(t *testing.T) {
	ctx := withTimeout(t)
	var asked *acp.RequestPermissionRequest
	fc := &acptest.FakeClient{RequestPermissionFunc: func(ctx context.Context, req *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		asked = req
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: "allow"}}, nil
	}}
	cc := acptest.Pipe(t, newTestAgent, fc)
	_, err := cc.Initialize(ctx)
	require.NoError(t, err)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)
	resp, err := cc.Prompt(ctx, sid, "permission")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	require.NotNil(t, asked)
	assert.Equal(t, "t1", asked.ToolCall.ToolCallID)
	ups := cc.Updates()
	require.Len(t, ups, 2)
	assert.Equal(t, acp.StatusCompleted, ups[1].Update.ToolCallUpdate.Status)
}

func TestConn_CancelDuringPermissionSendsCancelRequest(t *testing.T) {
	ctx := withTimeout(t)
	asked := make(chan struct{})
	abandoned := make(chan struct{})
	fc := &acptest.FakeClient{RequestPermissionFunc: func(ctx context.Context, req *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		close(asked)
		<-ctx.Done() // cancelled by the agent's $/cancel_request
		close(abandoned)
		return nil, ctx.Err()
	}}
	cc := acptest.Pipe(t, newTestAgent, fc)
	_, err := cc.Initialize(ctx)
	require.NoError(t, err)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)
	type result struct {
		r   *acp.PromptResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := cc.Prompt(ctx, sid, "permission")
		done <- result{r, err}
	}()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("permission never requested")
	}
	require.NoError(t, cc.Cancel(sid))
	select {
	case <-abandoned:
	case <-ctx.Done():
		t.Fatal("agent did not send $/cancel_request for its pending call")
	}
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, acp.StopCancelled, r.r.StopReason)
	ups := cc.Updates()
	require.Len(t, ups, 2, "the final tool_call_update after cancel must be written")
	assert.Equal(t, acp.StatusFailed, ups[1].Update.ToolCallUpdate.Status)
}

func TestConn_CancelRequestAnswersMinus32800(t *testing.T) {
	ctx := withTimeout(t)
	cc := acptest.Pipe(t, newTestAgent, nil)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := cc.Prompt(ctx, sid, "block")
		done <- err
	}()
	// Wait for the turn to be running; if the prompt ends first, say how.
	waited := make(chan error, 1)
	go func() {
		_, err := cc.WaitUpdates(ctx, 1)
		waited <- err
	}()
	select {
	case err := <-waited:
		require.NoError(t, err, "lines so far: %q", cc.Lines())
	case err := <-done:
		t.Fatalf("the blocking prompt ended before its first update: %v; lines: %q", err, cc.Lines())
	}
	// acptest numbers requests from 1: session/new is 1, the prompt 2.
	require.NoError(t, cc.Notify(acp.MethodCancelRequest, map[string]any{"requestId": 2}))
	err = <-done
	var ae *acp.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, acp.CodeRequestCancelled, ae.Code)
}

func TestConn_PanicBecomesInternalError(t *testing.T) {
	ctx := withTimeout(t)
	cc := acptest.Pipe(t, newTestAgent, nil)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)
	_, err = cc.Prompt(ctx, sid, "panic")
	var ae *acp.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, acp.CodeInternalError, ae.Code)
	assert.Contains(t, ae.Message, "boom")
	_, err = cc.Initialize(ctx)
	require.NoError(t, err, "the connection must survive a panic")
}

func TestConn_NilResultIsEmptyObject(t *testing.T) {
	stdin, stdout := startOSPipe(t)
	rc := acptest.NewRawClient(stdin, stdout)
	t.Cleanup(rc.Stop)
	require.NoError(t, rc.Send(`{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"m"}}`))
	m, err := rc.NextMessage(5 * time.Second)
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(m.Result))
}

func TestConn_ClientCapabilitiesStored(t *testing.T) {
	ctx := withTimeout(t)
	var conn *acp.Conn
	cc := acptest.Pipe(t, func(c acp.Client) acp.Agent {
		conn = c.(*acp.Conn)
		return newTestAgent(c)
	}, nil)
	assert.False(t, conn.ClientCapabilities().Terminal)
	_, err := cc.Initialize(ctx)
	require.NoError(t, err)
	caps := conn.ClientCapabilities()
	assert.True(t, caps.Terminal)
	assert.True(t, caps.FS.ReadTextFile)
}

func TestConn_ClientCallErrors(t *testing.T) {
	ctx := withTimeout(t)
	var client acp.Client
	fc := &acptest.FakeClient{}
	cc := acptest.Pipe(t, func(c acp.Client) acp.Agent { client = c; return newTestAgent(c) }, fc)
	_, err := cc.Initialize(ctx)
	require.NoError(t, err)
	sid, err := cc.NewSession(ctx, t.TempDir())
	require.NoError(t, err)

	// The fake's default for terminals is method-not-found; it must come
	// back as *acp.Error with its code.
	_, err = client.CreateTerminal(ctx, &acp.CreateTerminalRequest{SessionID: "s", Command: "/bin/true"})
	var ae *acp.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, acp.CodeMethodNotFound, ae.Code)

	_, err = client.ReadTextFile(ctx, &acp.ReadTextFileRequest{SessionID: "s", Path: "/nonexistent/file"})
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, acp.CodeResourceNotFound, ae.Code)

	path := t.TempDir() + "/f.txt"
	require.NoError(t, client.WriteTextFile(ctx, &acp.WriteTextFileRequest{SessionID: "s", Path: path, Content: "a\nb\nc\n"}))
	two, one := 2, 1
	r, err := client.ReadTextFile(ctx, &acp.ReadTextFileRequest{SessionID: "s", Path: path, Line: &two, Limit: &one})
	require.NoError(t, err)
	assert.Equal(t, "b\n", r.Content)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = client.RequestPermission(cancelled, &acp.RequestPermissionRequest{SessionID: "s"})
	require.ErrorIs(t, err, context.Canceled)
	// Updates are written even with a cancelled context.
	require.NoError(t, client.SessionUpdate(cancelled, &acp.SessionNotification{SessionID: sid, Update: acp.SessionUpdate{Kind: acp.UpdateCurrentMode, CurrentModeID: "code"}}))
	ups, err := cc.WaitUpdates(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "code", ups[0].Update.CurrentModeID)
}

func TestConn_ShutdownWithin1s(t *testing.T) {
	tests := []struct {
		name string
		stop func(stdin io.Closer, cancel context.CancelFunc)
	}{
		{"stdin EOF", func(stdin io.Closer, _ context.CancelFunc) { _ = stdin.Close() }},
		{"context cancelled", func(_ io.Closer, cancel context.CancelFunc) { cancel() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdinR, stdinW, err := os.Pipe()
			require.NoError(t, err)
			stdoutR, stdoutW, err := os.Pipe()
			require.NoError(t, err)
			t.Cleanup(func() { _ = stdinW.Close(); _ = stdoutW.Close(); _ = stdoutR.Close() })
			conn := acp.NewConn(stdinR, stdoutW, acp.Options{})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- conn.Serve(ctx, newTestAgent(conn)) }()
			rc := acptest.NewRawClient(stdinW, stdoutR)
			t.Cleanup(rc.Stop)
			require.NoError(t, rc.Send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`))
			_, err = rc.Next(5 * time.Second)
			require.NoError(t, err)
			require.NoError(t, rc.Send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"block"}]}}`))
			m, err := rc.NextMessage(5 * time.Second)
			require.NoError(t, err)
			require.Equal(t, acp.MethodSessionUpdate, m.Method)

			start := time.Now()
			tt.stop(stdinW, cancel)
			// The running turn is cancelled and still answered.
			m, err = rc.NextMessage(2 * time.Second)
			require.NoError(t, err)
			assert.Equal(t, "2", string(m.ID))
			require.NotNil(t, m.Error)
			assert.Equal(t, acp.CodeRequestCancelled, m.Error.Code)
			select {
			case err := <-served:
				require.NoError(t, err)
			case <-time.After(time.Second):
				t.Fatal("Serve did not return within 1s")
			}
			assert.Less(t, time.Since(start), time.Second)
		})
	}
}

func TestToRPCError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code int64
		msg  string
	}{
		{"acp error wrapped", fmt.Errorf("prompt: %w", acp.ErrAuthRequired()), acp.CodeAuthRequired, "Authentication required"},
		{"jsonrpc2 error", &jsonrpc2.Error{Code: -32002, Message: "x"}, -32002, "x"},
		{"cancelled", fmt.Errorf("turn: %w", context.Canceled), acp.CodeRequestCancelled, "Request cancelled"},
		{"plain", errors.New("disk full"), acp.CodeInternalError, "disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := acp.ToRPCError(tt.err)
			assert.Equal(t, tt.code, e.Code)
			assert.Equal(t, tt.msg, e.Message)
		})
	}
	e := acp.ToRPCError(acp.ErrInvalidParams("cwd", "cwd must be absolute"))
	require.NotNil(t, e.Data)
	assert.JSONEq(t, `{"field":"cwd"}`, string(*e.Data))
}

func TestConn_ServeTwiceFails(t *testing.T) {
	r, w := io.Pipe()
	t.Cleanup(func() { _ = w.Close() })
	conn := acp.NewConn(r, io.Discard, acp.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- conn.Serve(ctx, newTestAgent(conn)) }()
	// Wait until the first Serve is running, observed via a Client call
	// that no longer reports ErrNotServing.
	require.Eventually(t, func() bool {
		return !errors.Is(conn.SessionUpdate(ctx, &acp.SessionNotification{SessionID: "s", Update: acp.SessionUpdate{Kind: acp.UpdateCurrentMode, CurrentModeID: "m"}}), acp.ErrNotServing)
	}, 2*time.Second, time.Millisecond)
	require.Error(t, conn.Serve(ctx, newTestAgent(conn)))
	cancel()
	require.NoError(t, <-done)
}

// TestConn_OnFirstReplyRunsOnceAfterTheAnswer: the hook runs once, after
// the first response is on the wire; a notification read before it does
// not count, and later replies do not run it again.
func TestConn_OnFirstReplyRunsOnceAfterTheAnswer(t *testing.T) {
	ctx := withTimeout(t)
	stdinR, stdinW := io.Pipe()
	out := &acptest.SyncBuffer{}
	var calls atomic.Int32
	seen := make(chan string, 4)
	conn := acp.NewConn(stdinR, out, acp.Options{OnFirstReply: func() {
		calls.Add(1)
		seen <- out.String()
	}})
	served := make(chan error, 1)
	go func() { served <- conn.Serve(ctx, newTestAgent(conn)) }()
	write := func(line string) {
		_, err := io.WriteString(stdinW, line+"\n")
		require.NoError(t, err)
	}
	write(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"none"}}`)
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	select {
	case wire := <-seen:
		assert.Contains(t, wire, `"id":1`, "the hook ran before the answer was written")
		assert.Contains(t, wire, `"protocolVersion":1`)
	case <-ctx.Done():
		t.Fatal("the hook did not run after the initialize answer")
	}
	write(`{"jsonrpc":"2.0","id":2,"method":"no/such/method","params":{}}`)
	write(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}`)
	require.Eventually(t, func() bool {
		s := out.String()
		return strings.Contains(s, `"id":2`) && strings.Contains(s, `"id":3`)
	}, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, stdinW.Close())
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Serve did not return after EOF")
	}
	assert.Equal(t, int32(1), calls.Load())
}
