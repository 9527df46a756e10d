package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/checkpoint"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tokens"
	"github.com/acpd/acpd/session/turnguard"
	"github.com/acpd/acpd/session/usage"
)

// turn is the state of one prompt turn (qwen-code's #executePromptInner).
type turn struct {
	s *Session
	g *turnguard.Guard
	// answered holds the provider call ids answered in this prompt;
	// duplicates those answered as a replay. Both are per prompt, so
	// tracking is cleared between prompts (vector 104).
	answered   map[string]string // provider id -> repeat key of the call answered under it
	duplicates map[string]bool
	// recErr is the first transcript write that failed in this turn; the
	// turn stops at its next step and answers -32603 naming it.
	recErr error
	// start is the index of the turn's prompt in the history (moved by a
	// compaction; -1 outside a prompt turn).
	start int
	// final is the text of the response that ended the turn (no calls): a
	// subagent run's answer.
	final string
	// permStop is set when a cancelled permission request ended the turn.
	permStop bool
	// mu guards recErr, answered and the guard while the agent calls of
	// one response run concurrently (runAgents); the turn is otherwise
	// single-threaded.
	mu sync.Mutex
	// meter adds up the tokens of every request made for the turn (its
	// own, summaries, subagents); see charge.
	meter usage.Meter
	// room is what model.maxTokensPerTurn leaves for the next request's
	// answer (0: no budget); capped tells the last request's max_tokens was
	// cut to it.
	room   int
	capped bool
	// up is the turn a subagent run's turn works for: its requests are
	// charged to that turn too, as the subagent's.
	up *turn
	// nearTurn and nearSession are set once the prompt turn told the user
	// its token budgets are 80% spent (budgetNear; the top turn's count).
	nearTurn, nearSession atomic.Bool
	// cp records the turn's checkpoint (nil: the session keeps none);
	// cpErr is why the store could not be opened (checkpoints.go).
	cp    *checkpoint.Recorder
	cpErr error
	// results holds the result digests of the batch's calls that ran, by
	// toolCallId, until the batch loop gives them to the guard (mu).
	results map[string]uint64
}

var cancelled = &acp.PromptResponse{StopReason: acp.StopCancelled}

func (s *Session) runTurn(ctx context.Context, blocks []acp.ContentBlock, msg model.Message) (resp *acp.PromptResponse, err error) {
	t := &turn{
		s:          s,
		g:          newGuard(s.m.opts.Cap, s.m.opts.SkipLoopDetection, s.m.opts.FailureGuard, s.log),
		answered:   map[string]string{},
		duplicates: map[string]bool{},
	}
	// Telemetry (off: a no-op): the turn's span ends after the transcript's
	// turn end below, with the final answer.
	ctx, tspan := s.m.opts.Telemetry.StartTurn(ctx, s.id, s.getModel(), msg.Content)
	defer func() { tspan.End(t.telemetryEnd(resp, err)) }()
	if s.w != nil {
		// A prompt that cannot be recorded is refused before anything runs,
		// so the conversation in memory and on disk stay the same.
		if err := s.record(store.Record{Kind: store.KindUser, Prompt: blocks, MessageID: newMessageID()}); err != nil {
			return nil, storeError(s.id, err)
		}
		defer func() { resp, err = t.end(resp, err) }()
		if s.parent == nil {
			s.turnNo++
			t.beginCheckpoint(blocks)
			defer t.endCheckpoint()
		}
	}
	if !s.waitPrep(ctx) {
		return cancelled, nil
	}
	hadLoopContext := s.pendingLoopContext
	if s.pendingLoopContext {
		// The model sees why the previous turn stopped: the context message
		// leads the next user message (measured on qwen-code 0.24.4).
		msg.Content = loopdetect.LoopDetectedContextMessage + "\n\n" + msg.Content
		s.pendingLoopContext = false
	}
	t.start = len(s.history)
	s.history = append(s.history, msg)
	defer func() { resp = t.withUsage(resp) }()
	if s.title == "" {
		// Editors list sessions by title: announce the one session/list
		// will show (the first line of the first prompt).
		if title := store.TitleFromPrompt(blocks); title != "" {
			s.title = title
			now := time.Now().UTC().Format(time.RFC3339)
			s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateSessionInfo, Title: &title, UpdatedAt: &now})
		}
	}
	for _, n := range s.notes.TakeText() {
		b := acp.TextBlock(n)
		s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b, MessageID: newMessageID()})
	}
	return t.loop(ctx, hadLoopContext)
}

