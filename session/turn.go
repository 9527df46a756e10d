package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/checkpoint"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tokens"
	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/turnguard"
	"github.com/acpd/acpd/session/usage"
)

// turn is the state of one prompt turn (qwen-code's #executePromptInner).
type turn struct {
	s *Session
	g *turnguard.Guard
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
	// stopContinues counts the times Stop hooks kept the turn going.
	stopContinues int
	// tc is the turn's tool calls: their lifecycle, the deciders and what
	// the turn remembers of the calls answered (package toolcall).
	tc *toolcall.Turn
	// mu guards recErr while the agent calls of one response run
	// concurrently; the turn is otherwise single-threaded.
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
}

var cancelled = &acp.PromptResponse{StopReason: acp.StopCancelled}

func (s *Session) runTurn(ctx context.Context, blocks []acp.ContentBlock, msg model.Message) (resp *acp.PromptResponse, err error) {
	t := &turn{s: s, g: newGuard(s.m.opts.Cap, s.m.opts.SkipLoopDetection, s.m.opts.FailureGuard, s.log)}
	if s.parent == nil {
		// The turn takes the user's steering messages until it ends; those
		// it could not deliver are reported in its answer (steering.go).
		s.steers.Open()
		defer func() { resp, err = withUndelivered(resp, err, s.steers.Close()) }()
	}
	t.tc = t.newToolTurn()
	// Telemetry (off: a no-op): the turn's span ends after the transcript's
	// turn end below, with the final answer.
	ctx, tspan := s.m.opts.Telemetry.StartTurn(ctx, s.id, s.getModel(), msg.Content)
	defer func() { tspan.End(t.telemetryEnd(resp, err)) }()
	held := &heldRecords{t: t}
	hookText := ""
	if s.parent == nil && s.pol != nil {
		var blocked bool
		if hookText, blocked = t.beforePrompt(ctx, held, msg.Content); blocked {
			held.flush()
			return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
		}
	}
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
	held.flush()
	t.hookContext(hookText)
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
			cs := t.tc.Prepare(res.calls)
			t.appendAssistant(res, cs)
			t.tc.SkipAll(ctx, cs, loopdetect.ToolExecutionCancelledMessage)
			s.history = append(s.history, (&toolcall.Batch{Calls: cs}).Messages()...)
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
		cs := t.tc.Prepare(res.calls)
		t.appendAssistant(res, cs)
		if t.recErr != nil {
			return nil, storeError(s.id, t.recErr)
		}
		if len(res.calls) == 0 && res.finish != "length" && res.finish != "content_filter" && t.steers(ctx) {
			// The user steered the turn while the model answered: it reads
			// the messages and goes on, in the same turn.
			continue
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
				// Clipped: the next message starts a new array, so the
				// messages a side question still reads stay as they were.
				s.history = slices.Clip(s.history[:t.start])
				s.cm.acct.Reset()
				s.pendingLoopContext = hadLoopContext
				return &acp.PromptResponse{StopReason: acp.StopRefusal}, nil
			}
			if t.stopHook(ctx, res.text) {
				continue
			}
			return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
		}
		out := t.tc.RunBatch(ctx, cs)
		s.history = append(s.history, out.Messages()...)
		for _, a := range out.Appended {
			s.history = append(s.history, a.Message)
			t.rec(a.Record)
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
		case out.Stop:
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
// reasoning, text, then the calls as prepared (toolcall.HistoryCalls), so
// the live history and a reloaded one are the same.
func (t *turn) appendAssistant(r streamResult, cs []*toolcall.Call) {
	if r.text == "" && r.reasoning == "" && len(r.thinking) == 0 && len(cs) == 0 {
		return
	}
	s := t.s
	calls := toolcall.HistoryCalls(cs)
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

// watchRetries makes every retry of a model request a notice, so the user
// knows why the answer is late and when the next try is: a busy answer
// (429, 503, 529: rate limit or overload) as the provider being busy, any
// other failure (no answer within model.requestTimeout, a refused or cut
// connection, a server error) as the request failing. Silence there can
// last the request timeout times the attempts (8 minutes by default).
func (s *Session) watchRetries(ctx context.Context) context.Context {
	return model.WithRetryWatch(ctx, func(r model.Retry) {
		wait := r.Wait.Round(100 * time.Millisecond)
		switch r.Status {
		case 429, 503, 529:
			s.notify(ctx, notice.ProviderRetry, fmt.Sprintf("The model provider answered %d (%v); attempt %d of %d is retried in %s.",
				r.Status, r.Err, r.Attempt, r.Attempts, wait))
		default:
			s.notify(ctx, notice.ModelRetry, fmt.Sprintf("Attempt %d of %d failed: %v; the next try is in %s.",
				r.Attempt, r.Attempts, r.Err, wait))
		}
	})
}

// modelRequest is the session's next model request: its conversation as
// it stands, with maxTokens for the answer. Callers hold the turn.
func (s *Session) modelRequest(maxTokens int) model.Request {
	return model.Request{
		Model:       s.getModel(),
		System:      s.systemPrompt(),
		Messages:    s.history,
		Tools:       s.toolSpecs(),
		MaxTokens:   maxTokens,
		Temperature: s.m.opts.Temperature,
		Cache:       &s.msgCache,
		// A subagent thinks at its session's level.
		ThinkingLevel: s.thinkingLevel(),
		// The session's id routes its requests to one prompt cache
		// (Responses' prompt_cache_key); it survives session/load. Stable
		// is where the last compaction's summary ends.
		CacheHints: model.CacheHints{Key: s.id, Stable: min(s.cm.stable, len(s.history))},
	}
}

// stream runs one model request, forwarding text and reasoning as chunks.
// On a retry marker the attempt's calls and text are discarded before they
// are ever counted (§7.2).
func (t *turn) streamModel(ctx context.Context) (streamResult, error) {
	s := t.s
	req := s.modelRequest(t.maxTokens())
	t.capped = req.MaxTokens > 0 && req.MaxTokens != s.m.opts.MaxTokens
	if s.parent == nil {
		// What the provider will cache: a side question (/btw) repeats it.
		s.sidePrefix.Store(req)
	}
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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
