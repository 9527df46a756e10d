package session_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model/modeltest"
)

// interopDir holds the pinned SDK manifest, its lock and the Node client.
const interopDir = "testdata/interop"

// TestInterop_TypeScriptSDK drives the built acpd with the official ACP
// TypeScript SDK (@agentclientprotocol/sdk 2.4.0 on the machine's node):
// initialize, session/new, a prompt with a permission-gated tool call, a
// prompt cancelled while its permission request is pending, one cancelled
// while its tool runs, a loop-stopped prompt and a prompt after it.
func TestInterop_TypeScriptSDK(t *testing.T) {
	// CI sets ACPD_REQUIRE_INTEROP so that a missing node or npm fails
	// the run instead of skipping the test.
	node, npm := acptest.NodeAndNPM(t, "the interop test")
	clientDir := acptest.InteropClient(t, npm, interopDir)

	shell := func(cmd string) modeltest.ToolCall {
		b, err := json.Marshal(map[string]string{"command": cmd})
		require.NoError(t, err)
		return modeltest.ToolCall{Name: "run_shell_command", Arguments: string(b)}
	}
	calls := func(cs ...modeltest.ToolCall) modeltest.Response { return modeltest.Response{ToolCalls: cs} }
	// One response list for the whole session, in prompt order. The cap of
	// one call per turn is counted over a turn, so every turn but the
	// loop-stopped one makes a single call; the cancelled turns end at the
	// cancel and ask the model nothing more.
	srv := modeltest.NewServer(t,
		calls(shell("echo interop-hello")), modeltest.Response{Text: "said hello"}, // tools
		calls(shell("sleep 30")),                           // cancel-while-asking
		calls(shell("sleep 31")),                           // cancel-while-running
		calls(shell("echo one")), calls(shell("echo two")), // loop-stopped
		modeltest.Response{Text: "after"}, // after-loop-stop
		calls(agentTC("call_delegate", "Read the notes", "INTEROP-SUBTASK: what do the notes say?", "Explore")), // subagents
		modeltest.Response{Text: "delegated"},
	)
	workspace := t.TempDir()
	notes := filepath.Join(workspace, "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("hello"), 0o644))
	srv.Add(
		modeltest.Response{Match: "INTEROP-SUBTASK", ToolCalls: []modeltest.ToolCall{readCall(notes)}},
		modeltest.Response{Match: "INTEROP-SUBTASK", Text: "The notes say hello."},
	)

	sum, agentLines := acptest.RunInteropClient(t, node, clientDir, workspace,
		[]string{"XDG_CONFIG_HOME=" + t.TempDir(), "OPENAI_API_KEY=test-key"},
		acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--data-dir", t.TempDir(), "--log-level", "warn",
		"--approval-mode", "default", "--max-tool-calls-per-turn", "1")

	assert.Equal(t, acp.ProtocolVersion, sum.Initialize.ProtocolVersion)
	require.NotNil(t, sum.Initialize.AgentInfo)
	assert.Equal(t, "acpd", sum.Initialize.AgentInfo.Name)
	assert.NotEmpty(t, sum.Initialize.AgentInfo.Version)
	assert.NotEmpty(t, sum.NewSession.SessionID)
	assert.Equal(t, "default", sum.NewSession.CurrentModeID)
	assert.Empty(t, sum.SDKErrors, "the SDK rejected lines acpd wrote")

	steps := map[string]acptest.InteropStep{}
	for _, s := range sum.Steps {
		steps[s.Name] = s
	}
	require.Len(t, sum.Steps, 7)
	for _, tc := range []struct {
		name        string
		stopReason  string
		loopStop    bool
		toolCalls   int
		updates     int
		permissions int
		statuses    []string
		failures    []string
	}{
		// pending → permission → in_progress → completed.
		{name: "tools", stopReason: string(acp.StopEndTurn), toolCalls: 1, updates: 2, permissions: 1, statuses: []string{"completed"}},
		// pending → permission answered cancelled → failed.
		{name: "cancel-while-asking", stopReason: string(acp.StopCancelled), toolCalls: 1, updates: 1, permissions: 1, statuses: []string{"failed"},
			failures: []string{loopdetect.ToolExecutionCancelledMessage}},
		// pending → allowed → in_progress → cancelled while running → failed.
		{name: "cancel-while-running", stopReason: string(acp.StopCancelled), toolCalls: 1, updates: 2, permissions: 1, statuses: []string{"failed"},
			failures: []string{loopdetect.ToolExecutionCancelledMessage}},
		// The first call runs; the second batch crosses the cap and is
		// skipped whole, shown as a call that fails with the skip message.
		{name: "loop-stopped", loopStop: true, toolCalls: 2, updates: 3, permissions: 1, statuses: []string{"completed", "failed"},
			failures: []string{loopdetect.LoopDetectedSkipMessage}},
		{name: "after-loop-stop", stopReason: string(acp.StopEndTurn)},
		// The agent call and the subagent's read, both completed; the
		// read names the agent call in _meta.
		{name: "subagents", stopReason: string(acp.StopEndTurn), toolCalls: 2, updates: 2, statuses: []string{"completed", "completed"}},
		{name: "help", stopReason: string(acp.StopEndTurn)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := steps[tc.name]
			require.True(t, ok, "step %s missing from the summary", tc.name)
			if tc.loopStop {
				require.NotNil(t, s.Error, "a loop-stopped prompt answers an error, got stopReason %q", s.StopReason)
				assert.True(t, s.Error.RequestError, "the SDK rejects with its RequestError")
				assert.Equal(t, acp.CodeInternalError, s.Error.Code)
				assert.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, s.Error.Message)
				assert.JSONEq(t, `{"code":"LOOP_DETECTED","errorKind":"loop_detected","loopType":"turn_tool_call_cap",`+
					`"capReason":"explicit","toolCalls":2,"maxKeyRepeat":1,"maxToolCallsPerTurn":1,"explicit":true}`, string(s.Error.Data))
			} else {
				require.Nil(t, s.Error, "prompt failed")
				assert.Equal(t, tc.stopReason, s.StopReason)
			}
			assert.Equal(t, tc.toolCalls, s.ToolCalls, "tool_call frames")
			assert.Equal(t, tc.updates, s.ToolCallUpdates, "tool_call_update frames")
			assert.Len(t, s.Permissions, tc.permissions, "permission requests")
			for _, p := range s.Permissions {
				assert.Contains(t, p.OptionKinds, "allow_once")
				assert.Contains(t, p.OptionKinds, "reject_once")
			}
			assert.ElementsMatch(t, tc.statuses, s.FinalStatuses(), "final tool call statuses")
			var failures []string
			for _, f := range s.Failures {
				failures = append(failures, f)
			}
			assert.ElementsMatch(t, tc.failures, failures, "failed calls' text")
		})
	}
	// The running `sleep 31` was killed on cancel, not waited out.
	assert.Less(t, steps["cancel-while-running"].MS, 15_000, "cancel-while-running took %d ms", steps["cancel-while-running"].MS)
	assert.Equal(t, "said hello", steps["tools"].Text)
	assert.Equal(t, "after", steps["after-loop-stop"].Text)
	assert.Equal(t, "delegated", steps["subagents"].Text, "the subagent's text is not the assistant's")
	require.Len(t, steps["subagents"].Parents, 1)
	for id, parent := range steps["subagents"].Parents {
		assert.NotEqual(t, "call_delegate", id)
		assert.Equal(t, "call_delegate", parent)
	}
	assert.Equal(t, 2, srv.ServedMatching("INTEROP-SUBTASK"))
	assert.Contains(t, steps["help"].Text, "/compress [focus]")
	// The commands were announced once, after session/new.
	require.Len(t, sum.AvailableCommands, 1, "available_commands_update")
	assert.Equal(t, []string{"compress", "init", "context", "tools", "mcp", "agents", "rewind", "fork", "btw", "help"}, sum.AvailableCommands[0])
	commandLines := 0
	for _, l := range agentLines {
		if strings.Contains(l, `"available_commands_update"`) {
			commandLines++
		}
	}
	assert.Equal(t, 1, commandLines, "available_commands_update lines on the wire")
	assert.Equal(t, 9, srv.Served(), "every scripted response used, none requested after a cancel")

	require.NotNil(t, sum.Exit.Code, "acpd exit: signal %v, error %q", sum.Exit.Signal, sum.Exit.Error)
	assert.Zero(t, *sum.Exit.Code, "acpd exits 0 when its stdin closes")
}
