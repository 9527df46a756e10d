package session

import (
	"context"
	"slices"
	"sync"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/side"
)

// Side questions (/btw, package side). Decisions where the issue and the
// peers are silent:
//   - /btw is a prompt like any slash command (a side question needs no
//     protocol): session/prompt with "/btw QUESTION". It runs beside the
//     turn: it neither queues behind a running turn nor cancels it, and
//     answers its own session/prompt with end_turn once the answer is
//     shown. session/cancel cancels it with the turn.
//   - The answer streams as agent_message_chunk (thoughts as
//     agent_thought_chunk) with a messageId of its own and
//     _meta.source "side_answer", so an editor can show it apart; the
//     question is not echoed.
//   - While a turn runs, the question follows the turn's last request as
//     sent (what the provider caches), not the messages added since; with
//     no turn running it follows the whole conversation, as the next
//     prompt would. Asked before the session's first request, it waits for
//     that request or for the turn to end.
//   - Its cost counts in the session's, like any request's; nothing is
//     recorded in the transcript.

// metaSideAnswer is the _meta.source of a side answer's chunks.
const metaSideAnswer = "side_answer"

// besideCommand is the command of a prompt that runs beside the turn
// (commands.Command.Beside), with its arguments; nil for any other prompt.
func (s *Session) besideCommand(blocks []acp.ContentBlock) (*commands.Command, string) {
	if len(blocks) == 0 || blocks[0].Type != "text" {
		return nil, ""
	}
	name, args, ok := commands.Parse(blocks[0].Text)
	if !ok {
		return nil, ""
	}
	// Built-in names are reserved: the built-in is the command whatever
	// the workspace's files say, and needs no command set yet.
	for _, c := range commands.Builtins() {
		if c.Name == name && c.Beside {
			return c, args
		}
	}
	return nil, ""
}

// runBeside runs cmd for a prompt without taking the turn.
func (s *Session) runBeside(ctx context.Context, cmd *commands.Command, args string) (*acp.PromptResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &promptHandle{cancel: cancel}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errSessionClosing()
	}
	s.asides = append(s.asides, h)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.asides = slices.DeleteFunc(s.asides, func(p *promptHandle) bool { return p == h })
		s.mu.Unlock()
	}()
	if !s.waitCommands(ctx) {
		return cancelled, nil
	}
	s.log.Info("slash command", "name", cmd.Name, "source", string(cmd.Source), "beside_turn", true)
	res, err := cmd.Invoke(ctx, sessionHost{s: s, ctx: ctx}, args)
	if ctx.Err() != nil {
		return cancelled, nil
	}
	if err != nil {
		if ae, ok := err.(*acp.Error); ok {
			return nil, ae
		}
		return nil, acp.ErrInternal("/" + cmd.Name + ": " + err.Error())
	}
	if !res.Shown {
		b := acp.TextBlock(res.Message)
		s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b, MessageID: newMessageID(), Meta: acp.Meta{"source": "slash_command"}})
	}
	return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil
}

func (h sessionHost) SideQuestion(ctx context.Context, question string) error {
	return h.s.sideQuestion(ctx, question)
}

// sideQuestion asks the model question on the session's prefix and shows
// the answer.
func (s *Session) sideQuestion(ctx context.Context, question string) error {
	prefix, err := s.sideRequestPrefix(ctx)
	if err != nil {
		return err
	}
	msg, err := s.userMessage([]acp.ContentBlock{acp.TextBlock(question)})
	if err != nil {
		return err
	}
	req := side.Request(prefix, msg)
	id := newMessageID()
	var once sync.Once
	show := func(ev model.Event) {
		b := acp.TextBlock(ev.Text)
		u := acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b, MessageID: id, Meta: acp.Meta{"source": metaSideAnswer}}
		switch ev.Kind {
		case model.EventReasoning:
			u.Kind = acp.UpdateAgentThoughtChunk
		case model.EventRetry:
			// What follows repeats the answer from its start.
			id = newMessageID()
			return
		}
		once.Do(func() { s.log.Info("side question answering", "message_id", id) })
		s.update(ctx, u)
	}
	a, err := side.Ask(s.watchRetries(ctx), s.m.opts.Provider, req, show)
	if a.Usage != nil {
		s.chargeSide(req.Model, *a.Usage)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Error("side question failed", "err", err)
		return s.modelError(err)
	}
	if a.Calls > 0 {
		s.log.Warn("the model called tools in a side question; none ran", "calls", a.Calls)
		if a.Text == "" {
			show(model.Event{Kind: model.EventText, Text: "(The model tried to use a tool; a side question runs none. Ask again, or send it as a prompt.)"})
		}
	}
	return nil
}

// sideRequestPrefix is the request a side question extends: with no turn
// running, the conversation as the next prompt would send it; while one
// runs, its last request as sent.
func (s *Session) sideRequestPrefix(ctx context.Context) (model.Request, error) {
	idle := func() (model.Request, error) {
		defer s.release()
		if !s.waitPrep(ctx) {
			return model.Request{}, ctx.Err()
		}
		req := s.modelRequest(s.m.opts.MaxTokens)
		req.Messages = slices.Clip(req.Messages)
		return req, nil
	}
	for {
		select {
		case s.turns <- struct{}{}:
			return idle()
		default:
		}
		if req, ok := s.sidePrefix.Last(); ok {
			return req, nil
		}
		select {
		case s.turns <- struct{}{}:
			return idle()
		case <-s.sidePrefix.Sent():
		case <-ctx.Done():
			return model.Request{}, ctx.Err()
		}
	}
}

// chargeSide adds a side question's cost to the session's.
func (s *Session) chargeSide(mdl string, u model.Usage) {
	price, ok := s.m.opts.Prices.Of(mdl)
	if !ok {
		return
	}
	s.costMu.Lock()
	s.cost += price.Cost(u)
	s.costMu.Unlock()
}
