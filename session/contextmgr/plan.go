package contextmgr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tokens"
)

// StubPrefix starts every stub that replaces an old tool result.
const StubPrefix = store.StubPrefix

// SummaryIntro starts the user message that carries a summary.
const SummaryIntro = "This session is being continued from an earlier conversation that was compacted to fit the model's context window. The state snapshot below summarises the earlier part:\n\n"

// summaryTrailer follows the summary (the reference's wording, §1.6).
const summaryTrailer = "\n\nResume the prior task using the summary above. Continue from the last in-flight step; do not acknowledge the summary, do not re-introduce, do not greet the user again."

// Ack is the assistant message between a compaction's head and a user
// message that follows it, so roles keep alternating.
const Ack = "Got it. Thanks for the additional context!"

// dropNote heads a history whose oldest part was dropped.
const dropNote = "[acpd: %s of this conversation %s dropped to keep it inside the model's context window, because a summary could not be made. That part is no longer visible to you; ask the user if you need it.]"

// Errors of a summary that cannot replace the history (§1.8).
var (
	ErrEmptySummary  = errors.New("the summary was empty")
	ErrNotSmaller    = errors.New("the summary did not make the conversation smaller")
	ErrNothingToDrop = errors.New("nothing can be compacted: the current prompt and the calls in flight alone are too large")
)

// Input is what a compaction is planned over.
type Input struct {
	History []model.Message
	// Cur is the index of the current prompt, kept whatever happens; -1
	// when there is none (a forced compaction between turns).
	Cur int
	// Used is the size of the next request (Accounting.Used).
	Used int
	Th   Thresholds
	// Manual is a forced compaction (/compress): the summary covers the
	// whole history but the calls in flight and the current prompt.
	Manual bool
	// Whole: the summary covers everything but the calls in flight and the
	// current prompt, as for Manual (a summary made ahead of need, at a
	// turn's start).
	Whole bool
}

// Plan is one compaction being planned. Stage by stage: Stub (no model
// call), then, when that is not enough, a summary (SummaryRequest,
// Summarised), else Drop.
type Plan struct {
	in       Input
	est      []int // per message, with the stubs applied
	overhead int   // Used minus the messages' estimate
	inflight int   // first message of the calls in flight (len when none)

	refs    []stubRef
	stubs   []store.Stub // built from refs when needed
	stubbed int          // request size with the stubs applied

	cut    int // the summary's cut (0: nothing to summarise)
	pinned int
}

// NewPlan estimates every message and plans the stubs. It costs one pass
// over the history.
func NewPlan(in Input) *Plan {
	h := in.History
	p := &Plan{in: in, est: make([]int, len(h)), inflight: len(h), pinned: -1}
	sum := 0
	for i := range h {
		p.est[i] = tokens.Message(&h[i])
		sum += p.est[i]
	}
	p.overhead = in.Used - sum
	// The calls in flight: the last response's calls and their results,
	// which the model has not seen yet.
	if n := len(h); n > 0 && h[n-1].Role == model.RoleTool {
		i := n - 1
		for i > 0 && h[i].Role == model.RoleTool {
			i--
		}
		p.inflight = i
	}
	p.planStubs()
	return p
}

// Before is the request's size before the compaction.
func (p *Plan) Before() int { return p.in.Used }

// Seen is the part of the history the model has seen: all of it but the
// calls in flight and their results.
func (p *Plan) Seen() []model.Message { return p.in.History[:p.inflight] }

// stubRef is one planned stub.
type stubRef struct {
	i      int // the result's index
	tokens int // the result's estimated size
}

