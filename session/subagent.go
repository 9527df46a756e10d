package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unique"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/instructions"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
	"github.com/acpd/acpd/session/turnguard"
)

// Subagents: the agent tool (package agents) hands a task to a subagent,
// which runs it as a conversation of its own and returns its final answer
// as the call's result. A run reuses the turn machinery on a session of
// its own (child): an empty history but for the prompt, its own system
// prompt, tools, model, context accounting and compaction, and its own
// loop guard built from the session's settings. What belongs to the whole
// session — the approval mode, "always allow" answers, toolCallIds, the
// workspace cache, the sandbox, the transcript — is the parent's.
//
// Decisions where the spec is silent:
//   - The agent call is a tool_call of kind "other" (the reference maps
//     agent to other) titled by its description, in_progress from the
//     start: it never asks permission itself; the subagent's calls do,
//     with the session's mode.
//   - The subagent's text, thoughts and usage are not sent (they would mix
//     into the assistant's message and the context meter); its tool calls
//     and compactions are, with _meta acpd.parentToolCallId. Its answer is
//     the agent call's final content.
//   - A guard stop, a model failure or a refusal fails the agent call with
//     a result that says what happened; the parent's turn goes on. A
//     cancelled permission request inside the run stops the parent's batch
//     as one of the parent's own would.
//   - In plan mode only read-only agents (agents.Agent.ReadOnly) run.

// subagentResult is how a subagent run ended, for the parent's call.
type subagentResult struct {
	text           string // the parent model's tool result
	failed         bool
	errType        string // for the repeated-failure guard and telemetry
	permissionStop bool
	rawOutput      map[string]any
}

// Error types of a failed agent call.
const (
	errTypeSubagentLoop   = "SUBAGENT_LOOP_DETECTED"
	errTypeSubagentFailed = "SUBAGENT_FAILED"
)

// runAgent runs a built agent call: the subagent run nested under it, and
// its answer as the call's result; stop when a permission request inside
// the run was cancelled (the parent's batch stops as for one of its own).
func (t *turn) runAgent(ctx context.Context, id string, call *agents.Call) (tools.Result, bool) {
	res := t.s.runSubagent(ctx, t, id, call)
	r := tools.Result{LLMContent: res.text, Content: []acp.ToolCallContent{acp.TextContent(res.text)}, RawOutput: res.rawOutput}
	if res.failed || ctx.Err() != nil {
		r.Err, r.ErrType = errors.New(firstLine(res.text)), res.errType
	}
	return r, res.permissionStop
}

// runSubagent runs call's agent for the agent call parentID of turn pt and
// returns how it ended. It records the run (agent_start, the run's own
// records, agent_end), all tagged with parentID.
func (s *Session) runSubagent(ctx context.Context, pt *turn, parentID string, call *agents.Call) subagentResult {
	pctx := ctx
	a := call.Agent
	c := s.child(a, parentID)
	o := s.m.opts
	t := &turn{s: c, g: newGuard(o.Cap, o.SkipLoopDetection, o.FailureGuard, c.log), up: pt}
	t.tc = t.newToolTurn()
	t.tc.Agent = a.Name
	runCtx := ctx
	var endChild func(*acp.SubagentState)
	if s.m.subagentsVisible() {
		runCtx, endChild = s.announceChild(ctx, c, a, call)
	}
	ctx, span := o.Telemetry.StartSubagent(runCtx, s.id, a.Name, c.getModel(), call.Prompt)
	c.history = []model.Message{{Role: model.RoleUser, Content: call.Prompt}}
	t.rec(store.Record{Kind: store.KindAgentStart, Agent: &store.AgentRun{
		Type: a.Name, Description: call.Description, Model: c.getModel(), Prompt: call.Prompt,
	}})
	c.log.Info("subagent started", "tools", len(c.tools.Tools()), "model", c.getModel())
	resp, err := t.loop(ctx, false)
	res := t.result(ctx, a, resp, err)
	if runCtx.Err() != nil && pctx.Err() == nil {
		// The user stopped this run alone (session/cancel with its child
		// id); the parent's turn goes on.
		res.text = fmt.Sprintf("The user stopped the subagent %q before it finished; it gave no answer.", a.Name)
	}
	if endChild != nil {
		defer endChild(childState(runCtx, resp, res))
	}
	end := &store.AgentRun{}
	switch {
	case ctx.Err() != nil:
		end.StopReason = acp.StopCancelled
	case res.failed:
		end.Error = firstLine(res.text)
	case resp != nil:
		end.StopReason = resp.StopReason
	}
	t.rec(store.Record{Kind: store.KindAgentEnd, Agent: end})
	span.End(t.telemetryEnd(resp, err))
	c.log.Info("subagent ended", "tool_calls", t.g.Total(), "stop_reason", end.StopReason, "error", end.Error)
	if t.recErr != nil {
		pt.setRecErr(t.recErr)
	}
	res.text = tools.TruncateOutput(&tools.Env{MaxOutputBytes: o.MaxOutputBytes}, res.text)
	return res
}

