package toolcall

import (
	"context"
	"encoding/json"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
	"github.com/acpd/acpd/session/turnguard"
)

// Mode is a session's approval mode (the ACP mode ids, qwen-code's values).
type Mode string

const (
	ModePlan     Mode = "plan"      // analyse only: what modifies is refused, unknown commands asked
	ModeDefault  Mode = "default"   // ask before edits and commands
	ModeAutoEdit Mode = "auto-edit" // edits run, commands ask
	ModeYolo     Mode = "yolo"      // everything runs
)

// Call is one tool call the model made, from the model's response to its
// answer: what it asked for, what acpd built from it, every decision taken
// about it and by whom, and how it ended.
type Call struct {
	// What the model sent.
	Name      string
	Arguments json.RawMessage
	Invalid   string // the arguments could not be parsed or repaired
	Thinking  []model.Thinking
	// ProviderID is the provider's call id, or one made up when it sent
	// none; ID is the ACP toolCallId, unique within the session, also the
	// call's id in the model's history.
	ProviderID string
	ID         string
	// Dup marks a provider replay of a call already answered in this
	// prompt; Args are the decoded arguments (rawInput, the repeat key's
	// value) and Key the (tool, args) repeat key.
	Dup  bool
	Args any
	Key  string

	// What the lifecycle made of it, filled as it goes.
	Tool  tools.Tool // nil until found
	Run   tools.Call // nil until built
	Title string
	Kind  acp.ToolKind
	// Confirm is what the user would be asked about: the kind of call, the
	// "always" label, the content shown, the shell line parsed, the real
	// paths it touches.
	Confirm tools.Confirmation
	// Mode is the approval mode the call was decided in.
	Mode Mode
	// Meta is the _meta of the call's frames.
	Meta acp.Meta
	// Agent is the subagent whose run made the call ("" for the session's
	// own turn).
	Agent string
	// Body runs the call in place of its tool's Execute (the host sets it
	// for exit_plan_mode and agent calls).
	Body Body
	// Decisions is the trail: the deciders' answers in order, the user's
	// answer, the reviewers'.
	Decisions []Decision
	// Result is what the call's run returned (nil when it never ran).
	Result *tools.Result
	// Outcome is how the call ended.
	Outcome Outcome
	// asked is set once the editor was asked about the call.
	asked bool
	// notes are the reasons of deciders that abstained though they could
	// have allowed the call, shown in its question.
	notes []string
}

// Body runs a call the session runs itself; stop ends the batch after it
// (a subagent run whose permission request was cancelled).
type Body func(ctx context.Context, env *tools.Env) (res tools.Result, stop bool)

// Outcome is how a call ended: the text the model reads and what the loop
// guard, the repeated-failure reducer and telemetry learn.
type Outcome struct {
	Text      string
	Terminal  loopdetect.TerminalStatus
	Execution loopdetect.ExecutionStatus
	ErrType   string
	// Stop ends the batch after this call: the rest are skipped and the
	// turn ends (a cancelled permission request, a decider's stop).
	Stop bool
	// Observed: the repeated-failure reducer learns from the call (it was
	// not skipped).
	Observed bool
	// Duplicate marks a provider replay answered without running.
	Duplicate bool
}

// Outcomes the lifecycle gives; each is built here and nowhere else.

func skipped(text string) Outcome { return Outcome{Text: text} }

func notStarted(text string, terminal loopdetect.TerminalStatus, errType string) Outcome {
	return Outcome{Text: text, Terminal: terminal, Execution: loopdetect.ExecutionNotStarted, ErrType: errType, Observed: true}
}

func cancelledRun(text string) Outcome {
	return Outcome{Text: text, Terminal: loopdetect.TerminalCancelled, Execution: loopdetect.ExecutionCancelled, Observed: true}
}

// ran is the outcome of a call that ran to its result.
func ran(ctx context.Context, text string, res tools.Result) Outcome {
	switch {
	case ctx.Err() != nil:
		return cancelledRun(text)
	case res.Err != nil:
		return Outcome{Text: text, Terminal: loopdetect.TerminalError, Execution: loopdetect.ExecutionError, ErrType: res.ErrType, Observed: true}
	}
	return Outcome{Text: text, Terminal: loopdetect.TerminalSuccess, Execution: loopdetect.ExecutionSuccess, Observed: true}
}

