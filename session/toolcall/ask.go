package toolcall

import (
	"context"
	"fmt"
	"slices"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/tools"
)

// This file is the one place that asks the editor about a call
// (session/request_permission): the options offered, the request, and its
// answer read into an Answer.

// Question is what a permission request offers and what the model reads
// when it is not allowed. Nil fields take the defaults: the options for
// the call's confirmation (permissionOptions), and the default texts.
type Question struct {
	Options []acp.PermissionOption
	// Failed is the model's text when the request itself failed.
	Failed func(name string, err error) string
	// Rejected is the model's text when the user chose a reject option.
	Rejected string
}

// AnswerKind is how a permission request was answered.
type AnswerKind uint8

const (
	Allowed   AnswerKind = iota // an allow option was chosen
	Rejected                    // a reject option was chosen: the call does not run, the batch goes on
	Cancelled                   // the request was cancelled (or the turn was): the batch stops
	Failed                      // the request failed or chose no offered option: the batch stops
)

// Answer is the editor's answer, read: what was chosen and, unless the
// call was allowed, what the model reads.
type Answer struct {
	Kind   AnswerKind
	Option acp.PermissionOption // the option chosen (Allowed, Rejected)
	Text   string
}

// Permission option ids are qwen-code's ToolConfirmationOutcome values.
const (
	OptProceedOnce          = "proceed_once"
	OptProceedAlways        = "proceed_always"
	OptProceedAlwaysProject = "proceed_always_project"
	OptProceedAlwaysUser    = "proceed_always_user"
	OptCancel               = "cancel"
)

// PermissionOptions lists the options offered per confirmation type (§11).
func PermissionOptions(c tools.Confirmation) []acp.PermissionOption {
	allow := acp.PermissionOption{OptionID: OptProceedOnce, Name: "Allow", Kind: acp.AllowOnce}
	reject := acp.PermissionOption{OptionID: OptCancel, Name: "Reject", Kind: acp.RejectOnce}
	if c.NoAlways {
		return []acp.PermissionOption{allow, reject}
	}
	switch c.Kind {
	case tools.ConfirmEdit:
		return []acp.PermissionOption{
			{OptionID: OptProceedAlways, Name: "Allow All Edits", Kind: acp.AllowAlways}, allow, reject,
		}
	case tools.ConfirmPrivateNetwork:
		// Asked every time: no "always".
		return []acp.PermissionOption{allow, reject}
	case tools.ConfirmNetwork:
		// "Always" is kept for the host, for the session.
		return []acp.PermissionOption{
			allow, {OptionID: OptProceedAlways, Name: "Allow " + display.Line(c.Label) + " always", Kind: acp.AllowAlways}, reject,
		}
	case tools.ConfirmFetch:
		// "Always" is remembered for the host, for the session.
		return []acp.PermissionOption{
			{OptionID: OptProceedAlways, Name: "Always Allow fetching from " + display.Line(c.Label), Kind: acp.AllowAlways}, allow, reject,
		}
	case tools.ConfirmInfo:
		return []acp.PermissionOption{
			{OptionID: OptProceedAlwaysProject, Name: "Always Allow in project", Kind: acp.AllowAlways},
			{OptionID: OptProceedAlwaysUser, Name: "Always Allow for user", Kind: acp.AllowAlways},
			allow, reject,
		}
	}
	label := display.Line(c.Label) // the command roots, as the model wrote them
	return []acp.PermissionOption{
		{OptionID: OptProceedAlwaysProject, Name: "Always Allow in project: " + label, Kind: acp.AllowAlways},
		{OptionID: OptProceedAlwaysUser, Name: "Always Allow for user: " + label, Kind: acp.AllowAlways},
		allow, reject,
	}
}

// exit_plan_mode's question (agent-features.md §5): three options, the
// issue's subset of qwen-code's four (without "restore the previous
// mode"). Accepting switches the mode (Approval.Grant); keeping planning
// fails the call with a message telling the model to refine the plan, and
// the turn goes on (qwen-code stops the turn; acpd treats it as any
// rejected call, so the model can answer the user).
const (
	optPlanAutoEdit = "proceed_always"
	optPlanDefault  = "proceed_once"
	optPlanKeep     = "cancel"
)

// keepPlanningMessage is the tool result when the user keeps planning.
const keepPlanningMessage = "The user did not approve the plan and chose to keep planning. Plan mode is still active: " +
	"do not make changes. Ask what to change or refine the plan, then present it again with exit_plan_mode."

var planExitQuestion = &Question{
	Options: []acp.PermissionOption{
		{OptionID: optPlanAutoEdit, Name: "Yes, and auto-accept edits", Kind: acp.AllowAlways},
		{OptionID: optPlanDefault, Name: "Yes, and manually approve edits", Kind: acp.AllowOnce},
		{OptionID: optPlanKeep, Name: "No, keep planning", Kind: acp.RejectOnce},
	},
	Failed: func(_ string, err error) string {
		return fmt.Sprintf("The editor could not present the plan for approval (%v). Plan mode remains active.", err)
	},
	Rejected: keepPlanningMessage,
}

