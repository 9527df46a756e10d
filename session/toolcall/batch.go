package toolcall

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/telemetry"
	"github.com/acpd/acpd/session/turnguard"
)

// Turn is the tool-call state of one prompt turn, or of one subagent run:
// the loop guard that counts its calls, the deciders, and what it
// remembers of the calls answered.
type Turn struct {
	Host  Host
	Guard *turnguard.Guard
	// Deciders decide about every call, in order (see the package doc);
	// the Granters, Reviewers and AfterBatch stages among them take their
	// turns at their steps.
	Deciders []Decider
	// Stages are after-batch stages that take no part in deciding (the
	// delivery of the user's steering messages); they run after those
	// among the Deciders.
	Stages []AfterBatch
	// AgentConcurrency bounds the agent calls of one response that run at
	// once.
	AgentConcurrency int
	Telemetry        *telemetry.Telemetry
	// Agent is the subagent whose run this is ("" for a prompt turn); its
	// calls carry it (Call.Agent).
	Agent string

	// mu guards the maps and the guard while the agent calls of one
	// response run concurrently; the turn is otherwise single-threaded.
	mu sync.Mutex
	// answered holds the provider call ids answered in this prompt;
	// duplicates those answered as a replay. Both are per prompt, so
	// tracking is cleared between prompts (vector 104).
	answered   map[string]string // provider id -> repeat key of the call answered under it
	duplicates map[string]bool
	// results holds the result digests of the batch's calls that ran, by
	// toolCallId, until the batch gives them to the guard.
	results map[string]uint64
}

// Batch is one model response's calls after they all answered, as the
// after-batch stages see it.
type Batch struct {
	Calls []*Call
	// Stop: a call stopped the batch (a cancelled permission request, a
	// decider's stop); the turn ends after it.
	Stop bool
	// Appended is what the model reads after the calls' results, in order,
	// each message with the record that keeps it in the transcript.
	Appended []Appended
}

// Appended is one message added after a batch's results.
type Appended struct {
	Message model.Message
	Record  store.Record
}

// Append adds a user-role text after the results (a reminder), recorded
// as a reminder.
func (b *Batch) Append(text string) {
	b.Appended = append(b.Appended, Appended{
		Message: model.Message{Role: model.RoleUser, Content: text},
		Record:  store.Record{Kind: store.KindReminder, Text: text},
	})
}

// Messages is the batch's tool results, in call order.
func (b *Batch) Messages() []model.Message {
	out := make([]model.Message, 0, len(b.Calls))
	for _, c := range b.Calls {
		out = append(out, c.Message())
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Prepare deduplicates the calls of one model response by id, marks
// provider replays (§10 steps 1–3) and gives each call its ACP toolCallId.
func (t *Turn) Prepare(calls []model.ToolCall) []*Call {
	seen := map[string]bool{}
	out := make([]*Call, 0, len(calls))
	for i, mc := range calls {
		id := mc.ID
		if id == "" {
			name := mc.Name
			if name == "" {
				name = "tool"
			}
			id = fmt.Sprintf("%s-%s-%d", name, randomHex(8), i)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		c := &Call{Name: mc.Name, Arguments: mc.Arguments, Invalid: mc.Invalid, Thinking: mc.Thinking,
			ProviderID: id, ID: t.Host.NewCallID(id), Agent: t.Agent}
		c.Args = decodeArgs(mc.Arguments, mc.Invalid)
		c.Key = loopdetect.ToolCallRepeatKey(c.Name, c.Args)
		// A replay is the same provider id carrying the same call. Some
		// OpenAI-compatible servers number ids per response ("call_0"
		// every time), so an id alone is not proof of a replay: a
		// different call under a reused id runs as a new call.
		c.Dup = t.answered[id] == c.Key
		out = append(out, c)
	}
	return out
}

// decodeArgs is the arguments as rawInput shows them and the repeat key
// reads them: decoded JSON, the text itself when it is not JSON, {} when
// empty.
func decodeArgs(raw json.RawMessage, invalid string) any {
	var args any
	if invalid == "" && len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			args = string(raw)
		}
	} else {
		args = string(raw)
	}
	if args == nil || args == "" {
		args = map[string]any{}
	}
	return args
}

// SkipAll shows every call of cs as skipped for reason; their answers are
// the reason.
func (t *Turn) SkipAll(ctx context.Context, cs []*Call, reason string) {
	for _, c := range cs {
		t.skip(ctx, c, reason)
	}
}

// RunBatch runs one model response's calls, prepared (§10): the loop
// guard counts the batch before anything runs, then each call goes
// through its lifecycle (consecutive agent calls concurrently), and after
// the batch the guard sees the results, the repeated-failure reducer and
// the loop warning add their reminders, and the after-batch stages run.
func (t *Turn) RunBatch(ctx context.Context, cs []*Call) *Batch {
	if t.answered == nil {
		t.answered, t.duplicates = map[string]string{}, map[string]bool{}
	}
	b := &Batch{Calls: cs}
	// A provider id already answered as a duplicate, repeated again: the
	// model is replaying; stop the turn (§7.5).
	for _, c := range cs {
		if c.Dup && t.duplicates[c.ProviderID] {
			t.Guard.RecordDuplicateReplay(c.ProviderID, c.Name)
			// qwen-code returns no parts here; acpd answers every call
			// with the skip message, since an OpenAI-style history needs
			// a result for each call (deliberate deviation).
			t.SkipAll(ctx, cs, loopdetect.LoopDetectedSkipMessage)
			return b
		}
	}

	// The daemon guard counts the whole response before anything runs.
	keys := make([]string, 0, len(cs))
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		if !c.Dup {
			keys = append(keys, c.Key)
			names = append(names, c.Name)
		}
	}
	if t.Guard.RecordBatch(keys, names) {
		t.SkipAll(ctx, cs, loopdetect.LoopDetectedSkipMessage)
		return b
	}

	for i := 0; i < len(cs); {
		if n := agentRun(cs[i:]); n > 1 {
			// Consecutive agent calls run concurrently (§10 step 3).
			for _, c := range t.runAgents(ctx, cs[i:i+n], b.Stop) {
				b.Stop = b.Stop || c.Outcome.Stop
			}
			i += n
			continue
		}
		t.call(ctx, cs[i], b.Stop)
		b.Stop = b.Stop || cs[i].Outcome.Stop
		i++
	}
	t.afterBatch(ctx, b)
	return b
}