// loop runs the turn's model requests and tool batches until the model
// answers without calls or the turn stops. A subagent run (s.parent set)
// runs the same loop over its own conversation; only what a stop leaves
// for the next prompt differs.
func (t *turn) loop(ctx context.Context, hadLoopContext bool) (*acp.PromptResponse, error) {
	s := t.s
	for {
		if ctx.Err() != nil {
			return cancelled, nil
		}
		res, err := t.request(ctx)
		if ctx.Err() != nil {
			// The response stays in history, and its calls, which will
			// never run, are answered as cancelled (with their frames, sent
			// before the prompt answers): a provider refuses a history
			// holding calls without results.
			ps := t.prepare(res.calls)
			t.appendAssistant(res, ps)
			s.history = append(s.history, t.skipAll(ctx, ps, loopdetect.ToolExecutionCancelledMessage)...)
			return cancelled, nil
		}
		if err != nil {
			var stop *budgetStop
			if errors.As(err, &stop) {
				return t.stopForBudget(ctx, stop), nil
			}
			var ae *acp.Error
			if errors.As(err, &ae) {
				s.log.Error("prompt failed", "err", err)
				return nil, ae
			}
			s.log.Error("model request failed", "err", err)
			return nil, s.modelError(err)
		}
		ps := t.prepare(res.calls)
		t.appendAssistant(res, ps)
		if t.recErr != nil {
			return nil, storeError(s.id, t.recErr)
		}
		if len(res.calls) == 0 || (res.finish == "length" && t.capped) {
			t.final = res.text
			switch res.finish {
			case "length":
				if t.capped {
					// Cut off by the room the budget left it.
					return t.stopForBudget(ctx, t.turnBudgetStop(0)), nil
				}
				return &acp.PromptResponse{StopReason: acp.StopMaxTokens}, nil
			case "content_filter":
				if s.parent != nil {
					return &acp.PromptResponse{StopReason: acp.StopRefusal}, nil
				}
				// ACP: after a refusal, the prompt and everything after it
				// is left out of the next prompt. The transcript rebuilds
				// the history the same way (store.Transcript.Messages).
				s.history = s.history[:t.start]
				s.cm.acct.Reset()
				s.pendingLoopContext = hadLoopContext
				return &acp.PromptResponse{StopReason: acp.StopRefusal}, nil
			}
			return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
		}
		out := t.runToolCalls(ctx, ps)
		s.history = append(s.history, out.messages...)
		if out.reminder != "" {
			s.history = append(s.history, model.Message{Role: model.RoleUser, Content: out.reminder})
			t.rec(store.Record{Kind: store.KindReminder, Text: out.reminder})
		}
		switch {
		case ctx.Err() != nil:
			return cancelled, nil
		case t.recErr != nil:
			return nil, storeError(s.id, t.recErr)
		case t.g.Detected():
			// The repeated-failure stop leaves its own message in history;
			// every other loop stop makes the next prompt carry the context.
			// The loop_stop record carries that context (none for the
			// repeated-failure stop), so a reloaded session does the same.
			// A subagent's stop ends its run: its result tells the parent.
			stop := t.g.Facts().Record(t.g.LoopType())
			if s.parent == nil && t.g.LoopType() != loopdetect.LoopRepeatedToolExecutionFailure {
				s.pendingLoopContext = true
				stop.Message = loopdetect.LoopDetectedContextMessage
			}
			t.rec(store.Record{Kind: store.KindLoopStop, Loop: stop})
			return nil, t.g.Err()
		case out.permissionStop:
			t.permStop = true
			return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
		}
	}
}

// request runs one model request of the turn: the history is compacted
// first when it would cross the threshold, and a provider refusal of the
// request as too long compacts and retries once.
func (t *turn) request(ctx context.Context) (streamResult, error) {
	s := t.s
	if err := t.fit(ctx, "auto"); err != nil {
		return streamResult{}, err
	}
	if err := t.withinBudgets(); err != nil {
		return streamResult{}, err
	}
	t.budgetNear(ctx)
	res, err := t.stream(ctx)
	if err == nil || ctx.Err() != nil || !model.IsContextOverflow(err) {
		return res, err
	}
	s.log.Warn("the provider refused the request as too long; compacting and retrying once", "err", err)
	s.learnWindow(err)
	if err := t.fit(ctx, "overflow"); err != nil {
		return res, err
	}
	if err := t.withinBudgets(); err != nil {
		return streamResult{}, err
	}
	t.budgetNear(ctx)
	res, err = t.stream(ctx)
	if err != nil && ctx.Err() == nil && model.IsContextOverflow(err) {
		return res, contextOverflowError("the model refused the conversation as too long even after compaction: " + err.Error())
	}
	return res, err
}