// planExitModes is the mode each approving option of the plan's question
// switches to.
var planExitModes = map[string]Mode{optPlanAutoEdit: ModeAutoEdit, optPlanDefault: ModeDefault}

// canceledByUser is the model's text for a call the user rejected.
func canceledByUser(name string) string {
	return fmt.Sprintf("Tool %q was canceled by the user.", name)
}

// ask sends the permission request for c about conf (its own confirmation,
// or one the call asks about while it runs) and reads the answer. why is
// the asking decider's reason when it is not one of the built-in ones
// (whose questions are the approval mode's own): the request then ends
// with it, and carries the trail so far in _meta "acpd.decisions". The
// answer joins the call's trail; an allowed answer about the call's own
// confirmation goes to the granters (one about what a running call asks,
// such as a host, is no grant of the call: Env.Permit keeps its "always").
func (t *Turn) ask(ctx context.Context, c *Call, conf tools.Confirmation, q *Question, why string) Answer {
	if q == nil {
		q = &Question{}
	}
	opts := q.Options
	if opts == nil {
		opts = PermissionOptions(conf)
		if !conf.NoAlways {
			for _, dc := range t.Deciders {
				if o, ok := dc.(Offerer); ok {
					opts = o.Offer(c, opts)
				}
			}
		}
	}
	title := display.Line(c.Title)
	var reqMeta acp.Meta
	switch conf.Kind {
	case tools.ConfirmPrivateNetwork:
		reqMeta = acp.Meta{acp.MetaPermission: acp.PermissionPrivateNetwork}
	case tools.ConfirmNetwork:
		reqMeta = acp.Meta{acp.MetaPermission: acp.PermissionSandboxNetwork}
	}
	content := shownContent(conf.Content)
	if why != "" {
		content = append(slices.Clip(content), acp.TextContent(display.Text(why)))
		if reqMeta == nil {
			reqMeta = acp.Meta{}
		}
		reqMeta[acp.MetaDecisions] = trailMeta(spoke(c.Decisions))
	}
	c.asked = true
	resp, err := t.Host.RequestPermission(ctx, &acp.RequestPermissionRequest{
		ToolCall: acp.ToolCallUpdate{
			ToolCallID: c.ID, Title: &title, Kind: c.Kind, Status: acp.StatusPending,
			Content: content, Locations: locations(c), RawInput: c.Args, Meta: c.Meta,
		},
		Options: opts,
		Meta:    reqMeta,
	})
	a := read(ctx, c.Name, opts, resp, err, q)
	d := Decision{By: ByUser, Verdict: Allow, Reason: a.Option.Name}
	switch a.Kind {
	case Rejected:
		d.Verdict = Deny
	case Cancelled, Failed:
		d.Verdict, d.Reason = Stop, a.Text
	}
	c.Decisions = append(c.Decisions, d)
	if a.Kind == Allowed && conf.Kind == c.Confirm.Kind && conf.Label == c.Confirm.Label {
		for _, dc := range t.Deciders {
			if g, ok := dc.(Granter); ok {
				g.Grant(ctx, c, a)
			}
		}
	}
	return a
}

// builtIn reports the deciders acpd always has.
func builtIn(by string) bool { return by == PlanName || by == GrantsName || by == ApprovalName }

// read interprets a permission request's answer.
func read(ctx context.Context, name string, opts []acp.PermissionOption, resp *acp.RequestPermissionResponse, err error, q *Question) Answer {
	if err != nil {
		if ctx.Err() != nil {
			return Answer{Kind: Cancelled, Text: loopdetect.ToolExecutionCancelledMessage}
		}
		if q.Failed != nil {
			return Answer{Kind: Failed, Text: q.Failed(name, err)}
		}
		return Answer{Kind: Failed, Text: fmt.Sprintf("Permission request failed for %q: %v", name, err)}
	}
	if resp.Outcome.Outcome == "cancelled" {
		return Answer{Kind: Cancelled, Text: canceledByUser(name)}
	}
	if resp.Outcome.Outcome != "selected" {
		return Answer{Kind: Failed, Text: fmt.Sprintf("Permission request failed for %q: unknown outcome %q", name, resp.Outcome.Outcome)}
	}
	for _, o := range opts {
		if o.OptionID != resp.Outcome.OptionID {
			continue
		}
		switch o.Kind {
		case acp.RejectOnce, acp.RejectAlways:
			text := q.Rejected
			if text == "" {
				text = canceledByUser(name)
			}
			return Answer{Kind: Rejected, Option: o, Text: text}
		}
		return Answer{Kind: Allowed, Option: o}
	}
	// An option that was not offered is never an approval.
	return Answer{Kind: Failed, Text: fmt.Sprintf("Permission request failed for %q: Permission response selected unoffered option: %s", name, resp.Outcome.OptionID)}
}
