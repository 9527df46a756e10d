package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/contextmgr"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tokens"
)

// Context management (issue 14). Before every model request of a turn the
// history's size is known from the accounting (provider count plus the
// estimate of what was appended since); a request at or above the
// threshold is compacted first, and one known larger than the window is
// never sent. Decisions where the spec is silent:
//   - A compaction is shown as a tool call of kind "think" (never as agent
//     text) whose title carries the token counts; a failed one ends
//     "failed" with the reason. Its record replays as the finished call.
//   - The compaction edits nothing until it is complete: a cancelled or
//     failed summary request, or a crash, leaves the history as it was.
//   - A provider overflow (model.IsContextOverflow) takes the size the
//     provider reported (at least the window) as the request's size, forces
//     a compaction and retries once; the retry is not a model response for
//     the loop guard, which counts tool batches only.
//   - Manual compaction (/compress) always tries a summary, and a failed
//     manual summary does not count towards pausing automatic ones.

// compactState is a session's accounting and compaction state, owned by the
// turn holder.
type compactState struct {
	acct contextmgr.Accounting
	// failures counts automatic summaries that failed in a row; at
	// contextmgr.MaxConsecutiveFailures automatic summaries pause until one
	// succeeds (a forced one).
	failures int
	last     *CompactionInfo
	// learned holds windows providers revealed by refusing a request as too
	// long, smaller than the configured ones, by model.
	learned map[string]int
}

// CompactionInfo describes a finished compaction (for /context).
type CompactionInfo struct {
	Method  string // "stub", "summary", "drop" or "none"
	Trigger string // "auto", "overflow", "manual"
	Before  int
	After   int
	At      time.Time
	Detail  string
}

// ContextReport is the session's context usage (for /context).
type ContextReport struct {
	Model     string
	Used      int  // tokens of the next request
	Estimated bool // Used is an estimate (no provider count since the last rewrite)
	Size      int  // the model's window
	Threshold int  // automatic compaction starts at this size
	Messages  int  // messages in the model's history
	// SummariesPaused is set after contextmgr.MaxConsecutiveFailures failed
	// automatic summaries.
	SummariesPaused bool
	Last            *CompactionInfo // nil: none since the session started here
}

// window is the current model's context window: the configured or known
// one, or the smaller one the provider revealed.
func (s *Session) window() int {
	mdl := s.getModel()
	w := s.configuredWindow(mdl)
	if n := s.cm.learned[mdl]; n > 0 && n < w {
		return n
	}
	return w
}

// learnWindow takes what a provider's overflow refusal says about the
// model's window: its limit when the message names it, else just below the
// size it refused (or below the estimate of the refused request).
func (s *Session) learnWindow(err error) {
	limit, size := model.OverflowLimit(err), model.OverflowTokens(err)
	if limit == 0 && size > 0 {
		limit = size - 1
	}
	if limit == 0 {
		limit = s.cm.acct.Used() * 9 / 10
	}
	mdl := s.getModel()
	if w := s.window(); limit > 0 && limit < w {
		s.log.Warn("the provider's context window is smaller than configured; using it", "model", mdl, "window", limit, "configured", w)
		if s.cm.learned == nil {
			s.cm.learned = map[string]int{}
		}
		s.cm.learned[mdl] = limit
	}
	// The refused request was larger than the window.
	s.cm.acct.Observe(max(size, s.window()+1))
}

// configuredWindow is mdl's window from the configuration or the table.
func (s *Session) configuredWindow(mdl string) int {
	if n := s.m.opts.ContextWindows[mdl]; n > 0 {
		return n
	}
	if mdl == s.m.opts.Model && s.m.opts.ContextWindow > 0 {
		return s.m.opts.ContextWindow
	}
	return contextmgr.Windows{}.Of(mdl)
}

func (s *Session) thresholds() contextmgr.Thresholds {
	return contextmgr.ComputeThresholds(s.window(), s.m.opts.CompactThreshold)
}

// requestOverhead estimates what a request costs besides its messages: the
// system prompt and the tool schemas as sent. It does not depend on the
// history.
func (s *Session) requestOverhead() int {
	return tokens.Overhead(s.systemPrompt(), s.toolSpecs())
}

// used brings the accounting up to date and returns the next request's size.
func (s *Session) used() int {
	s.cm.acct.SetOverhead(s.requestOverhead())
	s.cm.acct.Sync(s.history)
	return s.cm.acct.Used()
}