// result turns the run's end into the parent's tool result.
func (t *turn) result(ctx context.Context, a *agents.Agent, resp *acp.PromptResponse, err error) subagentResult {
	calls := t.g.Total()
	raw := map[string]any{"subagentType": a.Name, "toolCalls": calls}
	fail := func(errType, text string) subagentResult {
		return subagentResult{text: text, failed: true, errType: errType, rawOutput: raw}
	}
	switch {
	case ctx.Err() != nil:
		raw["stopReason"] = string(acp.StopCancelled)
		return fail("", loopdetect.ToolExecutionCancelledMessage)
	case err != nil && t.g.Detected():
		f := t.g.Facts()
		raw["loopType"] = string(t.g.LoopType())
		if f.CapReason != "" {
			raw["capReason"] = string(f.CapReason)
		}
		return fail(errTypeSubagentLoop, loopStopResult(a.Name, t.g.LoopType(), f))
	case err != nil:
		msg := err.Error()
		if ae, ok := err.(*acp.Error); ok {
			msg = ae.Message
		}
		raw["error"] = msg
		return fail(errTypeSubagentFailed, fmt.Sprintf("The subagent %q failed after %d tool calls: %s", a.Name, calls, msg))
	}
	raw["stopReason"] = string(resp.StopReason)
	answer := strings.TrimSpace(t.final)
	switch resp.StopReason {
	case acp.StopRefusal:
		return fail(errTypeSubagentFailed, fmt.Sprintf("The subagent %q's model refused the task.", a.Name))
	case acp.StopMaxTokens:
		if ours, _ := resp.Meta["acpd"].(map[string]any); ours["budget"] != nil {
			// A token budget stopped the run (the turn's budget counts
			// its subagents' requests): its last message says which.
			h := t.s.history
			return fail(errTypeSubagentFailed, fmt.Sprintf("The subagent %q stopped before it finished: %s", a.Name, h[len(h)-1].Content))
		}
		answer += "\n\n[the subagent's answer was cut off at the model's output limit]"
	case acp.StopEndTurn:
		if t.permStop {
			r := fail("", fmt.Sprintf("The subagent %q stopped: a permission request was cancelled.", a.Name))
			r.permissionStop = true
			return r
		}
	}
	if answer == "" {
		answer = fmt.Sprintf("The subagent %q finished without an answer.", a.Name)
	}
	return subagentResult{text: answer, rawOutput: raw}
}

// loopStopResult tells the parent's model that the subagent's own guard
// stopped it: the loop type, the cap rule and the calls counted.
func loopStopResult(agent string, lt loopdetect.LoopType, f turnguard.Facts) string {
	var why []string
	why = append(why, "loop type "+string(lt))
	if f.CapReason != "" {
		why = append(why, "cap reason "+string(f.CapReason))
	}
	why = append(why, fmt.Sprintf("%d tool calls", f.ToolCalls))
	if f.RepeatedTool != "" {
		why = append(why, fmt.Sprintf("%s repeated %d times", f.RepeatedTool, f.RepeatCount))
	}
	return fmt.Sprintf("The subagent %q was stopped by its loop protection (%s). Its task is unfinished and it gave no answer. "+
		"Decide how to go on: give a subagent a narrower or clearer task, do the work yourself, or tell the user.",
		agent, strings.Join(why, ", "))
}

