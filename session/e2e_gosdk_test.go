package session_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestInterop_GoSDKAgainstBinary drives the built acpd with
// coder/acp-go-sdk's client-side connection, as a Go editor would:
// initialize, session/new, a prompt whose shell call asks permission, a
// cancel while the permission is pending, a loop-stopped prompt (the error
// data as the SDK surfaces it) and a prompt after it.
func TestInterop_GoSDKAgainstBinary(t *testing.T) {
	cwd := t.TempDir()
	list := `{"path":"` + cwd + `"}`
	srv := modeltest.NewServer(t,
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: "run_shell_command", Arguments: `{"command":"echo interop"}`}}},
		modeltest.Response{Text: "echoed"},
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: "run_shell_command", Arguments: `{"command":"echo wait"}`}}},
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: "list_directory", Arguments: list}}},
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: "glob", Arguments: `{"pattern":"*"}`}}},
		modeltest.Response{Text: "after"},
	)
	cmd := exec.Command(acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(),
		"--model", "scripted", "--data-dir", t.TempDir(), "--log-level", "warn", "--approval-mode", "default",
		"--max-tool-calls-per-turn", "1")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "OPENAI_API_KEY=test-key")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		acptest.WaitExit(t, cmd, 5*time.Second)
	})

	asked := make(chan sdk.RequestPermissionRequest, 1)
	answer := make(chan sdk.RequestPermissionResponse, 1)
	client := &acptest.SDKClient{Permission: func(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
		asked <- p
		return <-answer, nil
	}}
	cs := sdk.NewClientSideConnection(client, stdin, stdout)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	init, err := cs.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber})
	require.NoError(t, err)
	assert.EqualValues(t, 1, init.ProtocolVersion)
	require.NotNil(t, init.AgentInfo)
	assert.Equal(t, "acpd", init.AgentInfo.Name)
	sess, err := cs.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	require.NoError(t, err)
	sid := sess.SessionId

	// A shell call asks; allow it once.
	answer <- sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: "proceed_once", Outcome: "selected"}}}
	resp, err := cs.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: []sdk.ContentBlock{sdk.TextBlock("echo")}})
	require.NoError(t, err)
	assert.Equal(t, sdk.StopReasonEndTurn, resp.StopReason)
	p := <-asked
	var kinds []string
	for _, o := range p.Options {
		kinds = append(kinds, string(o.Kind))
	}
	assert.Equal(t, []string{"allow_always", "allow_always", "allow_once", "reject_once"}, kinds)
	assert.Equal(t, "echoed", client.Text())

	// Cancel while the permission request is pending.
	type result struct {
		r   sdk.PromptResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := cs.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: []sdk.ContentBlock{sdk.TextBlock("wait")}})
		done <- result{r, err}
	}()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("no permission request")
	}
	require.NoError(t, cs.Cancel(ctx, sdk.CancelNotification{SessionId: sid}))
	answer <- sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, sdk.StopReasonCancelled, r.r.StopReason)

	// With a cap of 1, the turn's second call stops it: the SDK surfaces the
	// JSON-RPC error with its data.
	_, err = cs.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: []sdk.ContentBlock{sdk.TextBlock("loop")}})
	var re *sdk.RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, -32603, re.Code)
	assert.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, re.Message)
	data, ok := re.Data.(map[string]any)
	require.True(t, ok, "data is %T", re.Data)
	for k, v := range map[string]any{"code": "LOOP_DETECTED", "errorKind": "loop_detected", "loopType": "turn_tool_call_cap",
		"capReason": "explicit", "toolCalls": float64(2), "maxToolCallsPerTurn": float64(1), "explicit": true} {
		assert.Equal(t, v, data[k], k)
	}

	// The session goes on.
	resp, err = cs.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: []sdk.ContentBlock{sdk.TextBlock("after")}})
	require.NoError(t, err)
	assert.Equal(t, sdk.StopReasonEndTurn, resp.StopReason)
	assert.Equal(t, 6, srv.Served(), "every scripted response was used")
}
