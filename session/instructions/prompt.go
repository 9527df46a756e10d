// Package instructions builds what a session tells the model about itself
// and its project: the built-in system prompt, the environment block (date,
// OS, shell, workspace roots with their git state and top-level entries)
// and the project's instruction files (AGENTS.md, QWEN.md) with their
// @imports.
//
// The parts are laid out most stable first — the base prompt, then the
// instruction files, then the environment — and are fixed for the life of
// a session, so a provider's prompt cache keeps matching the whole system
// message on every request of the session.
package instructions

import (
	"slices"
	"strings"
)

// base is acpd's own system prompt.
const base = `You are acpd, a coding agent working in the user's workspace on their behalf, through their editor. You read and change code, run commands and answer questions about the project with the tools you are given.

# How to work
- Understand before you act: read the relevant files and search the code before you change anything. Never guess what a file holds or how an API behaves.
- Read a file before you edit it, and make small edits you can check, in the project's own style, structure and libraries.
- After a change, run the project's own build, tests or linters (the instruction files below usually say how) and fix what you broke. Say so if you could not check.
- Never revert, overwrite or throw away changes you did not make: the user may be working on the same files. Do not commit, push, or delete files and branches unless asked.
- When the request is ambiguous, or a choice has consequences the user would want a say in, ask one short question instead of guessing.
- When a tool fails, read the error and change your approach; do not repeat the same call.
- Keep to the task: no unrelated refactoring, no new files that are not needed.`

// toolHints are the per-tool lines of the prompt, for the tools offered.
var toolHints = []struct {
	names []string
	hint  string
}{
	{[]string{"read_file"}, "read_file: give an absolute path; for a large file read the part you need with offset and limit."},
	{[]string{"list_directory", "glob", "grep_search"}, "list_directory, glob, grep_search: find files and code before reading them; prefer a narrow pattern."},
	{[]string{"edit"}, "edit: replace an exact, unique snippet of the current text (read it first, include enough context to be unique); one logical change per call."},
	{[]string{"write_file"}, "write_file: create a file or replace one whole; prefer edit for changes to an existing file."},
	{[]string{"run_shell_command"}, "run_shell_command: run builds, tests and git queries in the workspace; explain a command that changes things before running it, and avoid interactive or never-ending commands."},
	{[]string{"todo_write"}, "todo_write: keep a short plan for multi-step work and update it as steps finish."},
	{[]string{"agent"}, "agent: hand a broad search or a self-contained task to a subagent, with a complete prompt: it sees nothing of this conversation."},
}

const answers = `# Answers
The user reads your answers in a narrow editor panel: be brief and direct — a few sentences or a short list, in Markdown, code in fenced blocks. Say what you changed and how you checked it; do not paste back files the user can open.`

// Parts are the pieces of a session's system prompt.
type Parts struct {
	// Custom replaces the built-in prompt (model.systemPrompt) when set.
	Custom string
	// Tools are the names of the tools offered, for the built-in prompt's
	// tool guidance.
	Tools []string
	// Instructions is Loaded.Text(); Environment is an Environment's Text().
	Instructions string
	Environment  string
}

// SystemPrompt lays the parts out, most stable first.
func SystemPrompt(p Parts) string {
	var b strings.Builder
	if p.Custom != "" {
		b.WriteString(strings.TrimSpace(p.Custom))
	} else {
		b.WriteString(base)
		var lines []string
		for _, h := range toolHints {
			if slices.ContainsFunc(h.names, func(n string) bool { return slices.Contains(p.Tools, n) }) {
				lines = append(lines, "- "+h.hint)
			}
		}
		if len(lines) > 0 {
			b.WriteString("\n\n# Tools\n")
			b.WriteString(strings.Join(lines, "\n"))
		}
		b.WriteString("\n\n" + answers)
	}
	if p.Instructions != "" {
		b.WriteString("\n\n" + p.Instructions)
	}
	if p.Environment != "" {
		b.WriteString("\n\n" + p.Environment)
	}
	return b.String()
}
