// Package agents defines the subagents the `agent` tool starts: the
// built-in ones (general-purpose, Explore), the ones teams keep in
// Markdown files (.acpd/agents, .qwen/agents, .claude/agents in the
// workspace roots, and the user's global folder), and the tool itself —
// its parameters, the description that lists the agents, and the
// validation of a call. Running a subagent is the session's work: a
// subagent run is a conversation of its own, guarded by its own loop
// guard, and the session package holds the turn machinery it reuses.
package agents

import (
	"fmt"
	"slices"
	"strings"
)

// Source says where an agent comes from.
type Source string

const (
	SourceBuiltin Source = "builtin"
	SourceProject Source = "project" // a workspace root's agent folders
	SourceGlobal  Source = "global"  // the user's configuration folder
)

// Names of the built-in agents.
const (
	GeneralPurpose = "general-purpose"
	Explore        = "Explore"
)

// Agent is one subagent definition.
type Agent struct {
	Name        string
	Description string
	// Tools restricts the agent to exactly these tools (canonical names).
	// nil gives it every tool of the session a subagent may have
	// (SubagentTool); an empty, non-nil list gives it none.
	Tools []string
	// Model is one of the configured models; "" runs the agent on the
	// session's current model.
	Model string
	// Prompt is the agent's own system prompt; the session adds its
	// instruction files and environment block after it.
	Prompt string
	Source Source
	// Path is the file the agent was read from ("" for a built-in).
	Path string
}

// readOnlyTools are the tools that never change the workspace or run a
// command: an agent limited to them may run in plan mode.
var readOnlyTools = []string{"read_file", "list_directory", "glob", "grep_search", "web_fetch"}

// ReadOnly reports whether the agent can only look: its tools are an
// explicit subset of the read-only tools. Only such agents run in plan
// mode.
func (a *Agent) ReadOnly() bool {
	if a.Tools == nil {
		return false
	}
	for _, t := range a.Tools {
		if !slices.Contains(readOnlyTools, t) {
			return false
		}
	}
	return true
}

// SubagentTool reports whether a subagent may be given the tool named
// name. Decision: besides the agent tool itself (depth is 1), a subagent
// never gets todo_write, whose plan update would replace the session's
// plan in the editor (ACP's plan is the whole session's), nor
// exit_plan_mode, since only the user's conversation can leave plan mode.
func SubagentTool(name string) bool {
	switch name {
	case ToolName, legacyToolName, "todo_write", "exit_plan_mode", "ask_user_question":
		return false
	}
	return true
}

// The built-in agents' system prompts, in acpd's own words. The session
// appends its instruction files and environment block to each.
const (
	commonPrompt = `You are a subagent of acpd, a coding agent working in the user's workspace. The main agent handed you one self-contained task; the user message below is all you know of it. You cannot see the main conversation and you cannot ask questions: if something is unclear, make the most reasonable assumption, follow it, and say so in your answer.

# Your answer
The main agent sees only your final message, never your tool calls or their output. End with one complete, self-contained answer:
- what you found or did, with absolute file paths and line numbers where they matter;
- short quotes of the lines that matter, not whole files;
- what you could not find or finish, and why.
Be concise: your answer goes into the main agent's context.`

	generalPurposePrompt = commonPrompt + `

# How to work
- Search and read before you change anything; never guess what a file holds.
- Make small edits in the project's own style, and check them with the project's own build or tests when you can.
- When a tool fails, read the error and change your approach instead of repeating the call.
- Stay within the task you were given.`

	explorePrompt = commonPrompt + `

# How to work
You are read-only: you can read files, list folders, search file names and contents, and fetch web pages, but you cannot change anything or run commands.
- Start broad (glob for names, grep_search for identifiers and strings), then read the few files that answer the question.
- Prefer narrow patterns and the parts of large files you need.
- Stop as soon as you can answer: the main agent wants the answer, not a tour.`
)

// Builtins returns the built-in agents.
func Builtins() []*Agent {
	return []*Agent{
		{
			Name: GeneralPurpose,
			Description: "Researches complex questions, searches code and carries out multi-step tasks, with " +
				"the session's tools.",
			Prompt: generalPurposePrompt,
			Source: SourceBuiltin,
		},
		{
			Name: Explore,
			Description: "Read-only: finds files and code and answers how and where things are done in the " +
				"codebase; cannot change files or run commands. Allowed in plan mode.",
			Tools:  slices.Clone(readOnlyTools),
			Prompt: explorePrompt,
			Source: SourceBuiltin,
		},
	}
}

