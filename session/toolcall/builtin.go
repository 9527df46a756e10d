package toolcall

import (
	"context"
	"fmt"
	"sync"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/shellline"
	"github.com/acpd/acpd/session/tools"
)

// The deciders acpd always has: plan mode first, the session's "always"
// grants, and the approval mode's fallback last.

// PlanName, GrantsName and ApprovalName are the built-in deciders' names
// in a call's trail.
const (
	PlanName     = "plan"
	GrantsName   = "always"
	ApprovalName = "mode"
)

// PlanMode is plan mode's say (agent-features.md §11): in plan mode what
// modifies is refused, a command it cannot show read-only is asked about
// (with no "always", and whatever was always allowed before), a read-only
// command runs. exit_plan_mode is refused outside plan mode and asked
// about, with its own question, in it. Outside plan mode it abstains but
// for exit_plan_mode.
type PlanMode struct{}

func (PlanMode) Name() string { return PlanName }

func (PlanMode) Decide(_ context.Context, c *Call) Decision {
	if c.Confirm.Kind == tools.ConfirmSwitchMode {
		if c.Mode != ModePlan {
			return Decision{Verdict: Deny, Reason: notInPlanModeMessage(c.Mode), ErrType: tools.ErrTypeExecutionFailed}
		}
		return Decision{Verdict: Ask, Question: planExitQuestion}
	}
	if c.Mode != ModePlan {
		return Decision{}
	}
	if ac, ok := c.Run.(*agents.Call); ok {
		if ac.Agent.ReadOnly() {
			return Decision{}
		}
		return Decision{Verdict: Deny, Reason: PlanBlockedMessage(c.Name), ErrType: ErrTypeDenied}
	}
	conf := c.Confirm
	switch {
	case planBlocked(conf):
		return Decision{Verdict: Deny, Reason: PlanBlockedMessage(c.Name), ErrType: ErrTypeDenied}
	case conf.Kind == tools.ConfirmExec && conf.Shell == shellline.ReadOnly:
		return Decision{Verdict: Allow, Reason: "a read-only command"}
	case conf.Kind == tools.ConfirmExec:
		// A command plan mode cannot show read-only is approved once, even
		// one "always allowed" earlier: an "always" given while planning
		// would keep answering for it after the plan, in a mode that never
		// asked (as the reference).
		return Decision{Verdict: Ask, NoAlways: true, Reason: "plan mode cannot show that this command only reads"}
	}
	return Decision{}
}

// PlanBlockedMessage is qwen-code's exact plan-mode refusal.
func PlanBlockedMessage(name string) string {
	return fmt.Sprintf("Plan mode is active. The tool %q cannot be executed because it modifies the system. Please use the exit_plan_mode tool to present your plan and exit plan mode before making changes.", name)
}

// notInPlanModeMessage is exit_plan_mode's result outside plan mode.
func notInPlanModeMessage(mode Mode) string {
	return fmt.Sprintf("You are not in plan mode (current mode: %s). exit_plan_mode only presents a plan from plan mode; "+
		"carry on with the task.", mode)
}

// planBlocked is qwen-code's isPlanModeBlocked for acpd's tools: anything
// that is not read-only or informational, and shell commands classified as
// writes. Unknown shell commands are not blocked; they must be confirmed.
func planBlocked(c tools.Confirmation) bool {
	switch c.Kind {
	case tools.ConfirmNone, tools.ConfirmInfo, tools.ConfirmFetch, tools.ConfirmPrivateNetwork:
		return false // web_fetch reads; it still asks in plan mode
	case tools.ConfirmExec:
		return c.Shell == shellline.Write
	}
	return true
}

// Grants are a session's "always allow" answers: a call whose
// confirmation has a label granted earlier runs without asking. Shared by
// the session's subagent runs; the zero value is ready.
type Grants struct {
	mu sync.Mutex
	m  map[string]bool // made at the first grant: an idle session has none
}

func (*Grants) Name() string { return GrantsName }

func (g *Grants) Decide(_ context.Context, c *Call) Decision {
	if c.Confirm.NoAlways || c.Confirm.Kind == tools.ConfirmNone || c.Confirm.Kind == tools.ConfirmPrivateNetwork {
		return Decision{}
	}
	g.mu.Lock()
	ok := len(g.m) > 0 && g.m[alwaysKey(c.Confirm)]
	g.mu.Unlock()
	if !ok {
		return Decision{}
	}
	return Decision{Verdict: Allow, Reason: "always allowed in this session: " + c.Confirm.Label}
}

// Grant keeps an "always" answer for a call that is not an edit ("Allow
// All Edits" is a mode, see Approval) nor a plan's approval.
func (g *Grants) Grant(_ context.Context, c *Call, a Answer) {
	if a.Option.Kind != acp.AllowAlways || c.Confirm.Kind == tools.ConfirmEdit || c.Confirm.Kind == tools.ConfirmSwitchMode {
		return
	}
	g.Allow(c.Confirm)
}

// Allow grants conf's label for the rest of the session.
func (g *Grants) Allow(conf tools.Confirmation) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]bool{}
	}
	g.m[alwaysKey(conf)] = true
}

func alwaysKey(c tools.Confirmation) string {
	return fmt.Sprintf("%d:%s", c.Kind, c.Label)
}

// Approval is the approval mode's fallback, last in the list: it answers
// only when no decider before it did (§11). Reads never ask, nor does a
// private network fetch (the call asks itself when it connects); yolo runs
// everything; auto-edit asks for commands, MCP tools and fetches; plan
// mode asks for the rest of what it did not decide; default asks.
type Approval struct {
	// SetMode switches the session's mode when the user chose "Allow All
	// Edits" (an "always" on an edit) or a plan's approval.
	SetMode func(ctx context.Context, m Mode)
}

func (Approval) Name() string { return ApprovalName }

func (Approval) Decide(_ context.Context, c *Call) Decision {
	if Strictest(c.Decisions).Verdict != Abstain {
		return Decision{}
	}
	if modeAsks(c.Mode, c.Confirm) {
		return Decision{Verdict: Ask, Reason: "approval mode " + string(c.Mode)}
	}
	return Decision{Verdict: Allow, Reason: "approval mode " + string(c.Mode)}
}

// modeAsks is the approval mode's own answer: true when mode asks about a
// call of confirmation c.
func modeAsks(mode Mode, c tools.Confirmation) bool {
	switch {
	case mode == ModeYolo, c.Kind == tools.ConfirmNone, c.Kind == tools.ConfirmPrivateNetwork:
		return false
	case mode == ModeAutoEdit:
		return c.Kind == tools.ConfirmExec || c.Kind == tools.ConfirmMCP || c.Kind == tools.ConfirmFetch
	case mode == ModePlan:
		return !(c.Kind == tools.ConfirmExec && c.Shell == shellline.ReadOnly)
	}
	return true
}

// Grant switches the mode: "Allow All Edits" to auto-edit, as qwen-code
// does; a plan's approval to the mode its option names.
func (a Approval) Grant(ctx context.Context, c *Call, ans Answer) {
	if a.SetMode == nil {
		return
	}
	switch {
	case c.Confirm.Kind == tools.ConfirmSwitchMode:
		if m, ok := planExitModes[ans.Option.OptionID]; ok {
			a.SetMode(ctx, m)
		}
	case c.Confirm.Kind == tools.ConfirmEdit && ans.Option.Kind == acp.AllowAlways && ans.Option.OptionID == OptProceedAlways:
		// "Allow All Edits"; another "always" (an Offerer's) is its own.
		a.SetMode(ctx, ModeAutoEdit)
	}
}
