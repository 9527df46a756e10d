package session_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// planClient answers exit_plan_mode's request with the option answer and
// records every permission request.
type planClient struct {
	answer string
	mu     sync.Mutex
	reqs   []acp.RequestPermissionRequest
}

func (c *planClient) fake() *acptest.FakeClient {
	return &acptest.FakeClient{RequestPermissionFunc: func(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		c.mu.Lock()
		c.reqs = append(c.reqs, *r)
		c.mu.Unlock()
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: c.answer}}, nil
	}}
}

func toolNames(r modeltest.Request) []string {
	var out []string
	for _, tl := range r.Tools {
		out = append(out, tl.Function.Name)
	}
	return out
}

func modeViews(updates []acp.SessionUpdate) (mode, option string) {
	for _, u := range updates {
		switch u.Kind {
		case acp.UpdateCurrentMode:
			mode = u.CurrentModeID
		case acp.UpdateConfigOption:
			for _, o := range u.ConfigOptions {
				if o.Category == "mode" {
					option = o.CurrentValue
				}
			}
		}
	}
	return mode, option
}

const thePlan = "## Create notes\n1. write notes.txt"

// TestE2E_ExitPlanMode drives a plan-mode turn that ends in exit_plan_mode
// through the built binary: accepted, the mode switches (both mode APIs)
// and the next edit runs; kept planning, the mode stays and the edit is
// blocked.
func TestE2E_ExitPlanMode(t *testing.T) {
	for _, tc := range []struct {
		answer, mode string
	}{
		{"proceed_always", "auto-edit"},
		{"proceed_once", "default"},
		{"cancel", "plan"},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			pc := &planClient{answer: tc.answer}
			d := startDaemon(t, pc.fake(), nil, "--approval-mode", "plan")
			notes := filepath.Join(d.cwd, "notes.txt")
			d.model.Add(
				calls(call("exit_plan_mode", map[string]any{"plan": thePlan})),
				calls(call("write_file", map[string]any{"file_path": notes, "content": "n\n"})),
				modeltest.Response{Text: "done"},
			)
			sid := d.session(t)
			r, err := d.cc.Prompt(ctxFor(t), sid, "plan then write")
			require.NoError(t, err)
			assert.Equal(t, acp.StopEndTurn, r.StopReason)

			// The request: kind switch_mode, the plan as content, three options.
			pc.mu.Lock()
			reqs := slices.Clone(pc.reqs)
			pc.mu.Unlock()
			require.NotEmpty(t, reqs)
			pr := reqs[0]
			assert.Equal(t, acp.KindSwitchMode, pr.ToolCall.Kind)
			require.NotNil(t, pr.ToolCall.Title)
			assert.Equal(t, "Plan: Create notes", *pr.ToolCall.Title)
			assert.Equal(t, []acp.ToolCallContent{acp.TextContent(thePlan)}, pr.ToolCall.Content)
			var ids []string
			for _, o := range pr.Options {
				ids = append(ids, o.OptionID+":"+string(o.Kind))
			}
			assert.Equal(t, []string{"proceed_always:allow_always", "proceed_once:allow_once", "cancel:reject_once"}, ids)

			reqsToModel := d.model.Requests()
			require.Len(t, reqsToModel, 3)
			assert.Contains(t, toolNames(reqsToModel[0]), "exit_plan_mode", "offered in plan mode")
			msgs := reqsToModel[1].Messages
			planResult := msgs[len(msgs)-1].Text()
			msgs = reqsToModel[2].Messages
			writeResult := msgs[len(msgs)-1].Text()
			mode, option := modeViews(forSession(d.cc.Updates(), sid))

			if tc.mode == "plan" {
				assert.Contains(t, planResult, "chose to keep planning")
				assert.Contains(t, toolNames(reqsToModel[1]), "exit_plan_mode", "still offered")
				assert.Empty(t, mode, "no mode change announced")
				assert.Contains(t, writeResult, "Plan mode is active")
				assert.NoFileExists(t, notes)
				return
			}
			assert.Contains(t, planResult, "User approved the plan")
			assert.Contains(t, planResult, `"`+tc.mode+`"`)
			// The tools are the same bytes after the mode switch: the
			// provider's prompt cache, which holds them first, stays valid.
			assert.Equal(t, reqsToModel[0].Tools, reqsToModel[1].Tools, "the tool list does not change with the mode")
			assert.Equal(t, tc.mode, mode, "current_mode_update")
			assert.Equal(t, tc.mode, option, "config_option_update")
			// The next edit runs: without asking in auto-edit, after the
			// (default client's) approval in default.
			b, err := os.ReadFile(notes)
			require.NoError(t, err, writeResult)
			assert.Equal(t, "n\n", string(b))
			if tc.mode == "auto-edit" {
				assert.Len(t, reqs, 1, "auto-edit applies the edit without asking")
			} else {
				assert.Len(t, reqs, 2, "default asks before the edit")
			}
		})
	}
}

// TestE2E_ExitPlanModeOutsidePlanMode: a call outside plan mode fails with
// a message and asks nothing; the tool is offered in every mode, as the
// reference does, so the tool list never changes within a session.
func TestE2E_ExitPlanModeOutsidePlanMode(t *testing.T) {
	pc := &planClient{answer: "proceed_always"}
	d := startDaemon(t, pc.fake(), nil, "--approval-mode", "default")
	d.model.Add(calls(call("exit_plan_mode", map[string]any{"plan": "x"})), modeltest.Response{Text: "ok"})
	sid := d.session(t)
	_, err := d.cc.Prompt(ctxFor(t), sid, "go")
	require.NoError(t, err)
	assert.Empty(t, pc.reqs)
	reqs := d.model.Requests()
	assert.Contains(t, toolNames(reqs[0]), "exit_plan_mode")
	msgs := reqs[1].Messages
	assert.Contains(t, msgs[len(msgs)-1].Text(), "You are not in plan mode (current mode: default)")
}
