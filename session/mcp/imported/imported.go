// Package imported reads the MCP servers users configured for other
// agents, so a session offers them too: Claude Code's (~/.claude.json, its
// user scope at the top and its local scope per project, and a project's
// .mcp.json), Gemini CLI's (~/.gemini/settings.json and a project's
// .gemini/settings.json) and Codex's (~/.codex/config.toml and a project's
// .codex/config.toml, codex.go).
//
// The package only parses: it depends on nothing but acp, so the policy
// package (which binds a workspace's trust to its files, .mcp.json among
// them) can read a project's servers without the MCP SDK. The files of a
// project are untrusted input: their servers start only once the user
// trusted the workspace (package policy decides); the user's own files are
// the user's own.
//
// What is kept of an entry is what acpd has an equivalent for: the
// transport (command, args, env; url with a type, or Gemini's url for SSE
// and httpUrl for Streamable HTTP; headers), Gemini's cwd, timeout,
// includeTools and excludeTools. Servers those files switch off stay off:
// Claude Code's disabledMcpjsonServers (for .mcp.json servers), Gemini
// CLI's mcp.excluded and mcp.allowed.
package imported

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acpd/acpd/acp"
)

// Agent names a source of servers, as the configuration's mcp.import
// spells it.
type Agent string

// The agents whose configurations are read.
const (
	Claude Agent = "claude"
	Gemini Agent = "gemini"
	Codex  Agent = "codex"
)

// Agents are every source, in the order their servers are taken.
var Agents = []Agent{Claude, Gemini, Codex}

// Scope is where a server was configured.
type Scope string

// Scopes, as Claude Code names them (Gemini CLI has user and project).
const (
	// ScopeLocal: ~/.claude.json, projects[<workspace>].mcpServers — the
	// user's own, for one project.
	ScopeLocal Scope = "local"
	// ScopeProject: a file of the workspace (.mcp.json,
	// .gemini/settings.json); started only in a trusted workspace.
	ScopeProject Scope = "project"
	// ScopeUser: the user's own, for every project.
	ScopeUser Scope = "user"
)

// Server is one imported server: the ACP shape the session starts, and
// what acpd keeps of the rest.
type Server struct {
	acp.MCPServer
	Agent Agent
	Scope Scope
	// File is the file it came from.
	File string
	// Dir is the server's working directory (Gemini CLI's cwd) as
	// written; "" when the file names none.
	Dir string
	// IncludeTools, when not empty, are the only tools offered;
	// ExcludeTools are never offered (and win).
	IncludeTools, ExcludeTools []string
	// Timeout bounds each call (Gemini CLI's timeout); 0: none.
	Timeout time.Duration
	// Vars are the environment variables its fields name.
	Vars []string
}

// Origin is where the server came from, for acpd doctor and the trust
// question: "Claude Code, local scope, /home/u/.claude.json".
func (s Server) Origin() string {
	name := "Claude Code"
	switch s.Agent {
	case Gemini:
		name = "Gemini CLI"
	case Codex:
		name = "Codex"
	}
	return fmt.Sprintf("%s, %s scope, %s", name, s.Scope, s.File)
}

// Summary is the server's transport in one line: its command line or
// its URL.
func (s Server) Summary() string {
	if s.Type == "" {
		return strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
	}
	return s.Type + " " + s.URL
}

// Off is a configured server that stays off, and why.
type Off struct {
	Name, File, Why string
}

// Found is what files said.
type Found struct {
	Servers []Server
	Off     []Off
	// Problems are the parts of the files that could not be used.
	Problems []string
}

func (f *Found) add(o Found) {
	f.Servers = append(f.Servers, o.Servers...)
	f.Off = append(f.Off, o.Off...)
	f.Problems = append(f.Problems, o.Problems...)
}

// entry is one mcpServers entry as either agent writes it.
type entry struct {
	Type         string            `json:"type"`
	Command      string            `json:"command"`
	Args         []string          `json:"args"`
	Env          map[string]string `json:"env"`
	Cwd          string            `json:"cwd"`
	URL          string            `json:"url"`
	HTTPURL      string            `json:"httpUrl"`
	Headers      map[string]string `json:"headers"`
	Timeout      *float64          `json:"timeout"`
	IncludeTools []string          `json:"includeTools"`
	ExcludeTools []string          `json:"excludeTools"`
	Disabled     bool              `json:"disabled"`
}