// afterBatch gives the guard the results in call order, as it would have
// seen them one by one, then adds the reminders and runs the after-batch
// stages.
func (t *Turn) afterBatch(ctx context.Context, b *Batch) {
	var obs []loopdetect.FailureObservation
	for _, c := range b.Calls {
		if c.Outcome.Observed {
			obs = append(obs, c.Outcome.observation(c.Name))
		}
		if h, ok := t.resultOf(c.ID); ok && !c.Dup {
			t.Guard.ObserveResult(c.Key, h)
		}
	}
	reminder := ""
	if ctx.Err() == nil && !t.Guard.Detected() && !b.Stop {
		_, reminder = t.Guard.FailureVerdict(obs)
	}
	if w := t.Guard.TakeWarning(); w != "" && ctx.Err() == nil && !t.Guard.Detected() {
		// model.loopRecovery = "warn": the model reads the warning after
		// the results of the batch that fired; the editor is shown it.
		reminder = joinText(reminder, w)
		t.Host.LoopWarning(ctx, w)
	}
	if reminder != "" {
		b.Append(reminder)
	}
	if ctx.Err() != nil || t.Guard.Detected() {
		return
	}
	for _, d := range t.Deciders {
		if s, ok := d.(AfterBatch); ok {
			s.AfterBatch(ctx, b)
		}
	}
	for _, s := range t.Stages {
		s.AfterBatch(ctx, b)
	}
}

// call runs one call of a batch, or shows it skipped once the turn was
// cancelled, a loop was detected or a permission was cancelled (stop).
func (t *Turn) call(ctx context.Context, c *Call, stop bool) {
	t.mu.Lock()
	detected := t.Guard.Detected()
	t.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		t.skip(ctx, c, loopdetect.ToolExecutionCancelledMessage)
		return
	case detected:
		t.skip(ctx, c, loopdetect.LoopDetectedSkipMessage)
		return
	case stop:
		t.skip(ctx, c, loopdetect.PermissionCancelSkipMessage)
		return
	case c.Dup:
		msg := fmt.Sprintf("Duplicate provider tool call id %q: this call was already answered in this turn and was not executed again.", c.ProviderID)
		t.duplicates[c.ProviderID] = true
		t.skip(ctx, c, msg)
		c.Outcome = Outcome{Text: msg, Duplicate: true, Observed: true}
		return
	}
	tctx, span := t.Telemetry.StartTool(ctx, c.Name, c.ID, c.Arguments)
	t.run(tctx, c)
	c.Outcome.Observed = true
	span.End(c.Outcome.TelemetryErrorType())
	t.mu.Lock()
	t.answered[c.ProviderID] = c.Key
	t.mu.Unlock()
}

// agentRun is how many calls at the start of cs are agent calls that will
// run (not provider replays).
func agentRun(cs []*Call) int {
	n := 0
	for n < len(cs) && cs[n].Name == agents.ToolName && !cs[n].Dup {
		n++
	}
	return n
}

// runAgents runs consecutive agent calls concurrently, at most
// AgentConcurrency at a time. As in the reference, once a loop is detected
// or the turn is cancelled the calls not yet started are skipped, and
// those running settle.
func (t *Turn) runAgents(ctx context.Context, group []*Call, stop bool) []*Call {
	sem := make(chan struct{}, max(t.AgentConcurrency, 1))
	var stopped atomic.Bool
	stopped.Store(stop)
	var wg sync.WaitGroup
	for _, c := range group {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			t.call(ctx, c, stopped.Load()) // shown as cancelled
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			t.call(ctx, c, stopped.Load())
			if c.Outcome.Stop {
				stopped.Store(true)
			}
		})
	}
	wg.Wait()
	return group
}

// failureErrorType maps a tool's error type to the reducer's: acpd's tools
// spell qwen-code's ToolErrorType names in upper case (tools.ErrTypeUnknown
// is "UNKNOWN"), and an unclassified failure must disable enforcement
// (§7.6), not become a failure key of its own.
func failureErrorType(t string) string {
	if strings.EqualFold(t, loopdetect.ErrorTypeUnknown) {
		return loopdetect.ErrorTypeUnknown
	}
	return t
}
