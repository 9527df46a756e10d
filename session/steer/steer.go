// Package steer holds the messages a user adds to a running turn
// (_session/steering) until the turn's next safe point, and delivers them
// there: after every tool result of the current step, before the next
// model request, as a user message appended to the history in the form
// that is recorded and sent again, so the provider's prompt cache keeps
// matching. Nothing before the message changes: not an earlier message,
// not the system prompt.
//
// A session has one Queue. The turn opens it when it starts and closes it
// when it ends; in between, Offer accepts steers in order. The turn takes
// them at two points: the Delivery stage after a batch of tool calls
// (toolcall.AfterBatch), and TakeOrClose when the model answered without
// calling tools — the steers then go to the model in the same turn, so
// the prompt that started it stays the turn's single end. A steer the turn
// could not deliver (the turn was cancelled, stopped or failed first) is
// never delivered later: Close returns it for the prompt's answer to
// report (Report).
package steer

import (
	"context"
	"sync"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/toolcall"
)

// Steer is one message the user added to the running turn.
type Steer struct {
	// ID is its messageId: the echo's and the transcript record's.
	ID string
	// Prompt is the message as the client sent it.
	Prompt []acp.ContentBlock
	// Message is the message as the model reads it: the prompt's own
	// conversion, which a reloaded session applies to the record again.
	Message model.Message
}

// Record is the transcript record of s where it landed.
func (s Steer) Record() store.Record {
	return store.Record{Kind: store.KindSteer, Prompt: s.Prompt, MessageID: s.ID}
}

// Updates are the user_message_chunks that show s where it landed.
func (s Steer) Updates() []acp.SessionUpdate {
	out := make([]acp.SessionUpdate, 0, len(s.Prompt))
	for i := range s.Prompt {
		out = append(out, acp.SessionUpdate{Kind: acp.UpdateUserMessageChunk, Content: &s.Prompt[i], MessageID: s.ID})
	}
	return out
}

// Queue is a session's steering state: whether a turn takes steers, and
// the steers it accepted and has not delivered, in arrival order. The
// zero value is closed (no turn runs). Safe for concurrent use.
type Queue struct {
	mu      sync.Mutex
	open    bool
	pending []Steer
}

// Open marks a turn running: from now on it takes steers.
func (q *Queue) Open() {
	q.mu.Lock()
	q.open, q.pending = true, nil
	q.mu.Unlock()
}

// Offer gives s to the running turn; false when no turn takes steers
// (none runs, or it is ending).
func (q *Queue) Offer(s Steer) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.open {
		return false
	}
	q.pending = append(q.pending, s)
	return true
}

// Running reports whether a turn takes steers now.
func (q *Queue) Running() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.open
}

// Take removes the pending steers, at a safe point, for delivery; none
// once the queue was shut (a cancelled turn delivers nothing more).
func (q *Queue) Take() []Steer {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.open {
		return nil
	}
	out := q.pending
	q.pending = nil
	return out
}

// TakeOrClose is Take at the point where the turn would end (the model
// answered without calling tools): the pending steers, with which the
// turn goes on, or none, and then the queue is closed in the same step,
// so a steer arriving after it is never accepted by a turn that will not
// read it.
func (q *Queue) TakeOrClose() []Steer {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.open {
		return nil
	}
	out := q.pending
	q.pending = nil
	if len(out) == 0 {
		q.open = false
	}
	return out
}

// Shut refuses new steers at once (session/cancel), keeping the pending
// ones for Close to return: the turn is ending, and they will not be
// delivered.
func (q *Queue) Shut() {
	q.mu.Lock()
	q.open = false
	q.mu.Unlock()
}

// Close ends the turn: new steers are refused, and the pending ones, which
// the turn never delivered, are returned.
func (q *Queue) Close() []Steer {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.pending
	q.open, q.pending = false, nil
	return out
}

// Delivery is the turn's after-batch stage (toolcall.AfterBatch) that
// hands the pending steers to the model after the batch's results.
type Delivery struct {
	Queue *Queue
	// Echo shows a delivered steer to the client.
	Echo func(ctx context.Context, s Steer)
}

// AfterBatch appends the pending steers, in order, after the batch's
// results and reminders. A batch that stopped the turn (a cancelled
// permission request, a decider's stop) delivers none: the turn ends
// there, and the model would not read them in it.
func (d Delivery) AfterBatch(ctx context.Context, b *toolcall.Batch) {
	if b.Stop {
		return
	}
	for _, s := range d.Queue.Take() {
		b.Appended = append(b.Appended, toolcall.Appended{Message: s.Message, Record: s.Record()})
		d.Echo(ctx, s)
	}
}

// MetaKey is the `_meta` key of the steering extension's own data.
const MetaKey = "steering"

// Report is what a prompt's answer carries about the steers its turn
// ended without delivering (nil when there are none): under
// `_meta.steering.undelivered`, each with its messageId and the prompt as
// sent, so the client can give the text back to the user.
func Report(ss []Steer) map[string]any {
	if len(ss) == 0 {
		return nil
	}
	list := make([]map[string]any, 0, len(ss))
	for _, s := range ss {
		list = append(list, map[string]any{"messageId": s.ID, "prompt": s.Prompt})
	}
	return map[string]any{"undelivered": list}
}
