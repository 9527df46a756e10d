package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/tools"
)

// Daemon-guard vectors 91–104 of loop-detection.md §14.

func nDistinct(prefix string, n int) []call {
	var cs []call
	for i := range n {
		cs = append(cs, read(fmt.Sprintf("/w/%s_%d", prefix, i)))
	}
	return cs
}

func TestVector91_ExplicitCapSkipsWholeBatch(t *testing.T) {
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 3, Explicit: true}, SkipLoopDetection: true},
		callsResp(nDistinct("a", 2)...), callsResp(nDistinct("b", 2)...), textResp("unreached"))
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopTurnToolCallCap)
	completed, failed := h.client.counts()
	assert.Equal(t, 2, completed)
	assert.Equal(t, 2, failed)
	assert.Equal(t, []string{loopdetect.LoopDetectedSkipMessage, loopdetect.LoopDetectedSkipMessage}, h.client.failedTexts())
	assert.Len(t, h.prov.requests, 2, "no model send after the stop")
}

func TestVector92_OneBatchPastExplicitCap(t *testing.T) {
	var builds atomic.Int32
	reg := func() *tools.Registry {
		return tools.NewRegistry(&countingTool{fakeTool: fakeTool{name: "read_file", kind: acp.KindRead}, builds: &builds})
	}
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 100, Explicit: true}, Tools: reg},
		callsResp(nDistinct("a", 101)...))
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopTurnToolCallCap)
	assert.Zero(t, builds.Load(), "no tool is built")
	assert.Len(t, h.prov.requests, 1)
}

type countingTool struct {
	fakeTool
	builds *atomic.Int32
}

func (c *countingTool) Build(env *tools.Env, args json.RawMessage) (tools.Call, error) {
	c.builds.Add(1)
	return c.fakeTool.Build(env, args)
}

func TestVector93_AdaptiveLetsBigDistinctBatchRun(t *testing.T) {
	h := newHarness(t, Options{}, callsResp(nDistinct("a", 101)...), textResp("done"))
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	completed, _ := h.client.counts()
	assert.Equal(t, 101, completed)
}

func TestVector94_Backstop(t *testing.T) {
	var script [][]model.Event
	for i := range 10 {
		script = append(script, callsResp(nDistinct(fmt.Sprint("r", i), 100)...))
	}
	script = append(script, callsResp(read("/w/last")), textResp("unreached"))
	h := newHarness(t, Options{}, script...)
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopTurnToolCallCap)
	completed, failed := h.client.counts()
	assert.Equal(t, 1000, completed)
	assert.Equal(t, 1, failed)
}

func TestVector95_AdaptiveStuckPastSoftCap(t *testing.T) {
	var script [][]model.Event
	for i := range 30 {
		if i%5 == 0 {
			script = append(script, callsResp(read("/w/X")))
		} else {
			script = append(script, callsResp(read(fmt.Sprint("/w/d", i))))
		}
	}
	// 6 X among the first 30 calls; fill up to 100 then one more batch.
	script = append(script, callsResp(nDistinct("fill", 70)...), callsResp(read("/w/over")), textResp("unreached"))
	h := newHarness(t, Options{SkipLoopDetection: true}, script...)
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopTurnToolCallCap)
	completed, failed := h.client.counts()
	assert.Equal(t, 100, completed)
	assert.Equal(t, 1, failed)
}

func TestVector96_GlobalDuplicateWhenHeuristicsOn(t *testing.T) {
	var script [][]model.Event
	for range 5 {
		script = append(script, callsResp(read("/w/X")))
	}
	script = append(script, callsResp(read("/w/other"), read("/w/X")), textResp("unreached"))
	h := newHarness(t, Options{SkipLoopDetection: false}, script...)
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopGlobalToolCallDuplicate)
	completed, failed := h.client.counts()
	assert.Equal(t, 5, completed)
	assert.Equal(t, 2, failed, "the batch holding the 6th occurrence is skipped whole")
}

func TestVector97_NoConsecutiveGuardInDaemon(t *testing.T) {
	var script [][]model.Event
	for range 50 {
		script = append(script, callsResp(read("/w/X")))
	}
	h := newHarness(t, Options{SkipLoopDetection: true}, append(script, textResp("done"))...)
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	completed, _ := h.client.counts()
	assert.Equal(t, 50, completed)
}

func TestVector98_UnknownToolStopsAtThree(t *testing.T) {
	cs := []call{
		{name: "missing_tool", args: map[string]any{"value": "one"}},
		{name: "missing_tool", args: map[string]any{"value": "two"}},
		{name: "missing_tool", args: map[string]any{"value": "three"}},
		{name: "missing_tool", args: map[string]any{"value": "four"}},
	}
	h := newHarness(t, Options{}, callsResp(cs...), textResp("unreached"))
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopInvalidToolParamsStagnation)
	notFound := `Tool "missing_tool" not found in registry.`
	assert.Equal(t, []string{notFound, notFound, notFound, loopdetect.LoopDetectedSkipMessage}, h.client.failedTexts())
	assert.Len(t, h.prov.requests, 1)
}

