package session

import (
	"context"
	"fmt"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
)

// exit_plan_mode (agent-features.md §5). The tool is offered in every mode
// (see toolSpecs); called outside plan mode it fails with qwen-code's
// message. It always asks the
// user: session/request_permission with kind switch_mode and the plan as
// content, and three options (the issue's, a subset of qwen-code's four,
// without "restore the previous mode"):
//
//	proceed_always  "Yes, and auto-accept edits"      allow_always → auto-edit
//	proceed_once    "Yes, and manually approve edits" allow_once   → default
//	cancel          "No, keep planning"               reject_once  → stays in plan
//
// Accepting records and switches the mode and announces it through both
// mode APIs (current_mode_update and config_option_update). Keeping
// planning fails the call with a message telling the model to refine the
// plan, and the turn goes on (qwen-code stops the turn; acpd treats it as
// any rejected call, so the model can answer the user). A cancelled request
// stops the batch like any cancelled permission.
//
// Headless runs (`acpd run`) answer every permission request with its
// reject option, so a run in plan mode stays in plan mode: it follows its
// approval mode.

const (
	optPlanAutoEdit = "proceed_always"
	optPlanDefault  = "proceed_once"
	optPlanKeep     = "cancel"
)

var planExitOptions = []acp.PermissionOption{
	{OptionID: optPlanAutoEdit, Name: "Yes, and auto-accept edits", Kind: acp.AllowAlways},
	{OptionID: optPlanDefault, Name: "Yes, and manually approve edits", Kind: acp.AllowOnce},
	{OptionID: optPlanKeep, Name: "No, keep planning", Kind: acp.RejectOnce},
}

// keepPlanningMessage is the tool result when the user keeps planning.
const keepPlanningMessage = "The user did not approve the plan and chose to keep planning. Plan mode is still active: " +
	"do not make changes. Ask what to change or refine the plan, then present it again with exit_plan_mode."

func notInPlanModeMessage(mode string) string {
	return fmt.Sprintf("You are not in plan mode (current mode: %s). exit_plan_mode only presents a plan from plan mode; "+
		"carry on with the task.", mode)
}

// toolSpecs is what the model is offered: every tool of the session, in
// every mode. exit_plan_mode is offered outside plan mode too (as the
// reference registers it), where it fails with notInPlanModeMessage: the
// tool list is then the same bytes for the whole session, and switching
// modes does not invalidate the provider's prompt cache, which holds the
// tools ahead of the conversation.
func (s *Session) toolSpecs() []model.ToolSpec { return s.tools.Specs() }

// runExitPlanMode runs a built exit_plan_mode call.
func (t *turn) runExitPlanMode(ctx context.Context, p pcall, tool tools.Tool, call *tools.ExitPlanModeCall, meta acp.Meta) toolRun {
	s := t.s
	id := p.acpID
	title := display.Line(call.Title())
	conf := call.Confirmation()
	failed := func(msg string) {
		t.close(ctx, p, acp.ToolCallUpdate{
			ToolCallID: id, Status: acp.StatusFailed, Content: []acp.ToolCallContent{acp.TextContent(msg)},
		}, msg)
	}
	mode := s.getMode()
	t.open(ctx, p, acp.ToolCall{
		ToolCallID: id, Title: title, Kind: tool.Kind(), Status: acp.StatusPending,
		Content: conf.Content, RawInput: p.args, Meta: meta,
	})
	if mode != ModePlan {
		msg := notInPlanModeMessage(mode)
		failed(msg)
		return toolRun{llm: msg, obs: failureObservation{terminal: "error", execution: "not_started", tool: p.Name, errType: tools.ErrTypeExecutionFailed}}
	}

	resp, err := s.m.client.RequestPermission(ctx, &acp.RequestPermissionRequest{
		SessionID: s.id,
		ToolCall: acp.ToolCallUpdate{
			ToolCallID: id, Title: &title, Kind: tool.Kind(), Status: acp.StatusPending,
			Content: shownContent(conf.Content), RawInput: p.args, Meta: meta,
		},
		Options: planExitOptions,
	})
	var next string
	switch {
	case err != nil && ctx.Err() != nil:
		failed(loopdetect.ToolExecutionCancelledMessage)
		return toolRun{llm: loopdetect.ToolExecutionCancelledMessage, permissionStop: true, obs: failureObservation{terminal: "cancelled", execution: "not_started", tool: p.Name}}
	case err != nil:
		msg := fmt.Sprintf("The editor could not present the plan for approval (%v). Plan mode remains active.", err)
		failed(msg)
		return toolRun{llm: msg, permissionStop: true, obs: failureObservation{terminal: "cancelled", execution: "not_started", tool: p.Name}}
	case resp.Outcome.Outcome == "cancelled":
		msg := canceledByUser(p.Name)
		failed(msg)
		return toolRun{llm: msg, permissionStop: true, obs: failureObservation{terminal: "cancelled", execution: "not_started", tool: p.Name}}
	case resp.Outcome.Outcome == "selected" && resp.Outcome.OptionID == optPlanAutoEdit:
		next = ModeAutoEdit
	case resp.Outcome.Outcome == "selected" && resp.Outcome.OptionID == optPlanDefault:
		next = ModeDefault
	case resp.Outcome.Outcome == "selected" && resp.Outcome.OptionID == optPlanKeep:
		failed(keepPlanningMessage)
		return toolRun{llm: keepPlanningMessage, obs: failureObservation{terminal: "cancelled", execution: "not_started", tool: p.Name}}
	default:
		// An option that was not offered is never an approval.
		msg := fmt.Sprintf("Permission request failed for %q: Permission response selected unoffered option: %s", p.Name, resp.Outcome.OptionID)
		failed(msg)
		return toolRun{llm: msg, permissionStop: true, obs: failureObservation{terminal: "cancelled", execution: "not_started", tool: p.Name}}
	}

	t.rec(store.Record{Kind: store.KindMode, ModeID: next})
	s.setMode(next)
	s.announceMode(ctx)
	res := call.Execute(ctx, t.env(id))
	llm := res.LLMContent + fmt.Sprintf(" The approval mode is now %q", next)
	if next == ModeAutoEdit {
		llm += ": edits are applied without asking; shell commands still ask."
	} else {
		llm += ": the user is asked before each edit and shell command."
	}
	t.close(ctx, p, acp.ToolCallUpdate{ToolCallID: id, Status: acp.StatusCompleted, Content: res.Content}, llm)
	return toolRun{llm: llm, obs: failureObservation{terminal: "success", execution: "success", tool: p.Name}}
}
