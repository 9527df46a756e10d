package tools

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
// stateless; their schemas are compiled once per process.
func Builtin() []Tool {
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
}

// NewBuiltinRegistry returns a registry of the built-in tools except those
// named in exclude (e.g. a config's excluded tools).
func NewBuiltinRegistry(exclude []string) *Registry {
	skip := map[string]bool{}
	for _, n := range exclude {
		skip[n] = true
	}
	r := NewRegistry()
	for _, t := range Builtin() {
		if !skip[t.Name()] {
			r.Add(t)
		}
	}
	return r
}