func TestVector99_BuildErrorsAcrossRounds(t *testing.T) {
	bad := func() *tools.Registry {
		return tools.NewRegistry(&fakeTool{name: "ask_user_question", buildErr: errors.New(`Parameter "questions" must be an array`)})
	}
	q := call{name: "ask_user_question", args: map[string]any{"questions": "x"}}
	h := newHarness(t, Options{Tools: bad}, callsResp(q), callsResp(q), callsResp(q), textResp("unreached"), textResp("next"))
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopInvalidToolParamsStagnation)
	assert.Len(t, h.prov.requests, 3, "no 4th model send")

	_, err = h.prompt(t, "again")
	require.NoError(t, err)
	msgs := h.prov.requests[3].Messages
	var sawError, sawContext bool
	for _, m := range msgs {
		if m.Role == model.RoleTool && strings.Contains(m.Content, `Parameter "questions" must be an array`) {
			sawError = true
		}
		if m.Role == model.RoleUser && strings.Contains(m.Content, "terminated because the model exceeded tool-call safety limits") {
			sawContext = true
		}
	}
	assert.True(t, sawError)
	assert.True(t, sawContext)
}

func TestVector100_InvalidParamsCountedPerName(t *testing.T) {
	reg := func() *tools.Registry {
		return tools.NewRegistry(
			&fakeTool{name: "a", buildErr: errors.New("bad a")},
			&fakeTool{name: "b", buildErr: errors.New("bad b")},
		)
	}
	h := newHarness(t, Options{Tools: reg},
		callsResp(call{name: "a", args: map[string]any{"i": 1}}, call{name: "b", args: map[string]any{"i": 1}}),
		callsResp(call{name: "a", args: map[string]any{"i": 2}}, call{name: "b", args: map[string]any{"i": 2}}),
		textResp("done"))
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
}

func TestVector101_RejectionsAreNotInvalidParams(t *testing.T) {
	w := call{name: "write_file", args: map[string]any{"file_path": "/w/a"}}
	h := newHarness(t, Options{ApprovalMode: ModeDefault}, callsResp(w), callsResp(w), callsResp(w), textResp("done"))
	h.client.Permission = func(context.Context, *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: optCancel}}, nil
	}
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Len(t, h.client.perms, 3)
}

func TestVector102_CancellationWinsOverLoopStop(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	reg := func() *tools.Registry {
		return tools.NewRegistry(&fakeTool{name: "read_file", kind: acp.KindRead, run: func(context.Context) { cancel() }})
	}
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 1, Explicit: true}, Tools: reg},
		callsResp(read("/w/a")), callsResp(read("/w/b")))
	resp, err := h.m.Prompt(ctx, &acp.PromptRequest{SessionID: h.sid, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
	require.NoError(t, err)
	assert.Equal(t, acp.StopCancelled, resp.StopReason)
}

func TestVector103_RetryDiscardsCollectedCalls(t *testing.T) {
	first := callsResp(nDistinct("lost", 3)...)
	first = first[:len(first)-1]
	first = append(first, model.Event{Kind: model.EventRetry, RetryErr: errors.New("stream cut")})
	first = append(first, callsResp(nDistinct("kept", 2)...)...)
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 2, Explicit: true}}, first, textResp("done"))
	resp, err := h.prompt(t, "go")
	require.NoError(t, err, "only the 2 calls after the retry count against the cap of 2")
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	completed, failed := h.client.counts()
	assert.Equal(t, 2, completed)
	assert.Zero(t, failed)
}

func TestVector104_DuplicateProviderID(t *testing.T) {
	sh := call{name: "read_file", args: map[string]any{"file_path": "/w/a"}, id: "shell_1"}
	script := [][]model.Event{callsResp(sh), callsResp(sh), textResp("done")}
	h := newHarness(t, Options{}, append(script, script...)...)
	for range 2 {
		before := len(h.prov.requests)
		resp, err := h.prompt(t, "go")
		require.NoError(t, err)
		assert.Equal(t, acp.StopEndTurn, resp.StopReason)
		followUp := h.prov.requests[before+2].Messages
		last := followUp[len(followUp)-1]
		assert.Equal(t, model.RoleTool, last.Role)
		assert.Contains(t, last.Content, `Duplicate provider tool call id "shell_1"`)
		assert.Equal(t, model.RoleAssistant, followUp[len(followUp)-2].Role, "exactly one part follows the replayed call")
	}
}

