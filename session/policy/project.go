package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/acpd/acpd/session/hooks"
	"github.com/acpd/acpd/session/mcp/imported"
	"github.com/acpd/acpd/session/rules"
	"github.com/acpd/acpd/session/shellline"
)

// maxSettingsBytes bounds what is read of a settings file or a hook script:
// a workspace's files are untrusted input.
const maxSettingsBytes = 1 << 20

// ProjectFiles are the workspace's settings files acpd reads, relative to
// its root, with their scope.
var ProjectFiles = []struct {
	Rel   string
	Scope rules.Scope
}{
	{filepath.Join(".claude", "settings.json"), rules.ScopeProject},
	{filepath.Join(".claude", "settings.local.json"), rules.ScopeLocal},
	{filepath.Join(".gemini", "settings.json"), rules.ScopeProject},
	{filepath.Join(".acpd", "settings.toml"), rules.ScopeProject},
	{".mcp.json", rules.ScopeProject},
	{filepath.Join(".codex", "config.toml"), rules.ScopeProject},
}

// Project is what a workspace's settings files say.
type Project struct {
	Root string
	// Files are the settings files found.
	Files []string
	// Scripts are the files of the workspace the project's hooks run.
	Scripts []string
	// Digest is of the files' content and the scripts': what trust is
	// bound to.
	Digest string
	// Narrow are the deny and ask rules, which apply at once.
	Narrow []rules.Rule
	// Allow and Hooks apply once the workspace is trusted.
	Allow []rules.Rule
	Hooks hooks.Config
	// MCP are the MCP servers its files configure for other agents
	// (.mcp.json, .gemini/settings.json; package imported), those the
	// files themselves switch off removed: started once it is trusted.
	MCP imported.Project
	// Ignored are the settings acpd never takes from a project (a
	// default mode, an environment, extra folders, …), by file.
	Ignored []string
	// Problems are the parts of the files that could not be read.
	Problems []string
}

// Widens reports whether trusting the workspace would change anything:
// it has allow rules or hooks.
func (p *Project) Widens() bool {
	return len(p.Allow) > 0 || len(p.Hooks) > 0 || len(p.MCP.Servers) > 0
}

// Enables lists, for the trust question and acpd trust, what trusting the
// workspace turns on.
func (p *Project) Enables() []string {
	var out []string
	for _, r := range p.Allow {
		out = append(out, fmt.Sprintf("allow rule %s (%s)", r.Text, rel(p.Root, r.Source.File)))
	}
	for _, h := range p.Hooks {
		m := ""
		if h.Matcher != "" {
			m = " on " + h.Matcher
		}
		out = append(out, fmt.Sprintf("%s hook%s: %s (%s)", h.Event, m, h.Command, rel(p.Root, h.Source.File)))
	}
	for _, s := range p.MCP.Servers {
		x := fmt.Sprintf("MCP server %s: %s (%s)", s.Name, s.Summary(), rel(p.Root, s.File))
		if len(s.Vars) > 0 {
			x += ", given $" + strings.Join(s.Vars, ", $") + " from acpd's environment"
		}
		out = append(out, x)
	}
	return out
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// loadProject reads the settings files of the workspace at root, and the
// MCP servers they configure for the agents named.
func loadProject(root string, agents []imported.Agent) *Project {
	p := &Project{Root: root}
	h := sha256.New()
	for _, pf := range ProjectFiles {
		path := filepath.Join(root, pf.Rel)
		data, err := readBounded(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		// Every file found is part of the digest, read or not: a file
		// that cannot be read now may be readable once trusted.
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(pf.Rel), len(data))
		h.Write(data)
		p.Files = append(p.Files, path)
		if err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		src := rules.Source{Scope: pf.Scope, File: path, Anchor: root}
		if more, ok := projectMCP(&p.MCP, pf.Rel, path, data, agents); ok || more != nil {
			p.Problems = append(p.Problems, more...)
			if ok {
				continue
			}
		}
		var s settings
		switch {
		case strings.HasSuffix(path, ".toml"):
			s, err = acpdSettings(data)
		case strings.Contains(pf.Rel, ".gemini"):
			s, err = geminiSettings(data)
		default:
			s, err = claudeSettings(data)
		}
		if err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		for _, k := range s.ignored {
			p.Ignored = append(p.Ignored, fmt.Sprintf("%s: %s", rel(root, path), k))
		}
		rs, bad := s.rules(src)
		p.Problems = append(p.Problems, bad...)
		for _, r := range rs {
			if r.Kind == rules.Allow {
				p.Allow = append(p.Allow, r)
			} else {
				p.Narrow = append(p.Narrow, r)
			}
		}
		if s.hooks != nil {
			hs, errs := hooks.Decode(s.hooks, hooks.Source{File: path, Project: true})
			for _, e := range errs {
				p.Problems = append(p.Problems, fmt.Sprintf("%s: %v", path, e))
			}
			p.Hooks = append(p.Hooks, hs...)
		}
	}
	for _, s := range hookScripts(root, p.Hooks) {
		data, err := readBounded(s)
		if err != nil {
			continue
		}
		fmt.Fprintf(h, "script\x00%s\x00%d\x00", filepath.ToSlash(rel(root, s)), len(data))
		h.Write(data)
		p.Scripts = append(p.Scripts, s)
	}
	imported.ApplyClaudeDisabled(&p.MCP.Found, p.MCP.ClaudeDisabled)
	imported.ApplyGemini(&p.MCP.Found, p.MCP.GeminiLists)
	if len(p.Files) > 0 {
		p.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	return p
}

// readBounded reads a file of at most maxSettingsBytes; a regular file
// only (a FIFO or a device planted in the workspace must not hang acpd).
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSettingsBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSettingsBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxSettingsBytes)
	}
	return data, nil
}

