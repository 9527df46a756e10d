package session

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/model"
)

func agentCall(id, desc, prompt, typ string) call {
	args := map[string]any{"description": desc, "prompt": prompt}
	if typ != "" {
		args["subagent_type"] = typ
	}
	return call{name: agents.ToolName, args: args, id: id}
}

func toolNames(specs []model.ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// An Explore run: its request carries the read-only tools only, its own
// system prompt and nothing of the parent's conversation; its tool calls
// are shown nested under the agent call; its text is not the assistant's;
// its answer is the agent call's result.
func TestSubagent_ExploreRun(t *testing.T) {
	h := newHarness(t, Options{},
		callsResp(agentCall("call_a", "Find the config", "Where is the port set? Report the path.", agents.Explore)),
		append([]model.Event{{Kind: model.EventText, Text: "Searching."}}, callsResp(read("/w/config.go"))...),
		textResp("The port is set in /w/config.go line 3."),
		textResp("It is in config.go."),
	)
	resp, err := h.prompt(t, "secret parent prompt")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)

	reqs := h.prov.requests
	require.Len(t, reqs, 4)
	assert.Contains(t, toolNames(reqs[0].Tools), agents.ToolName, "the session offers the agent tool")
	for _, r := range reqs[1:3] {
		assert.Equal(t, []string{"read_file"}, toolNames(r.Tools), "Explore gets the read-only tools the session has")
		assert.Contains(t, r.System, "You are read-only")
		assert.NotContains(t, r.System, "You are acpd, a coding agent")
		for _, m := range r.Messages {
			assert.NotContains(t, m.Content, "secret parent prompt")
		}
	}
	assert.Equal(t, []model.Message{{Role: model.RoleUser, Content: "Where is the port set? Report the path."}}, reqs[1].Messages)
	last := reqs[3].Messages
	require.Equal(t, model.RoleTool, last[len(last)-1].Role)
	assert.Equal(t, "The port is set in /w/config.go line 3.", last[len(last)-1].Content)
	assert.Equal(t, "call_a", last[len(last)-1].ToolCallID)

	var text strings.Builder
	var sub []string
	for _, u := range h.client.updates {
		switch u.Kind {
		case acp.UpdateAgentMessageChunk:
			text.WriteString(u.Content.Text)
		case acp.UpdateToolCall:
			tc := u.ToolCall
			if tc.ToolCallID == "call_a" {
				assert.Equal(t, "Find the config", tc.Title)
				assert.Equal(t, acp.KindOther, tc.Kind)
				assert.Equal(t, acp.StatusInProgress, tc.Status)
				assert.Nil(t, tc.Meta[acp.MetaParentToolCallID])
				continue
			}
			assert.Equal(t, "call_a", tc.Meta[acp.MetaParentToolCallID])
			sub = append(sub, tc.ToolCallID)
		case acp.UpdateToolCallUpdate:
			if u.ToolCallUpdate.ToolCallID != "call_a" {
				assert.Equal(t, "call_a", u.ToolCallUpdate.Meta[acp.MetaParentToolCallID])
				continue
			}
			assert.Equal(t, acp.StatusCompleted, u.ToolCallUpdate.Status)
			assert.Equal(t, "The port is set in /w/config.go line 3.", u.ToolCallUpdate.Content[0].Content.Text)
		case acp.UpdateUsage:
			t.Errorf("no usage update expected")
		}
	}
	assert.Len(t, sub, 1)
	assert.Equal(t, "It is in config.go.", text.String(), "the subagent's text is not the assistant's")
}

