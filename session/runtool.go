package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/shellline"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
)

// toolRun is the outcome of one call, for the batch loop.
type toolRun struct {
	llm            string // the tool result the model sees
	permissionStop bool
	obs            failureObservation
	observed       bool // obs goes to the repeated-failure guard (the call was not skipped)
}

// failureObservation is what the repeated-failure guard learns from a call.
type failureObservation struct {
	providerDuplicate bool
	terminal          string // success, error, cancelled
	execution         string // success, error, cancelled, not_started
	tool              string
	errType           string
}

const todoWriteTool = "todo_write"

// planBlockedMessage is qwen-code's exact plan-mode refusal.
func planBlockedMessage(name string) string {
	return fmt.Sprintf("Plan mode is active. The tool %q cannot be executed because it modifies the system. Please use the exit_plan_mode tool to present your plan and exit plan mode before making changes.", name)
}

func canceledByUser(name string) string {
	return fmt.Sprintf("Tool %q was canceled by the user.", name)
}

// frameMeta lets a call (an MCP tool) add keys to the frames' _meta.
type frameMeta interface{ FrameMeta() map[string]any }

func (t *turn) env(id string) *tools.Env {
	s := t.s
	s.m.mu.Lock()
	caps := s.m.clientCaps
	s.m.mu.Unlock()
	return &tools.Env{
		SessionID:      s.id,
		ToolCallID:     id,
		Roots:          s.roots,
		RootCache:      &s.base().rootCache,
		Client:         s.m.client,
		Caps:           caps,
		ShellTimeout:   s.m.opts.ShellTimeout,
		MaxOutputBytes: s.m.opts.MaxOutputBytes,
		Sandbox:        s.sandbox,
		WebFetch:       s.m.webFetch,
		Update: func(ctx context.Context, u acp.ToolCallUpdate) error {
			u.ToolCallID = id
			s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &u})
			return nil
		},
		Notify: func(k notice.Kind, detail string) { s.notify(context.Background(), k, detail) },
	}
}

