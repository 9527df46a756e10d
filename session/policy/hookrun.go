package policy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/hooks"
	"github.com/acpd/acpd/session/rules"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/toolcall"
)

// Host is what running hooks needs of a session: to show a hook's run in
// the editor and to keep it in the transcript.
type Host interface {
	Update(ctx context.Context, u acp.SessionUpdate)
	Record(rec store.Record)
}

// MetaHook is the _meta key of a hook's card: the event, the command and
// the file it was configured in.
const MetaHook = "acpd.hook"

// HookName is the hooks decider's name in a call's trail.
const HookName = "hooks"

// Event is one firing of an event.
type Event struct {
	Name string
	// Match are the names the matchers are tried on (a tool's names, a
	// session event's source).
	Match []string
	// Input holds the event's own fields; Fire adds the session's.
	Input hooks.Input
}

// maxShown bounds the output a hook's card shows and its record keeps.
const maxShown = 4000

// Fire runs the hooks of an event whose matchers accept it, all at once,
// each shown in the editor as a card (an execute tool call) and recorded
// in the transcript; the zero Verdict when no hook matches.
func (s *Session) Fire(ctx context.Context, h Host, ev Event) hooks.Verdict {
	snap := s.ws.Snapshot()
	hs := snap.Hooks.Of(ev.Name, ev.Match...)
	if len(hs) == 0 {
		return hooks.Verdict{}
	}
	in := ev.Input
	in.SessionID, in.TranscriptPath, in.Cwd, in.HookEventName = s.ID, s.Transcript, s.ws.Root, ev.Name
	data, err := json.Marshal(in)
	if err != nil {
		s.ws.e.log.Warn("hook input", "event", ev.Name, "err", err)
		return hooks.Verdict{}
	}
	ids := make([]string, len(hs))
	for i, hk := range hs {
		ids[i] = "hook_" + randomHex(6)
		if h != nil {
			h.Update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &acp.ToolCall{
				ToolCallID: ids[i], Title: cardTitle(hk), Kind: acp.KindExecute, Status: acp.StatusInProgress,
				RawInput: hookInput(hk), Meta: acp.Meta{MetaHook: hookMeta(hk)},
			}})
		}
	}
	env := hooks.Env{Dir: s.ws.Root, Vars: []string{"CLAUDE_PROJECT_DIR=" + s.ws.Root, "ACPD_PROJECT_DIR=" + s.ws.Root, "ACPD_SESSION_ID=" + s.ID}}
	rs := hooks.Run(ctx, hs, data, env)
	for i, r := range rs {
		s.ws.e.log.Debug("hook ran", "event", ev.Name, "command", r.Hook.Command, "exit", r.Exit, "timed_out", r.TimedOut, "duration", r.Duration)
		if h == nil {
			continue
		}
		status, content, out := cardEnd(r)
		h.Update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
			ToolCallID: ids[i], Status: status, Content: content, RawOutput: out,
		}})
		raw, _ := json.Marshal(hookInput(r.Hook))
		rawOut, _ := json.Marshal(out)
		h.Record(store.Record{Kind: store.KindToolResult, Tool: &store.ToolCallRecord{
			ToolCallID: ids[i], Name: "hook", Title: cardTitle(r.Hook), Kind: acp.KindExecute, Status: status,
			RawInput: raw, RawOutput: rawOut, Content: content,
		}})
	}
	v := hooks.Combine(ev.Name, rs)
	for _, n := range v.Notes {
		s.ws.e.log.Warn("hook", "note", n)
	}
	return v
}

func cardTitle(h *hooks.Hook) string {
	return display.Line(h.Event + " hook: " + h.Command)
}

func hookInput(h *hooks.Hook) map[string]any {
	m := map[string]any{"event": h.Event, "command": h.Command}
	if h.Matcher != "" {
		m["matcher"] = h.Matcher
	}
	return m
}

func hookMeta(h *hooks.Hook) map[string]any {
	m := hookInput(h)
	if h.Source.File != "" {
		m["source"] = h.Source.File
	}
	return m
}

// cardEnd is how a hook's card ends: its status, a line saying what the
// hook did (and what it printed, unless it asked for suppressOutput), and
// its exit for rawOutput.
func cardEnd(r hooks.Result) (acp.ToolCallStatus, []acp.ToolCallContent, map[string]any) {
	out := map[string]any{"exitCode": r.Exit, "durationMs": r.Duration.Milliseconds()}
	var line string
	status := acp.StatusFailed
	switch {
	case r.TimedOut:
		out["timedOut"] = true
		line = fmt.Sprintf("timed out after %s and was killed; acpd went on without it", r.Duration.Round(time.Millisecond))
	case r.Err != nil:
		line = "could not run: " + r.Err.Error()
	case r.Exit == 0:
		status, line = acp.StatusCompleted, "exit 0"
	case r.Exit == 2:
		line = "exit 2: blocked"
	default:
		line = fmt.Sprintf("exit %d: failed (not blocking)", r.Exit)
	}
	text := line
	if r.Output == nil || !r.Output.SuppressOutput {
		if s := bounded(r.Stdout); s != "" {
			out["stdout"] = s
			text += "\n" + s
		}
	}
	if s := bounded(r.Stderr); s != "" {
		out["stderr"] = s
		text += "\n" + s
	}
	return status, []acp.ToolCallContent{acp.TextContent(display.Text(text))}, out
}