// streamResult is one model response after its stream ended.
type streamResult struct {
	// msgID is the messageId of the response's chunks (recorded with it).
	msgID           string
	text, reasoning string
	thinking        []model.Thinking // the provider's thinking blocks, in order
	calls           []model.ToolCall
	finish          string
	usage           *model.Usage // the response's token usage (estimated: the provider sent none)
	estimated       bool
}

// appendAssistant adds a model response to the history and records it:
// reasoning, text, then the calls as prepared (historyCalls), so the live
// history and a reloaded one are the same.
func (t *turn) appendAssistant(r streamResult, ps []pcall) {
	if r.text == "" && r.reasoning == "" && len(r.thinking) == 0 && len(ps) == 0 {
		return
	}
	s := t.s
	calls := historyCalls(ps)
	s.history = append(s.history, model.Message{
		Role: model.RoleAssistant, Content: r.text, Reasoning: r.reasoning, Thinking: r.thinking, ToolCalls: calls,
	})
	if s.w == nil {
		return
	}
	if r.reasoning != "" || len(r.thinking) > 0 {
		// The blocks ride with the text so a reloaded session sends them
		// back exactly as the provider returned them.
		t.rec(store.Record{Kind: store.KindReasoning, Text: r.reasoning, Thinking: r.thinking, MessageID: r.msgID})
	}
	if r.text != "" {
		t.rec(store.Record{Kind: store.KindText, Text: r.text, MessageID: r.msgID})
	}
	if len(calls) > 0 {
		t.rec(store.Record{Kind: store.KindToolCalls, ToolCalls: recordedCalls(calls)})
	}
}

// nameless is the name a call the model sent without one carries in the
// history: providers refuse a tool call without a name, and the model still
// has to see its call answered with "Missing function name". The guard
// counts such calls under "unknown_tool" (§7.4), as qwen-code does.
const nameless = turnguard.UnknownTool

// historyCalls is how the model's history holds a response's calls: the
// calls deduplicated by provider id (§10 step 1; a call dropped there never
// runs and is never answered), each under its ACP toolCallId, which is
// unique within the session where provider ids need not be (reused, or
// missing), so every call is answered exactly once.
func historyCalls(ps []pcall) []model.ToolCall {
	if len(ps) == 0 {
		return nil
	}
	out := make([]model.ToolCall, 0, len(ps))
	for _, p := range ps {
		c := model.ToolCall{ID: p.acpID, Name: p.Name, Arguments: p.Arguments, Invalid: p.Invalid, Thinking: p.Thinking}
		if c.Name == "" {
			c.Name = nameless
		}
		if len(c.Arguments) == 0 {
			c.Arguments = json.RawMessage("{}")
		}
		out = append(out, c)
	}
	return out
}

// watchRetries makes a provider's retry after a busy answer (429, 503,
// 529: rate limit or overload) a notice, so the user knows why the answer
// is late; other retries (a cut connection) stay in the log.
func (s *Session) watchRetries(ctx context.Context) context.Context {
	return model.WithRetryWatch(ctx, func(r model.Retry) {
		switch r.Status {
		case 429, 503, 529:
		default:
			return
		}
		s.notify(ctx, notice.ProviderRetry, fmt.Sprintf("The model provider answered %d (%v); attempt %d is retried in %s.",
			r.Status, r.Err, r.Attempt, r.Wait.Round(100*time.Millisecond)))
	})
}

