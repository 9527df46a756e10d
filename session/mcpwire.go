package session

import (
	"context"
	"errors"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/tools"
)

// MCP wiring. The servers' listings reach the session at turn boundaries
// only (tool definitions sit in the model's cached prompt prefix): when a
// server says its tools, prompts or resources changed, the session lists
// them again as soon as no turn runs, or at the start of the next prompt;
// tools keep their places in the registry and new ones follow, prompts
// are announced again as commands.

// connectMCP starts the session's MCP servers concurrently and adds their
// tools to its registry. A server that fails to start is logged and reported
// in the session at its next prompt; the session starts regardless.
func (m *Manager) connectMCP(ctx context.Context, s *Session, servers []acp.MCPServer) {
	if len(servers) == 0 {
		return
	}
	set, errs := mcp.Connect(ctx, servers, m.mcpOptions(s))
	for _, err := range errs {
		s.notify(ctx, notice.MCPServerFailed, err.Error())
	}
	if set == nil {
		return
	}
	s.mcp = set
	s.syncMCPTools()
	if names := set.NeedsSignIn(); len(names) > 0 {
		m.signInMCP(ctx, s, names)
	}
}

// mcpOptions configures the session's MCP servers: the servers may ask
// the user through the editor in the elicitation modes it advertised.
func (m *Manager) mcpOptions(s *Session) mcp.Options {
	o := mcp.Options{Logger: s.log, ClientVersion: m.opts.Version, Changed: s.mcpChanged, Tokens: m.opts.MCPTokens}
	if o.Tokens != nil {
		o.SignIn = m.signInPrompt(s)
	}
	caps := s.clientCaps()
	el, ok := m.client.(acp.Elicitor)
	if !ok || (!caps.ElicitForm() && !caps.ElicitURL()) {
		return o
	}
	o.Elicit = &mcp.Elicitation{
		Form: caps.ElicitForm(),
		URL:  caps.ElicitURL(),
		Create: func(ctx context.Context, req *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
			req.SessionID = s.id
			return el.CreateElicitation(ctx, req)
		},
		Complete: func(ctx context.Context, id string) {
			if c, ok := m.client.(acp.ElicitationCompleter); ok {
				if err := c.CompleteElicitation(ctx, &acp.CompleteElicitationNotification{ElicitationID: id}); err != nil {
					s.log.Warn("elicitation/complete failed", "err", err)
				}
			}
		},
	}
	return o
}

// mcpChanged applies a server's listing change as soon as no turn runs
// (after the first announcement of the commands, which a change may
// alter). It runs on a goroutine of its own.
func (s *Session) mcpChanged() {
	select {
	case <-s.cmds.ready:
	case <-s.prep.ctx.Done():
		return
	}
	if s.acquire(s.prep.ctx) != nil {
		return
	}
	defer s.release()
	s.refreshMCP(context.Background())
}

// refreshMCP lists again what the servers said changed, and applies it:
// the tools to the registry, the prompts to the commands. Callers hold
// the turn.
func (s *Session) refreshMCP(ctx context.Context) {
	if s.mcp == nil {
		return
	}
	ch := s.mcp.Refresh(ctx)
	if ch.Tools || ch.Resources {
		s.syncMCPTools()
	}
	if ch.Prompts {
		s.cmds.mu.Lock()
		s.cmds.mcpStale = true
		s.cmds.mu.Unlock()
		s.refreshCommands(ctx)
	}
}

// syncMCPTools makes the registry's MCP tools the set's: a tool no longer
// offered is removed, one still offered keeps its place (its definition
// updated), a new one is added at the end.
func (s *Session) syncMCPTools() {
	cur := s.mcp.Tools()
	keep := make(map[string]bool, len(cur))
	for _, t := range cur {
		keep[t.Name()] = true
	}
	for _, t := range s.tools.Tools() {
		if isMCPTool(t) && !keep[t.Name()] {
			s.tools.Remove(t.Name())
		}
	}
	for _, t := range cur {
		s.tools.Add(t)
	}
}

func isMCPTool(t tools.Tool) bool {
	switch t.(type) {
	case *mcp.Tool, *mcp.ResourceTool:
		return true
	}
	return false
}

// mcpCommands are the servers' prompts as slash commands (see package mcp
// for their names and arguments): used, a prompt's messages become the
// user's message.
func (s *Session) mcpCommands() []*commands.Command {
	var out []*commands.Command
	for _, p := range s.mcp.Prompts() {
		out = append(out, &commands.Command{
			Name: p.Command, Description: p.Description, Hint: p.Hint, Source: commands.SourceMCP,
			Run: func(ctx context.Context, _ commands.Host, args string) (commands.Result, error) {
				blocks, err := p.Expand(ctx, args)
				var usage *mcp.UsageError
				if errors.As(err, &usage) {
					return commands.Result{Message: usage.Msg}, nil
				}
				if err != nil {
					return commands.Result{}, err
				}
				return commands.Result{Blocks: blocks}, nil
			},
		})
	}
	return out
}

// mcpMentions reads the MCP resources the prompt's resource_link and
// resource blocks name, through their servers; the prompt and its model
// message are returned with what was read.
func (s *Session) mcpMentions(ctx context.Context, blocks []acp.ContentBlock, msg model.Message) ([]acp.ContentBlock, model.Message, error) {
	out, changed := s.mcp.ReadMentions(ctx, blocks)
	if !changed {
		return blocks, msg, nil
	}
	m, err := s.userMessage(out)
	return out, m, err
}
