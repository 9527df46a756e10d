package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/mcp/imported"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/policy"
	"github.com/acpd/acpd/session/tools"
)

// MCP wiring. The servers' listings reach the session at turn boundaries
// only (tool definitions sit in the model's cached prompt prefix): when a
// server says its tools, prompts or resources changed, the session lists
// them again as soon as no turn runs, or at the start of the next prompt;
// tools keep their places in the registry and new ones follow, prompts
// are announced again as commands.

// connectMCP starts the session's MCP servers concurrently and adds their
// tools to its registry: the client's, and those the user configured for
// other agents (importedMCP). A server that fails to start is logged and
// reported in the session at its next prompt; the session starts
// regardless.
func (m *Manager) connectMCP(ctx context.Context, s *Session, servers []acp.MCPServer) {
	names := make([]string, 0, len(servers))
	for _, srv := range servers {
		names = append(names, srv.Name)
	}
	more, extra := m.importedMCP(s, names)
	servers = append(slices.Clip(servers), more...)
	if len(servers) == 0 {
		return
	}
	o := m.mcpOptions(s)
	o.Servers = extra
	set, errs := mcp.Connect(ctx, servers, o)
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

// ImportedMCP is what the configurations of other agents give a session in
// the workspace at cwd (its policy pol, nil for none): the servers it
// starts, ready, and those it leaves off, with the problems met. acpd
// doctor shows it.
func ImportedMCP(o imported.Options, pol *policy.Session, cwd string) imported.Found {
	return importedFound(o, pol, cwd, nil)
}

func importedFound(o imported.Options, pol *policy.Session, cwd string, taken []string) imported.Found {
	if len(o.Agents) == 0 {
		return imported.Found{}
	}
	proj, trusted := pol.ProjectMCP()
	f := imported.Merge(imported.ReadUser(o, cwd), proj, trusted, taken)
	f = imported.Resolve(f, cwd, os.LookupEnv, exec.LookPath)
	keep := f.Servers[:0]
	for _, srv := range f.Servers {
		if err := mcp.ValidateServers([]acp.MCPServer{srv.MCPServer}); err != nil {
			f.Problems = append(f.Problems, fmt.Sprintf("mcp server %q (%s): %v", srv.Name, srv.File, err))
			continue
		}
		keep = append(keep, srv)
	}
	f.Servers = keep
	return f
}

// importedMCP are the servers the user configured for other agents that
// the session starts besides the client's (taken: their names win), and
// what acpd keeps of their settings.
func (m *Manager) importedMCP(s *Session, taken []string) ([]acp.MCPServer, map[string]mcp.ServerOptions) {
	f := importedFound(m.opts.MCPImport, s.pol, s.cwd, taken)
	for _, p := range f.Problems {
		s.log.Warn("imported MCP servers", "problem", p)
	}
	var out []acp.MCPServer
	extra := map[string]mcp.ServerOptions{}
	for _, srv := range f.Servers {
		s.log.Info("imported MCP server", "name", srv.Name, "from", srv.Origin())
		out = append(out, srv.MCPServer)
		extra[srv.Name] = mcp.ServerOptions{Dir: srv.Dir, IncludeTools: srv.IncludeTools,
			ExcludeTools: srv.ExcludeTools, CallTimeout: srv.Timeout}
	}
	return out, extra
}

// trustedMCP starts the servers the workspace's files configure, after the
// user trusted it during the session: what the session did not run yet.
// Callers hold the turn; the tools reach the model in this turn.
func (m *Manager) trustedMCP(ctx context.Context, s *Session) {
	var taken []string
	for _, st := range s.mcp.Status() {
		taken = append(taken, st.Name)
	}
	more, extra := m.importedMCP(s, taken)
	if len(more) == 0 {
		return
	}
	var errs []error
	if s.mcp == nil {
		o := m.mcpOptions(s)
		o.Servers = extra
		s.mcp, errs = mcp.Connect(ctx, more, o)
	} else {
		errs = s.mcp.Add(ctx, more, extra)
	}
	for _, err := range errs {
		s.notify(ctx, notice.MCPServerFailed, err.Error())
	}
	if s.mcp == nil {
		return
	}
	s.syncMCPTools()
	s.cmds.mu.Lock()
	s.cmds.mcpStale = true
	s.cmds.mu.Unlock()
	s.refreshCommands(ctx)
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
