package toolcall

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/shellline"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
)

// Host is what the lifecycle needs from the session a call runs in. The
// session root implements it; every method is the session's own business
// (its transcript, its editor connection, its checkpoint store).
type Host interface {
	// NewCallID returns a toolCallId unique within the session for a
	// provider call id.
	NewCallID(providerID string) string
	// Tool is the session's tool of that name.
	Tool(name string) (tools.Tool, bool)
	// Env is the environment a call runs in.
	Env(id string) *tools.Env
	// Mode is the session's approval mode now.
	Mode() Mode
	// Body runs c in place of its tool's Execute, for the calls the
	// session runs itself (exit_plan_mode, agent calls); nil otherwise.
	Body(c *Call) Body
	// Record appends to the transcript; a failure is the turn's to keep.
	Record(rec store.Record)
	// Update shows the editor a session/update.
	Update(ctx context.Context, u acp.SessionUpdate)
	// RequestPermission asks the editor (the host fills the session id).
	RequestPermission(ctx context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error)
	// Checkpoint records what c may change before it runs; it returns
	// what the model reads when that failed and c must not run.
	Checkpoint(c *Call) string
	// Plan records and shows a plan update (todo_write).
	Plan(ctx context.Context, plan []acp.PlanEntry)
	// LoopWarning tells the user the loop guard warned the model.
	LoopWarning(ctx context.Context, text string)
}

// frameMeta lets a built call (an MCP tool) add keys to the frames' _meta.
type frameMeta interface{ FrameMeta() map[string]any }

// run takes one call through its lifecycle: built and prepared, decided,
// asked about, checkpointed, run, reviewed, recorded and shown. Every way
// it can end is an Outcome built in this package.
func (t *Turn) run(ctx context.Context, c *Call) {
	env := t.Host.Env(c.ID)
	c.Meta = acp.Meta{"toolName": c.Name}
	if !t.resolve(ctx, c, env) {
		return
	}
	if fm, ok := c.Run.(frameMeta); ok {
		for k, v := range fm.FrameMeta() {
			c.Meta[k] = v
		}
	}
	c.Body = t.Host.Body(c)
	c.Mode = t.Host.Mode()
	// A call asks for itself while it runs (web_fetch reaching a private
	// address, every time; a confined command reaching a host through
	// acpd's proxy, whose "always" the session's grants keep for the host).
	env.Permit = func(ctx context.Context, conf tools.Confirmation) (bool, error) {
		if conf.Kind == tools.ConfirmNetwork && t.granted(conf) {
			return true, nil
		}
		a := t.ask(ctx, c, conf, nil, "")
		if a.Kind == Allowed && conf.Kind == tools.ConfirmNetwork && a.Option.Kind == acp.AllowAlways {
			t.grant(conf)
		}
		switch a.Kind {
		case Allowed:
			t.Host.Update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
				ToolCallID: c.ID, Status: acp.StatusInProgress,
			}})
			return true, nil
		case Rejected:
			return false, nil
		}
		return false, errors.New(a.Text)
	}

	d, ok := t.decide(ctx, c)
	if !ok {
		return // a rewritten input that could not be built
	}
	switch d.Verdict {
	case Deny, Stop:
		t.refuse(ctx, c, d)
		return
	}
	// todo_write is shown as the session plan, not as a tool call. Its
	// result is still recorded, since the model's history needs it; a
	// replay shows it as a finished call (the store has no hidden result).
	if c.Name == tools.NameTodoWrite && d.Verdict != Ask {
		t.runAsPlan(ctx, c, env)
		return
	}
	status := acp.StatusInProgress
	if d.Verdict == Ask {
		status = acp.StatusPending
	}
	t.open(ctx, c, acp.ToolCall{
		ToolCallID: c.ID, Title: c.Title, Kind: c.Kind, Status: status,
		Content: c.Confirm.Content, Locations: locations(c), RawInput: c.Args, Meta: c.Meta,
	})
	if d.Verdict == Ask && !t.askFirst(ctx, c) {
		return
	}
	if msg := t.Host.Checkpoint(c); msg != "" {
		t.fail(ctx, c, notStarted(msg, loopdetect.TerminalError, ""))
		return
	}
	env.Unasked = !c.asked && c.Mode == ModePlan && c.Confirm.Kind == tools.ConfirmExec && c.Confirm.Shell == shellline.ReadOnly
	var res tools.Result
	stop := false
	if c.Body != nil {
		res, stop = c.Body(ctx, env)
	} else {
		res = c.Run.Execute(ctx, env)
	}
	c.Result = &res
	t.finish(ctx, c, res, stop)
}

