// Package commands is acpd's slash-command registry: the built-in commands
// a session offers, the custom commands teams keep in files (.acpd/commands,
// .qwen/commands, .claude/commands and the user's global folder), how a
// prompt is recognised as a command, and how a file command's template is
// expanded with its arguments.
//
// A built-in's handler gets the session through the Host interface, so a
// capability built elsewhere (context compaction) plugs in by adding a
// method to Host and a handler here; the session package wires the rest.
package commands

import (
	"context"
	"slices"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/display"
)

// Source says where a command comes from.
type Source string

const (
	SourceBuiltin Source = "builtin"
	SourceProject Source = "project" // a workspace root's command folders
	SourceGlobal  Source = "global"  // $XDG_CONFIG_HOME/acpd/commands
	SourceMCP     Source = "mcp"     // an MCP server's prompt
)

// Result is what running a command produced: either a Message reported to
// the user (the turn ends without calling the model), or a Prompt sent to
// the model as the user's message, or Blocks sent as the user's message
// (an MCP prompt's messages, which may hold images and resources).
type Result struct {
	Message string
	Prompt  string
	Blocks  []acp.ContentBlock
	// Shown is set when the handler showed its answer itself (a side
	// question streams it): nothing more is shown.
	Shown bool
}

// Handler runs a built-in command for the session h with the raw argument
// text (everything after the name, trimmed). An error is answered to the
// prompt as a JSON-RPC error.
type Handler func(ctx context.Context, h Host, args string) (Result, error)

// Command is one slash command.
type Command struct {
	Name        string // without the leading slash; folders joined by ':'
	Description string
	Hint        string // argument hint; "" when the command takes none
	Source      Source

	// Run is set for built-ins.
	Run Handler
	// Beside is set for a built-in that runs beside the session's turn: a
	// prompt holding it neither waits for the running turn nor cancels it,
	// and its handler never touches the conversation (/btw).
	Beside bool
	// Template and Path are set for file commands: the prompt text, and the
	// file it came from.
	Template string
	Path     string
}

// Invoke runs c: a built-in's handler, or a file command's expansion.
func (c *Command) Invoke(ctx context.Context, h Host, args string) (Result, error) {
	if c.Run != nil {
		return c.Run(ctx, h, args)
	}
	return Result{Prompt: Expand(c.Template, args)}, nil
}

// Expand substitutes the arguments into a file command's template: every
// {{args}} and $ARGUMENTS becomes the raw argument text; a template with
// neither gets the arguments appended after a blank line (nothing is
// appended when there are none).
func Expand(template, args string) string {
	if strings.Contains(template, "{{args}}") || strings.Contains(template, "$ARGUMENTS") {
		r := strings.NewReplacer("{{args}}", args, "$ARGUMENTS", args)
		return r.Replace(template)
	}
	if args == "" {
		return template
	}
	return strings.TrimRight(template, "\n") + "\n\n" + args
}

// Parse reports whether text is a slash command and splits it into the
// command name and its arguments. As the reference does: text must start
// with '/', not "//" or "/*", and its first word must hold no '/' or '\'
// (so an absolute path is an ordinary prompt). Leading whitespace makes an
// ordinary prompt.
func Parse(text string) (name, args string, ok bool) {
	if !strings.HasPrefix(text, "/") || strings.HasPrefix(text, "//") || strings.HasPrefix(text, "/*") {
		return "", "", false
	}
	rest := text[1:]
	end := strings.IndexFunc(rest, isSpace)
	if end < 0 {
		end = len(rest)
	}
	name = rest[:end]
	if name == "" || strings.ContainsAny(name, `/\`) {
		return "", "", false
	}
	return name, strings.TrimSpace(rest[end:]), true
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// Set is a session's commands: built-ins first, then file commands, each
// name once.
type Set struct {
	cmds []*Command
	// Warnings are the problems found loading file commands (file:line: …).
	Warnings []string
	// Files are the command files found, for change detection.
	stamp string
}

// NewSet combines built-ins and file commands. Built-in names are
// reserved: a file command of the same name is left out with a warning
// (decision: the reference lets files shadow built-ins, which would let a
// repository's file replace /compress or /init unnoticed).
func NewSet(builtins []*Command, files *Loaded) *Set {
	s := &Set{}
	taken := map[string]bool{}
	for _, c := range builtins {
		taken[c.Name] = true
		s.cmds = append(s.cmds, c)
	}
	if files != nil {
		s.Warnings = append(s.Warnings, files.Warnings...)
		s.stamp = files.Stamp
		for _, c := range files.Commands {
			if taken[c.Name] {
				s.Warnings = append(s.Warnings, c.Path+": command /"+c.Name+" has the name of a built-in command; left out")
				continue
			}
			taken[c.Name] = true
			s.cmds = append(s.cmds, c)
		}
	}
	return s
}

// With returns a set of s's commands followed by extra (the MCP servers'
// prompts), each name once: a command of extra whose name s has is left
// out with a warning.
func (s *Set) With(extra []*Command) *Set {
	if len(extra) == 0 {
		return s
	}
	out := &Set{}
	if s != nil {
		out.cmds, out.Warnings, out.stamp = slices.Clone(s.cmds), slices.Clone(s.Warnings), s.stamp
	}
	for _, c := range extra {
		if _, taken := out.Lookup(c.Name); taken {
			out.Warnings = append(out.Warnings, "the "+string(c.Source)+" command /"+c.Name+" has the name of another command; left out")
			continue
		}
		out.cmds = append(out.cmds, c)
	}
	return out
}

// Stamp identifies the command files the set was loaded from (paths, sizes,
// modification times).
func (s *Set) Stamp() string { return s.stamp }

// Lookup returns the command called name.
func (s *Set) Lookup(name string) (*Command, bool) {
	if s == nil {
		return nil, false
	}
	i := slices.IndexFunc(s.cmds, func(c *Command) bool { return c.Name == name })
	if i < 0 {
		return nil, false
	}
	return s.cmds[i], true
}

// Commands returns every command, built-ins first.
func (s *Set) Commands() []*Command {
	if s == nil {
		return nil
	}
	return slices.Clone(s.cmds)
}

// Available is the set as an available_commands_update advertises it.
// Every command that takes arguments carries an input hint: file commands
// always do (their arguments are substituted or appended).
func (s *Set) Available() []acp.AvailableCommand {
	out := make([]acp.AvailableCommand, 0, len(s.Commands()))
	for _, c := range s.Commands() {
		// A file command's name, description and hint come from the
		// workspace: shown in the editor's command list.
		ac := acp.AvailableCommand{Name: display.Line(c.Name), Description: display.Line(c.Description)}
		if c.Hint != "" || c.Run == nil {
			ac.Input = &acp.AvailableCommandInput{Hint: display.Line(c.Hint)}
		}
		out = append(out, ac)
	}
	return out
}
