package policy

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/rules"
	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/tools"
)

// RulesName is the rules decider's name in a call's trail.
const RulesName = "rules"

// OptAlwaysPath is the option id of "Always allow edits in DIR": an edit
// rule for the folder written to the workspace's rules file.
const OptAlwaysPath = "proceed_always_path"

// Rules is the permission rules as a decider of the tool-call lifecycle:
// it refuses what a deny rule matches (without a question, the rule quoted
// to the model), asks what an ask rule matches, allows what allow rules
// cover; and as a granter it writes an "always allow" answer as a rule.
type Rules struct{ S *Session }

var (
	_ toolcall.Decider = Rules{}
	_ toolcall.Granter = Rules{}
	_ toolcall.Offerer = Rules{}
)

func (Rules) Name() string { return RulesName }

// Decide judges one call.
func (r Rules) Decide(_ context.Context, c *toolcall.Call) toolcall.Decision {
	if c.Run == nil {
		return toolcall.Decision{}
	}
	if what, ok := r.S.protected(c); ok {
		return toolcall.Decision{Verdict: toolcall.Ask, NoAlways: true,
			Reason: fmt.Sprintf("it writes %s, which decides what agents may do here: asked every time, whatever allows it", what)}
	}
	_, set := r.S.current()
	if set.Len() == 0 {
		return toolcall.Decision{}
	}
	res := set.Check(callOf(c))
	switch res.Kind {
	case rules.Deny:
		return toolcall.Decision{Verdict: toolcall.Deny, Reason: DenyMessage(c.Name, res)}
	case rules.Ask:
		return toolcall.Decision{Verdict: toolcall.Ask, NoAlways: true, Reason: "asked by " + res.Describe()}
	case rules.Allow:
		if c.Confirm.Kind == tools.ConfirmNone {
			return toolcall.Decision{} // it would not ask anyway: no trail to keep
		}
		return toolcall.Decision{Verdict: toolcall.Allow, Reason: "allowed by " + res.Describe()}
	}
	return toolcall.Decision{}
}

// DenyMessage is what the model reads for a call a deny rule refused: the
// rule quoted, and what to do instead.
func DenyMessage(tool string, res rules.Result) string {
	return fmt.Sprintf("Permission denied: %s refuses this %s call. The user set this rule; do not try to get around it "+
		"(another command or tool doing the same is refused too). Tell the user if the task needs it.", res.Describe(), tool)
}

// callOf is a tool call as the rules see it.
func callOf(c *toolcall.Call) *rules.Call {
	rc := &rules.Call{Tool: c.Name, Paths: c.Confirm.Paths}
	switch c.Confirm.Kind {
	case tools.ConfirmExec:
		rc.Line, rc.Paths = c.Confirm.Command, nil
		if len(c.Confirm.Paths) > 0 {
			rc.Dir = c.Confirm.Paths[0]
		}
		if m, ok := c.Args.(map[string]any); ok {
			rc.Command, _ = m["command"].(string)
		}
	case tools.ConfirmFetch, tools.ConfirmPrivateNetwork:
		rc.Host = c.Confirm.Label
	}
	if mt, ok := c.Tool.(interface{ RuleNames() (string, string) }); ok {
		rc.Server, rc.MCPTool = mt.RuleNames()
	}
	if c.Name == rules.ToolAgent {
		if m, ok := c.Args.(map[string]any); ok {
			rc.Agent, _ = m["subagent_type"].(string)
		}
	}
	return rc
}

// protectedDirs are the workspace folders whose files decide what agents
// may do or run there: acpd's, Claude Code's, Gemini CLI's, Codex's,
// VS Code's settings, and git's hooks and configuration (core.fsmonitor
// names a program). A write there is asked every time, in every mode,
// and no rule or "always" can pre-approve it.
var protectedDirs = []string{".acpd", ".claude", ".gemini", ".codex", ".vscode", filepath.Join(".git", "hooks"), filepath.Join(".git", "config")}