// A subagent that repeats one call past the adaptive soft cap is stopped by
// its own guard; the agent call fails saying why and the parent's turn
// goes on to end_turn. The parent's guard counts the agent call once.
func TestSubagent_OwnGuardStopsIt(t *testing.T) {
	script := [][]model.Event{callsResp(agentCall("call_a", "Loop", "read forever", ""))}
	for range 101 {
		script = append(script, callsResp(read("/w/same.txt")))
	}
	script = append(script, textResp("The subagent looped; I stop here."))
	h := newHarness(t, Options{SkipLoopDetection: true}, script...)
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	var result string
	for _, u := range h.client.updates {
		if u.Kind == acp.UpdateToolCallUpdate && u.ToolCallUpdate.ToolCallID == "call_a" {
			assert.Equal(t, acp.StatusFailed, u.ToolCallUpdate.Status)
			result = u.ToolCallUpdate.Content[0].Content.Text
			raw := u.ToolCallUpdate.RawOutput.(map[string]any)
			assert.Equal(t, "turn_tool_call_cap", raw["loopType"])
			assert.Equal(t, "stuck", raw["capReason"])
		}
	}
	assert.Contains(t, result, `The subagent "general-purpose" was stopped by its loop protection (loop type turn_tool_call_cap, cap reason stuck, 101 tool calls, read_file repeated 101 times)`)
	completed, failed := h.client.counts()
	assert.Equal(t, 100, completed, "the subagent's 100 calls that ran")
	assert.Equal(t, 2, failed, "the skipped 101st call and the agent call")
	s := h.m.session(h.sid)
	assert.False(t, s.pendingLoopContext, "the subagent's stop is not the session's")
}

// In plan mode only read-only agents run.
func TestSubagent_PlanModeRunsReadOnlyAgentsOnly(t *testing.T) {
	h := newHarness(t, Options{ApprovalMode: ModePlan},
		callsResp(agentCall("call_g", "Change it", "edit things", "")),
		callsResp(agentCall("call_e", "Look", "look around", agents.Explore)),
		textResp("looked"),
		textResp("done"),
	)
	_, err := h.prompt(t, "go")
	require.NoError(t, err)
	texts := h.client.failedTexts()
	require.Len(t, texts, 1)
	assert.Equal(t, planBlockedMessage(agents.ToolName), texts[0])
	assert.Len(t, h.prov.requests, 4, "Explore ran")
}

// A subagent has no agent tool (depth 1), nor todo_write or exit_plan_mode.
func TestSubagent_ToolsOfGeneralPurpose(t *testing.T) {
	h := newHarness(t, Options{},
		callsResp(agentCall("call_a", "Work", "do it", "")),
		textResp("did it"),
		textResp("done"),
	)
	_, err := h.prompt(t, "go")
	require.NoError(t, err)
	parent, child := toolNames(h.prov.requests[0].Tools), toolNames(h.prov.requests[1].Tools)
	assert.Equal(t, slices.DeleteFunc(slices.Clone(parent), func(n string) bool { return n == agents.ToolName }), child)
	assert.Contains(t, h.prov.requests[1].System, "Search and read before you change anything")
}

// An unknown subagent_type is an invalid-parameters error the guard counts.
func TestSubagent_UnknownTypeIsInvalidParams(t *testing.T) {
	var script [][]model.Event
	for i := range 3 {
		script = append(script, callsResp(agentCall("", "x", "y", "Nope"+strings.Repeat("e", i))))
	}
	h := newHarness(t, Options{}, script...)
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopInvalidToolParamsStagnation)
}

// A subagent's permission request goes to the editor like any other, with
// the session's mode, naming its agent call in _meta; an "always allow"
// given for a run is the session's.
func TestSubagent_PermissionsAreTheSessions(t *testing.T) {
	shell := call{name: "run_shell_command", args: map[string]any{"command": "make"}}
	h := newHarness(t, Options{ApprovalMode: ModeDefault},
		callsResp(agentCall("call_a", "Build", "build it", "")),
		callsResp(shell),
		textResp("built"),
		callsResp(shell),
		textResp("done"),
	)
	h.client.Permission = func(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: optProceedAlwaysProject}}, nil
	}
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	require.Len(t, h.client.perms, 1, "the parent's own later call is allowed by the run's answer")
	p := h.client.perms[0]
	assert.Equal(t, "call_a", p.ToolCall.Meta[acp.MetaParentToolCallID])
	assert.Equal(t, "run_shell_command", p.ToolCall.Meta["toolName"])
	completed, failed := h.client.counts()
	assert.Equal(t, 3, completed, "the run's call, the agent call, the parent's call")
	assert.Zero(t, failed)
}