// runTool runs one call through validation, plan mode, permission and
// execution, sending its frames (§10 runTool, §11).
func (t *turn) runTool(ctx context.Context, p pcall) toolRun {
	s := t.s
	id := p.acpID
	env := t.env(id)
	meta := acp.Meta{"toolName": p.Name}

	fail := func(title string, kind acp.ToolKind, msg string, o failureObservation) toolRun {
		t.open(ctx, p, acp.ToolCall{
			ToolCallID: id, Title: title, Kind: kind, Status: acp.StatusPending, RawInput: p.args, Meta: meta,
		})
		t.close(ctx, p, acp.ToolCallUpdate{
			ToolCallID: id, Status: acp.StatusFailed, Content: []acp.ToolCallContent{acp.TextContent(msg)},
		}, msg)
		return toolRun{llm: msg, obs: o}
	}
	invalid := func(kind acp.ToolKind, msg string) toolRun {
		// Never counted once the turn is cancelled (§7.4): the error may
		// come from the cancellation, not from the model.
		if ctx.Err() == nil {
			t.mu.Lock()
			t.g.RecordInvalidParams(p.Name, msg)
			t.mu.Unlock()
		}
		return fail(nameOr(p.Name), kind, msg, failureObservation{terminal: "error", execution: "not_started", tool: p.Name})
	}

	if p.Name == "" {
		return invalid(acp.KindOther, "Missing function name")
	}
	tool, ok := s.tools.Get(p.Name)
	if !ok {
		return invalid(acp.KindOther, fmt.Sprintf("Tool %q not found in registry.", p.Name))
	}
	if p.Invalid != "" {
		return invalid(tool.Kind(), fmt.Sprintf("Invalid arguments for tool %q: %s", p.Name, p.Invalid))
	}
	call, err := tool.Build(env, p.Arguments)
	if err != nil {
		return invalid(tool.Kind(), err.Error())
	}
	// Prepare reads what the permission request shows (the whole-file diff
	// of an edit), through the editor when it offers fs.
	if pr, ok := call.(tools.Preparer); ok {
		if err := pr.Prepare(ctx, env); err != nil {
			if ctx.Err() != nil {
				return fail(call.Title(), tool.Kind(), loopdetect.ToolExecutionCancelledMessage, failureObservation{terminal: "cancelled", execution: "not_started", tool: p.Name})
			}
			return fail(call.Title(), tool.Kind(), err.Error(), failureObservation{terminal: "error", execution: "not_started", tool: p.Name})
		}
	}
	if fm, ok := call.(frameMeta); ok {
		for k, v := range fm.FrameMeta() {
			meta[k] = v
		}
	}
	if pc, ok := call.(*tools.ExitPlanModeCall); ok {
		return t.runExitPlanMode(ctx, p, tool, pc, meta)
	}
	if ac, ok := call.(*agents.Call); ok {
		if s.getMode() == ModePlan && !ac.Agent.ReadOnly() {
			return fail(call.Title(), tool.Kind(), planBlockedMessage(p.Name), failureObservation{terminal: "error", execution: "not_started", tool: p.Name, errType: "EXECUTION_DENIED"})
		}
		return t.runAgent(ctx, p, ac, meta)
	}
	// A call asks for itself while it runs (web_fetch reaching a private
	// address): in every mode, offering no "always".
	env.Permit = func(ctx context.Context, c tools.Confirmation) (bool, error) {
		switch verdict, msg := t.askPermission(ctx, id, p, tool, call, c, meta); verdict {
		case permAllow:
			s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
				ToolCallID: id, Status: acp.StatusInProgress,
			}})
			return true, nil
		case permReject:
			return false, nil
		default:
			return false, errors.New(msg)
		}
	}
	conf := call.Confirmation()
	title := call.Title()
	mode := s.getMode()

	if mode == ModePlan && planBlocked(conf) {
		return fail(title, tool.Kind(), planBlockedMessage(p.Name), failureObservation{terminal: "error", execution: "not_started", tool: p.Name, errType: "EXECUTION_DENIED"})
	}

	// todo_write is shown as the session plan, not as a tool call. Its
	// result is still recorded, since the model's history needs it; a
	// replay shows it as a finished call (the store has no hidden result).
	if p.Name == todoWriteTool {
		res := call.Execute(ctx, env)
		st := acp.StatusCompleted
		if res.Err != nil || ctx.Err() != nil {
			st = acp.StatusFailed
		}
		t.rec(store.Record{Kind: store.KindToolResult, Tool: &store.ToolCallRecord{
			ToolCallID: id, Name: p.Name, Title: title, Kind: tool.Kind(), Status: st,
			RawInput: rawJSON(p.args), ModelText: res.LLMContent,
			ResultHash: t.resultHash(id, st == acp.StatusFailed, res.LLMContent),
		}})
		if res.Plan != nil {
			t.recordPlan(ctx, res.Plan)
		}
		return toolRun{llm: res.LLMContent, obs: observe(p.Name, res, ctx)}
	}

	ask := s.needsConfirmation(mode, conf)
	status := acp.StatusInProgress
	if ask {
		status = acp.StatusPending
	}
	t.open(ctx, p, acp.ToolCall{
		ToolCallID: id, Title: title, Kind: tool.Kind(), Status: status,
		Content: conf.Content, Locations: call.Locations(), RawInput: p.args, Meta: meta,
	})
	failed := func(msg string) {
		t.close(ctx, p, acp.ToolCallUpdate{
			ToolCallID: id, Status: acp.StatusFailed, Content: []acp.ToolCallContent{acp.TextContent(msg)},
		}, msg)
	}
	if ask {
		if mode == ModePlan && conf.Kind == tools.ConfirmExec {
			// A command plan mode cannot show read-only is approved once:
			// an "always" given while planning would keep answering for it
			// after the plan, in a mode that never asked (as the reference).
			conf.NoAlways = true
		}
		verdict, msg := t.askPermission(ctx, id, p, tool, call, conf, meta)
		switch verdict {
		case permAllow:
			s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
				ToolCallID: id, Status: acp.StatusInProgress,
			}})
		case permCancel:
			if ctx.Err() != nil {
				msg = loopdetect.ToolExecutionCancelledMessage
			}
			failed(msg)
			return toolRun{llm: msg, permissionStop: true, obs: failureObservation{terminal: "cancelled", execution: "not_started", tool: p.Name}}
		case permReject:
			failed(msg)
			return toolRun{llm: msg, obs: failureObservation{terminal: "cancelled", execution: "not_started", tool: p.Name}}
		}
	}

	if msg := t.checkpoint(call, conf); msg != "" {
		failed(msg)
		return toolRun{llm: msg, obs: failureObservation{terminal: "error", execution: "not_started", tool: p.Name}}
	}
	env.Unasked = !ask && mode == ModePlan && conf.Kind == tools.ConfirmExec && conf.Shell == shellline.ReadOnly
	res := call.Execute(ctx, env)
	if ctx.Err() != nil {
		// Content replaces the call's collection: keep an embedded terminal,
		// so the editor still shows what the command printed before the cancel.
		msg := loopdetect.ToolExecutionCancelledMessage
		var content []acp.ToolCallContent
		for _, c := range res.Content {
			if c.Type == acp.ToolContentTerminal {
				content = append(content, c)
			}
		}
		content = append(content, acp.TextContent(msg))
		t.close(ctx, p, acp.ToolCallUpdate{ToolCallID: id, Status: acp.StatusFailed, Content: content}, msg)
		return toolRun{llm: msg, obs: failureObservation{terminal: "cancelled", execution: "cancelled", tool: p.Name}}
	}
	content := res.Content
	if len(content) == 0 && res.LLMContent != "" {
		content = []acp.ToolCallContent{acp.TextContent(res.LLMContent)}
	}
	st := acp.StatusCompleted
	if res.Err != nil {
		st = acp.StatusFailed
	}
	t.close(ctx, p, acp.ToolCallUpdate{
		ToolCallID: id, Status: st, Content: content, RawOutput: res.RawOutput, Locations: res.Locations,
	}, res.LLMContent)
	if res.Plan != nil {
		t.recordPlan(ctx, res.Plan)
	}
	return toolRun{llm: res.LLMContent, obs: observe(p.Name, res, ctx)}
}

