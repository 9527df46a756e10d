package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/compactwire"
	"github.com/acpd/acpd/session/contextmgr"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tokens"
	"github.com/acpd/acpd/session/usage"
)

// Context management, so that a long session never dies of its own history
// (the provider refusing a request larger than its window, every prompt
// after, and the reload too). Before every model request of a turn the
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
	// accepted holds, by model, the largest prompt the provider accepted
	// (its own count): a learned window never drops below it.
	accepted map[string]int
	// sent is the size of the last request sent; growth holds the recent
	// increases from one request to the next (a ring), from which the next
	// request's size is foreseen.
	sent   int
	growth [8]int
	gi     int
	// summarySize is the size of the last summary made, in tokens.
	summarySize int
	// stable is how many leading messages of the history the last
	// compaction wrote (its summary and the message it pinned): every later
	// request repeats them, so a protocol with explicit cache breakpoints
	// puts one after them (model.CacheHints.Stable).
	stable int
}

// foresee records how much the history grew since the last request and
// returns the growth to expect before the next one: the largest of the
// recent increases (a tool result as large as the largest lately).
func (c *compactState) foresee(used int) int {
	if c.sent > 0 && used > c.sent {
		c.growth[c.gi%len(c.growth)] = used - c.sent
		c.gi++
	}
	return slices.Max(c.growth[:])
}

