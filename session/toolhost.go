package session

import (
	"context"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/autoallow"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/steer"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/tools"
)

// A turn is the host of its tool calls' lifecycle (package toolcall): the
// lifecycle decides, asks, runs, records and shows; the session supplies
// its tools, transcript, editor connection, checkpoints and the bodies of
// the calls it runs itself.

// deciders lists, in order, what decides about each tool call of the turn
// (package toolcall says what each is for and where the next ones go). A
// new decider is added here; Options.Deciders are an embedder's, asked
// after plan mode and before the session's "always" grants.
func (t *turn) deciders() []toolcall.Decider {
	ds := []toolcall.Decider{toolcall.PlanMode{}}
	ds = append(ds, t.policyDeciders()...)
	ds = append(ds, t.s.m.opts.Deciders...)
	if t.s.m.opts.AutoAllowConfined {
		ds = append(ds, autoallow.Decider{Sandbox: t.s.sandbox})
	}
	return append(ds, &t.s.base().grants, toolcall.Approval{SetMode: t.switchMode})
}

// newToolTurn is the tool-call state of a turn (a prompt turn, or a
// subagent run's).
func (t *turn) newToolTurn() *toolcall.Turn {
	o := t.s.m.opts
	tc := &toolcall.Turn{Host: t, Guard: t.g, Deciders: t.deciders(), AgentConcurrency: o.AgentConcurrency, Telemetry: o.Telemetry}
	if t.s.parent == nil {
		// The user's steering messages reach the model after a batch's
		// results (a subagent run takes none).
		tc.Stages = append(tc.Stages, steer.Delivery{Queue: &t.s.steers, Echo: t.s.echoSteer})
	}
	return tc
}

// switchMode records a mode the user chose in a permission request
// ("Allow All Edits", a plan's approval), switches to it and announces it.
func (t *turn) switchMode(ctx context.Context, m toolcall.Mode) {
	t.rec(store.Record{Kind: store.KindMode, ModeID: string(m)})
	t.s.setMode(string(m))
	t.s.announceMode(ctx)
}

func (t *turn) NewCallID(providerID string) string { return t.s.newToolCallID(providerID) }

func (t *turn) Tool(name string) (tools.Tool, bool) { return t.s.tools.Get(name) }

func (t *turn) Mode() toolcall.Mode { return toolcall.Mode(t.s.getMode()) }

func (t *turn) Record(rec store.Record) { t.rec(rec) }

func (t *turn) Update(ctx context.Context, u acp.SessionUpdate) { t.s.update(ctx, u) }

// RequestPermission asks the editor; a subagent's request names its agent
// call.
func (t *turn) RequestPermission(ctx context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
	r.SessionID = t.s.wire()
	r.ToolCall.Meta = t.s.runMeta(r.ToolCall.Meta)
	if r.ToolCall.Title != nil {
		t.notifyHook(ctx, *r.ToolCall.Title)
	}
	return t.s.m.client.RequestPermission(ctx, r)
}

func (t *turn) Plan(ctx context.Context, plan []acp.PlanEntry) { t.recordPlan(ctx, plan) }

// LoopWarning shows the loop guard's warning to the user; a client
// without notices gets it as agent text at once (the notice's own
// fallback for this kind is the log only).
func (t *turn) LoopWarning(ctx context.Context, w string) {
	t.s.notify(ctx, notice.LoopWarning, w)
	if !t.s.base().notes.Enabled() {
		b := acp.TextBlock("\n\n" + w + "\n\n")
		t.s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b})
	}
}

// Body runs the calls the session runs itself: exit_plan_mode (the mode
// was switched when the user approved the plan) and agent calls (a
// subagent run).
func (t *turn) Body(c *toolcall.Call) toolcall.Body {
	switch call := c.Run.(type) {
	case *tools.ExitPlanModeCall:
		return func(ctx context.Context, env *tools.Env) (tools.Result, bool) {
			return t.exitPlanMode(ctx, call, env), false
		}
	case *agents.Call:
		return func(ctx context.Context, _ *tools.Env) (tools.Result, bool) { return t.runAgent(ctx, c.ID, call) }
	}
	return nil
}

// Env is the environment a call of the turn runs in.
func (t *turn) Env(id string) *tools.Env {
	s := t.s
	s.m.mu.Lock()
	caps := s.m.clientCaps
	s.m.mu.Unlock()
	return &tools.Env{
		SessionID:      s.wire(),
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
