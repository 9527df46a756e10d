package session

import (
	"context"
	"fmt"
	"sync"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/tokens"
	"github.com/acpd/acpd/session/workspace"
)

// Slash commands. Decisions where the spec is silent:
//   - The commands are announced (available_commands_update) once the
//     answer to session/new, load or resume is on the wire, and again when
//     the command files change: seen by the process's one watcher of
//     command folders (inotify) while the session is idle, and checked by
//     path, size and modification time at the start of each prompt, so a
//     file saved just before the prompt is used by it, and changes are
//     still seen when inotify is not available. An idle session does no
//     work at all; all sessions of a workspace share one command set,
//     loaded once per change (session/workspace).
//   - A prompt waits for the first announcement, so the update never lands
//     inside a turn's updates.
//   - A command that only reports (/context, /help, …) is not recorded in
//     the transcript and not added to the conversation: it is about the
//     session, not part of it. A command that prompts the model (/init, a
//     file command) is recorded and sent as its expanded text, so a
//     reloaded conversation is the one the model saw.
//   - Built-in names are reserved (see commands.NewSet).

// cmdState is a session's commands.
type cmdState struct {
	mu  sync.Mutex
	set *commands.Set // the set last announced
	// base is the workspace's set the announced one was made from (set
	// adds the MCP servers' prompts); mcpStale says the prompts changed
	// since.
	base     *commands.Set
	mcpStale bool
	// sub is the session's subscription to its workspace's command set,
	// made at the first announcement; nil before it and once freed.
	sub   *workspace.Commands
	freed bool
	ready chan struct{} // closed after the first announcement
	once  sync.Once
}

func (s *Session) commandDirs() []commands.Dir {
	global := ""
	if s.m.opts.ConfigDir != "" {
		global = s.m.opts.ConfigDir + "/commands"
	}
	return commands.Dirs(s.roots, global)
}

// commandSub returns the session's subscription, subscribing the first
// time; nil once the session is freed.
func (s *Session) commandSub() *workspace.Commands {
	s.cmds.mu.Lock()
	defer s.cmds.mu.Unlock()
	if s.cmds.sub == nil && !s.cmds.freed {
		s.cmds.sub = s.m.hub.Commands(s.commandDirs(), s.commandsChanged)
	}
	return s.cmds.sub
}

func (s *Session) commandSet() *commands.Set {
	s.cmds.mu.Lock()
	defer s.cmds.mu.Unlock()
	return s.cmds.set
}

// announce sends the workspace's set base, with the MCP servers' prompts,
// as the session's commands.
func (s *Session) announce(ctx context.Context, base *commands.Set) {
	set := base.With(s.mcpCommands())
	s.cmds.mu.Lock()
	s.cmds.set, s.cmds.base, s.cmds.mcpStale = set, base, false
	s.cmds.mu.Unlock()
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAvailableCommands, AvailableCommands: set.Available()})
	for _, w := range set.Warnings {
		s.notify(ctx, notice.CommandFile, w)
	}
}

// announceCommands sends available_commands_update once the answer to the
// request of ctx (session/new, resume) is on the wire: a new session's
// updates must not precede its id, which its client learns from that
// answer (clients drop them, or wait on them). A loaded session's (replay)
// go before the answer instead, after its replay: its client named the
// session itself, and session/load's answer ends the session's setup —
// the conformance kit (acp-tck ACP-LOAD-002) allows no update after it,
// and a client may treat one as a turn it did not start.
func (s *Session) announceCommands(ctx context.Context, replay bool) {
	fn := func() {
		sub := s.commandSub()
		if sub == nil {
			return // closed meanwhile
		}
		// From here the client knows the session: held notices go out.
		s.notes.Open(ctx)
		set := sub.Check()
		s.announce(ctx, set)
		s.cmds.once.Do(func() { close(s.cmds.ready) })
		if sub.Check() != set {
			// Changed before ready was closed, when commandsChanged
			// leaves it to this announcement.
			go s.commandsChanged()
		}
	}
	if replay {
		fn()
		return
	}
	if !acp.AfterReply(ctx, fn) {
		go fn()
	}
}

// commandsChanged re-announces the commands after the workspace's set was
// reloaded, as soon as no turn runs (a running turn's updates come first).
// It runs on a goroutine of its own.
func (s *Session) commandsChanged() {
	select {
	case <-s.cmds.ready:
	default:
		return // the first announcement is still to come, with the new set
	}
	// The session's lifetime: ended by free.
	if s.acquire(s.prep.ctx) != nil {
		return
	}
	defer s.release()
	s.refreshCommands(context.Background())
}

// stopCommands ends the subscription.
func (s *Session) stopCommands() {
	s.cmds.mu.Lock()
	sub := s.cmds.sub
	s.cmds.sub, s.cmds.freed = nil, true
	s.cmds.mu.Unlock()
	if sub != nil {
		sub.Close()
	}
}

