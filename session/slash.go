package session

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/tokens"
)

// Slash commands. Decisions where the spec is silent:
//   - The commands are announced (available_commands_update) once the
//     answer to session/new, load or resume is on the wire, and again when
//     the command files change: checked by path, size and modification
//     time at the start of each prompt and every commandPoll while the
//     session is idle. Polling (a few stat calls per root) rather than
//     inotify: it needs no descriptors per session, sees folders created
//     later, and works on network file systems.
//   - A prompt waits for the first announcement, so the update never lands
//     inside a turn's updates.
//   - A command that only reports (/context, /help, …) is not recorded in
//     the transcript and not added to the conversation: it is about the
//     session, not part of it. A command that prompts the model (/init, a
//     file command) is recorded and sent as its expanded text, so a
//     reloaded conversation is the one the model saw.
//   - Built-in names are reserved (see commands.NewSet).

// commandPoll is how often an idle session looks for changed command files.
const commandPoll = 2 * time.Second

// cmdState is a session's commands.
type cmdState struct {
	mu    sync.Mutex
	set   *commands.Set
	ready chan struct{} // closed after the first announcement
	once  sync.Once
	// stop ends the watcher (closed by free).
	stop     chan struct{}
	stopOnce sync.Once
}

func (s *Session) commandDirs() []commands.Dir {
	global := ""
	if s.m.opts.ConfigDir != "" {
		global = s.m.opts.ConfigDir + "/commands"
	}
	return commands.Dirs(s.roots, global)
}

// loadCommands reads the command files and returns the new set.
func (s *Session) loadCommands() *commands.Set {
	set := commands.NewSet(commands.Builtins(), commands.Load(s.commandDirs()))
	for _, w := range set.Warnings {
		s.log.Warn("command file problem", "detail", w)
	}
	s.cmds.mu.Lock()
	s.cmds.set = set
	s.cmds.mu.Unlock()
	return set
}

func (s *Session) commandSet() *commands.Set {
	s.cmds.mu.Lock()
	defer s.cmds.mu.Unlock()
	return s.cmds.set
}

// announceCommands loads the commands and sends available_commands_update
// once the answer to the request of ctx (session/new, load, resume) is on
// the wire: a new session's updates must not precede its id.
func (s *Session) announceCommands(ctx context.Context) {
	fn := func() {
		set := s.loadCommands()
		s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAvailableCommands, AvailableCommands: set.Available()})
		s.cmds.once.Do(func() {
			close(s.cmds.ready)
			go s.watchCommands()
		})
	}
	if !acp.AfterReply(ctx, fn) {
		go fn()
	}
}

// watchCommands re-announces the commands when their files change while
// no turn runs (a prompt checks for itself when it starts).
func (s *Session) watchCommands() {
	t := time.NewTicker(commandPoll)
	defer t.Stop()
	for {
		select {
		case <-s.cmds.stop:
			return
		case <-t.C:
		}
		select {
		case s.turns <- struct{}{}:
		default:
			continue // a turn runs
		}
		select {
		case <-s.cmds.stop:
		default:
			s.refreshCommands(context.Background())
		}
		s.release()
	}
}

// stopCommands ends the watcher.
func (s *Session) stopCommands() { s.cmds.stopOnce.Do(func() { close(s.cmds.stop) }) }

// waitCommands waits for the first announcement; false when ctx ended.
func (s *Session) waitCommands(ctx context.Context) bool {
	select {
	case <-s.cmds.ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// refreshCommands reloads and re-announces the commands when their files
// changed since they were loaded. Callers hold the turn.
func (s *Session) refreshCommands(ctx context.Context) {
	set := s.commandSet()
	if set != nil && commands.Stamp(s.commandDirs()) == set.Stamp() {
		return
	}
	set = s.loadCommands()
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAvailableCommands, AvailableCommands: set.Available()})
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
	text := res.Message
	if text == "" {
		text = "Command executed."
	}
	b := acp.TextBlock(text)
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateAgentMessageChunk, Content: &b, Meta: acp.Meta{"source": "slash_command"}})
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
	return info
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