// stream runs one model request, forwarding text and reasoning as chunks.
// On a retry marker the attempt's calls and text are discarded before they
// are ever counted (§7.2).
func (t *turn) streamModel(ctx context.Context) (streamResult, error) {
	s := t.s
	req := model.Request{
		Model:       s.getModel(),
		System:      s.systemPrompt(),
		Messages:    s.history,
		Tools:       s.toolSpecs(),
		MaxTokens:   t.maxTokens(),
		Temperature: s.m.opts.Temperature,
		Cache:       &s.msgCache,
		// A subagent thinks at its session's level.
		ThinkingLevel: s.thinkingLevel(),
		// The session's id routes its requests to one prompt cache
		// (Responses' prompt_cache_key); it survives session/load. Stable
		// is where the last compaction's summary ends.
		CacheHints: model.CacheHints{Key: s.id, Stable: min(s.cm.stable, len(s.history))},
	}
	t.capped = req.MaxTokens > 0 && req.MaxTokens != s.m.opts.MaxTokens
	s.used() // the accounting knows what this request carries
	s.cm.acct.Sent()
	r := streamResult{msgID: newMessageID()}
	var text, reasoning strings.Builder
	var reported *model.Usage
	for ev, err := range s.m.opts.Provider.Stream(s.watchRetries(ctx), req) {
		if err != nil {
			r.text, r.reasoning = text.String(), reasoning.String()
			return r, err
		}
		switch ev.Kind {
		case model.EventText:
			text.WriteString(ev.Text)
			b := acp.TextBlock(ev.Text)
			s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b, MessageID: r.msgID})
		case model.EventReasoning:
			reasoning.WriteString(ev.Text)
			b := acp.TextBlock(ev.Text)
			s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentThoughtChunk, Content: &b, MessageID: r.msgID})
		case model.EventToolCall:
			r.calls = append(r.calls, ev.ToolCall)
		case model.EventThinking:
			r.thinking = append(r.thinking, ev.Thinking)
		case model.EventUsage:
			u := ev.Usage
			reported = &u
		case model.EventFinish:
			r.finish = ev.FinishReason
		case model.EventRetry:
			s.log.Warn("model stream retried", "err", ev.RetryErr, "discarded_calls", len(r.calls))
			r.calls, r.thinking = nil, nil
			// What follows is a new message: the client must not append
			// it to the discarded attempt's text.
			r.msgID = newMessageID()
			text.Reset()
			reasoning.Reset()
		}
	}
	r.text, r.reasoning = text.String(), reasoning.String()
	estimated := reported == nil
	if estimated {
		// No usage from the provider: the request's size as accounted, and
		// the answer's as estimated, so budgets and stats still count it.
		u := model.Usage{PromptTokens: s.cm.acct.Used(), CompletionTokens: tokens.Text(r.text) + tokens.Text(r.reasoning)}
		for _, c := range r.calls {
			u.CompletionTokens += tokens.CallOverhead + tokens.Text(c.Name) + tokens.Bytes(len(c.Arguments))
		}
		u.ReasoningTokens = tokens.Text(r.reasoning)
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		reported = &u
	} else {
		s.cm.acct.Observe(reported.PromptTokens)
		s.cm.accept(req.Model, reported.PromptTokens)
		if reported.ReasoningTokens == 0 && r.reasoning != "" {
			// Reasoning streamed but not counted apart: estimated from its
			// text, as qwen-code does, within the completion count.
			reported.ReasoningTokens = min(tokens.Text(r.reasoning), reported.CompletionTokens)
		}
	}
	r.usage, r.estimated = reported, estimated
	rec := store.Usage{}
	if !estimated {
		used := reported.TotalTokens
		if used == 0 {
			used = reported.PromptTokens + reported.CompletionTokens
		}
		s.lastUsed = max(used, 0)
		rec.Used, rec.Size = uint64(max(used, 0)), uint64(s.window())
	}
	t.charge(usage.Turn, req.Model, *reported, estimated, rec)
	if !estimated {
		s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateUsage, Used: rec.Used, Size: rec.Size, Cost: s.costSoFar()})
	}
	return r, nil
}

// batchOutcome is what runToolCalls hands back to the turn loop.
type batchOutcome struct {
	messages       []model.Message // tool results, in call order
	permissionStop bool
	reminder       string
}

