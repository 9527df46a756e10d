package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestGuard_TypeScriptSDK drives `acpd guard -- acpd` with the official ACP
// TypeScript SDK, the interop test's client (session/testdata/interop): a
// permission-gated call, a cancel while asking, a cancel while running, a
// turn the guard stops (the inner acpd's own cap is off) and the prompt
// after it. Every line the SDK got validates against the ACP schema and the
// protocol's ordering rules, the guard's own lines included.
func TestGuard_TypeScriptSDK(t *testing.T) {
	t.Parallel()
	node, npm := acptest.NodeAndNPM(t, "the TypeScript SDK guard test")
	clientDir := acptest.InteropClient(t, npm, filepath.Join("..", "..", "session", "testdata", "interop"))
	bin := acpdBinary(t)

	shell := func(cmd string) modeltest.Response {
		b, err := json.Marshal(map[string]string{"command": cmd})
		require.NoError(t, err)
		return modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: "run_shell_command", Arguments: string(b)}}}
	}
	workspace, home := t.TempDir(), t.TempDir()
	notes := filepath.Join(workspace, "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("hello"), 0o644))
	delegate, err := json.Marshal(map[string]string{"description": "Read the notes",
		"prompt": "INTEROP-SUBTASK: what do the notes say?", "subagent_type": "Explore"})
	require.NoError(t, err)
	read, err := json.Marshal(map[string]string{"file_path": notes})
	require.NoError(t, err)
	srv := modeltest.NewServer(t,
		shell("echo interop-hello"), modeltest.Response{Text: "said hello"}, // tools
		shell("sleep 30"),                                         // cancel-while-asking
		shell("sleep 31"),                                         // cancel-while-running
		shell("echo one"), shell("echo two"), shell("echo three"), // loop-stopped by the guard at the third
		modeltest.Response{Text: "after"}, // after-loop-stop
		// subagents: the agent call and its subagent's read are the turn's
		// two calls, within the guard's cap.
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: "call_delegate", Name: "agent", Arguments: string(delegate)}}},
		modeltest.Response{Text: "delegated"},
		modeltest.Response{Match: "INTEROP-SUBTASK", ToolCalls: []modeltest.ToolCall{{Name: "read_file", Arguments: string(read)}}},
		modeltest.Response{Match: "INTEROP-SUBTASK", Text: "The notes say hello."},
	)
	sum, _ := acptest.RunInteropClient(t, node, clientDir, workspace,
		[]string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "OPENAI_API_KEY=test-key"},
		bin, "guard", "--config", os.DevNull, "--data-dir", filepath.Join(home, "guard-data"), "--log-level", "warn",
		"--max-tool-calls-per-turn", "2", "--",
		bin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--data-dir", filepath.Join(home, "data"), "--log-level", "warn", "--approval-mode", "default",
		"--max-tool-calls-per-turn", "0")
	assert.Empty(t, sum.SDKErrors, "the SDK rejected lines it got through the guard")
	require.NotNil(t, sum.Initialize.AgentInfo)
	assert.Equal(t, "acpd", sum.Initialize.AgentInfo.Name, "initialize is the agent's own answer")

	require.Len(t, sum.Steps, 7)
	want := map[string]string{"tools": "end_turn", "cancel-while-asking": "cancelled", "cancel-while-running": "cancelled",
		"after-loop-stop": "end_turn", "subagents": "end_turn", "help": "end_turn"}
	for _, s := range sum.Steps {
		if s.Name == "loop-stopped" {
			require.NotNil(t, s.Error, "the guard stops this turn")
			assert.True(t, s.Error.RequestError)
			assert.Equal(t, acp.CodeInternalError, s.Error.Code)
			assert.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, s.Error.Message)
			assert.JSONEq(t, `{"code":"LOOP_DETECTED","errorKind":"loop_detected","loopType":"turn_tool_call_cap",`+
				`"capReason":"explicit","toolCalls":3,"maxKeyRepeat":1,"maxToolCallsPerTurn":2,"explicit":true}`, string(s.Error.Data))
			assert.Len(t, s.Permissions, 2, "the stopped call's permission request never reaches the editor")
			assert.ElementsMatch(t, []string{"completed", "completed", "failed"}, s.FinalStatuses())
			continue
		}
		require.Nil(t, s.Error, "step %s", s.Name)
		assert.Equal(t, want[s.Name], s.StopReason, "step %s", s.Name)
	}
	assert.Equal(t, 10, srv.Served(), "every scripted response used, none after the stop")
	assert.Equal(t, 2, srv.ServedMatching("INTEROP-SUBTASK"), "the subagent's")
	require.NotNil(t, sum.Exit.Code)
	assert.Zero(t, *sum.Exit.Code, "the guard exits with the agent's status, 0 when the editor closes")
}

// TestGuard_GoSDK drives `acpd guard -- acpd` with coder/acp-go-sdk's client:
// a permission-gated call goes through, a turn the guard stops answers the
// SDK with acpd's loop error, and the next prompt works.
func TestGuard_GoSDK(t *testing.T) {
	t.Parallel()
	bin := acpdBinary(t)
	shell := func(cmd string) modeltest.Response {
		b, _ := json.Marshal(map[string]string{"command": cmd})
		return modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: "run_shell_command", Arguments: string(b)}}}
	}
	srv := modeltest.NewServer(t,
		shell("echo go-sdk"), modeltest.Response{Text: "ran it"},
		shell("echo a"), shell("echo b"), shell("echo c"),
		modeltest.Response{Text: "after"},
	)
	home, workspace := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, "guard", "--config", os.DevNull, "--data-dir", filepath.Join(home, "guard-data"), "--log-level", "warn",
		"--max-tool-calls-per-turn", "2", "--",
		bin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--data-dir", filepath.Join(home, "data"), "--log-level", "warn", "--max-tool-calls-per-turn", "0")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "OPENAI_API_KEY=test-key"}
	stderr := &acptest.SyncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()

	ed := &acptest.SDKClient{Permission: func(_ context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
		for _, o := range p.Options {
			if o.Kind == sdk.PermissionOptionKindAllowOnce {
				return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(o.OptionId)}, nil
			}
		}
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}}
	conn := sdk.NewClientSideConnection(ed, stdin, stdout)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	init, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber})
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	require.NotNil(t, init.AgentInfo)
	assert.Equal(t, "acpd", init.AgentInfo.Name)
	sess, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: workspace, McpServers: []sdk.McpServer{}})
	require.NoError(t, err)

	resp, err := conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("run it")}})
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	assert.Equal(t, sdk.StopReasonEndTurn, resp.StopReason)

	_, err = conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("loop")}})
	var re *sdk.RequestError
	require.ErrorAs(t, err, &re, "the guard's loop error reaches the SDK as a JSON-RPC error")
	assert.Equal(t, acp.CodeInternalError, re.Code)
	assert.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, re.Message)
	b, err := json.Marshal(re.Data)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"capReason":"explicit"`)
	assert.Contains(t, string(b), `"toolCalls":3`)

	resp, err = conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("and now")}})
	require.NoError(t, err)
	assert.Equal(t, sdk.StopReasonEndTurn, resp.StopReason)
}
