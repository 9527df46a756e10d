package commands

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Host is what built-in commands see of their session. The session package
// implements it; a new built-in that needs more of the session adds a
// method here.
type Host interface {
	// Cwd is the session's first workspace root.
	Cwd() string
	// Context describes what fills the model's window.
	Context() ContextInfo
	// Tools are the tools offered to the model, MCP tools included.
	Tools() []ToolInfo
	// MCPServers are the session's MCP servers and their state.
	MCPServers() []MCPServer
	// Commands are the session's commands.
	Commands() []*Command
	// Compact compacts the conversation now (/compress), with focus added
	// to the summariser's instructions.
	Compact(ctx context.Context, focus string) (Compaction, error)
	// Agents are the subagents the agent tool can start.
	Agents() Agents
	// SideQuestion answers question from the conversation without tools
	// and shows the answer; neither is kept in the conversation (/btw).
	// It may run while a turn runs.
	SideQuestion(ctx context.Context, question string) error
}

// Agents is the /agents report's data.
type Agents struct {
	// Off is set when the configuration leaves the agent tool out.
	Off  bool
	List []AgentInfo
	// Warnings name the agent files (file:line) and settings left out.
	Warnings []string
}

// AgentInfo is one subagent.
type AgentInfo struct {
	Name, Description string
	// Tools are the agent's tools; nil means every tool a subagent may have.
	Tools  []string
	Model  string // "" runs on the session's model
	Source Source
	Path   string // the agent's file; "" for a built-in
}

// Compaction is what a forced compaction did.
type Compaction struct {
	// Method is "summary", "stub", "drop", or "none" when there was
	// nothing to compact.
	Method        string
	Before, After int // the request's tokens before and after
	Detail        string
}

// ContextInfo is the /context report's data.
type ContextInfo struct {
	// Used is the size of the next request in tokens: the provider's last
	// count plus an estimate of what was added since, or an estimate only
	// (Estimated) before the first count and after a compaction. Window is
	// the model's context size, Threshold where automatic compaction starts.
	Used, Window, Threshold int
	Estimated               bool
	// SummariesPaused is set after three failed automatic summaries.
	SummariesPaused bool
	// SystemTokens estimates the system prompt (environment and
	// instructions included); ToolTokens the tool schemas sent with it.
	SystemTokens, ToolTokens int
	// Messages is the number of messages in the conversation.
	Messages int
	// Instructions are the instruction files loaded into the prompt.
	Instructions []InstructionFile
	// Environment is false when the environment block is turned off.
	Environment bool
	// Compaction describes the last compaction ("" when there was none).
	Compaction string
	// Warnings are the instruction and command files left out or cut.
	Warnings []string
}

// InstructionFile is one loaded instruction file.
type InstructionFile struct {
	Path      string
	Tokens    int
	Truncated bool
}

// ToolInfo is one tool offered to the model.
type ToolInfo struct {
	Name, Description string
	Server            string // the MCP server that serves it; "" for built-in tools
}

// MCPServer is one MCP server of the session.
type MCPServer struct {
	Name, Type string
	Connected  bool
	Tools      int
	Err        string
}

// maxFocus bounds /compress's instructions (the reference's limit).
const maxFocus = 2000

// Builtins returns the built-in commands, in the order /help lists them.
func Builtins() []*Command {
	return []*Command{
		{Name: "compress", Description: "Compress the conversation now by replacing it with a summary", Hint: "[focus]",
			Source: SourceBuiltin, Run: compress},
		{Name: "init", Description: "Study the project and write or update its AGENTS.md",
			Source: SourceBuiltin, Run: initCmd},
		{Name: "context", Description: "Show what fills the context window: tokens, instruction files, tools, MCP servers",
			Source: SourceBuiltin, Run: contextCmd},
		{Name: "tools", Description: "List the tools offered to the model", Source: SourceBuiltin, Run: toolsCmd},
		{Name: "mcp", Description: "List the MCP servers, their state and tools", Source: SourceBuiltin, Run: mcpCmd},
		{Name: "agents", Description: "List the subagents the agent tool can start, and agent files left out",
			Source: SourceBuiltin, Run: agentsCmd},
		{Name: "rewind", Description: "List the turns, or undo turn N and those after it: files and conversation, or only code or conversation",
			Hint: "[N [code|conversation]]", Source: SourceBuiltin, Run: rewindCmd},
		{Name: "fork", Description: "Copy the conversation, or its turns up to N, into a new session", Hint: "[N]",
			Source: SourceBuiltin, Run: forkCmd},
		{Name: "btw", Description: "Ask a side question about the conversation, even while a turn runs: answered without tools and not kept in the conversation",
			Hint: "QUESTION", Source: SourceBuiltin, Run: btwCmd, Beside: true},
		{Name: "help", Description: "List the available commands", Source: SourceBuiltin, Run: helpCmd},
	}
}