// protected reports a call that writes a protected file of the workspace,
// and which.
func (s *Session) protected(c *toolcall.Call) (string, bool) {
	var paths []string
	switch c.Confirm.Kind {
	case tools.ConfirmEdit:
		paths = c.Confirm.Paths
	case tools.ConfirmExec:
		if c.Confirm.Command == nil {
			return "", false
		}
		dir := ""
		if len(c.Confirm.Paths) > 0 {
			dir = c.Confirm.Paths[0]
		}
		for _, seg := range c.Confirm.Command.Segments {
			for _, t := range seg.Targets {
				if !filepath.IsAbs(t) {
					t = filepath.Join(dir, t)
				}
				paths = append(paths, filepath.Clean(t))
			}
		}
	default:
		return "", false
	}
	for _, p := range paths {
		rel, ok := s.inRoot(p)
		if !ok {
			continue
		}
		for _, d := range protectedDirs {
			if rel == d || strings.HasPrefix(rel, d+string(filepath.Separator)) {
				return rel, true
			}
		}
	}
	return "", false
}

// Offer adds "Always allow edits in DIR" to an edit's question when the
// answer can be kept (a state folder) and the file is in the workspace.
func (r Rules) Offer(c *toolcall.Call, opts []acp.PermissionOption) []acp.PermissionOption {
	if c.Confirm.Kind != tools.ConfirmEdit || r.S.ws.RulesFile() == "" {
		return opts
	}
	pat, label, ok := r.S.editGlob(c)
	if !ok || pat == "" {
		return opts
	}
	o := acp.PermissionOption{OptionID: OptAlwaysPath, Name: "Always allow edits " + display.Line(label), Kind: acp.AllowAlways}
	out := make([]acp.PermissionOption, 0, len(opts)+1)
	for i, op := range opts {
		out = append(out, op)
		if i == 0 {
			out = append(out, o)
		}
	}
	return out
}

// editGlob is the rule "always allow edits" writes for an edit: its
// folder in the workspace (`Edit(/src/**)`), or the file itself when it is
// at the root.
func (s *Session) editGlob(c *toolcall.Call) (pattern, label string, ok bool) {
	if len(c.Confirm.Paths) != 1 {
		return "", "", false
	}
	rel, ok := s.inRoot(c.Confirm.Paths[0])
	if !ok {
		return "", "", false
	}
	rel = filepath.ToSlash(rel)
	if dir := pathDir(rel); dir != "" {
		return "Edit(/" + escapeGlob(dir) + "/**)", "in " + dir + "/", true
	}
	return "Edit(/" + escapeGlob(rel) + ")", "of " + rel, true
}

func pathDir(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

// escapeGlob escapes what a path pattern would read as a wildcard.
func escapeGlob(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[]{}\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Grant writes an "always allow" answer as a rule: the command roots the
// question showed (`Bash(npm test:*)`, one per command of the line), the
// MCP tool, the fetch's host, the edit's folder; to the workspace's rules
// file, or the user's for "Always Allow for user".
func (r Rules) Grant(_ context.Context, c *toolcall.Call, a toolcall.Answer) {
	if a.Option.Kind != acp.AllowAlways || r.S.ws.RulesFile() == "" {
		return
	}
	file := r.S.ws.RulesFile()
	if a.Option.OptionID == toolcall.OptProceedAlwaysUser {
		file = r.S.ws.UserRulesFile()
	}
	var texts []string
	switch c.Confirm.Kind {
	case tools.ConfirmExec:
		if c.Confirm.Command == nil {
			return
		}
		roots, ok := c.Confirm.Command.AlwaysRoots()
		if !ok {
			return
		}
		for _, root := range roots {
			text := rules.CommandRule(root)
			if text == "" {
				return // a root no rule can spell: the session's grant only
			}
			texts = append(texts, text)
		}
	case tools.ConfirmMCP:
		texts = []string{c.Name}
		if mt, ok := c.Tool.(interface{ RuleNames() (string, string) }); ok {
			server, tool := mt.RuleNames()
			texts = []string{"mcp__" + server + "__" + tool}
		}
	case tools.ConfirmFetch:
		if c.Confirm.Label == "" {
			return
		}
		texts = []string{"WebFetch(domain:" + c.Confirm.Label + ")"}
	case tools.ConfirmEdit:
		if a.Option.OptionID != OptAlwaysPath {
			return
		}
		pat, _, ok := r.S.editGlob(c)
		if !ok {
			return
		}
		texts = []string{pat}
	default:
		return
	}
	if len(texts) == 0 || len(texts) > maxAlwaysRules {
		return
	}
	if _, err := AddRules(file, r.S.ws.Root, rules.Allow, texts); err != nil {
		r.S.ws.e.log.Warn("keeping an \"always allow\" answer", "file", file, "err", err)
		return
	}
	r.S.ws.Invalidate()
}

// maxAlwaysRules bounds the rules one answer writes (one per command of a
// compound line), as Claude Code does.
const maxAlwaysRules = 5