// waitCommands waits for the first announcement; false when ctx ended.
func (s *Session) waitCommands(ctx context.Context) bool {
	select {
	case <-s.cmds.ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// refreshCommands re-announces the commands when their files changed since
// the session announced them. Callers hold the turn.
func (s *Session) refreshCommands(ctx context.Context) {
	s.cmds.mu.Lock()
	sub, last, stale := s.cmds.sub, s.cmds.base, s.cmds.mcpStale
	s.cmds.mu.Unlock()
	if sub == nil {
		return
	}
	if set := sub.Check(); set != last || stale {
		s.announce(ctx, set)
	}
}

// runCommand handles a prompt that is a known slash command. handled is
// false for ordinary prompts and unknown names (they go to the model
// unchanged). A command that prompts the model returns the blocks to run
// the turn with: the first text block replaced by the expanded prompt.
func (s *Session) runCommand(ctx context.Context, blocks []acp.ContentBlock) (resp *acp.PromptResponse, next []acp.ContentBlock, handled bool, err error) {
	if len(blocks) == 0 || blocks[0].Type != "text" {
		return nil, nil, false, nil
	}
	name, args, ok := commands.Parse(blocks[0].Text)
	if !ok {
		return nil, nil, false, nil
	}
	cmd, ok := s.commandSet().Lookup(name)
	if !ok {
		return nil, nil, false, nil
	}
	s.log.Info("slash command", "name", name, "source", string(cmd.Source))
	res, err := cmd.Invoke(ctx, sessionHost{s: s, ctx: ctx}, args)
	if err != nil {
		return nil, nil, true, acp.ErrInternal("/" + name + ": " + err.Error())
	}
	if ctx.Err() != nil {
		return cancelled, nil, true, nil
	}
	if res.Prompt != "" {
		next = append([]acp.ContentBlock{acp.TextBlock(res.Prompt)}, blocks[1:]...)
		return nil, next, true, nil
	}
	if len(res.Blocks) > 0 {
		next = append(append([]acp.ContentBlock(nil), res.Blocks...), blocks[1:]...)
		return nil, next, true, nil
	}
	// A command's answer quotes the workspace (file paths, warnings,
	// agent descriptions) and the configuration: shown as written, its
	// control and bidi characters escaped.
	text := display.Text(res.Message)
	if text == "" {
		text = "Command executed."
	}
	b := acp.TextBlock(text)
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b, MessageID: newMessageID(), Meta: acp.Meta{"source": "slash_command"}})
	return &acp.PromptResponse{StopReason: acp.StopEndTurn}, nil, true, nil
}

// sessionHost is what built-in commands see of the session; its methods
// run on the turn holder's goroutine.
type sessionHost struct {
	s   *Session
	ctx context.Context
}

func (h sessionHost) Cwd() string { return h.s.cwd }

func (h sessionHost) Commands() []*commands.Command { return h.s.commandSet().Commands() }

func (h sessionHost) Context() commands.ContextInfo {
	s := h.s
	info := commands.ContextInfo{
		Window: s.window(), Threshold: s.thresholds().Auto, Estimated: true,
		Messages: len(s.history), Environment: !s.m.opts.NoEnvironment,
	}
	if !s.waitPrep(h.ctx) {
		return info
	}
	u := s.ContextUsage()
	info.Used, info.Estimated, info.SummariesPaused = u.Used, u.Estimated, u.SummariesPaused
	if c := u.Last; c != nil {
		info.Compaction = fmt.Sprintf("%s (%s) at %s: %d -> %d tokens. %s",
			c.Method, c.Trigger, c.At.UTC().Format("15:04:05"), c.Before, c.After, c.Detail)
	}
	// The same estimates compaction acts on (requestOverhead).
	info.SystemTokens = tokens.System(s.systemPrompt())
	info.ToolTokens = tokens.Tools(s.toolSpecs())
	for _, f := range s.prep.instr.Files {
		info.Instructions = append(info.Instructions, commands.InstructionFile{
			Path: f.Path, Tokens: tokens.Text(f.Text), Truncated: f.Truncated,
		})
	}
	info.Warnings = append(append(info.Warnings, s.prep.instr.Warnings...), s.commandSet().Warnings...)
	if s.agentTool != nil {
		info.Warnings = append(info.Warnings, s.agentTool.Agents().Warnings...)
	}
	return info
}

func (h sessionHost) Agents() commands.Agents {
	s := h.s
	if s.agentTool == nil {
		return commands.Agents{Off: true}
	}
	set := s.agentTool.Agents()
	out := commands.Agents{Warnings: set.Warnings}
	for _, a := range set.Agents() {
		out.List = append(out.List, commands.AgentInfo{
			Name: a.Name, Description: a.Description, Tools: a.Tools, Model: a.Model,
			Source: commands.Source(a.Source), Path: a.Path,
		})
	}
	return out
}

func (h sessionHost) Compact(ctx context.Context, focus string) (commands.Compaction, error) {
	c, err := h.s.Compact(ctx, focus)
	return commands.Compaction{Method: c.Method, Before: c.Before, After: c.After, Detail: c.Detail}, err
}

func (h sessionHost) Tools() []commands.ToolInfo {
	var out []commands.ToolInfo
	for _, t := range h.s.tools.Tools() {
		ti := commands.ToolInfo{Name: t.Name(), Description: t.Spec().Description}
		if mt, ok := t.(*mcp.Tool); ok {
			ti.Server = mt.ServerName()
		}
		out = append(out, ti)
	}
	return out
}

func (h sessionHost) MCPServers() []commands.MCPServer {
	var out []commands.MCPServer
	for _, st := range h.s.mcp.Status() {
		ms := commands.MCPServer{Name: st.Name, Type: st.Type, Connected: st.Connected, Tools: st.Tools}
		if st.Err != nil {
			ms.Err = st.Err.Error()
		}
		out = append(out, ms)
	}
	return out
}