func bounded(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxShown {
		return hooks.Bound(s[:maxShown])
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Hooks is PreToolUse and PostToolUse as a decider and a reviewer of the
// tool-call lifecycle: a blocking hook refuses the call with its reason
// for the model, permissionDecision allows, asks or denies, updatedInput
// changes the arguments (the deciders after it judge the new call), and
// after the run additionalContext reaches the model's next request.
type Hooks struct {
	S    *Session
	Host Host
}

var (
	_ toolcall.Decider  = Hooks{}
	_ toolcall.Reviewer = Hooks{}
)

func (Hooks) Name() string { return HookName }

func toolNames(tool string) []string {
	if cn := rules.ClaudeName(tool); cn != tool {
		return []string{cn, tool}
	}
	return []string{tool}
}

func (h Hooks) toolInput(c *toolcall.Call) hooks.Input {
	return hooks.Input{
		PermissionMode: hooks.PermissionMode(string(c.Mode)), AgentType: c.Agent,
		ToolName: rules.ClaudeName(c.Name), AcpdToolName: c.Name, ToolInput: c.Args, ToolUseID: c.ID,
	}
}

// Decide runs the PreToolUse hooks.
func (h Hooks) Decide(ctx context.Context, c *toolcall.Call) toolcall.Decision {
	if c.Run == nil {
		return toolcall.Decision{}
	}
	v := h.S.Fire(ctx, h.Host, Event{Name: hooks.PreToolUse, Match: toolNames(c.Name), Input: h.toolInput(c)})
	who := "PreToolUse hook"
	if v.By != nil {
		who = fmt.Sprintf("PreToolUse hook %q", v.By.Command)
	}
	var d toolcall.Decision
	switch {
	case v.Stop:
		return toolcall.Decision{Verdict: toolcall.Stop, Reason: stopText(v)}
	case v.Permission == "deny":
		return toolcall.Decision{Verdict: toolcall.Deny, Reason: fmt.Sprintf("The %s blocked this call: %s", who, v.Reason)}
	case v.Permission == "ask":
		d = toolcall.Decision{Verdict: toolcall.Ask, NoAlways: true, Reason: reasonOf("asked by the "+who, v.Reason)}
	case v.Permission == "allow":
		d = toolcall.Decision{Verdict: toolcall.Allow, Reason: reasonOf("allowed by the "+who, v.Reason)}
	}
	if len(v.UpdatedInput) > 0 {
		d.Input = json.RawMessage(v.UpdatedInput)
		if d.Reason == "" {
			d.Reason = "input changed by a PreToolUse hook"
		}
	}
	if v.Context != "" {
		h.S.keepContext(c.ID, v.Context)
	}
	return d
}

func reasonOf(what, why string) string {
	if why == "" {
		return what
	}
	return what + ": " + why
}

func stopText(v hooks.Verdict) string {
	if v.StopReason != "" {
		return "Stopped by a hook: " + v.StopReason
	}
	return "Stopped by a hook."
}

// Review runs the PostToolUse hooks of a call that ran.
func (h Hooks) Review(ctx context.Context, c *toolcall.Call) toolcall.Decision {
	pre := h.S.takeContext(c.ID)
	d := toolcall.Decision{Context: pre}
	if c.Result == nil {
		return d
	}
	in := h.toolInput(c)
	resp := map[string]any{"success": c.Result.Err == nil, "output": hooks.Bound(c.Result.LLMContent)}
	if c.Result.Err != nil {
		resp["error"] = c.Result.Err.Error()
	}
	in.ToolResponse = resp
	v := h.S.Fire(ctx, h.Host, Event{Name: hooks.PostToolUse, Match: toolNames(c.Name), Input: in})
	add := func(s string) {
		if s == "" {
			return
		}
		if d.Context != "" {
			d.Context += "\n\n"
		}
		d.Context += s
	}
	add(v.Context)
	if v.Block {
		who := "A PostToolUse hook"
		if v.By != nil {
			who = fmt.Sprintf("The PostToolUse hook %q", v.By.Command)
		}
		add(fmt.Sprintf("%s says: %s", who, v.Reason))
	}
	if v.Stop {
		d.Verdict, d.Reason = toolcall.Stop, stopText(v)
	}
	return d
}

// keepContext holds a PreToolUse hook's additionalContext until the call
// has its result.
func (s *Session) keepContext(id, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[string]string{}
	}
	s.pending[id] = text
}

func (s *Session) takeContext(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.pending[id]
	delete(s.pending, id)
	return t
}