func TestVector104_RepeatedDuplicateReplayStops(t *testing.T) {
	sh := call{name: "read_file", args: map[string]any{"file_path": "/w/a"}, id: "shell_1"}
	h := newHarness(t, Options{}, callsResp(sh), callsResp(sh), callsResp(sh), textResp("unreached"))
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopGlobalToolCallDuplicate)
}

// Approval vectors 119–124.

func TestVector120_PlanModeBlocksEdits(t *testing.T) {
	w := call{name: "write_file", args: map[string]any{"file_path": "/w/a"}}
	h := newHarness(t, Options{ApprovalMode: ModePlan}, callsResp(w), textResp("done"))
	_, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Empty(t, h.client.perms)
	assert.Equal(t, []string{`Plan mode is active. The tool "write_file" cannot be executed because it modifies the system. Please use the exit_plan_mode tool to present your plan and exit plan mode before making changes.`}, h.client.failedTexts())
}

func TestVector121_AutoEdit(t *testing.T) {
	w := call{name: "write_file", args: map[string]any{"file_path": "/w/a"}}
	x := call{name: "run_shell_command", args: map[string]any{"command": "npm test"}}
	h := newHarness(t, Options{ApprovalMode: ModeAutoEdit}, callsResp(w), callsResp(x), textResp("done"))
	_, err := h.prompt(t, "go")
	require.NoError(t, err)
	require.Len(t, h.client.perms, 1, "only the exec call asks")
	assert.Equal(t, "run_shell_command", h.client.perms[0].ToolCall.Meta["toolName"])
	var statuses []acp.ToolCallStatus
	for _, u := range h.client.updates[:2] {
		if u.ToolCall != nil {
			statuses = append(statuses, u.ToolCall.Status)
		} else {
			statuses = append(statuses, u.ToolCallUpdate.Status)
		}
	}
	assert.Equal(t, []acp.ToolCallStatus{acp.StatusInProgress, acp.StatusCompleted}, statuses)
}

func TestVector122_ExecOptions(t *testing.T) {
	opts := permissionOptions(tools.Confirmation{Kind: tools.ConfirmExec, Label: "npm test"})
	assert.Equal(t, []acp.PermissionOption{
		{OptionID: optProceedAlwaysProject, Name: "Always Allow in project: npm test", Kind: acp.AllowAlways},
		{OptionID: optProceedAlwaysUser, Name: "Always Allow for user: npm test", Kind: acp.AllowAlways},
		{OptionID: optProceedOnce, Name: "Allow", Kind: acp.AllowOnce},
		{OptionID: optCancel, Name: "Reject", Kind: acp.RejectOnce},
	}, opts)
}

func TestVector123_PermissionCancelSkipsRest(t *testing.T) {
	x := func(i int) call {
		return call{name: "run_shell_command", args: map[string]any{"command": fmt.Sprint("echo ", i)}}
	}
	h := newHarness(t, Options{ApprovalMode: ModeDefault}, callsResp(x(1), x(2), x(3)), textResp("unreached"))
	h.client.Permission = func(context.Context, *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}, nil
	}
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Equal(t, []string{
		`Tool "run_shell_command" was canceled by the user.`,
		loopdetect.PermissionCancelSkipMessage,
		loopdetect.PermissionCancelSkipMessage,
	}, h.client.failedTexts())
	assert.Len(t, h.prov.requests, 1)
}

func TestVector123_UnofferedOptionIsNotApproval(t *testing.T) {
	x := call{name: "run_shell_command", args: map[string]any{"command": "rm -rf /"}}
	h := newHarness(t, Options{ApprovalMode: ModeDefault}, callsResp(x), textResp("unreached"))
	h.client.Permission = func(context.Context, *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: "yes_please"}}, nil
	}
	_, err := h.prompt(t, "go")
	require.NoError(t, err)
	completed, _ := h.client.counts()
	assert.Zero(t, completed)
	assert.Equal(t, []string{`Permission request failed for "run_shell_command": Permission response selected unoffered option: yes_please`}, h.client.failedTexts())
}

func TestVector124_UnknownModeAndConfigID(t *testing.T) {
	h := newHarness(t, Options{})
	_, err := h.m.SetSessionMode(t.Context(), &acp.SetSessionModeRequest{SessionID: h.sid, ModeID: "bogus"})
	var e *acp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, acp.CodeInvalidParams, e.Code)
	assert.Equal(t, "Unknown approval mode: bogus", e.Message)

	_, err = h.m.SetSessionConfigOption(t.Context(), &acp.SetSessionConfigOptionRequest{SessionID: h.sid, ConfigID: "foo", Value: []byte(`"x"`)})
	require.ErrorAs(t, err, &e)
	assert.Equal(t, acp.CodeInvalidParams, e.Code)
	assert.Equal(t, "Unsupported configId: foo", e.Message)
}