// resolve finds the call's tool, builds the call from its arguments and
// prepares it; false when it ended there (an invalid-params error, a
// failed preparation).
func (t *Turn) resolve(ctx context.Context, c *Call, env *tools.Env) bool {
	if c.Name == "" {
		t.invalid(ctx, c, "Missing function name")
		return false
	}
	tool, ok := t.Host.Tool(c.Name)
	if !ok {
		t.invalid(ctx, c, fmt.Sprintf("Tool %q not found in registry.", c.Name))
		return false
	}
	c.Tool, c.Kind = tool, tool.Kind()
	if c.Invalid != "" {
		t.invalid(ctx, c, fmt.Sprintf("Invalid arguments for tool %q: %s", c.Name, c.Invalid))
		return false
	}
	run, err := tool.Build(env, c.Arguments)
	if err != nil {
		t.invalid(ctx, c, err.Error())
		return false
	}
	return t.prepare(ctx, c, env, run)
}

// prepare gives c its built form and lets it read what the permission
// request shows (the whole-file diff of an edit), through the editor when
// it offers fs; false when that failed (the call ended).
func (t *Turn) prepare(ctx context.Context, c *Call, env *tools.Env, run tools.Call) bool {
	c.Run, c.Title = run, run.Title()
	if pr, ok := run.(tools.Preparer); ok {
		if err := pr.Prepare(ctx, env); err != nil {
			if ctx.Err() != nil {
				t.fail(ctx, c, notStarted(loopdetect.ToolExecutionCancelledMessage, loopdetect.TerminalCancelled, ""))
				return false
			}
			t.fail(ctx, c, notStarted(err.Error(), loopdetect.TerminalError, ""))
			return false
		}
	}
	c.Title, c.Confirm = run.Title(), run.Confirmation()
	return true
}

// rebuild builds c again from a decision's new arguments; false when they
// are not valid (c is then refused, saying whose arguments they were).
func (t *Turn) rebuild(ctx context.Context, c *Call, d Decision) bool {
	env := t.Host.Env(c.ID)
	run, err := c.Tool.Build(env, d.Input)
	if err != nil {
		t.fail(ctx, c, notStarted(fmt.Sprintf("The arguments %s gave for %q are not valid: %v", d.By, c.Name, err), loopdetect.TerminalError, tools.ErrTypeInvalidParams))
		return false
	}
	c.Arguments = d.Input
	c.Args = decodeArgs(d.Input, "")
	return t.prepare(ctx, c, env, run)
}

// invalid ends a call whose name or arguments are not valid: an
// invalid-params error, which the daemon guard counts per tool name.
func (t *Turn) invalid(ctx context.Context, c *Call, msg string) {
	// Never counted once the turn is cancelled (§7.4): the error may come
	// from the cancellation, not from the model.
	if ctx.Err() == nil {
		t.mu.Lock()
		t.Guard.RecordInvalidParams(c.Name, msg)
		t.mu.Unlock()
	}
	if c.Kind == "" {
		c.Kind = acp.KindOther
	}
	if c.Title == "" {
		c.Title = nameOr(c.Name)
	}
	t.fail(ctx, c, notStarted(msg, loopdetect.TerminalError, ""))
}

// refuse ends a call a decider denied or stopped, without asking: the
// model reads the decision's reason.
func (t *Turn) refuse(ctx context.Context, c *Call, d Decision) {
	errType := d.ErrType
	if errType == "" {
		errType = ErrTypeDenied
	}
	if d.Verdict == Stop {
		o := notStarted(d.Reason, loopdetect.TerminalCancelled, errType)
		o.Stop = true
		t.fail(ctx, c, o)
		return
	}
	t.fail(ctx, c, notStarted(d.Reason, loopdetect.TerminalError, errType))
}

// askFirst asks the editor about c before it runs (the strictest decision
// was an ask); false when the call ended there.
func (t *Turn) askFirst(ctx context.Context, c *Call) bool {
	conf, q, why := c.Confirm, (*Question)(nil), ""
	for _, d := range c.Decisions {
		if d.Verdict == Ask {
			conf.NoAlways = conf.NoAlways || d.NoAlways
			if d.Question != nil {
				q = d.Question
			}
			if why == "" && !builtIn(d.By) {
				why = d.Reason
			}
		}
	}
	if why == "" && len(c.notes) > 0 {
		why = strings.Join(c.notes, "; ")
	}
	a := t.ask(ctx, c, conf, q, why)
	switch a.Kind {
	case Allowed:
		t.Host.Update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
			ToolCallID: c.ID, Status: acp.StatusInProgress,
		}})
		return true
	case Rejected:
		t.close(ctx, c, failedUpdate(c, a.Text), notStarted(a.Text, loopdetect.TerminalCancelled, ""))
	default:
		o := notStarted(a.Text, loopdetect.TerminalCancelled, "")
		o.Stop = true
		t.close(ctx, c, failedUpdate(c, a.Text), o)
	}
	return false
}