// ContextUsage reports the session's context usage. Call it while holding
// the turn (from a prompt's handling), once the system prompt is gathered
// (waitPrep).
func (s *Session) ContextUsage() ContextReport {
	th := s.thresholds()
	return ContextReport{
		Model: s.getModel(), Used: s.used(), Estimated: s.cm.acct.Estimated(), Size: th.Window, Threshold: th.Auto,
		Messages: len(s.history), SummariesPaused: s.cm.failures >= contextmgr.MaxConsecutiveFailures, Last: s.cm.last,
	}
}

// Compact compacts the history now, with a summary when one can be made
// (/compress [focus]); focus is added to the summariser's instructions. Call
// it while holding the turn (from a prompt's handling, before or instead of
// the model request). Progress is shown to the editor as for an automatic
// compaction. It returns what was done; "none" when there was nothing to
// compact.
func (s *Session) Compact(ctx context.Context, focus string) (CompactionInfo, error) {
	if !s.waitPrep(ctx) { // the request's size includes the system prompt
		return CompactionInfo{}, ctx.Err()
	}
	t := &turn{s: s, start: -1}
	info, err := t.compact(ctx, compactRequest{trigger: "manual", focus: focus, cur: -1})
	if err == nil && t.recErr != nil {
		err = storeError(s.id, t.recErr)
	}
	return info, err
}

// compactRequest says why and how to compact.
type compactRequest struct {
	trigger string // "auto", "overflow", "manual"
	focus   string
	cur     int // the current prompt's index in the history, -1 none
}

// fit runs before every model request of a turn: it compacts a history at
// or above the threshold and refuses a request known to be larger than the
// window. force compacts regardless of the threshold (provider overflow).
func (t *turn) fit(ctx context.Context, trigger string) error {
	s := t.s
	th := s.thresholds()
	if trigger == "auto" && s.used() < th.Auto {
		return nil
	}
	if _, err := t.compact(ctx, compactRequest{trigger: trigger, cur: t.start}); err != nil {
		return err
	}
	if used := s.used(); used >= th.Window {
		return contextOverflowError(fmt.Sprintf(
			"the conversation does not fit the model's context window even after compaction (about %d tokens, window %d): the current prompt and its tool results alone are too large",
			used, th.Window))
	}
	return nil
}

// contextOverflowError answers a prompt whose request cannot fit the window.
func contextOverflowError(msg string) error {
	return &acp.Error{Code: acp.CodeInternalError, Message: msg, Data: map[string]any{"errorKind": "context_overflow"}}
}