// pcall is one provider call prepared for execution.
type pcall struct {
	model.ToolCall
	id    string // provider id, or generated when the provider sent none
	acpID string // the ACP toolCallId, unique within the session
	dup   bool   // a replay of a call already answered in this prompt
	args  any    // decoded arguments, for rawInput and the repeat key
	key   string // the (tool, args) repeat key
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// prepare deduplicates the calls of one model response by id, marks
// provider replays (§10 steps 1–3) and gives each call its ACP toolCallId.
func (t *turn) prepare(calls []model.ToolCall) []pcall {
	seen := map[string]bool{}
	out := make([]pcall, 0, len(calls))
	for i, c := range calls {
		id := c.ID
		if id == "" {
			name := c.Name
			if name == "" {
				name = "tool"
			}
			id = fmt.Sprintf("%s-%s-%d", name, randomHex(8), i)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		p := pcall{ToolCall: c, id: id, acpID: t.s.newToolCallID(id)}
		if c.Invalid == "" && len(c.Arguments) > 0 {
			if err := json.Unmarshal(c.Arguments, &p.args); err != nil {
				p.args = string(c.Arguments)
			}
		} else {
			p.args = string(c.Arguments)
		}
		if p.args == nil || p.args == "" {
			p.args = map[string]any{}
		}
		p.key = loopdetect.ToolCallRepeatKey(p.Name, p.args)
		// A replay is the same provider id carrying the same call. Some
		// OpenAI-compatible servers number ids per response ("call_0" every
		// time), so an id alone is not proof of a replay: a different call
		// under a reused id runs as a new call.
		p.dup = t.answered[id] == p.key
		out = append(out, p)
	}
	return out
}

func toolMessage(p pcall, content string) model.Message {
	return model.Message{Role: model.RoleTool, ToolCallID: p.acpID, Name: p.Name, Content: content}
}

// skipAll shows every call of ps as skipped for reason and returns their
// tool results.
func (t *turn) skipAll(ctx context.Context, ps []pcall, reason string) []model.Message {
	out := make([]model.Message, 0, len(ps))
	for _, p := range ps {
		t.skip(ctx, p, reason)
		out = append(out, toolMessage(p, reason))
	}
	return out
}

// runToolCalls executes one model response's calls, prepared (§10).
func (t *turn) runToolCalls(ctx context.Context, ps []pcall) batchOutcome {
	var out batchOutcome

	// A provider id already answered as a duplicate, repeated again: the
	// model is replaying; stop the turn (§7.5).
	for _, p := range ps {
		if p.dup && t.duplicates[p.id] {
			t.g.RecordDuplicateReplay(p.id, p.Name)
			// qwen-code returns no parts here; acpd answers every call
			// with the skip message, since an OpenAI-style history needs
			// a result for each call (deliberate deviation).
			out.messages = t.skipAll(ctx, ps, loopdetect.LoopDetectedSkipMessage)
			return out
		}
	}

	// The daemon guard counts the whole response before anything runs.
	keys := make([]string, 0, len(ps))
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		if !p.dup {
			keys = append(keys, p.key)
			names = append(names, p.Name)
		}
	}
	if t.g.RecordBatch(keys, names) {
		out.messages = t.skipAll(ctx, ps, loopdetect.LoopDetectedSkipMessage)
		return out
	}

	var obs []failureObservation
	for i := 0; i < len(ps); {
		if n := agentRun(ps[i:]); n > 1 {
			// Consecutive agent calls run concurrently (§10 step 3).
			group := ps[i : i+n]
			for j, r := range t.runAgents(ctx, group, out.permissionStop) {
				out.messages = append(out.messages, toolMessage(group[j], r.llm))
				if r.observed {
					obs = append(obs, r.obs)
				}
				out.permissionStop = out.permissionStop || r.permissionStop
			}
			i += n
			continue
		}
		r := t.call(ctx, ps[i], out.permissionStop)
		out.messages = append(out.messages, toolMessage(ps[i], r.llm))
		if r.observed {
			obs = append(obs, r.obs)
		}
		out.permissionStop = out.permissionStop || r.permissionStop
		i++
	}
	// The results go to the result signal in call order, after the batch
	// ran, as the guard would have seen them one by one.
	for _, p := range ps {
		if h, ok := t.resultOf(p.acpID); ok && !p.dup {
			t.g.ObserveResult(p.key, h)
		}
	}
	if ctx.Err() == nil && !t.g.Detected() && !out.permissionStop {
		out.reminder = failureVerdict(t.g, obs)
	}
	if w := t.g.TakeWarning(); w != "" && ctx.Err() == nil && !t.g.Detected() {
		// model.loopRecovery = "warn": the model reads the warning after
		// the results of the batch that fired; the editor is shown it.
		// A client without notices gets the text as agent text at once
		// (the notice's own fallback for this kind is the log only).
		out.reminder = joinReminders(out.reminder, w)
		t.s.notify(ctx, notice.LoopWarning, w)
		if !t.s.base().notes.Enabled() {
			b := acp.TextBlock("\n\n" + w + "\n\n")
			t.s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b})
		}
	}
	return out
}

// joinReminders puts two user-role reminders in one message.
func joinReminders(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n\n" + b
}