// child returns the session a run of agent a for the agent call runID
// works in (see the package comment above).
func (s *Session) child(a *agents.Agent, runID string) *Session {
	c := &Session{
		id:      s.id,
		m:       s.m,
		cwd:     s.cwd,
		roots:   s.roots,
		sandbox: s.sandbox,
		log:     s.log.With("subagent", a.Name, "agent_call", runID),
		tools:   tools.NewRegistry(),
		w:       s.w,
		parent:  s,
		runID:   runID,
		model:   a.Model,
		// The run's hooks are told the agent it runs as.
		agentName: a.Name,
	}
	if c.model == "" {
		c.model = s.getModel()
	}
	for _, tl := range s.tools.Tools() {
		if agents.SubagentTool(tl.Name()) && (a.Tools == nil || slices.Contains(a.Tools, tl.Name())) {
			c.tools.Add(tl)
		}
	}
	// The parent's turn waited for the gathering: its instruction files
	// and environment follow the agent's own prompt.
	done := make(chan struct{})
	close(done)
	c.prep = &prep{done: done, built: true,
		system: unique.Make(instructions.SystemPrompt(s.promptParts(a.Prompt)))}
	return c
}

// subagentUpdate adapts an update of a subagent run's session before it
// is sent: tool calls carry the agent call's id in _meta; the run's text,
// thoughts, usage and plan are not shown (false).
func (s *Session) subagentUpdate(u *acp.SessionUpdate) bool {
	if s.childID != "" {
		return true // a visible run: shown as its own session (children.go)
	}
	switch u.Kind {
	case acp.UpdateToolCall:
		tc := *u.ToolCall
		tc.Meta = s.runMeta(tc.Meta)
		u.ToolCall = &tc
	case acp.UpdateToolCallUpdate:
		tu := *u.ToolCallUpdate
		tu.Meta = s.runMeta(tu.Meta)
		u.ToolCallUpdate = &tu
	case acp.UpdateCurrentMode, acp.UpdateConfigOption:
	default:
		return false
	}
	return true
}

// runMeta is m with the agent call's id added, for a subagent run's frames
// (m itself is not changed).
func (s *Session) runMeta(m acp.Meta) acp.Meta {
	if s.parent == nil {
		return m
	}
	out := make(acp.Meta, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[acp.MetaParentToolCallID] = s.runID
	return out
}

// agentDirs are the session's agent folders.
func (s *Session) agentDirs() []agents.Dir {
	global := ""
	if s.m.opts.ConfigDir != "" {
		global = s.m.opts.ConfigDir + "/agents"
	}
	return agents.Dirs(s.roots, global)
}

// refreshAgents reloads the agent files when they changed since they were
// loaded (checked at the start of each prompt, by the turn holder). The
// files are read once for all the sessions of a workspace (workspace.Hub);
// the set is the session's, checked against its tools and models.
func (s *Session) refreshAgents(ctx context.Context) {
	if s.agentTool == nil {
		return
	}
	files := s.m.hub.Agents(s.agentDirs())
	if files == s.agentFiles {
		return
	}
	s.agentFiles = files
	if len(files.Agents) == 0 && len(files.Warnings) == 0 {
		s.agentTool.SetAgents(s.m.builtinAgents()) // shared by every such session
		return
	}
	set := s.agentSet(files)
	for _, w := range set.Warnings {
		s.notify(ctx, notice.AgentFile, w)
	}
	s.agentTool.SetAgents(set)
}

// agentSet is the built-ins and files, checked against the session's tools
// and the configured models.
func (s *Session) agentSet(files *agents.Loaded) *agents.Set {
	return agents.NewSet(agents.Builtins(), files, agents.Check{
		Tool: func(n string) bool {
			_, ok := s.tools.Get(n)
			return ok
		},
		Model: func(n string) bool { return slices.Contains(s.m.opts.Models, n) },
	})
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
