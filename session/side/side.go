// Package side answers a side question (/btw): one model request that
// reads the session's conversation and the question, and whose answer is
// shown and forgotten — never added to the history nor recorded, so the
// conversation goes on as if it had not been asked.
//
// The request is the session's last request (what the provider holds in
// its prompt cache) with the question appended as a user message: the same
// system prompt, the same tool list, the same messages byte for byte, so the
// provider serves the prefix from its cache and the question costs little.
// The tools stay in the request because removing them would change the
// prefix; tool use is switched off instead (model.Request.NoToolUse), and a
// call the model makes anyway is ignored: a side question runs nothing.
package side

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/acpd/acpd/session/model"
)

// Prefix is a session's last model request, kept for side questions. The
// turn stores each request before it is sent; a side question reads it
// from another goroutine while the turn runs. Safe for concurrent use.
type Prefix struct {
	mu  sync.Mutex
	req *model.Request
	// sent is closed at the first Store: a side question asked before the
	// session's first request waits for it (or for the turn to end).
	sent chan struct{}
}

// Store keeps req as the session's last request. Its Messages must not be
// changed in place afterwards (the history only grows: a turn that cuts
// it starts a new array); the per-conversation Cache is not kept, a side
// request must not update it.
func (p *Prefix) Store(req model.Request) {
	req.Messages = slices.Clip(req.Messages)
	req.Cache = nil
	p.mu.Lock()
	defer p.mu.Unlock()
	p.req = &req
	p.init()
	select {
	case <-p.sent:
	default:
		close(p.sent)
	}
}

func (p *Prefix) init() {
	if p.sent == nil {
		p.sent = make(chan struct{})
	}
}

// Last is the session's last request; false before the first.
func (p *Prefix) Last() (model.Request, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.req == nil {
		return model.Request{}, false
	}
	return *p.req, true
}

// Sent is closed once a request was stored.
func (p *Prefix) Sent() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	return p.sent
}

// Request is the side request for question on prefix: prefix's messages
// and the question after them, the same tools with tool use off, and no
// conversation cache (it would take the question for the conversation's).
func Request(prefix model.Request, question model.Message) model.Request {
	req := prefix
	// Clipped: appending never writes into the conversation's array.
	req.Messages = append(slices.Clip(prefix.Messages), question)
	req.NoToolUse = true
	req.Cache = nil
	return req
}

// Answer is what the model answered.
type Answer struct {
	Text string
	// Calls is the number of tool calls the model made although tool use
	// was off; they were not run.
	Calls int
	// Usage is the provider's count; nil when it sent none.
	Usage *model.Usage
}

// Ask streams req from p, handing each text and reasoning delta to show
// (kind model.EventText or model.EventReasoning) as it arrives. A retried
// attempt's text is shown again from its start: show receives the
// EventRetry too, to tell the user.
func Ask(ctx context.Context, p model.Provider, req model.Request, show func(model.Event)) (Answer, error) {
	var a Answer
	var text strings.Builder
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			a.Text = text.String()
			return a, err
		}
		switch ev.Kind {
		case model.EventText:
			text.WriteString(ev.Text)
			show(ev)
		case model.EventReasoning:
			show(ev)
		case model.EventRetry:
			text.Reset()
			a.Calls = 0
			show(ev)
		case model.EventToolCall:
			a.Calls++
		case model.EventUsage:
			u := ev.Usage
			a.Usage = &u
		}
	}
	a.Text = text.String()
	return a, nil
}