// call runs one call of a batch, or shows it skipped once the turn was
// cancelled, a loop was detected or a permission was cancelled (stop).
// observed is set when the repeated-failure guard learns from the result.
func (t *turn) call(ctx context.Context, p pcall, stop bool) (r toolRun) {
	t.mu.Lock()
	detected := t.g.Detected()
	t.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		t.skip(ctx, p, loopdetect.ToolExecutionCancelledMessage)
		return toolRun{llm: loopdetect.ToolExecutionCancelledMessage}
	case detected:
		t.skip(ctx, p, loopdetect.LoopDetectedSkipMessage)
		return toolRun{llm: loopdetect.LoopDetectedSkipMessage}
	case stop:
		t.skip(ctx, p, loopdetect.PermissionCancelSkipMessage)
		return toolRun{llm: loopdetect.PermissionCancelSkipMessage}
	case p.dup:
		msg := fmt.Sprintf("Duplicate provider tool call id %q: this call was already answered in this turn and was not executed again.", p.id)
		t.duplicates[p.id] = true
		t.skip(ctx, p, msg)
		return toolRun{llm: msg, observed: true, obs: failureObservation{providerDuplicate: true}}
	}
	tctx, span := t.s.m.opts.Telemetry.StartTool(ctx, p.Name, p.acpID, p.Arguments)
	r = t.runTool(tctx, p)
	span.End(r.obs.telemetryErrorType())
	t.mu.Lock()
	t.answered[p.id] = p.key
	t.mu.Unlock()
	r.observed = true
	return r
}

// agentRun is how many calls at the start of ps are agent calls that will
// run (not provider replays).
func agentRun(ps []pcall) int {
	n := 0
	for n < len(ps) && ps[n].Name == agents.ToolName && !ps[n].dup {
		n++
	}
	return n
}

// runAgents runs consecutive agent calls concurrently, at most
// Options.AgentConcurrency at a time, and returns their results in call
// order. As in the reference, once a loop is detected or the turn is
// cancelled the calls not yet started are skipped, and those running settle.
func (t *turn) runAgents(ctx context.Context, group []pcall, stop bool) []toolRun {
	out := make([]toolRun, len(group))
	sem := make(chan struct{}, t.s.m.opts.AgentConcurrency)
	var stopped atomic.Bool
	stopped.Store(stop)
	var wg sync.WaitGroup
	for i, p := range group {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			out[i] = t.call(ctx, p, stopped.Load()) // shown as cancelled
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = t.call(ctx, p, stopped.Load())
			if out[i].permissionStop {
				stopped.Store(true)
			}
		})
	}
	wg.Wait()
	return out
}

// skip shows a call that never ran: a pending tool_call, then a failed
// update carrying the reason (Decision 5: ACP wants the tool_call first).
func (t *turn) skip(ctx context.Context, p pcall, reason string) {
	title, kind := p.Name, acp.KindOther
	if title == "" {
		title = "unknown tool"
	}
	if tl, ok := t.s.tools.Get(p.Name); ok {
		kind = tl.Kind()
	}
	t.open(ctx, p, acp.ToolCall{
		ToolCallID: p.acpID, Title: title, Kind: kind, Status: acp.StatusPending, RawInput: p.args,
		Meta: acp.Meta{"toolName": p.Name},
	})
	t.close(ctx, p, acp.ToolCallUpdate{
		ToolCallID: p.acpID, Status: acp.StatusFailed, Content: []acp.ToolCallContent{acp.TextContent(reason)},
	}, reason)
}

// newToolCallID returns an ACP toolCallId unique within the session: the
// provider id when it is new, otherwise the id with a sequence suffix. The
// id is also the call's id in the model's history, so the suffix keeps to
// [A-Za-z0-9_-], which every provider accepts.
func (s *Session) newToolCallID(providerID string) string {
	s = s.base()
	s.idMu.Lock()
	defer s.idMu.Unlock()
	id := providerID
	if id == "" || s.toolCallIDs[id] {
		s.toolSeq++
		id = fmt.Sprintf("%s_%d", providerID, s.toolSeq)
		for s.toolCallIDs[id] {
			s.toolSeq++
			id = fmt.Sprintf("%s_%d", providerID, s.toolSeq)
		}
	}
	s.noteToolCallID(id)
	return id
}

// noteToolCallID marks id as used. The set is made at the first tool call:
// an idle session never needs it. Callers hold idMu (or own s alone).
func (s *Session) noteToolCallID(id string) {
	if s.toolCallIDs == nil {
		s.toolCallIDs = map[string]bool{}
	}
	s.toolCallIDs[id] = true
}