// finish shows and records the result of a call that ran, after the
// reviewers had their say.
func (t *Turn) finish(ctx context.Context, c *Call, res tools.Result, stop bool) {
	if ctx.Err() != nil && c.Body == nil {
		// Content replaces the call's collection: keep an embedded
		// terminal, so the editor still shows what the command printed
		// before the cancel.
		msg := loopdetect.ToolExecutionCancelledMessage
		var content []acp.ToolCallContent
		for _, cc := range res.Content {
			if cc.Type == acp.ToolContentTerminal {
				content = append(content, cc)
			}
		}
		content = append(content, acp.TextContent(msg))
		t.close(ctx, c, acp.ToolCallUpdate{ToolCallID: c.ID, Status: acp.StatusFailed, Content: content}, cancelledRun(msg))
		return
	}
	text, reviewStop := t.review(ctx, c, &res)
	content := res.Content
	if len(content) == 0 && res.LLMContent != "" {
		content = []acp.ToolCallContent{acp.TextContent(res.LLMContent)}
	}
	st := acp.StatusCompleted
	if res.Err != nil {
		st = acp.StatusFailed
	}
	o := ran(ctx, text, res)
	o.Stop = stop || reviewStop
	t.close(ctx, c, acp.ToolCallUpdate{
		ToolCallID: c.ID, Status: st, Content: content, RawOutput: res.RawOutput, Locations: res.Locations,
	}, o)
	if res.Plan != nil {
		t.Host.Plan(ctx, res.Plan)
	}
}

// review lets the reviewers look at the result: their context joins what
// the model reads; a deny marks the result failed with its reason; a stop
// ends the batch. It returns the model's text.
func (t *Turn) review(ctx context.Context, c *Call, res *tools.Result) (string, bool) {
	text, stop := res.LLMContent, false
	for _, dc := range t.Deciders {
		r, ok := dc.(Reviewer)
		if !ok {
			continue
		}
		d := r.Review(ctx, c)
		if d.Verdict == Abstain && d.Context == "" {
			continue
		}
		if d.By == "" {
			d.By = dc.Name()
		}
		d.After = true
		c.Decisions = append(c.Decisions, d)
		if d.Context != "" {
			text = joinText(text, d.Context)
		}
		switch d.Verdict {
		case Deny, Stop:
			text = joinText(text, d.Reason)
			if res.Err == nil {
				res.Err, res.ErrType = errors.New(d.Reason), ErrTypeDenied
			}
			stop = stop || d.Verdict == Stop
		}
	}
	return text, stop
}

// runAsPlan runs todo_write: no frames, its result recorded, its plan shown.
func (t *Turn) runAsPlan(ctx context.Context, c *Call, env *tools.Env) {
	res := c.Run.Execute(ctx, env)
	c.Result = &res
	st := acp.StatusCompleted
	if res.Err != nil || ctx.Err() != nil {
		st = acp.StatusFailed
	}
	c.Outcome = ran(ctx, res.LLMContent, res)
	t.Host.Record(store.Record{Kind: store.KindToolResult, Tool: &store.ToolCallRecord{
		ToolCallID: c.ID, Name: c.Name, Title: c.Title, Kind: c.Kind, Status: st,
		RawInput: rawJSON(c.Args), ModelText: res.LLMContent,
		ResultHash: t.resultHash(c.ID, st == acp.StatusFailed, res.LLMContent),
		Decisions:  records(c.Trail()),
	}})
	if res.Plan != nil {
		t.Host.Plan(ctx, res.Plan)
	}
}

func locations(c *Call) []acp.ToolCallLocation {
	if c.Run == nil {
		return nil
	}
	return c.Run.Locations()
}

func nameOr(n string) string {
	if n == "" {
		return "unknown tool"
	}
	return n
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n\n" + b
}

func failedUpdate(c *Call, msg string) acp.ToolCallUpdate {
	return acp.ToolCallUpdate{ToolCallID: c.ID, Status: acp.StatusFailed, Content: []acp.ToolCallContent{acp.TextContent(msg)}}
}

// granted reports whether the session's grants allow what a running call
// asks about (conf).
func (t *Turn) granted(conf tools.Confirmation) bool {
	for _, d := range t.Deciders {
		if g, ok := d.(*Grants); ok && g.Decide(context.Background(), &Call{Confirm: conf}).Verdict == Allow {
			return true
		}
	}
	return false
}

// grant keeps an "always" answer about what a running call asked (conf)
// in the session's grants.
func (t *Turn) grant(conf tools.Confirmation) {
	for _, d := range t.Deciders {
		if g, ok := d.(*Grants); ok {
			g.Allow(conf)
		}
	}
}