// compress compacts the conversation now: a summary of everything but the
// calls in flight (see session/contextmgr). The model is not otherwise
// called and nothing is added to the conversation.
func compress(ctx context.Context, h Host, args string) (Result, error) {
	var note string
	if len(args) > maxFocus {
		args = args[:maxFocus]
		note = fmt.Sprintf("The instructions were cut to their first %d characters.\n", maxFocus)
	}
	c, err := h.Compact(ctx, args)
	if ctx.Err() != nil {
		return Result{}, nil // the prompt answers cancelled
	}
	if err != nil {
		return Result{}, err
	}
	if c.Method == "none" {
		msg := "Nothing to compress."
		if c.Detail != "" {
			msg = "Nothing to compress: " + c.Detail
		}
		return Result{Message: note + msg}, nil
	}
	msg := fmt.Sprintf("Context compressed (%d -> %d tokens).", c.Before, c.After)
	if c.Detail != "" {
		msg += " " + c.Detail
	}
	return Result{Message: note + msg}, nil
}

// initCmd has the model study the project and write AGENTS.md: the prompt
// asks for an update when the file exists.
func initCmd(_ context.Context, h Host, args string) (Result, error) {
	path := filepath.Join(h.Cwd(), "AGENTS.md")
	verb := "Create"
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		verb = "Update"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s the project's instruction file %s for coding agents working in this repository.\n\n", verb, path)
	b.WriteString(`First study the project with your read-only tools: the top-level layout, the build and dependency files, the README and contributing notes, CI configuration, and a few representative source and test files.

Then write the file with write_file. Keep it short and specific to this project, in Markdown, with these sections where they apply:
- Project overview: what it is and how the code is organised (key directories and entry points).
- Build, test and lint: the exact commands, including how to run a single test.
- Code style and conventions actually used here (naming, error handling, formatting tools).
- Rules for changes: what must be kept in sync, what not to touch, how commits are made.

Do not invent commands or conventions you did not find evidence of.`)
	if verb == "Update" {
		b.WriteString(" The file already exists: read it first and keep what is still correct.")
	}
	if args != "" {
		b.WriteString("\n\nAlso take this into account: " + args)
	}
	return Result{Prompt: b.String()}, nil
}

func contextCmd(_ context.Context, h Host, _ string) (Result, error) {
	c := h.Context()
	var b strings.Builder
	b.WriteString("Context window\n")
	how := "the model's last count plus what was added since"
	if c.Estimated {
		how = "estimated"
	}
	fmt.Fprintf(&b, "- Used: %d of %d tokens (%.1f%%), %s\n", c.Used, c.Window, 100*float64(c.Used)/float64(max(c.Window, 1)), how)
	fmt.Fprintf(&b, "- Automatic compaction at %d tokens\n", c.Threshold)
	if c.SummariesPaused {
		b.WriteString("- Automatic summaries are paused after three failures; /compress resumes them\n")
	}
	fmt.Fprintf(&b, "- System prompt: about %d tokens; tool definitions: about %d tokens\n", c.SystemTokens, c.ToolTokens)
	fmt.Fprintf(&b, "- Conversation: %d messages\n", c.Messages)
	if !c.Environment {
		b.WriteString("- Environment block: off\n")
	}
	b.WriteString("\nInstruction files\n")
	if len(c.Instructions) == 0 {
		b.WriteString("- none loaded\n")
	}
	for _, f := range c.Instructions {
		note := ""
		if f.Truncated {
			note = " (cut to the size budget)"
		}
		fmt.Fprintf(&b, "- %s: about %d tokens%s\n", f.Path, f.Tokens, note)
	}
	tools := h.Tools()
	fmt.Fprintf(&b, "\nTools: %d offered\n", len(tools))
	servers := h.MCPServers()
	b.WriteString("\nMCP servers\n")
	writeServers(&b, servers)
	b.WriteString("\nCompaction\n")
	if c.Compaction == "" {
		b.WriteString("- none in this session\n")
	} else {
		b.WriteString("- " + c.Compaction + "\n")
	}
	if len(c.Warnings) > 0 {
		b.WriteString("\nWarnings\n")
		for _, w := range c.Warnings {
			b.WriteString("- " + w + "\n")
		}
	}
	return Result{Message: b.String()}, nil
}

