package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/hooks"
	"github.com/acpd/acpd/session/rules"
	"github.com/acpd/acpd/session/shellline"
	"github.com/acpd/acpd/session/toolcall"
)

// A foreign call is another agent's tool call, as `acpd guard` sees it in
// the agent's session/request_permission: an ACP tool kind, a title, the
// locations and, when the agent sends it, the raw input. The guard cannot
// know the agent's tools, so it judges what the request shows: an
// execute call with a command line is a shell call, an edit with a path an
// edit, and so on. A call whose content the request does not show is
// judged by the rules that name a tool alone (`Bash`, `mcp__github`);
// a rule about its content (`Bash(go test:*)`) cannot match it, so it
// falls back to the editor's question.

// Foreign is another agent's tool call as its permission request shows it.
type Foreign struct {
	// Kind is the ACP tool kind (execute, edit, read, fetch, …).
	Kind acp.ToolKind
	// Title is the call's title.
	Title string
	// RawInput is the call's raw input (nil when the agent sent none).
	RawInput json.RawMessage
	// Locations are the paths the call names.
	Locations []string
	// Cwd is the session's folder, which relative paths are taken from.
	Cwd string
}

// ForeignVerdict is what the policy says about a foreign call.
type ForeignVerdict struct {
	Verdict toolcall.Verdict
	// By is "rules" or "hooks"; Reason quotes the rule or names the hook.
	By, Reason string
}

// foreignCall is the rules' view of f; ok false when the request names
// nothing a rule can judge.
func (s *Session) foreignCall(f Foreign) (*rules.Call, bool) {
	in := map[string]any{}
	if len(f.RawInput) > 0 {
		_ = json.Unmarshal(f.RawInput, &in)
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := in[k].(string); ok && v != "" {
				return v
			}
		}
		return ""
	}
	if name := mcpName(f.Title); name != "" {
		return &rules.Call{Tool: name}, true
	}
	switch f.Kind {
	case acp.KindExecute:
		c := &rules.Call{Tool: rules.ToolShell, Dir: realDir(f.Cwd)}
		c.Command = foreignCommand(in["command"])
		if c.Command == "" {
			c.Command = str("cmd", "script")
		}
		if d := str("cwd", "workdir"); d != "" {
			c.Dir = realDir(s.abs(f.Cwd, d))
		}
		return c, true
	case acp.KindEdit, acp.KindDelete, acp.KindMove:
		return &rules.Call{Tool: rules.ToolWrite, Paths: s.foreignPaths(f, str("file_path", "path", "filePath", "abs_path", "notebook_path"))}, true
	case acp.KindRead, acp.KindSearch:
		return &rules.Call{Tool: rules.ToolRead, Paths: s.foreignPaths(f, str("file_path", "path", "filePath", "abs_path"))}, true
	case acp.KindFetch:
		host := ""
		if u, err := url.Parse(str("url", "uri")); err == nil {
			host = u.Hostname()
		}
		return &rules.Call{Tool: rules.ToolFetch, Host: host}, true
	}
	return nil, false
}

// mcpName is an MCP tool's rule name when the title is one
// (mcp__server__tool, as Claude Code's adapter titles them).
func mcpName(title string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(title), " ")
	if rest, ok := strings.CutPrefix(first, "mcp__"); ok && strings.Contains(rest, "__") {
		return first
	}
	return ""
}

// foreignCommand is a shell command line from an execute call's input:
// the string itself, or an argv (Codex sends ["bash", "-lc", "…"]) whose
// shell script is taken, or whose words are quoted back into a line.
func foreignCommand(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		words := make([]string, 0, len(c))
		for _, w := range c {
			s, ok := w.(string)
			if !ok {
				return ""
			}
			words = append(words, s)
		}
		if len(words) == 3 && isShell(words[0]) && (words[1] == "-c" || words[1] == "-lc") {
			return words[2]
		}
		return quoteWords(words)
	}
	return ""
}

// quoteWords is an argv as a shell line that parses back to the same
// words: every word with a character the shell reads is single-quoted.
func quoteWords(words []string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			b.WriteString(w)
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(w, "'", `'\''`) + "'")
	}
	return b.String()
}

func isShell(name string) bool {
	switch filepath.Base(name) {
	case "sh", "bash", "zsh", "dash":
		return true
	}
	return false
}

func (s *Session) abs(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	if cwd == "" {
		cwd = s.ws.Root
	}
	return filepath.Join(cwd, p)
}