// planStubs replaces the oldest tool results (never those in flight) with a
// one-line stub until the request is down to the target.
func (p *Plan) planStubs() {
	h := p.in.History
	total := p.in.Used
	asst := -1 // the assistant message whose calls the results answer
	for i := 0; i < p.inflight && total > p.in.Th.Target; i++ {
		m := &h[i]
		if m.Role == model.RoleAssistant {
			asst = i
			continue
		}
		if m.Role != model.RoleTool || strings.HasPrefix(m.Content, StubPrefix) {
			continue
		}
		r := stubRef{i: i, tokens: tokens.Text(m.Content)}
		name, args := m.Name, []byte(nil)
		if asst >= 0 {
			for _, c := range h[asst].ToolCalls {
				if c.ID == m.ToolCallID {
					name, args = c.Name, c.Arguments
					break
				}
			}
		}
		e := tokens.MessageOverhead + tokens.Bytes(store.StubTextLen(name, args, r.tokens)+len(m.ToolCallID))
		if e >= p.est[i] {
			continue
		}
		total -= p.est[i] - e
		p.est[i] = e
		p.refs = append(p.refs, r)
	}
	p.stubbed = total
}

// stubList is the planned stubs as recorded.
func (p *Plan) stubList() []store.Stub {
	if p.stubs != nil || len(p.refs) == 0 {
		return p.stubs
	}
	p.stubs = make([]store.Stub, len(p.refs))
	for k, r := range p.refs {
		p.stubs[k] = store.Stub{ToolCallID: p.in.History[r.i].ToolCallID, Tokens: r.tokens}
	}
	return p.stubs
}

// Stubbed is the request's size with the stubs applied.
func (p *Plan) Stubbed() int { return p.stubbed }

// StubsEnough reports whether the stubs alone bring the request down to
// between the target and the threshold: no summary is needed.
func (p *Plan) StubsEnough() bool { return p.StubsLeaveRoom(0) }

// StubsLeaveRoom reports whether the stubs alone leave room for growth
// more tokens below the midpoint between the target and the threshold.
func (p *Plan) StubsLeaveRoom(growth int) bool {
	return p.stubbed+growth <= (p.in.Th.Auto+p.in.Th.Target)/2
}

// Stub is the compaction of the stubs alone.
func (p *Plan) Stub() (*store.Compaction, int) {
	return &store.Compaction{Method: "stub", Stubs: p.stubList(), Pinned: -1, Before: p.in.Used, After: p.stubbed}, p.stubbed
}

// Summarisable plans the summary's cut: the most recent messages up to
// half the target stay verbatim (always the calls in flight), the older
// part is summarised. False when there is nothing older to summarise.
func (p *Plan) Summarisable() bool {
	h := p.in.History
	budget := p.in.Th.Target / 2
	if p.in.Manual || p.in.Whole {
		budget = 0
	}
	acc := 0
	for i := p.inflight; i < len(h); i++ {
		acc += p.est[i]
	}
	cut := p.inflight
	for i := p.inflight - 1; i > 0; i-- {
		acc += p.est[i]
		if acc > budget {
			break
		}
		if h[i].Role != model.RoleTool {
			cut = i
		}
	}
	// Something besides the current prompt must lie before the cut.
	n := cut
	if p.in.Cur >= 0 && p.in.Cur < cut {
		n--
	}
	if n <= 0 {
		return false
	}
	p.cut = cut
	p.pinned = -1
	if p.in.Cur >= 0 && p.in.Cur < cut {
		p.pinned = p.in.Cur
	}
	return true
}

// SummarisedTokens is the estimated size of what the summary replaces (the
// stubs applied, the current prompt left out). Call Summarisable first.
func (p *Plan) SummarisedTokens() int {
	n := 0
	for i := range p.cut {
		if i != p.pinned {
			n += p.est[i]
		}
	}
	return n
}

// ToSummarise is the part of the history the summary replaces (with the
// stubs applied), the current prompt left out. Call Summarisable first.
func (p *Plan) ToSummarise() []model.Message {
	h := p.in.History
	c := store.Compaction{Stubs: p.stubList(), Pinned: -1}
	stubbed, _, _ := c.Apply(h[:p.cut])
	out := make([]model.Message, 0, p.cut)
	for i, m := range stubbed {
		if i != p.pinned {
			out = append(out, m)
		}
	}
	return out
}

// head is the messages that start the compacted history: text as a user
// message, then the acknowledgement when a user message follows.
func (p *Plan) head(text string, cut int) []store.HeadMessage {
	hm := []store.HeadMessage{{Role: model.RoleUser, Text: text}}
	next := model.RoleUser // nothing kept: the next prompt follows
	if p.pinned < 0 && cut < len(p.in.History) {
		next = p.in.History[cut].Role
	}
	if next == model.RoleUser {
		hm = append(hm, store.HeadMessage{Role: model.RoleAssistant, Text: Ack})
	}
	return hm
}

