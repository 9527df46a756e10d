package acp_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	sdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	client := &acptest.SDKClient{Permission: func(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
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
	assert.Equal(t, "interop works", client.Text())

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
