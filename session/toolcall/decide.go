package toolcall

import (
	"context"
	"encoding/json"

	"github.com/acpd/acpd/acp"
)

// Verdict is a decider's answer about one call. The verdicts are ordered
// from the mildest to the strictest, and when deciders disagree the
// strictest wins: a deny is never overruled by an allow, and an allow does
// not skip a question another decider wants asked.
type Verdict uint8

const (
	Abstain Verdict = iota // no opinion: the others decide
	Allow                  // run without asking
	Ask                    // ask the editor first
	Deny                   // refuse without asking; the model reads the reason
	Stop                   // refuse, skip the rest of the batch and end the turn
)

// String is the verdict as the transcript, acpd stats and the editor's
// _meta spell it.
func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	case Stop:
		return "stop"
	}
	return "abstain"
}

// Decision is one entry of a call's trail: a decider's answer before the
// call runs, the user's answer to a permission request, or a reviewer's
// word after it ran.
type Decision struct {
	// By names who decided: the decider's Name, ByUser for the editor's
	// answer.
	By      string
	Verdict Verdict
	// Reason says why, in words for the user and the model. A deny's or a
	// stop's reason is the whole tool result the model reads, so it names
	// what refused the call (a rule quoted as written, a hook); an ask's
	// reason ends the permission request's content (the built-in deciders'
	// questions are the approval mode's own and carry none), and so does an
	// abstention's (why a decider that could have allowed the call did
	// not), which is not in the trail.
	Reason string
	// ErrType classifies a refusal for the repeated-failure guard and
	// telemetry (tools.ErrType…); ErrTypeDenied when empty.
	ErrType string
	// NoAlways (with Ask): the request offers no "always" option, and no
	// earlier "always" answers for this call.
	NoAlways bool
	// Question (with Ask) replaces the request's options and texts.
	Question *Question
	// Input (with Allow, Ask or Abstain) replaces the call's arguments
	// before it runs, as a PreToolUse hook's updatedInput does: the call
	// is built again from it (validated, confined) and the deciders after
	// this one judge the new call.
	Input json.RawMessage
	// Context (from a Reviewer) is added after the call's result, for the
	// model's next request.
	Context string
	// After marks a Reviewer's decision, taken after the call ran.
	After bool
}

// ByUser is Decision.By for the editor's answer to a permission request.
const ByUser = "user"

// ErrTypeDenied is the error type of a call a decider refused (qwen-code's
// EXECUTION_DENIED).
const ErrTypeDenied = "EXECUTION_DENIED"

// A Decider takes part in deciding whether a call runs. Deciders are asked
// in the order of their list, each seeing the call (its tool, arguments,
// built form, confirmation with the parsed shell line and real paths, the
// approval mode) and the decisions before it (Call.Decisions). A deny or a
// stop ends the round: the deciders after it are not asked.
type Decider interface {
	// Name is who decided, as the trail shows it ("plan", "rules").
	Name() string
	Decide(ctx context.Context, c *Call) Decision
}

// A Granter remembers the user's answers. After the editor allowed a call,
// every decider of the list that is a Granter gets the answer, the option
// chosen included: an "always" option is a grant for whoever can keep it
// (the session's grants, the approval mode for "Allow All Edits", a rule
// written to a file).
type Granter interface {
	Grant(ctx context.Context, c *Call, a Answer)
}

// An Offerer adds options of its own to the permission request about a
// call, when the request offers the default options: an "always" it can
// keep, such as a rule written to a file. The option it adds reaches the
// Granters like any other when chosen.
type Offerer interface {
	Offer(c *Call, opts []acp.PermissionOption) []acp.PermissionOption
}

// A Reviewer looks at a call after it ran to its result (a PostToolUse
// hook; not after a cancel, and not for a call that never ran): its
// decision's Context is added to what the model reads, a Deny's Reason too
// (the result stands, marked failed), and a Stop ends the batch after this
// call. Its decision joins the call's trail (Decision.After).
type Reviewer interface {
	Review(ctx context.Context, c *Call) Decision
}

// An AfterBatch stage runs once every call of a batch has its result,
// before the next model request: where queued user messages are delivered.
// It adds to b.Appended what the model reads next, after the results and
// the guard's reminders, each message with its transcript record (the turn
// appends and records them in order). It does not run when the turn was
// cancelled or the loop guard stopped it; b.Stop says the turn ends after
// this batch (a cancelled permission request).
type AfterBatch interface {
	AfterBatch(ctx context.Context, b *Batch)
}

// decide asks the deciders about c in order and returns the decision that
// won; false when a decision's new arguments could not be built (c then
// ended, refused).
func (t *Turn) decide(ctx context.Context, c *Call) (Decision, bool) {
	win := Decision{}
	for _, d := range t.Deciders {
		got := d.Decide(ctx, c)
		if got.Verdict == Abstain && got.Input == nil {
			if got.Reason != "" {
				// Said in the question should one be asked: why a decider
				// that could have allowed the call did not.
				c.notes = append(c.notes, got.Reason)
			}
			continue
		}
		if got.By == "" {
			got.By = d.Name()
		}
		c.Decisions = append(c.Decisions, got)
		if got.Input != nil && got.Verdict != Deny && got.Verdict != Stop && !t.rebuild(ctx, c, got) {
			return got, false
		}
		if got.Verdict > win.Verdict {
			win = got
		}
		if win.Verdict >= Deny {
			break
		}
	}
	return win, true
}

// Strictest is the winning decision of a trail so far (Abstain when no
// decider spoke), the user's answers and the reviewers' left out: what the
// approval mode's fallback checks before it answers, and what a decider
// that only adds to the others' verdicts may read.
func Strictest(ds []Decision) Decision {
	var win Decision
	for _, d := range ds {
		if !d.After && d.By != ByUser && d.Verdict > win.Verdict {
			win = d
		}
	}
	return win
}