// sizeWith is the request's size once the messages before cut are replaced
// by hm (and the pinned prompt).
func (p *Plan) sizeWith(hm []store.HeadMessage, cut int) int {
	n := p.overhead
	for _, m := range hm {
		n += tokens.MessageOverhead + tokens.Text(m.Text)
	}
	if p.pinned >= 0 {
		n += p.est[p.pinned]
	}
	for i := cut; i < len(p.est); i++ {
		n += p.est[i]
	}
	return n
}

// Summarised is the compaction that replaces the older part with summary,
// the model's answer to SummaryRequest. It fails when the summary is empty
// or not a state snapshot (ValidateSummary), or does not make the request
// smaller than the stubs alone.
func (p *Plan) Summarised(answer string) (*store.Compaction, int, error) {
	summary, err := ValidateSummary(answer)
	if err != nil {
		return nil, 0, err
	}
	hm := p.head(SummaryIntro+summary+summaryTrailer, p.cut)
	after := p.sizeWith(hm, p.cut)
	if after >= p.stubbed {
		return nil, 0, ErrNotSmaller
	}
	return &store.Compaction{
		Method: "summary", Stubs: p.stubList(), Cut: p.cut, Pinned: p.pinned, Head: hm, Summary: summary,
		Before: p.in.Used, After: after,
	}, after, nil
}

// Drop is the last resort: the oldest whole turns are dropped (never the
// current prompt), then, if that is not enough, the oldest whole call
// groups of the current turn (a call never leaves without its result; the
// calls in flight stay), until the request is down to the target. The
// history then starts with a note saying so. ErrNothingToDrop when nothing
// can go.
func (p *Plan) Drop() (*store.Compaction, int, error) {
	h := p.in.History
	cur := p.in.Cur
	// suffix[i] is the estimate of h[i:].
	suffix := make([]int, len(h)+1)
	for i := len(h) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + p.est[i]
	}
	limit := len(h) // turns may start up to here
	if cur >= 0 {
		limit = cur
	}
	noteCost := 2*tokens.MessageOverhead + tokens.Text(dropNote) + tokens.Text(Ack) + 8
	var cut, turns int
	for i := 1; i <= limit && i < len(h); i++ {
		if h[i].Role != model.RoleUser || h[i-1].Role == model.RoleTool {
			continue
		}
		cut = i
		turns++
		if p.overhead+noteCost+suffix[i] <= p.in.Th.Target {
			break
		}
	}
	p.pinned = -1
	what := fmt.Sprintf("the %d oldest turns", turns)
	if turns == 1 {
		what = "the oldest turn"
	}
	verb := "were"
	if cur >= 0 && p.overhead+noteCost+suffix[cut] > p.in.Th.Target {
		// Whole call groups of the current turn, oldest first.
		for j := cur + 2; j <= p.inflight && j < len(h); j++ {
			if h[j].Role != model.RoleAssistant {
				continue
			}
			cut, p.pinned = j, cur
			if p.overhead+noteCost+p.est[cur]+suffix[j] <= p.in.Th.Target {
				break
			}
		}
		if p.pinned >= 0 {
			what, verb = "the earlier turns and the first steps of the current one", "were"
			if turns == 0 {
				what = "the first steps of the current turn"
			}
		}
	}
	if cut == 0 {
		return nil, 0, ErrNothingToDrop
	}
	if turns == 1 && p.pinned < 0 {
		verb = "was"
	}
	hm := p.head(fmt.Sprintf(dropNote, what, verb), cut)
	after := p.sizeWith(hm, cut)
	return &store.Compaction{
		Method: "drop", Stubs: p.stubList(), Cut: cut, Pinned: p.pinned, Head: hm, Before: p.in.Used, After: after,
	}, after, nil
}

// Stubs are the stubs planned (nil when none).
func (p *Plan) Stubs() []store.Stub { return p.stubList() }