// hookScripts are the regular files inside root that the hooks' commands
// name ($CLAUDE_PROJECT_DIR/.claude/hooks/check.sh, ./scripts/x.py): their
// content is part of what trust is bound to.
func hookScripts(root string, hs hooks.Config) []string {
	var out []string
	for _, h := range hs {
		cmd := h.Command
		for _, v := range []string{`"$CLAUDE_PROJECT_DIR"`, "${CLAUDE_PROJECT_DIR}", "$CLAUDE_PROJECT_DIR", `"$ACPD_PROJECT_DIR"`, "${ACPD_PROJECT_DIR}", "$ACPD_PROJECT_DIR"} {
			cmd = strings.ReplaceAll(cmd, v, root)
		}
		for _, seg := range shellline.Parse(cmd).Segments {
			for _, w := range seg.Words {
				if !strings.Contains(w, "/") && !strings.Contains(w, ".") {
					continue
				}
				p := w
				if !filepath.IsAbs(p) {
					p = filepath.Join(root, p)
				}
				p = filepath.Clean(p)
				if p != root && !strings.HasPrefix(p, root+string(filepath.Separator)) || slices.Contains(out, p) {
					continue
				}
				if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// settings is one file's rules and hooks, before they are parsed.
type settings struct {
	allow, ask, deny []string
	hooks            any
	ignored          []string
}

func (s settings) rules(src rules.Source) ([]rules.Rule, []string) {
	var out []rules.Rule
	var bad []string
	for _, kl := range []struct {
		k     rules.Kind
		texts []string
	}{{rules.Deny, s.deny}, {rules.Ask, s.ask}, {rules.Allow, s.allow}} {
		for _, t := range kl.texts {
			r, err := rules.Parse(t, kl.k, src)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", src.File, err))
				continue
			}
			out = append(out, r)
		}
	}
	return out, bad
}

// kindList is the settings' rules of a permissions key (allow, ask,
// deny); nil, and the key reported as ignored, for any other.
func (s *settings) kindList(key string) *[]string {
	switch key {
	case "allow":
		return &s.allow
	case "ask":
		return &s.ask
	case "deny":
		return &s.deny
	}
	s.ignored = append(s.ignored, "permissions."+key)
	return nil
}

// claudeSettings reads a Claude Code settings file: permissions.allow, ask
// and deny, and hooks. The keys that would widen what runs or change where
// requests go (defaultMode, additionalDirectories, env, apiKeyHelper, …)
// are reported as ignored: acpd never takes them from a file.
func claudeSettings(data []byte) (settings, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return settings{}, err
	}
	var s settings
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		switch k {
		case "permissions":
			var p map[string]json.RawMessage
			if err := json.Unmarshal(raw[k], &p); err != nil {
				return s, fmt.Errorf("permissions: %v", err)
			}
			for _, pk := range slices.Sorted(maps.Keys(p)) {
				dst := s.kindList(pk)
				if dst == nil {
					continue
				}
				if err := json.Unmarshal(p[pk], dst); err != nil {
					return s, fmt.Errorf("permissions.%s: must be an array of strings", pk)
				}
			}
		case "hooks":
			if err := json.Unmarshal(raw[k], &s.hooks); err != nil {
				return s, fmt.Errorf("hooks: %v", err)
			}
		case "$schema", "disabledMcpjsonServers":
			// The last one switches MCP servers off (projectMCP).
		default:
			s.ignored = append(s.ignored, k)
		}
	}
	return s, nil
}

// geminiSettings reads Gemini CLI's settings: tools.allowed (and the older
// allowedTools) as allow rules, tools.exclude (excludeTools) as deny
// rules, Gemini's tool names mapped to acpd's; tools.core and the rest are
// ignored.
func geminiSettings(data []byte) (settings, error) {
	var raw struct {
		Tools struct {
			Allowed []string `json:"allowed"`
			Exclude []string `json:"exclude"`
			Core    []string `json:"core"`
		} `json:"tools"`
		AllowedTools []string `json:"allowedTools"`
		ExcludeTools []string `json:"excludeTools"`
		CoreTools    []string `json:"coreTools"`
		Hooks        any      `json:"hooks"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return settings{}, err
	}
	var s settings
	for _, t := range append(raw.Tools.Allowed, raw.AllowedTools...) {
		s.allow = append(s.allow, geminiRule(t))
	}
	for _, t := range append(raw.Tools.Exclude, raw.ExcludeTools...) {
		s.deny = append(s.deny, geminiRule(t))
	}
	if len(raw.Tools.Core) > 0 || len(raw.CoreTools) > 0 {
		s.ignored = append(s.ignored, "tools.core")
	}
	if raw.Hooks != nil {
		s.ignored = append(s.ignored, "hooks (Gemini CLI's events and shape)")
	}
	return s, nil
}

// geminiRule maps a Gemini CLI tool entry to a rule: its tool names to
// acpd's, and run_shell_command(git) — commands that start with git — to
// the prefix rule run_shell_command(git:*).
func geminiRule(t string) string {
	t = strings.TrimSpace(t)
	name, spec, hasSpec := strings.Cut(t, "(")
	switch name {
	case "replace":
		name = rules.ToolEdit
	case "search_file_content":
		name = rules.ToolGrep
	case "read_many_files":
		name = rules.ToolRead
	case "ShellTool":
		name = rules.ToolShell
	}
	if !hasSpec {
		return name
	}
	spec = strings.TrimSuffix(spec, ")")
	if name == rules.ToolShell && !strings.HasSuffix(spec, "*") {
		spec += ":*"
	}
	return name + "(" + spec + ")"
}

// acpdSettings reads .acpd/settings.toml: [permissions] allow, ask, deny
// and [hooks] in acpd's configuration shape; any other table is ignored
// (a workspace does not choose acpd's model, sandbox or data folder).
func acpdSettings(data []byte) (settings, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return settings{}, err
	}
	var s settings
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		switch k {
		case "permissions":
			p, ok := raw[k].(map[string]any)
			if !ok {
				return s, errors.New("permissions must be a table")
			}
			for _, pk := range slices.Sorted(maps.Keys(p)) {
				dst := s.kindList(pk)
				if dst == nil {
					continue
				}
				list, ok := p[pk].([]any)
				if !ok {
					return s, fmt.Errorf("permissions.%s: must be an array of strings", pk)
				}
				for _, el := range list {
					str, ok := el.(string)
					if !ok {
						return s, fmt.Errorf("permissions.%s: must be an array of strings", pk)
					}
					*dst = append(*dst, str)
				}
			}
		case "hooks":
			s.hooks = raw[k]
		default:
			s.ignored = append(s.ignored, "["+k+"]")
		}
	}
	return s, nil
}

// projectMCP reads the MCP servers of one project file into m, for the
// agents named: all of .mcp.json and .codex/config.toml (ok: nothing else
// is read of them),
// Gemini CLI's mcpServers and mcp lists, Claude Code's
// disabledMcpjsonServers. It returns the file's problems.
func projectMCP(m *imported.Project, rel, path string, data []byte, agents []imported.Agent) (problems []string, ok bool) {
	has := func(a imported.Agent) bool { return slices.Contains(agents, a) }
	switch {
	case rel == ".mcp.json":
		if !has(imported.Claude) {
			return nil, true
		}
		f, err := imported.MCPJSON(data, path)
		if err != nil {
			return []string{err.Error()}, true
		}
		m.Servers = append(m.Servers, f.Servers...)
		m.Off = append(m.Off, f.Off...)
		return f.Problems, true
	case strings.HasPrefix(rel, ".codex"):
		if !has(imported.Codex) {
			return nil, true
		}
		f, err := imported.CodexConfig(data, path, imported.ScopeProject)
		if err != nil {
			return []string{err.Error()}, true
		}
		m.Servers = append(m.Servers, f.Servers...)
		m.Off = append(m.Off, f.Off...)
		return f.Problems, true
	case strings.HasPrefix(rel, ".gemini"):
		if !has(imported.Gemini) {
			return nil, false
		}
		f, lists, err := imported.GeminiSettings(data, path, imported.ScopeProject)
		if err != nil {
			return nil, false // reported by the settings' own reader
		}
		m.Servers = append(m.Servers, f.Servers...)
		m.Off = append(m.Off, f.Off...)
		m.GeminiLists = append(m.GeminiLists, lists)
		return f.Problems, false
	case strings.HasPrefix(rel, ".claude"):
		if has(imported.Claude) {
			m.ClaudeDisabled = append(m.ClaudeDisabled, imported.ClaudeDisabled(data)...)
		}
	}
	return nil, false
}