func TestPrompt_SecondPromptCancelsFirst(t *testing.T) {
	h := newHarness(t, Options{}, textResp("one"), textResp("two"))
	h.prov.block = make(chan struct{})
	first := make(chan *acp.PromptResponse, 1)
	go func() {
		r, _ := h.prompt(t, "first")
		first <- r
	}()
	// Wait until the first turn is in the model call.
	require.Eventually(t, func() bool {
		h.prov.mu.Lock()
		defer h.prov.mu.Unlock()
		return len(h.prov.requests) == 1
	}, testTimeout, tick)
	h.prov.mu.Lock()
	h.prov.block = nil
	h.prov.mu.Unlock()
	resp, err := h.prompt(t, "second")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	select {
	case r := <-first:
		assert.Equal(t, acp.StopCancelled, r.StopReason)
	case <-t.Context().Done():
		t.Fatal("first prompt never answered")
	}
}

func TestCancel_DuringModelStream(t *testing.T) {
	h := newHarness(t, Options{}, textResp("never"))
	h.prov.block = make(chan struct{})
	done := make(chan *acp.PromptResponse, 1)
	go func() {
		r, _ := h.prompt(t, "go")
		done <- r
	}()
	require.Eventually(t, func() bool {
		h.prov.mu.Lock()
		defer h.prov.mu.Unlock()
		return len(h.prov.requests) == 1
	}, testTimeout, tick)
	h.m.Cancel(&acp.SessionIDRequest{SessionID: h.sid})
	select {
	case r := <-done:
		assert.Equal(t, acp.StopCancelled, r.StopReason)
	case <-t.Context().Done():
		t.Fatal("prompt never answered")
	}
}

func TestTodoWriteBecomesPlan(t *testing.T) {
	plan := []acp.PlanEntry{{Content: "a", Priority: "medium", Status: "pending"}}
	reg := func() *tools.Registry {
		return tools.NewRegistry(&fakeTool{name: todoWriteTool, kind: acp.KindThink, plan: plan})
	}
	h := newHarness(t, Options{Tools: reg}, callsResp(call{name: todoWriteTool, args: map[string]any{"todos": []any{}}}), textResp("done"))
	_, err := h.prompt(t, "go")
	require.NoError(t, err)
	var kinds []string
	for _, u := range h.client.updates {
		kinds = append(kinds, u.Kind)
	}
	assert.NotContains(t, kinds, acp.UpdateToolCall)
	assert.Contains(t, kinds, acp.UpdatePlan)
}

func TestUnknownSession(t *testing.T) {
	h := newHarness(t, Options{})
	_, err := h.m.Prompt(t.Context(), &acp.PromptRequest{SessionID: "nope", Prompt: []acp.ContentBlock{acp.TextBlock("x")}})
	var e *acp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, acp.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "nope")
}

// Vector 118: in enforce mode, rounds of 4, 4 and 1 FILE_NOT_FOUND failures
// warn after round 2 and stop after round 3.
func TestVector118_RepeatedFailureGuardEnforce(t *testing.T) {
	reg := func() *tools.Registry {
		return tools.NewRegistry(&fakeTool{name: "read_file", kind: acp.KindRead, execErr: errors.New("File not found"), errType: "FILE_NOT_FOUND"})
	}
	h := newHarness(t, Options{Tools: reg, FailureGuard: loopdetect.FailureModeEnforce},
		callsResp(nDistinct("r1", 4)...), callsResp(nDistinct("r2", 4)...), callsResp(nDistinct("r3", 1)...), textResp("unreached"))
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopRepeatedToolExecutionFailure)
	require.Len(t, h.prov.requests, 3)
	third := h.prov.requests[2].Messages
	assert.Equal(t, loopdetect.RepeatedToolFailureReminder, third[len(third)-1].Content, "round 2's next message ends with the reminder")
	hist := h.m.session(h.sid).history
	assert.Equal(t, "System: "+loopdetect.RepeatedToolFailureStopMessage, hist[len(hist)-1].Content)
}

func TestRepeatedFailureGuardShadowNeverStops(t *testing.T) {
	reg := func() *tools.Registry {
		return tools.NewRegistry(&fakeTool{name: "read_file", kind: acp.KindRead, execErr: errors.New("File not found"), errType: "FILE_NOT_FOUND"})
	}
	h := newHarness(t, Options{Tools: reg},
		callsResp(nDistinct("r1", 4)...), callsResp(nDistinct("r2", 4)...), callsResp(nDistinct("r3", 1)...), textResp("done"))
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	for _, r := range h.prov.requests {
		for _, m := range r.Messages {
			assert.NotEqual(t, loopdetect.RepeatedToolFailureReminder, m.Content)
		}
	}
}