// observation is the outcome as the repeated-failure reducer takes it.
func (o Outcome) observation(tool string) loopdetect.FailureObservation {
	if o.Duplicate {
		return loopdetect.FailureObservation{ProviderDuplicate: true}
	}
	return loopdetect.FailureObservation{Terminal: o.Terminal, Execution: o.Execution, PolicyToolName: tool, ErrorType: failureErrorType(o.ErrType)}
}

// TelemetryErrorType is the call's error.type: "" when it succeeded.
func (o Outcome) TelemetryErrorType() string {
	switch {
	case o.Terminal == loopdetect.TerminalSuccess || o.Terminal == "":
		return ""
	case o.ErrType != "":
		return o.ErrType
	}
	return string(o.Terminal)
}

// Message is the call's answer in the model's history.
func (c *Call) Message() model.Message {
	return model.Message{Role: model.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: c.Outcome.Text}
}

// nameless is the name a call the model sent without one carries in the
// history: providers refuse a tool call without a name, and the model still
// has to see its call answered with "Missing function name". The guard
// counts such calls under "unknown_tool" (§7.4), as qwen-code does.
const nameless = turnguard.UnknownTool

// HistoryCalls is how the model's history holds a response's calls: the
// calls deduplicated by provider id (§10 step 1; a call dropped there never
// runs and is never answered), each under its ACP toolCallId, which is
// unique within the session where provider ids need not be (reused, or
// missing), so every call is answered exactly once.
func HistoryCalls(cs []*Call) []model.ToolCall {
	if len(cs) == 0 {
		return nil
	}
	out := make([]model.ToolCall, 0, len(cs))
	for _, c := range cs {
		mc := model.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Invalid: c.Invalid, Thinking: c.Thinking}
		if mc.Name == "" {
			mc.Name = nameless
		}
		if len(mc.Arguments) == 0 {
			mc.Arguments = json.RawMessage("{}")
		}
		out = append(out, mc)
	}
	return out
}

// spoke is the decisions that were not abstentions.
func spoke(ds []Decision) []Decision {
	out := make([]Decision, 0, len(ds))
	for _, d := range ds {
		if d.Verdict != Abstain || d.Context != "" {
			out = append(out, d)
		}
	}
	return out
}

// Trail is the call's decisions as the transcript, acpd stats and the
// editor see them: nil when the approval mode alone let the call run (the
// common case, which then costs nothing), otherwise every decision that
// was not an abstention.
func (c *Call) Trail() []Decision {
	n := 0
	for _, d := range c.Decisions {
		if d.Verdict != Abstain || d.Context != "" {
			n++
		}
	}
	if n == 0 || (n == 1 && c.plainAllow()) {
		return nil
	}
	return spoke(c.Decisions)
}

// plainAllow: the one decision that spoke is the approval mode's allow.
func (c *Call) plainAllow() bool {
	for _, d := range c.Decisions {
		if d.Verdict != Abstain || d.Context != "" {
			return d.By == ApprovalName && d.Verdict == Allow
		}
	}
	return false
}

// records is the trail as the transcript stores it.
func records(ds []Decision) []store.Decision {
	if len(ds) == 0 {
		return nil
	}
	out := make([]store.Decision, 0, len(ds))
	for _, d := range ds {
		out = append(out, store.Decision{By: d.By, Verdict: d.Verdict.String(), Reason: d.Reason, Context: d.Context, After: d.After})
	}
	return out
}

// trailMeta is the trail as the editor's final tool_call_update carries it
// (_meta "acpd.decisions").
func trailMeta(ds []Decision) []map[string]any {
	out := make([]map[string]any, 0, len(ds))
	for _, d := range ds {
		m := map[string]any{"by": d.By, "verdict": d.Verdict.String()}
		if d.Reason != "" {
			m["reason"] = d.Reason
		}
		if d.After {
			m["after"] = true
		}
		out = append(out, m)
	}
	return out
}
