// Package rules is acpd's permission rule engine: allow, ask and deny
// rules written in Claude Code's syntax (`Bash(npm run test:*)`,
// `Edit(src/**)`, `Read(./.env)`, `WebFetch(domain:example.com)`,
// `mcp__server__tool`), with Claude Code's tool names mapped to acpd's and
// acpd's own names accepted too.
//
// A rule is parsed once (Parse) and compiled for a workspace (NewSet),
// which anchors its path patterns. Set.Check judges one call: any deny
// rule that matches refuses it, then any ask rule asks, then the allow
// rules may let it run without a question; a call no rule speaks about is
// left to the approval mode. Rules of every scope merge: a deny anywhere
// beats an allow anywhere, as in Claude Code.
//
// What a rule matches is read with the shell parser acpd already has
// (package shellline), never with string prefixes: a shell rule allows a
// command line only when every simple command of it is allowed, and never
// a line that hides part of what it runs (a command or process
// substitution, sh -c or eval with an argument that is not plain text, a
// redirection into a file no Edit rule allows). A deny or ask rule looks
// at every simple command, through wrappers (sudo, env, xargs, timeout,
// find -exec) and into the plain text of sh -c and eval. Path rules match
// the real path a tool touches, symlinks resolved and `..` collapsed.
package rules

import (
	"errors"
	"fmt"
	"strings"
)

// Kind is what a rule says about the calls it matches.
type Kind uint8

const (
	Allow Kind = iota + 1 // run without asking
	Ask                   // always ask, whatever else allows
	Deny                  // refuse without asking
)

// String is the kind as the [permissions] keys spell it.
func (k Kind) String() string {
	switch k {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return "none"
}

// HasSpecifier reports a rule about a call's content (Bash(go test:*)),
// not a whole tool (Bash, Bash(*)).
func (r *Rule) HasSpecifier() bool { return r.hasSpec }

// ParseKind reads a kind as String spells it.
func ParseKind(s string) (Kind, bool) {
	for k := Allow; k <= Deny; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// Scope says which kind of file a rule came from.
type Scope string

const (
	// ScopeConfig: acpd's TOML configuration (the user file, --config).
	ScopeConfig Scope = "config"
	// ScopeWorkspace: "always allow in project" answers, kept for one
	// workspace in acpd's state folder.
	ScopeWorkspace Scope = "workspace"
	// ScopeUser: "always allow for user" answers, kept in acpd's state
	// folder for every workspace.
	ScopeUser Scope = "user"
	// ScopeProject: the workspace's shared settings (.claude/settings.json,
	// .gemini/settings.json, .acpd/settings.toml).
	ScopeProject Scope = "project"
	// ScopeLocal: the workspace's personal settings
	// (.claude/settings.local.json).
	ScopeLocal Scope = "local"
	// ScopeClaudeUser: the user's ~/.claude/settings.json (opt-in).
	ScopeClaudeUser Scope = "claude-user"
)

// Source is where a rule was written.
type Source struct {
	Scope Scope
	// File is the file's path ("" for rules given otherwise).
	File string
	// Anchor is the folder a path pattern's leading "/" stands for: the
	// project's root for project files, ~/.claude for Claude's user file;
	// "" is the workspace's root.
	Anchor string
}

// String names the source for the user: the file, else the scope.
func (s Source) String() string {
	if s.File != "" {
		return s.File
	}
	return string(s.Scope)
}

// Rule is one parsed rule.
type Rule struct {
	// Text is the rule as written, quoted back to the user and the model.
	Text   string
	Kind   Kind
	Source Source
	// Warning says why the rule may not do what it seems to (it names no
	// tool acpd has, a `*` before the end of a command), for the log and
	// acpd permissions.
	Warning string

	target target
	// spec is the text between the parentheses; hasSpec tells Tool() from
	// Tool().
	spec    string
	hasSpec bool
	shell   *shellPattern
	domain  string
	agent   string
}

// Parse reads one rule: `Tool` or `Tool(specifier)`, Tool a Claude Code
// name, one of acpd's tool names, an MCP name (`mcp__server`,
// `mcp__server__tool`, `mcp__server__*`) or, for deny and ask, `*`.
func Parse(text string, kind Kind, src Source) (Rule, error) {
	r := Rule{Text: text, Kind: kind, Source: src}
	s := strings.TrimSpace(text)
	if s == "" {
		return r, errors.New("empty rule")
	}
	name := s
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return r, fmt.Errorf("rule %q: a specifier ends with ')'", text)
		}
		name, r.spec, r.hasSpec = strings.TrimSpace(s[:i]), s[i+1:len(s)-1], true
		if strings.TrimSpace(r.spec) == "" {
			return r, fmt.Errorf("rule %q: empty specifier; write %s alone for every call of the tool", text, name)
		}
	}
	t, ok := lookupTarget(name)
	if !ok {
		return r, fmt.Errorf("rule %q: %q is not a tool name", text, name)
	}
	r.target = t
	if t.glob && kind == Allow && !t.mcpGlobAllowed() {
		return r, fmt.Errorf("rule %q: an allow rule may use a wildcard in a tool name only after mcp__<server>__", text)
	}
	if t.unknown {
		r.Warning = fmt.Sprintf("%q names no tool acpd has; the rule matches only a tool of that exact name", name)
	}
	if !r.hasSpec || r.spec == "*" {
		// Tool(*) is the whole tool, as Tool alone.
		r.hasSpec = false
		return r, nil
	}
	switch t.spec {
	case specShell:
		p, warn := compileShell(r.spec)
		r.shell = p
		if warn != "" && kind == Allow {
			r.Warning = warn
		}
	case specPath:
		if err := checkPath(r.spec); err != nil {
			return r, fmt.Errorf("rule %q: %v", text, err)
		}
	case specDomain:
		d, ok := strings.CutPrefix(r.spec, "domain:")
		d = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
		if !ok || d == "" {
			return r, fmt.Errorf("rule %q: a WebFetch rule names a host: WebFetch(domain:example.com)", text)
		}
		r.domain = d
	case specAgent:
		r.agent = r.spec
	default:
		return r, fmt.Errorf("rule %q: %s takes no specifier", text, name)
	}
	return r, nil
}

// String is the rule as written.
func (r *Rule) String() string { return r.Text }

// Describe is the rule quoted with its kind and source, as the decision
// trail and the model read it: `the deny rule "Bash(curl:*)" of
// /home/u/.config/acpd/config.toml`.
func (r *Rule) Describe() string {
	return fmt.Sprintf("the %s rule %q of %s", r.Kind, r.Text, r.Source)
}

// Tools are the acpd tool names the rule is about (nil: any tool, or
// MCP tools named by pattern).
func (r *Rule) Tools() []string { return r.target.tools }