// compact plans and applies one compaction: stubs, else a summary, else
// dropping the oldest turns. The history changes only when it succeeds.
func (t *turn) compact(ctx context.Context, r compactRequest) (CompactionInfo, error) {
	s := t.s
	th := s.thresholds()
	before := s.used()
	manual := r.trigger == "manual"
	plan := contextmgr.NewPlan(contextmgr.Input{History: s.history, Cur: r.cur, Used: before, Th: th, Manual: manual})
	paused := s.cm.failures >= contextmgr.MaxConsecutiveFailures

	id := s.newToolCallID("compact")
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCall, ToolCall: &acp.ToolCall{
		ToolCallID: id, Title: fmt.Sprintf("Compacting conversation (%s tokens)", thousands(before)),
		Kind: acp.KindThink, Status: acp.StatusInProgress, Meta: acp.Meta{"acpd": map[string]any{"compaction": r.trigger}},
	}})
	fail := func(reason string) {
		title := fmt.Sprintf("Compacting conversation (%s tokens) failed", thousands(before))
		s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
			ToolCallID: id, Title: &title, Status: acp.StatusFailed, Content: []acp.ToolCallContent{acp.TextContent(reason)},
		}})
	}

	var (
		c      *store.Compaction
		after  int
		detail string
		note   string // why the summary was not used
	)
	switch {
	case !manual && plan.StubsEnough():
		c, after = plan.Stub()
		detail = fmt.Sprintf("Replaced %d old tool results with stubs.", len(c.Stubs))
	case plan.Summarisable() && (manual || r.trigger == "overflow" || !paused):
		answer, err := s.summarise(ctx, plan, th, r.focus)
		if ctx.Err() != nil {
			fail("Cancelled.")
			return CompactionInfo{}, ctx.Err()
		}
		if err == nil {
			c, after, err = plan.Summarised(answer)
		}
		if err == nil {
			s.cm.failures = 0
			n := len(plan.ToSummarise())
			detail = fmt.Sprintf("Summarised %d earlier messages; kept %d verbatim.", n, len(s.history)-c.Cut)
			break
		}
		s.log.Warn("compaction summary failed", "err", err, "trigger", r.trigger)
		if manual {
			// /compress never drops turns on its own: it reports.
			if errors.Is(err, contextmgr.ErrNotSmaller) {
				fail("A summary would not make this conversation smaller.")
				return CompactionInfo{Method: "none", Trigger: r.trigger, Before: before, After: before, At: time.Now(),
					Detail: "A summary would not make this conversation smaller."}, nil
			}
			fail("The summary failed: " + err.Error())
			return CompactionInfo{}, acp.ErrInternal("the summary failed: " + err.Error())
		}
		s.cm.failures++
		note = "The summary failed (" + err.Error() + "). "
		fallthrough
	default:
		if manual && note == "" && len(plan.Stubs()) == 0 {
			fail("Nothing to compact.")
			info := CompactionInfo{Method: "none", Trigger: r.trigger, Before: before, After: before, At: time.Now(), Detail: "Nothing to compact."}
			return info, nil
		}
		var err error
		c, after, err = plan.Drop()
		switch {
		case err == nil:
			detail = note + "Dropped the oldest part of the conversation."
		case len(plan.Stubs()) > 0:
			c, after = plan.Stub()
			detail = note + fmt.Sprintf("Replaced %d old tool results with stubs.", len(c.Stubs))
		default:
			fail(note + err.Error())
			return CompactionInfo{}, nil // fit refuses the request if it cannot be sent
		}
	}
	c.Trigger, c.ToolCallID, c.Detail = r.trigger, id, detail
	c.Title = fmt.Sprintf("Compacting conversation (%s → %s tokens)", thousands(before), thousands(after))
	compacted, moved, ok := c.Apply(s.history)
	if !ok {
		fail("internal error: the compaction does not fit the history")
		return CompactionInfo{}, acp.ErrInternal("compaction planned a cut that separates a tool call from its result")
	}
	// Recorded first: a compaction that cannot be recorded is not applied,
	// so the transcript and the live history stay the same.
	if s.w != nil {
		if err := s.record(store.Record{Kind: store.KindCompaction, Compaction: c}); err != nil {
			fail("recording the compaction failed: " + err.Error())
			return CompactionInfo{}, storeError(s.id, err)
		}
	}
	s.history = compacted
	if t.start >= 0 && r.cur >= 0 {
		t.start = moved(t.start)
	}
	s.cm.acct.Reset()
	now := s.used()
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateToolCallUpdate, ToolCallUpdate: &acp.ToolCallUpdate{
		ToolCallID: id, Title: &c.Title, Status: acp.StatusCompleted, Content: []acp.ToolCallContent{acp.TextContent(detail)},
	}})
	u := store.Usage{Used: uint64(now), Size: uint64(th.Window)}
	t.rec(store.Record{Kind: store.KindUsage, Usage: &u})
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateUsage, Used: u.Used, Size: u.Size})
	s.log.Info("conversation compacted", "method", c.Method, "trigger", r.trigger, "before", before, "after", now)
	info := CompactionInfo{Method: c.Method, Trigger: r.trigger, Before: before, After: now, At: time.Now(), Detail: detail}
	s.cm.last = &info
	return info, nil
}

// summarise runs the summary side request and returns the model's answer.
func (s *Session) summarise(ctx context.Context, plan *contextmgr.Plan, th contextmgr.Thresholds, focus string) (string, error) {
	mdl := s.m.opts.CompactionModel
	if mdl == "" {
		mdl = s.getModel()
	}
	win := s.window()
	if mdl != s.getModel() {
		win = s.configuredWindow(mdl)
	}
	maxOut := min(max(th.Target/2, 512), contextmgr.MaxSummaryTokens)
	budget := (win-maxOut)*4/5 - tokens.Text(contextmgr.SummaryPrompt)
	req := contextmgr.SummaryRequest(mdl, plan.ToSummarise(), focus, budget, maxOut)
	var text strings.Builder
	for ev, err := range s.m.opts.Provider.Stream(ctx, req) {
		if err != nil {
			return "", err
		}
		switch ev.Kind {
		case model.EventText:
			text.WriteString(ev.Text)
		case model.EventRetry:
			text.Reset()
		case model.EventFinish:
			if ev.FinishReason == "length" {
				return "", errors.New("the summary was cut off at its length limit")
			}
		}
	}
	return text.String(), nil
}

// thousands formats n with comma separators: 52,130.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
