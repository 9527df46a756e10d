package session

import (
	"context"
	"fmt"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/tools"
)

// exit_plan_mode (agent-features.md §5). The tool is offered in every mode
// (see toolSpecs); called outside plan mode it fails with qwen-code's
// message. It always asks the user:
// session/request_permission with kind switch_mode and the plan as
// content, and three options (the issue's, a subset of qwen-code's four,
// without "restore the previous mode"; the question is toolcall's):
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

// toolSpecs is what the model is offered: every tool of the session, in
// every mode. exit_plan_mode is offered outside plan mode too (as the
// reference registers it), where it fails: the tool list is then the same
// bytes for the whole session, and switching modes does not invalidate the
// provider's prompt cache, which holds the tools ahead of the conversation.
func (s *Session) toolSpecs() []model.ToolSpec { return s.tools.Specs() }

// exitPlanMode runs an approved exit_plan_mode call: plan mode's decider
// asked the user (toolcall.PlanMode), the answer switched the mode
// (toolcall.Approval.Grant), and the model is told which mode it is in now.
func (t *turn) exitPlanMode(ctx context.Context, call *tools.ExitPlanModeCall, env *tools.Env) tools.Result {
	res := call.Execute(ctx, env)
	next := t.s.getMode()
	res.LLMContent += fmt.Sprintf(" The approval mode is now %q", next)
	if next == ModeAutoEdit {
		res.LLMContent += ": edits are applied without asking; shell commands still ask."
	} else {
		res.LLMContent += ": the user is asked before each edit and shell command."
	}
	return res
}