// Limits on what the agent files can put in front of the model: the tool
// description lists every agent, and it is sent with every request.
const (
	// maxAgents bounds the agents a session offers, built-ins included.
	maxAgents = 50
	// maxListedDescription bounds one agent's description in the tool's
	// description (the whole description stays in /agents).
	maxListedDescription = 600
)

// Set is a session's agents: built-ins first, then file agents by name.
type Set struct {
	agents []*Agent
	// Warnings name file:line for every agent file or setting left out.
	Warnings []string
	stamp    string
	desc     string
}

// Check tells NewSet what the session offers: the tools by name and the
// configured models. Nil functions accept everything.
type Check struct {
	Tool  func(name string) bool
	Model func(name string) bool
}

// NewSet combines the built-ins and the file agents, resolving each file
// agent's tools and model against the session (check). Built-in names are
// reserved, in any case (decision: a repository's Explore.md could
// otherwise give "Explore" write tools while the model trusts it to be
// read-only); unknown tools and models are warnings.
func NewSet(builtins []*Agent, files *Loaded, check Check) *Set {
	s := &Set{}
	taken := map[string]bool{}
	for _, a := range builtins {
		taken[strings.ToLower(a.Name)] = true
		if a.Tools != nil && check.Tool != nil {
			// A built-in's tools the session does not offer (excluded by
			// the configuration) are left out quietly.
			b := *a
			b.Tools = slices.DeleteFunc(slices.Clone(a.Tools), func(n string) bool { return !check.Tool(n) })
			a = &b
		}
		s.agents = append(s.agents, a)
	}
	if files != nil {
		s.Warnings = append(s.Warnings, files.Warnings...)
		s.stamp = files.Stamp
		for _, f := range files.Agents {
			a := f.Agent
			if taken[strings.ToLower(a.Name)] {
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s:%d: agent %q has the name of a built-in agent; left out", a.Path, f.nameLine, a.Name))
				continue
			}
			if len(s.agents) >= maxAgents {
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s:1: more than %d agents; %q and the agents after it are left out", a.Path, maxAgents, a.Name))
				break
			}
			s.resolve(&a, f, check)
			taken[strings.ToLower(a.Name)] = true
			s.agents = append(s.agents, &a)
		}
	}
	s.desc = toolDescription(s.agents)
	return s
}

// resolve checks a file agent's tools and model against the session.
func (s *Set) resolve(a *Agent, f fileAgent, check Check) {
	if a.Tools != nil {
		tools := []string{}
		for i, t := range a.Tools {
			switch {
			case !SubagentTool(t):
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s:%d: tool %q is not available to subagents; left out of the agent's tools", a.Path, f.toolLines[i], f.rawTools[i]))
			case check.Tool != nil && !check.Tool(t):
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s:%d: unknown tool %q; left out of the agent's tools", a.Path, f.toolLines[i], f.rawTools[i]))
			case !slices.Contains(tools, t):
				tools = append(tools, t)
			}
		}
		a.Tools = tools
	}
	if a.Model != "" && check.Model != nil && !check.Model(a.Model) {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s:%d: model %q is not one of the configured models; the agent runs on the session's model", a.Path, f.modelLine, a.Model))
		a.Model = ""
	}
}

// Stamp identifies the agent files the set was loaded from.
func (s *Set) Stamp() string {
	if s == nil {
		return ""
	}
	return s.stamp
}

// Lookup returns the agent called name (exact match).
func (s *Set) Lookup(name string) (*Agent, bool) {
	if s == nil {
		return nil, false
	}
	i := slices.IndexFunc(s.agents, func(a *Agent) bool { return a.Name == name })
	if i < 0 {
		return nil, false
	}
	return s.agents[i], true
}

// Agents returns every agent, built-ins first.
func (s *Set) Agents() []*Agent {
	if s == nil {
		return nil
	}
	return slices.Clone(s.agents)
}

// names lists the agents' names, for error messages.
func (s *Set) names() string {
	var out []string
	for _, a := range s.agents {
		out = append(out, a.Name)
	}
	return strings.Join(out, ", ")
}