// accept records a prompt size the provider took for mdl.
func (c *compactState) accept(mdl string, promptTokens int) {
	if promptTokens <= c.accepted[mdl] {
		return
	}
	if c.accepted == nil {
		c.accepted = map[string]int{}
	}
	c.accepted[mdl] = promptTokens
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
func (s *Session) window() int { return s.windowOf(s.getModel()) }

// windowOf is mdl's context window: the configured or known one, or the
// smaller one the provider revealed.
func (s *Session) windowOf(mdl string) int {
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
	// The provider took requests this large before: whatever it refused
	// now (a request plus its answer's room, a transient limit), the window
	// is at least that.
	limit = max(limit, s.cm.accepted[mdl])
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
	if reason, blocked := t.preCompact(ctx, "manual", focus); blocked {
		return CompactionInfo{}, fmt.Errorf("a PreCompact hook blocked the compaction: %s", reason)
	}
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
	// ahead compacts one request early, when the next request is foreseen
	// to cross the threshold (room: the growth foreseen). It stubs; at a
	// turn's first request (first) it summarises when stubs would not leave
	// the room. It never drops turns, and shows nothing when it does
	// nothing.
	ahead, first bool
	room         int
}

// fit runs before every model request of a turn: it compacts a history at
// or above the threshold and refuses a request known to be larger than the
// window. force compacts regardless of the threshold (provider overflow).
//
// What a compaction costs is decided by where and when it rewrites: a
// provider's prompt cache serves a request's prefix that repeats the
// previous request at a tenth of the input price, and a rewritten message
// makes everything after it full price again. So when the next request is
// foreseen to cross the threshold (this one plus the largest recent growth
// between two requests), the old results it would stub are stubbed now:
// now the rewrite is followed only by what was appended since the last
// request, which is sent at full price anyway, while at the next request
// it would be followed by the new results too and the stubbed results
// would have been sent once more for nothing. Stubs go down to the target
// (the low-water mark), so rewrites come in few larger steps; and when
// they would not leave room for the foreseen growth below the midpoint
// between target and threshold, a turn's first request is summarised
// instead — a summary replaces the stubs and exchanges that pile up turn
// after turn, each re-sent with every request, and made at a turn's start
// it rewrites nothing the model is in the middle of. Mid-turn, the next
// request is often the turn's last, so only stubs are written ahead.
func (t *turn) fit(ctx context.Context, trigger string) error {
	s := t.s
	th := s.thresholds()
	if trigger == "auto" {
		used := s.used()
		growth := s.cm.foresee(used)
		defer func() { s.cm.sent = s.used() }()
		if used < th.Auto {
			if used+growth < th.Auto {
				return nil
			}
			first := t.start >= 0 && t.start == len(s.history)-1
			_, err := t.compact(ctx, compactRequest{trigger: trigger, cur: t.start, ahead: true, first: first, room: growth})
			return err
		}
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
	plan := contextmgr.NewPlan(contextmgr.Input{History: s.history, Cur: r.cur, Used: before, Th: th, Manual: manual, Whole: r.ahead})
	paused := s.cm.failures >= contextmgr.MaxConsecutiveFailures
	// Ahead of need: stubs when they leave the room (or are all there is),
	// a summary at a turn's start when they do not and it is worth making
	// (it replaces at least twice what the last summary wrote, and at least
	// minSummaryGain), else nothing.
	aheadSummary := r.ahead && r.first && !plan.StubsLeaveRoom(r.room) && !paused && plan.Summarisable() &&
		plan.SummarisedTokens() >= max(2*s.cm.summarySize, minSummaryGain)
	if r.ahead && !aheadSummary && len(plan.Stubs()) == 0 {
		return CompactionInfo{Method: "none", Trigger: r.trigger, Before: before, After: before, At: time.Now()}, nil
	}
	if !manual {
		t.preCompact(ctx, r.trigger, "")
	}

	id := s.newToolCallID("compact")
	shown := compactwire.Start(func(u acp.SessionUpdate) { s.update(ctx, u) }, s.clientCaps().Compaction(), id,
		fmt.Sprintf("Compacting conversation (%s tokens)", thousands(before)), acp.Meta{"acpd": map[string]any{"compaction": r.trigger}})
	fail := func(reason string) {
		shown.Fail(fmt.Sprintf("Compacting conversation (%s tokens) failed", thousands(before)), reason, ctx.Err() != nil)
	}

	var (
		c      *store.Compaction
		after  int
		detail string
		note   string // why the summary was not used
	)
	switch {
	case (r.ahead && !aheadSummary) || (!r.ahead && !manual && plan.StubsEnough()):
		c, after = plan.Stub()
		detail = fmt.Sprintf("Replaced %d old tool results with stubs.", len(c.Stubs))
	case plan.Summarisable() && (manual || r.trigger == "overflow" || !paused):
		answer, err := t.summarise(ctx, plan, th, r.focus)
		if ctx.Err() != nil {
			fail("Cancelled.")
			return CompactionInfo{}, ctx.Err()
		}
		if err == nil {
			c, after, err = plan.Summarised(answer)
		}
		if err == nil {
			s.cm.failures = 0
			s.cm.summarySize = tokens.Text(c.Summary)
			n := len(plan.ToSummarise())
			detail = fmt.Sprintf("Summarised %d earlier messages; kept %d verbatim.", n, len(s.history)-c.Cut)
			break
		}
		s.log.Warn("compaction summary failed", "err", err, "trigger", r.trigger)
		if r.ahead {
			// Not needed yet: the stubs, if any, and no dropping.
			s.cm.failures++
			if len(plan.Stubs()) == 0 {
				fail("The summary failed (" + err.Error() + ").")
				return CompactionInfo{}, nil
			}
			c, after = plan.Stub()
			detail = "The summary failed (" + err.Error() + "). " + fmt.Sprintf("Replaced %d old tool results with stubs.", len(c.Stubs))
			break
		}
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
	s.cm.stable = 0
	if c.Cut > 0 {
		s.cm.stable = len(c.Head)
		if c.Pinned >= 0 {
			s.cm.stable++
		}
	}
	if t.start >= 0 && r.cur >= 0 {
		t.start = moved(t.start)
	}
	s.cm.acct.Reset()
	now := s.used()
	shown.Complete(c.Title, detail, c.Summary)
	u := store.Usage{Used: uint64(now), Size: uint64(th.Window)}
	t.rec(store.Record{Kind: store.KindUsage, Usage: &u})
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateUsage, Used: u.Used, Size: u.Size, Cost: s.costSoFar()})
	s.log.Info("conversation compacted", "method", c.Method, "trigger", r.trigger, "before", before, "after", now)
	info := CompactionInfo{Method: c.Method, Trigger: r.trigger, Before: before, After: now, At: time.Now(), Detail: detail}
	s.cm.last = &info
	return info, nil
}

// minSummaryGain is the least a summary made ahead of need must replace,
// in tokens: less is not worth a model request.
const minSummaryGain = 1024

// minSummaryInput is the smallest input budget, in tokens, worth a summary
// request: a compactionModel whose window leaves less is not used.
const minSummaryInput = 2048

// summarise runs the summary side request and returns the model's answer,
// validated (contextmgr.ValidateSummary).
//
// When the session's own model summarises and the conversation fits its
// window with room for the summary, the request re-sends the conversation
// as the model saw it — the session's system prompt, tools and messages,
// byte for byte — with one more user message asking for the snapshot (the
// reference's cache-sharing path, agent-features.md §1.7): the provider
// serves all but that message from its prompt cache, and the summariser
// reads the conversation whole. If the model calls a tool there, or the
// request fails, the summary is asked for as a separate conversation with
// the summariser's own system prompt and the history rendered as text (the
// cold path, always used for model.compactionModel). An answer that is not
// the snapshot (a refusal, a cut-off or filtered answer) is a failed
// summary either way: asking again would not change the model's mind.
func (t *turn) summarise(ctx context.Context, plan *contextmgr.Plan, th contextmgr.Thresholds, focus string) (string, error) {
	s := t.s
	main := s.getModel()
	mdl := s.m.opts.CompactionModel
	if mdl == "" {
		mdl = main
	}
	maxOut := min(max(th.Target/2, 512), contextmgr.MaxSummaryTokens)
	if mdl == main {
		directive := contextmgr.InlineDirective(focus)
		if plan.Before()+tokens.Text(directive)+maxOut <= s.window() {
			seen := plan.Seen()
			req := model.Request{
				Model: main, System: s.systemPrompt(), Tools: s.toolSpecs(),
				Messages:  append(seen[:len(seen):len(seen)], model.Message{Role: model.RoleUser, Content: directive}),
				MaxTokens: maxOut, Temperature: s.m.opts.Temperature, Cache: &s.msgCache,
				CacheHints: model.CacheHints{Key: s.id}, // the same prefix as the turn's requests
			}
			answer, err := t.runSummary(ctx, req)
			var unusable answerError
			if err == nil || ctx.Err() != nil || errors.As(err, &unusable) {
				return answer, err
			}
			s.log.Warn("the summary over the cached conversation failed; asking for it separately", "err", err)
		}
	}
	// The cold request fits the summariser's own window: its answer's room
	// is at most a quarter of it, the input the rest with a fifth to spare
	// for tokenizers counting denser than the estimate.
	win := s.windowOf(mdl)
	budget := func() int {
		maxOut = min(maxOut, win/4)
		return (win-maxOut)*4/5 - tokens.System(contextmgr.SummaryPrompt) - tokens.Text(focus)
	}
	in := budget()
	if in < minSummaryInput && mdl != main {
		s.log.Warn("compactionModel's context window is too small for a summary; the session's model summarises",
			"compactionModel", mdl, "window", win)
		mdl, win = main, s.window()
		maxOut = min(max(th.Target/2, 512), contextmgr.MaxSummaryTokens)
		in = budget()
	}
	return t.runSummary(ctx, contextmgr.SummaryRequest(mdl, plan.ToSummarise(), focus, in, maxOut))
}

// answerError is a summary answer that cannot be used, as opposed to the
// request failing or the model calling a tool.
type answerError struct{ error }

func (e answerError) Unwrap() error { return e.error }

// runSummary streams one summary request and returns its answer's
// snapshot. Only a complete answer (finish "stop") without tool calls that
// is the snapshot asked for is a summary; anything else is an error.
func (t *turn) runSummary(ctx context.Context, req model.Request) (string, error) {
	s := t.s
	var text strings.Builder
	var finish, called string
	var reported *model.Usage
	// The request is accounted whatever its outcome, as the provider bills
	// it.
	defer func() {
		u, estimated := model.Usage{}, reported == nil
		if estimated {
			u.PromptTokens = tokens.Overhead(req.System, req.Tools) + tokens.Messages(req.Messages)
			u.CompletionTokens = tokens.Text(text.String())
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
		} else {
			u = *reported
		}
		t.charge(usage.Summary, req.Model, u, estimated, store.Usage{})
	}()
	for ev, err := range s.m.opts.Provider.Stream(s.watchRetries(ctx), req) {
		if err != nil {
			return "", err
		}
		switch ev.Kind {
		case model.EventText:
			text.WriteString(ev.Text)
		case model.EventToolCall:
			if called == "" {
				called = ev.ToolCall.Name
			}
		case model.EventRetry:
			text.Reset()
			called = ""
		case model.EventFinish:
			finish = ev.FinishReason
		case model.EventUsage:
			s.cm.accept(req.Model, ev.Usage.PromptTokens)
			u := ev.Usage
			reported = &u
		}
	}
	bad := func(msg string) error { return answerError{errors.New(msg)} }
	switch {
	case called != "":
		return "", fmt.Errorf("the summariser called a tool (%s) instead of writing the summary", called)
	case finish == "length":
		return "", bad("the summary was cut off at its length limit")
	case finish == "content_filter":
		return "", bad("the provider's content filter stopped the summary")
	case finish != "stop":
		return "", bad(fmt.Sprintf("the summary ended with finish reason %q", finish))
	}
	summary, err := contextmgr.ValidateSummary(text.String())
	if err != nil {
		return "", answerError{err}
	}
	return summary, nil
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