func writeServers(b *strings.Builder, servers []MCPServer) {
	if len(servers) == 0 {
		b.WriteString("- none\n")
	}
	for _, s := range servers {
		state := "connected"
		if !s.Connected {
			state = "unavailable"
			if s.Err != "" {
				state += ": " + s.Err
			}
		}
		fmt.Fprintf(b, "- %s (%s): %s, %d tools\n", s.Name, s.Type, state, s.Tools)
	}
}

func toolsCmd(_ context.Context, h Host, _ string) (Result, error) {
	var b strings.Builder
	tools := h.Tools()
	fmt.Fprintf(&b, "Tools offered to the model (%d)\n", len(tools))
	for _, t := range tools {
		line := "- " + t.Name
		if t.Server != "" {
			line += " [MCP: " + t.Server + "]"
		}
		if d := firstLine(t.Description); d != "" {
			line += ": " + d
		}
		b.WriteString(line + "\n")
	}
	if servers := h.MCPServers(); len(servers) > 0 {
		b.WriteString("\nMCP servers\n")
		writeServers(&b, servers)
	}
	return Result{Message: b.String()}, nil
}

func mcpCmd(_ context.Context, h Host, _ string) (Result, error) {
	var b strings.Builder
	servers := h.MCPServers()
	b.WriteString("MCP servers\n")
	writeServers(&b, servers)
	for _, s := range servers {
		var names []string
		for _, t := range h.Tools() {
			if t.Server == s.Name {
				names = append(names, t.Name)
			}
		}
		if len(names) > 0 {
			fmt.Fprintf(&b, "\n%s tools: %s\n", s.Name, strings.Join(names, ", "))
		}
	}
	return Result{Message: b.String()}, nil
}

func agentsCmd(_ context.Context, h Host, _ string) (Result, error) {
	a := h.Agents()
	var b strings.Builder
	if a.Off {
		b.WriteString("The agent tool is turned off ([tools] exclude lists \"agent\"): no subagents.\n")
	} else {
		fmt.Fprintf(&b, "Subagents (%d)\n", len(a.List))
		for _, ag := range a.List {
			from := "built-in"
			if ag.Path != "" {
				from = string(ag.Source) + ", " + ag.Path
			}
			fmt.Fprintf(&b, "- %s (%s): %s\n", ag.Name, from, firstLine(ag.Description))
			tools := "every tool but agent, todo_write and exit_plan_mode"
			switch {
			case ag.Tools == nil:
			case len(ag.Tools) == 0:
				tools = "none"
			default:
				tools = strings.Join(ag.Tools, ", ")
			}
			line := "  tools: " + tools
			if ag.Model != "" {
				line += "; model: " + ag.Model
			}
			b.WriteString(line + "\n")
		}
	}
	if len(a.Warnings) > 0 {
		b.WriteString("\nLeft out\n")
		for _, w := range a.Warnings {
			b.WriteString("- " + w + "\n")
		}
	}
	return Result{Message: b.String()}, nil
}

func btwCmd(ctx context.Context, h Host, args string) (Result, error) {
	if args == "" {
		return Result{Message: "Usage: /btw QUESTION — a side question about the conversation, answered without tools and not kept in it."}, nil
	}
	if err := h.SideQuestion(ctx, args); err != nil {
		return Result{}, err
	}
	return Result{Shown: true}, nil
}

func helpCmd(_ context.Context, h Host, _ string) (Result, error) {
	var b strings.Builder
	b.WriteString("Commands\n")
	for _, c := range h.Commands() {
		line := "- /" + c.Name
		if c.Hint != "" {
			line += " " + c.Hint
		}
		line += ": " + c.Description
		if c.Path != "" {
			line += " (" + c.Path + ")"
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("\nAny other text starting with / goes to the model unchanged.\n")
	return Result{Message: b.String()}, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const limit = 120
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit]) + "…"
	}
	return s
}
