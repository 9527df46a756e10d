package acp_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/acpd/acpd/acp"
	sdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkClient is an editor built on coder/acp-go-sdk's client side.
type sdkClient struct {
	mu      sync.Mutex
	updates []sdk.SessionNotification

	permission func(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error)
}

func (c *sdkClient) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n)
	return nil
}

func (c *sdkClient) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return c.permission(ctx, p)
}

func (c *sdkClient) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound("fs/read_text_file")
}

func (c *sdkClient) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound("fs/write_text_file")
}

func (c *sdkClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound("terminal/create")
}

func (c *sdkClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound("terminal/kill")
}

func (c *sdkClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound("terminal/output")
}

func (c *sdkClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound("terminal/release")
}

func (c *sdkClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound("terminal/wait_for_exit")
}

func (c *sdkClient) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := ""
	for _, n := range c.updates {
		if u := n.Update.AgentMessageChunk; u != nil && u.Content.Text != nil {
			s += u.Content.Text.Text
		}
	}
	return s
}

func TestInterop_CoderSDKClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	conn := acp.NewConn(agentIn, agentOut, acp.Options{})
	served := make(chan error, 1)
	go func() { served <- conn.Serve(ctx, newTestAgent(conn)) }()
	t.Cleanup(func() {
		_ = clientOut.Close()
		select {
		case err := <-served:
			assert.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Error("Serve did not return")
		}
		_ = agentOut.Close()
	})

	asked := make(chan struct{}, 1)
	release := make(chan sdk.RequestPermissionResponse, 1)
	client := &sdkClient{permission: func(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
		asked <- struct{}{}
		return <-release, nil
	}}
	cs := sdk.NewClientSideConnection(client, clientOut, clientIn)

	init, err := cs.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber})
	require.NoError(t, err)
	assert.EqualValues(t, 1, init.ProtocolVersion)
	require.NotNil(t, init.AgentInfo)
	assert.Equal(t, "test-agent", init.AgentInfo.Name)

	sess, err := cs.NewSession(ctx, sdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []sdk.McpServer{}})
	require.NoError(t, err)
	sid := sess.SessionId

	resp, err := cs.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: []sdk.ContentBlock{sdk.TextBlock("echo interop works")}})
	require.NoError(t, err)
	assert.Equal(t, sdk.StopReasonEndTurn, resp.StopReason)
	assert.Equal(t, "interop works", client.text())

	// Permission granted.
	release <- sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: "allow", Outcome: "selected"}}}
	resp, err = cs.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: []sdk.ContentBlock{sdk.TextBlock("permission")}})
	require.NoError(t, err)
	assert.Equal(t, sdk.StopReasonEndTurn, resp.StopReason)
	<-asked

	// Cancel while the permission request is pending; the client then
	// answers it with the cancelled outcome, as the spec requires.
	type result struct {
		r   sdk.PromptResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := cs.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: []sdk.ContentBlock{sdk.TextBlock("permission")}})
		done <- result{r, err}
	}()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("no permission request")
	}
	require.NoError(t, cs.Cancel(ctx, sdk.CancelNotification{SessionId: sid}))
	release <- sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, sdk.StopReasonCancelled, r.r.StopReason)

	// Validation errors surface as SDK request errors with our code.
	_, err = cs.NewSession(ctx, sdk.NewSessionRequest{Cwd: "relative", McpServers: []sdk.McpServer{}})
	var re *sdk.RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, acp.CodeInvalidParams, re.Code)
}
