package tools

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/acpd/acpd/acp"
)

// NameExitPlanMode is the tool a model in plan mode calls to present its
// plan and ask to start work (qwen-code's exit_plan_mode).
const NameExitPlanMode = "exit_plan_mode"

var exitPlanModeSpec = mustSpec(NameExitPlanMode, acp.KindSwitchMode,
	"Use this tool when you are in plan mode and have finished planning: it presents your plan to the user for "+
		"approval. If approved, plan mode ends and you can start making changes; if not, you stay in plan mode and "+
		"should refine the plan. Only use it for tasks that require writing code, not for research.",
	`{
  "type": "object",
  "properties": {
    "plan": {
      "type": "string",
      "minLength": 1,
      "pattern": "\\S",
      "description": "The plan you came up with, that you want to run by the user for approval. Supports markdown. The plan should be pretty concise."
    }
  },
  "required": ["plan"]
}`)

type exitPlanModeTool struct{ toolSpec }

func (t *exitPlanModeTool) Build(_ *Env, args json.RawMessage) (Call, error) {
	var a struct {
		Plan string `json:"plan"`
	}
	if err := t.decode(args, &a); err != nil {
		return nil, err
	}
	return &ExitPlanModeCall{plan: a.Plan}, nil
}

// ExitPlanModeCall is a validated exit_plan_mode call. The session host
// runs it itself: it asks the user (session/request_permission, kind
// switch_mode, the plan as content) and switches the mode.
type ExitPlanModeCall struct{ plan string }

// Plan is the plan the model presents.
func (c *ExitPlanModeCall) Plan() string { return c.plan }

// Title is "Plan: " and the plan's first line (shortened), so a list of
// tool calls shows which plan it was.
func (c *ExitPlanModeCall) Title() string {
	first := strings.TrimSpace(c.plan)
	if i := strings.IndexByte(first, '\n'); i >= 0 {
		first = strings.TrimSpace(first[:i])
	}
	first = strings.TrimLeft(first, "# ")
	const max = 80
	if r := []rune(first); len(r) > max {
		first = string(r[:max-1]) + "…"
	}
	return "Plan: " + first
}

// Locations is empty: a plan is about no one file.
func (c *ExitPlanModeCall) Locations() []acp.ToolCallLocation { return nil }

// Confirmation shows the plan; the user is always asked.
func (c *ExitPlanModeCall) Confirmation() Confirmation {
	return Confirmation{Kind: ConfirmSwitchMode, Label: NameExitPlanMode, Content: []acp.ToolCallContent{acp.TextContent(c.plan)}}
}

// Execute reports the approval; the host switches the mode before it.
func (c *ExitPlanModeCall) Execute(context.Context, *Env) Result {
	return Result{
		LLMContent: "User approved the plan. You can now start coding. Start with updating your todo list if applicable.",
		Content:    []acp.ToolCallContent{acp.TextContent(c.plan)},
	}
}
