// Package toolcall owns the life of a tool call in acpd: one Call record
// (the call as the model made it, what acpd built from it, every decision
// taken about it and by whom, its typed Outcome) and one lifecycle that
// takes it from the model's response to its answer. The session supplies
// a Host (its tools, transcript, editor connection and checkpoints) and an
// ordered list of Deciders; everything else happens here, once:
//
//	RunBatch(calls of one model response)
//	│ before: provider replays, the loop guard counts the batch
//	│         (a stop skips every call)
//	├─ per call (agent calls side by side):
//	│   resolve     the tool, its arguments, Build, Prepare  → invalid params
//	│   decide      the Deciders in order, strictest verdict wins:
//	│                 1 plan mode            (PlanMode)
//	│                 2 PreToolUse hooks     ─┐ Options.Deciders / the
//	│                 3 permission rules      │ session's list, in this
//	│                 4 sandbox auto-allow   ─┘ order
//	│                 5 "always" grants      (Grants)
//	│                 6 approval mode        (Approval: only if all abstained)
//	│               deny / stop → refused, the model reads the reason
//	│   ask         one permission request; the answer joins the trail and
//	│               goes to every Granter (an "always" to whoever keeps it)
//	│   checkpoint  the host's, before anything changes
//	│   run         the tool's Execute, or the host's Body
//	│   review      the Reviewers (PostToolUse hooks): context, deny, stop
//	│   record+show one tool_result record with the trail, one final update
//	│               with the trail in _meta "acpd.decisions"
//	└ after: the guard sees the results, the failure reminder and the loop
//	         warning, then the AfterBatch stages (steering delivery)
//
// A decider answers Abstain, Allow, Ask, Deny or Stop with a reason; it
// may also replace the call's arguments (Decision.Input), ask its own
// question (Decision.Question) or withhold "always" (Decision.NoAlways).
// A deny or stop ends the round. A decider that also implements Granter,
// Reviewer or AfterBatch takes part in those steps from the same list.
package toolcall
