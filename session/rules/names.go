package rules

import (
	"path"
	"strings"
)

// acpd's tool names (package tools and agents spell them; repeated here so
// the engine needs neither).
const (
	ToolShell     = "run_shell_command"
	ToolRead      = "read_file"
	ToolList      = "list_directory"
	ToolGlob      = "glob"
	ToolGrep      = "grep_search"
	ToolEdit      = "edit"
	ToolWrite     = "write_file"
	ToolFetch     = "web_fetch"
	ToolAgent     = "agent"
	ToolTodo      = "todo_write"
	ToolPlanExit  = "exit_plan_mode"
	ToolAskUser   = "ask_user_question"
	mcpPrefix     = "mcp__"
	mcpSeparator  = "__"
	allMCPPattern = "mcp__*"
)

// specKind is how a rule's specifier reads.
type specKind uint8

const (
	specNone   specKind = iota // the tool takes none
	specShell                  // a command pattern
	specPath                   // a gitignore-style path pattern
	specDomain                 // domain:host
	specAgent                  // a subagent type
)

// target is the set of tools a rule's name covers.
type target struct {
	tools []string // acpd tool names; nil for any (all) or MCP patterns
	all   bool     // "*"
	spec  specKind
	// write: a path rule about writes (Edit); otherwise reads.
	write bool
	// MCP: the server and tool patterns of mcp__server__tool ("" tool:
	// every tool of the server); glob: the name holds a '*'.
	mcp           bool
	server, tool  string
	glob, unknown bool
}

func (t target) mcpGlobAllowed() bool {
	return t.mcp && !strings.ContainsAny(t.server, "*") && t.server != ""
}

// readTools are the tools a Read rule covers: what reads files or lists
// them. writeTools are an Edit rule's.
var (
	readTools  = []string{ToolRead, ToolList, ToolGlob, ToolGrep}
	writeTools = []string{ToolEdit, ToolWrite}
)

// lookupTarget maps a rule's tool name to acpd's tools: Claude Code's
// names first, then acpd's own, then MCP names; any other name is kept as
// a literal tool name (unknown).
func lookupTarget(name string) (target, bool) {
	switch name {
	case "":
		return target{}, false
	case "*":
		return target{all: true, glob: true}, true
	case "Bash", ToolShell:
		return target{tools: []string{ToolShell}, spec: specShell}, true
	case "Read":
		return target{tools: readTools, spec: specPath}, true
	case ToolRead:
		return target{tools: []string{ToolRead}, spec: specPath}, true
	case "LS", ToolList:
		return target{tools: []string{ToolList}, spec: specPath}, true
	case "Glob", ToolGlob:
		return target{tools: []string{ToolGlob}, spec: specPath}, true
	case "Grep", ToolGrep:
		return target{tools: []string{ToolGrep}, spec: specPath}, true
	case "Edit", "Write", "MultiEdit":
		// Claude Code consults path rules on Edit only; acpd reads Write
		// and MultiEdit rules the same way, since they name the same
		// writes.
		return target{tools: writeTools, spec: specPath, write: true}, true
	case ToolEdit:
		return target{tools: []string{ToolEdit}, spec: specPath, write: true}, true
	case ToolWrite:
		return target{tools: []string{ToolWrite}, spec: specPath, write: true}, true
	case "WebFetch", ToolFetch:
		return target{tools: []string{ToolFetch}, spec: specDomain}, true
	case "Agent", "Task", ToolAgent:
		return target{tools: []string{ToolAgent}, spec: specAgent}, true
	case "TodoWrite", ToolTodo:
		return target{tools: []string{ToolTodo}}, true
	case "ExitPlanMode", ToolPlanExit:
		return target{tools: []string{ToolPlanExit}}, true
	case "AskUserQuestion", ToolAskUser:
		return target{tools: []string{ToolAskUser}}, true
	}
	if rest, ok := strings.CutPrefix(name, mcpPrefix); ok {
		if name == allMCPPattern {
			return target{mcp: true, server: "*", glob: true}, true
		}
		server, tool, _ := strings.Cut(rest, mcpSeparator)
		if server == "" {
			return target{}, false
		}
		return target{mcp: true, server: server, tool: tool, glob: strings.Contains(rest, "*")}, true
	}
	for _, r := range name {
		if !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return target{}, false
		}
	}
	return target{tools: []string{name}, unknown: true}, true
}

// ClaudeName is the name Claude Code gives acpd's tool, for hooks written
// for Claude Code ("Bash" for run_shell_command); the tool's own name when
// Claude Code has none.
func ClaudeName(tool string) string {
	switch tool {
	case ToolShell:
		return "Bash"
	case ToolRead:
		return "Read"
	case ToolList:
		return "LS"
	case ToolGlob:
		return "Glob"
	case ToolGrep:
		return "Grep"
	case ToolEdit:
		return "Edit"
	case ToolWrite:
		return "Write"
	case ToolFetch:
		return "WebFetch"
	case ToolAgent:
		return "Task"
	case ToolTodo:
		return "TodoWrite"
	case ToolPlanExit:
		return "ExitPlanMode"
	case ToolAskUser:
		return "AskUserQuestion"
	}
	return tool
}

// covers reports whether the rule's name covers tool (an MCP tool given
// by its server and tool names when known).
func (t *target) covers(tool, server, mcpTool string) bool {
	switch {
	case t.all:
		return true
	case t.mcp:
		if !strings.HasPrefix(tool, mcpPrefix) {
			return false
		}
		if server == "" {
			// A name alone (a guarded agent's call): split it as written.
			server, mcpTool, _ = strings.Cut(tool[len(mcpPrefix):], mcpSeparator)
		}
		if !globMatch(t.server, server) {
			return false
		}
		return t.tool == "" || globMatch(t.tool, mcpTool)
	}
	for _, n := range t.tools {
		if n == tool {
			return true
		}
	}
	return false
}

// globMatch matches a name pattern where '*' stands for any text.
func globMatch(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	ok, _ := path.Match(strings.ReplaceAll(pattern, "/", "\x00"), strings.ReplaceAll(s, "/", "\x00"))
	return ok
}