// servers converts a file's mcpServers object, in name order.
func servers(raw map[string]json.RawMessage, agent Agent, scope Scope, file string) Found {
	return collect(slices.Sorted(maps.Keys(raw)), scope, file, func(name string) (Server, string, error) {
		var e entry
		if err := json.Unmarshal(raw[name], &e); err != nil {
			return Server{}, "", err
		}
		if e.Disabled {
			return Server{}, "disabled in its entry", nil
		}
		s, err := convert(name, e, agent)
		return s, "", err
	})
}

// collect reads a file's entries in the order of names: one converts an
// entry, or says why it stays off.
func collect(names []string, scope Scope, file string, one func(name string) (s Server, off string, err error)) Found {
	var f Found
	for _, name := range names {
		s, off, err := one(name)
		switch {
		case err != nil:
			f.Problems = append(f.Problems, fmt.Sprintf("%s: mcp server %q: %v", file, name, err))
		case off != "":
			f.Off = append(f.Off, Off{Name: name, File: file, Why: off})
		default:
			s.Scope, s.File = scope, file
			s.Vars = vars(s)
			f.Servers = append(f.Servers, s)
		}
	}
	return f
}

func convert(name string, e entry, agent Agent) (Server, error) {
	s := Server{MCPServer: acp.MCPServer{Name: name, Command: e.Command, Args: e.Args}, Agent: agent,
		Dir: e.Cwd, IncludeTools: e.IncludeTools, ExcludeTools: e.ExcludeTools}
	switch {
	case agent == Gemini && e.HTTPURL != "":
		s.Type, s.URL = "http", e.HTTPURL
	case agent == Gemini && e.URL != "":
		// Gemini CLI's url is the legacy SSE transport unless a type says
		// otherwise.
		s.Type, s.URL = "sse", e.URL
		if e.Type == "http" {
			s.Type = "http"
		}
	case e.Type == "" || e.Type == "stdio":
		if e.Command == "" && e.URL != "" {
			s.Type, s.URL = "http", e.URL
		}
	case e.Type == "http" || e.Type == "sse":
		s.Type, s.URL = e.Type, e.URL
	case e.Type == "streamable-http":
		s.Type, s.URL = "http", e.URL
	default:
		return s, fmt.Errorf("transport %q is not one acpd speaks (stdio, http, sse)", e.Type)
	}
	if s.Type == "" && s.Command == "" {
		return s, fmt.Errorf("neither a command nor a url")
	}
	if s.Type != "" && s.URL == "" {
		return s, fmt.Errorf("type %q needs a url", s.Type)
	}
	if s.Type != "" {
		s.Command, s.Args = "", nil
	}
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		s.Env = append(s.Env, acp.EnvVariable{Name: k, Value: e.Env[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
		s.Headers = append(s.Headers, acp.HTTPHeader{Name: k, Value: e.Headers[k]})
	}
	if e.Timeout != nil && *e.Timeout > 0 {
		s.Timeout = time.Duration(*e.Timeout * float64(time.Millisecond))
	}
	return s, nil
}

// ClaudeGlobal reads Claude Code's ~/.claude.json: the servers of the user
// scope (top-level mcpServers) and of the local scope for the workspace
// (projects[<workspace>].mcpServers), and the names of the workspace's
// .mcp.json servers the user switched off there
// (projects[<workspace>].disabledMcpjsonServers).
func ClaudeGlobal(data []byte, file, workspace string) (Found, []string, error) {
	var raw struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		Projects   map[string]struct {
			MCPServers             map[string]json.RawMessage `json:"mcpServers"`
			DisabledMcpjsonServers []string                   `json:"disabledMcpjsonServers"`
		} `json:"projects"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Found{}, nil, fmt.Errorf("%s: %v", file, err)
	}
	var f Found
	var disabled []string
	real := workspace
	if r, err := filepath.EvalSymlinks(workspace); err == nil {
		real = r
	}
	// The local scope first: it wins over the user scope in Claude Code.
	for key, p := range raw.Projects {
		if !samePath(key, workspace) && !samePath(key, real) {
			continue
		}
		f.add(servers(p.MCPServers, Claude, ScopeLocal, file))
		disabled = append(disabled, p.DisabledMcpjsonServers...)
	}
	f.add(servers(raw.MCPServers, Claude, ScopeUser, file))
	return f, disabled, nil
}

// samePath reports whether a projects key of ~/.claude.json names the
// workspace (keys are absolute paths, with forward slashes on Windows).
func samePath(key, workspace string) bool {
	if key == "" || workspace == "" {
		return false
	}
	return filepath.Clean(filepath.FromSlash(key)) == filepath.Clean(workspace)
}

// MCPJSON reads a project's .mcp.json (Claude Code's project scope).
func MCPJSON(data []byte, file string) (Found, error) {
	var raw struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Found{}, fmt.Errorf("%s: %v", file, err)
	}
	return servers(raw.MCPServers, Claude, ScopeProject, file), nil
}

// ClaudeDisabled is a Claude Code settings file's disabledMcpjsonServers:
// the .mcp.json servers it switches off.
func ClaudeDisabled(data []byte) []string {
	var raw struct {
		Disabled []string `json:"disabledMcpjsonServers"`
	}
	if json.Unmarshal(data, &raw) != nil {
		return nil
	}
	return raw.Disabled
}

// GeminiLists are a Gemini CLI settings file's mcp.allowed and
// mcp.excluded.
type GeminiLists struct {
	// Allowed, when set, are the only servers started; Excluded are never
	// started.
	Allowed  []string
	Excluded []string
	// HasAllowed tells an empty allowed list (none) from an absent one.
	HasAllowed bool
}

// GeminiSettings reads the mcpServers of a Gemini CLI settings file, and
// its mcp.allowed and mcp.excluded.
func GeminiSettings(data []byte, file string, scope Scope) (Found, GeminiLists, error) {
	var raw struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		MCP        struct {
			Allowed  *[]string `json:"allowed"`
			Excluded []string  `json:"excluded"`
		} `json:"mcp"`
		// The settings of Gemini CLI before 0.3 had these at the top.
		AllowMCPServers   *[]string `json:"allowMCPServers"`
		ExcludeMCPServers []string  `json:"excludeMCPServers"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Found{}, GeminiLists{}, fmt.Errorf("%s: %v", file, err)
	}
	var l GeminiLists
	for _, a := range []*[]string{raw.MCP.Allowed, raw.AllowMCPServers} {
		if a != nil {
			l.HasAllowed = true
			l.Allowed = append(l.Allowed, *a...)
		}
	}
	l.Excluded = append(raw.MCP.Excluded, raw.ExcludeMCPServers...)
	return servers(raw.MCPServers, Gemini, scope, file), l, nil
}

// ApplyGemini switches off the Gemini CLI servers the lists exclude, or
// that an allowed list leaves out. Each list only narrows: a server is
// started when no file excludes it and every file with an allowed list
// names it.
func ApplyGemini(f *Found, lists []GeminiLists) {
	keep := f.Servers[:0]
	for _, s := range f.Servers {
		why := ""
		for _, l := range lists {
			switch {
			case s.Agent != Gemini:
			case slices.Contains(l.Excluded, s.Name):
				why = "listed in mcp.excluded"
			case l.HasAllowed && !slices.Contains(l.Allowed, s.Name):
				why = "not listed in mcp.allowed"
			}
			if why != "" {
				break
			}
		}
		if why != "" {
			f.Off = append(f.Off, Off{Name: s.Name, File: s.File, Why: why})
			continue
		}
		keep = append(keep, s)
	}
	f.Servers = keep
}

// ApplyClaudeDisabled switches off the .mcp.json servers named in a
// disabledMcpjsonServers list.
func ApplyClaudeDisabled(f *Found, disabled []string) {
	keep := f.Servers[:0]
	for _, s := range f.Servers {
		if s.Agent == Claude && s.Scope == ScopeProject && slices.Contains(disabled, s.Name) {
			f.Off = append(f.Off, Off{Name: s.Name, File: s.File, Why: "listed in disabledMcpjsonServers"})
			continue
		}
		keep = append(keep, s)
	}
	f.Servers = keep
}