// foreignPaths are the real paths a foreign call names: its input's path
// and its locations. None when it names none, which no path rule matches.
func (s *Session) foreignPaths(f Foreign, p string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range append([]string{p}, f.Locations...) {
		if x == "" {
			continue
		}
		r := realPath(s.abs(f.Cwd, x))
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// realPath is p with the symlinks of its longest existing prefix resolved
// (a file about to be written does not exist yet).
func realPath(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for dir := p; ; {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// CheckForeign judges a foreign call by the rules: deny and ask rules
// that can see it, allow rules only when they cover what it shows. A
// write into a protected folder of the workspace is always asked.
func (s *Session) CheckForeign(f Foreign) ForeignVerdict {
	c, ok := s.foreignCall(f)
	if !ok {
		return ForeignVerdict{}
	}
	if c.Tool == rules.ToolWrite {
		for _, p := range c.Paths {
			if rel, ok := s.protectedPath(p); ok {
				return ForeignVerdict{Verdict: toolcall.Ask, By: RulesName,
					Reason: fmt.Sprintf("it writes %s, which decides what agents may do here: asked every time", rel)}
			}
		}
	}
	_, set := s.current()
	if set.Len() == 0 {
		return ForeignVerdict{}
	}
	known := true
	switch {
	case c.Tool == rules.ToolShell && c.Command == "":
		known = false
	case (c.Tool == rules.ToolWrite || c.Tool == rules.ToolRead) && len(c.Paths) == 0:
		known = false
	case c.Tool == rules.ToolFetch && c.Host == "":
		known = false
	}
	res := set.Check(c)
	if !known && res.Kind == rules.Allow && !toolLevel(res) {
		// An allow about content the request does not show: ask.
		return ForeignVerdict{}
	}
	switch res.Kind {
	case rules.Deny:
		return ForeignVerdict{Verdict: toolcall.Deny, By: RulesName, Reason: "denied by " + res.Describe()}
	case rules.Ask:
		return ForeignVerdict{Verdict: toolcall.Ask, By: RulesName, Reason: "asked by " + res.Describe()}
	case rules.Allow:
		return ForeignVerdict{Verdict: toolcall.Allow, By: RulesName, Reason: "allowed by " + res.Describe()}
	}
	return ForeignVerdict{}
}

// toolLevel reports a result whose rules name whole tools only.
func toolLevel(res rules.Result) bool {
	for _, r := range res.Rules {
		if r.HasSpecifier() {
			return false
		}
	}
	return true
}

// protectedPath reports a path in one of the workspace's protected
// folders, and its path there.
func (s *Session) protectedPath(p string) (string, bool) {
	rel, ok := s.inRoot(p)
	if !ok {
		return "", false
	}
	for _, d := range protectedDirs {
		if rel == d || strings.HasPrefix(rel, d+string(filepath.Separator)) {
			return rel, true
		}
	}
	return "", false
}

// HasHooks reports whether an event has hooks whose matchers accept one
// of the names.
func (s *Session) HasHooks(event string, match ...string) bool {
	return len(s.ws.Snapshot().Hooks.Of(event, match...)) > 0
}

// ForeignToolName is the tool name hooks are told of a foreign call:
// Claude Code's name for what the request shows (Bash, Edit, Read,
// WebFetch, an MCP tool's), else its title.
func (s *Session) ForeignToolName(f Foreign) string {
	if c, ok := s.foreignCall(f); ok {
		return rules.ClaudeName(c.Tool)
	}
	return f.Title
}

// PreToolUseForeign runs the PreToolUse hooks on a foreign call: a hook
// that blocks or denies refuses it, one that allows or asks says so.
// updatedInput is not applied: the agent owns its call's input.
func (s *Session) PreToolUseForeign(ctx context.Context, h Host, f Foreign) ForeignVerdict {
	name := s.ForeignToolName(f)
	v := s.Fire(ctx, h, Event{Name: hooks.PreToolUse, Match: []string{name},
		Input: hooks.Input{ToolName: name, ToolInput: json.RawMessage(orNull(f.RawInput))}})
	who := "a PreToolUse hook"
	if v.By != nil {
		who = fmt.Sprintf("the PreToolUse hook %q", v.By.Command)
	}
	switch {
	case v.Stop, v.Block, v.Permission == "deny":
		return ForeignVerdict{Verdict: toolcall.Deny, By: HookName, Reason: reasonOf("denied by "+who, v.Reason)}
	case v.Permission == "ask":
		return ForeignVerdict{Verdict: toolcall.Ask, By: HookName, Reason: reasonOf("asked by "+who, v.Reason)}
	case v.Permission == "allow":
		return ForeignVerdict{Verdict: toolcall.Allow, By: HookName, Reason: reasonOf("allowed by "+who, v.Reason)}
	}
	return ForeignVerdict{}
}

// PostToolUseForeign runs the PostToolUse hooks on a foreign call that
// completed (a formatter, a check). What they answer cannot reach the
// other agent's model; it is shown and recorded like every hook's run.
func (s *Session) PostToolUseForeign(ctx context.Context, h Host, f Foreign, response json.RawMessage) {
	name := s.ForeignToolName(f)
	s.Fire(ctx, h, Event{Name: hooks.PostToolUse, Match: []string{name},
		Input: hooks.Input{ToolName: name, ToolInput: json.RawMessage(orNull(f.RawInput)), ToolResponse: json.RawMessage(orNull(response))}})
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// GrantForeign keeps the editor's "always allow" answer to a foreign
// call as rules in the workspace's rules file, as for acpd's own calls:
// the command roots of a shell line, an MCP tool, a fetch's host. Other
// calls keep no rule (the agent keeps its own "always"). It returns the
// rules written.
func (s *Session) GrantForeign(f Foreign) ([]string, error) {
	file := s.ws.RulesFile()
	c, ok := s.foreignCall(f)
	if file == "" || !ok {
		return nil, nil
	}
	var texts []string
	switch {
	case c.Tool == rules.ToolShell && c.Command != "":
		roots, ok := shellline.Parse(c.Command).AlwaysRoots()
		if !ok {
			return nil, nil
		}
		for _, root := range roots {
			t := rules.CommandRule(root)
			if t == "" {
				return nil, nil
			}
			texts = append(texts, t)
		}
	case strings.HasPrefix(c.Tool, "mcp__"):
		texts = []string{c.Tool}
	case c.Tool == rules.ToolFetch && c.Host != "":
		texts = []string{"WebFetch(domain:" + c.Host + ")"}
	}
	if len(texts) == 0 || len(texts) > maxAlwaysRules {
		return nil, nil
	}
	added, err := AddRules(file, s.ws.Root, rules.Allow, texts)
	if err != nil {
		return nil, err
	}
	s.ws.Invalidate()
	return added, nil
}
