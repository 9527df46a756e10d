package tools

import (
	"slices"
	"sync"
)

// Tool names as qwen-code spells them; the loop detectors key on them.
const (
	NameReadFile        = "read_file"
	NameWriteFile       = "write_file"
	NameEdit            = "edit"
	NameListDirectory   = "list_directory"
	NameGlob            = "glob"
	NameGrepSearch      = "grep_search"
	NameRunShellCommand = "run_shell_command"
	NameTodoWrite       = "todo_write"
)

// Builtin returns acpd's built-in tools in a stable order. The tools are
// stateless, so every caller gets the same instances (a served daemon's
// sessions share them instead of holding eleven copies each); their
// schemas are compiled once per process. The slice is the caller's.
func Builtin() []Tool { return slices.Clone(builtinTools()) }

var builtinTools = sync.OnceValue(func() []Tool {
	return []Tool{
		&readFileTool{readFileSpec},
		&writeFileTool{writeFileSpec},
		&editTool{editSpec},
		&listDirectoryTool{listDirectorySpec},
		&globTool{globSpec},
		&grepSearchTool{grepSearchSpec},
		&runShellCommandTool{runShellCommandSpec},
		&todoWriteTool{todoWriteSpec},
		&exitPlanModeTool{exitPlanModeSpec},
		&webFetchTool{webFetchSpec},
		&askUserQuestionTool{askUserQuestionSpec},
	}
})

// NewBuiltinRegistry returns a registry of the built-in tools except those
// named in exclude (e.g. a config's excluded tools).
func NewBuiltinRegistry(exclude []string) *Registry {
	skip := map[string]bool{}
	for _, n := range exclude {
		skip[n] = true
	}
	all := builtinTools()
	// Room for the agent tool and an MCP server's or two without growing.
	r := &Registry{order: make([]Tool, 0, len(all)+2)}
	for _, t := range all {
		if !skip[t.Name()] {
			r.Add(t)
		}
	}
	return r
}