func observe(name string, res tools.Result, ctx context.Context) failureObservation {
	switch {
	case ctx.Err() != nil:
		return failureObservation{terminal: "cancelled", execution: "cancelled", tool: name}
	case res.Err != nil:
		return failureObservation{terminal: "error", execution: "error", tool: name, errType: res.ErrType}
	}
	return failureObservation{terminal: "success", execution: "success", tool: name}
}

func nameOr(n string) string {
	if n == "" {
		return "unknown tool"
	}
	return n
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

// needsConfirmation decides whether the user is asked (§11): yolo never
// asks; reads never ask; auto-edit approves edits; plan mode lets read-only
// shell run and asks for unknown shell; "always allow" answers are
// remembered per session.
func (s *Session) needsConfirmation(mode string, c tools.Confirmation) bool {
	if mode == ModeYolo || c.Kind == tools.ConfirmNone || c.Kind == tools.ConfirmPrivateNetwork {
		// A private network question is asked by the call itself when it
		// connects (tools.Env.Permit).
		return false
	}
	if mode == ModePlan && c.Kind == tools.ConfirmExec && c.Shell != shellline.ReadOnly {
		// Plan mode must confirm a command it cannot classify as
		// read-only (§11), even one "always allowed" earlier.
		return true
	}
	b := s.base()
	b.mu.Lock()
	always := b.allowAlways[alwaysKey(c)] && !c.NoAlways
	b.mu.Unlock()
	if always {
		return false
	}
	switch mode {
	case ModeAutoEdit:
		return c.Kind == tools.ConfirmExec || c.Kind == tools.ConfirmMCP || c.Kind == tools.ConfirmFetch
	case ModePlan:
		return !(c.Kind == tools.ConfirmExec && c.Shell == shellline.ReadOnly)
	}
	return true
}

func alwaysKey(c tools.Confirmation) string {
	return fmt.Sprintf("%d:%s", c.Kind, c.Label)
}

// Permission option ids are qwen-code's ToolConfirmationOutcome values.
const (
	optProceedOnce          = "proceed_once"
	optProceedAlways        = "proceed_always"
	optProceedAlwaysProject = "proceed_always_project"
	optProceedAlwaysUser    = "proceed_always_user"
	optCancel               = "cancel"
)

// permissionOptions lists the options offered per confirmation type (§11).
func permissionOptions(c tools.Confirmation) []acp.PermissionOption {
	allow := acp.PermissionOption{OptionID: optProceedOnce, Name: "Allow", Kind: acp.AllowOnce}
	reject := acp.PermissionOption{OptionID: optCancel, Name: "Reject", Kind: acp.RejectOnce}
	if c.NoAlways {
		return []acp.PermissionOption{allow, reject}
	}
	switch c.Kind {
	case tools.ConfirmEdit:
		return []acp.PermissionOption{
			{OptionID: optProceedAlways, Name: "Allow All Edits", Kind: acp.AllowAlways}, allow, reject,
		}
	case tools.ConfirmPrivateNetwork:
		// Asked every time: no "always".
		return []acp.PermissionOption{allow, reject}
	case tools.ConfirmFetch:
		// "Always" is remembered for the host, for the session.
		return []acp.PermissionOption{
			{OptionID: optProceedAlways, Name: "Always Allow fetching from " + display.Line(c.Label), Kind: acp.AllowAlways}, allow, reject,
		}
	case tools.ConfirmInfo:
		return []acp.PermissionOption{
			{OptionID: optProceedAlwaysProject, Name: "Always Allow in project", Kind: acp.AllowAlways},
			{OptionID: optProceedAlwaysUser, Name: "Always Allow for user", Kind: acp.AllowAlways},
			allow, reject,
		}
	}
	label := display.Line(c.Label) // the command roots, as the model wrote them
	return []acp.PermissionOption{
		{OptionID: optProceedAlwaysProject, Name: "Always Allow in project: " + label, Kind: acp.AllowAlways},
		{OptionID: optProceedAlwaysUser, Name: "Always Allow for user: " + label, Kind: acp.AllowAlways},
		allow, reject,
	}
}

type permVerdict int

const (
	permAllow permVerdict = iota
	permReject
	permCancel // the request was cancelled or failed: stop the batch
)

// askPermission sends session/request_permission and interprets the answer.
func (t *turn) askPermission(ctx context.Context, id string, p pcall, tool tools.Tool, call tools.Call, c tools.Confirmation, meta acp.Meta) (permVerdict, string) {
	s := t.s
	opts := permissionOptions(c)
	title := display.Line(call.Title())
	var reqMeta acp.Meta
	if c.Kind == tools.ConfirmPrivateNetwork {
		reqMeta = acp.Meta{acp.MetaPermission: acp.PermissionPrivateNetwork}
	}
	resp, err := s.m.client.RequestPermission(ctx, &acp.RequestPermissionRequest{
		SessionID: s.id,
		ToolCall: acp.ToolCallUpdate{
			ToolCallID: id, Title: &title, Kind: tool.Kind(), Status: acp.StatusPending,
			Content: shownContent(c.Content), Locations: call.Locations(), RawInput: p.args,
			Meta: s.runMeta(meta), // a subagent's request names its agent call
		},
		Options: opts,
		Meta:    reqMeta,
	})
	if err != nil {
		if ctx.Err() != nil {
			return permCancel, loopdetect.ToolExecutionCancelledMessage
		}
		return permCancel, fmt.Sprintf("Permission request failed for %q: %v", p.Name, err)
	}
	if resp.Outcome.Outcome == "cancelled" {
		return permCancel, canceledByUser(p.Name)
	}
	if resp.Outcome.Outcome != "selected" {
		return permCancel, fmt.Sprintf("Permission request failed for %q: unknown outcome %q", p.Name, resp.Outcome.Outcome)
	}
	var chosen *acp.PermissionOption
	for i := range opts {
		if opts[i].OptionID == resp.Outcome.OptionID {
			chosen = &opts[i]
		}
	}
	if chosen == nil {
		return permCancel, fmt.Sprintf("Permission request failed for %q: Permission response selected unoffered option: %s", p.Name, resp.Outcome.OptionID)
	}
	switch chosen.Kind {
	case acp.RejectOnce, acp.RejectAlways:
		return permReject, canceledByUser(p.Name)
	case acp.AllowAlways:
		if c.Kind == tools.ConfirmEdit {
			// "Allow All Edits" switches the session to auto-edit, as qwen-code does.
			t.rec(store.Record{Kind: store.KindMode, ModeID: ModeAutoEdit})
			s.setMode(ModeAutoEdit)
			s.announceMode(ctx)
		} else {
			b := s.base()
			b.mu.Lock()
			if b.allowAlways == nil { // made at the first "always": an idle session has none
				b.allowAlways = map[string]bool{}
			}
			b.allowAlways[alwaysKey(c)] = true
			b.mu.Unlock()
		}
	}
	return permAllow, ""
}
