package rules

import (
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpd/acpd/session/shellline"
)

// Call is one tool call as the rules see it.
type Call struct {
	// Tool is acpd's name of the tool (a guarded agent's call: the name
	// mapped to acpd's).
	Tool string
	// Server and MCPTool are an MCP tool's server and tool names as its
	// model-facing name spells them; empty: read from Tool.
	Server, MCPTool string
	// Command is a shell call's command line, Line its parse (nil: parsed
	// from Command), Dir the real folder it runs in.
	Command string
	Line    *shellline.Line
	Dir     string
	// Paths are the real paths the call reads or writes (symlinks
	// resolved, inside the workspace roots).
	Paths []string
	// Host is a fetch's host name.
	Host string
	// Agent is an agent call's subagent type.
	Agent string
}

// Result is what the rules say about a call.
type Result struct {
	// Kind is the verdict; 0 when no rule spoke.
	Kind Kind
	// Rules decided it: the deny or ask rule, or every allow rule the
	// call needed (one per command of a compound line).
	Rules []*Rule
}

// Describe quotes the deciding rules for the user and the model.
func (r Result) Describe() string {
	if len(r.Rules) == 1 {
		return r.Rules[0].Describe()
	}
	parts := make([]string, len(r.Rules))
	for i, rl := range r.Rules {
		parts[i] = rl.Describe()
	}
	return strings.Join(parts, ", ")
}

// entry is a rule compiled for a workspace.
type entry struct {
	r      *Rule
	path   pathPattern
	pathOK bool // a path rule whose pattern could be anchored
}

// Set is rules compiled for one workspace. It is read-only once made and
// safe for concurrent use.
type Set struct {
	ws               Workspace
	roots            []string // the real roots, slash form
	rules            []Rule
	deny, ask, allow []entry
}

// NewSet compiles rules for a workspace whose roots (the session's cwd
// first) are given as real paths.
func NewSet(ws Workspace, roots []string, rs []Rule) *Set {
	s := &Set{ws: ws, rules: slices.Clone(rs)}
	for _, r := range roots {
		s.roots = append(s.roots, slash(r))
	}
	for i := range s.rules {
		r := &s.rules[i]
		e := entry{r: r}
		if r.target.spec == specPath && r.hasSpec {
			e.path, e.pathOK = compilePath(r.spec, r.Source, ws, r.Kind != Allow)
		}
		switch r.Kind {
		case Deny:
			s.deny = append(s.deny, e)
		case Ask:
			s.ask = append(s.ask, e)
		case Allow:
			s.allow = append(s.allow, e)
		}
	}
	return s
}

// Rules are the set's rules, in the order given.
func (s *Set) Rules() []Rule { return s.rules }

// Len is the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Check judges a call: a deny rule that matches refuses it, else an ask
// rule asks, else allow rules that cover all of it allow it; otherwise no
// rule speaks (Kind 0) and the approval mode decides.
func (s *Set) Check(c *Call) Result {
	if s == nil || len(s.rules) == 0 {
		return Result{}
	}
	if c.Tool == ToolShell && c.Line == nil {
		l := shellline.Parse(c.Command)
		c.Line = &l
	}
	var sf *shellFacts
	if e := s.restrictive(s.deny, c, &sf); e != nil {
		return Result{Kind: Deny, Rules: []*Rule{e.r}}
	}
	if e := s.restrictive(s.ask, c, &sf); e != nil {
		return Result{Kind: Ask, Rules: []*Rule{e.r}}
	}
	if rs, ok := s.allowed(c); ok {
		return Result{Kind: Allow, Rules: rs}
	}
	return Result{}
}

// shellFacts are the files a shell line reads and writes, resolved once
// per check when a path rule asks for them.
type shellFacts struct {
	reads, writes []string
}

func (s *Set) facts(c *Call, sf **shellFacts) *shellFacts {
	if *sf != nil {
		return *sf
	}
	f := &shellFacts{}
	if c.Line != nil {
		reads, writes, _ := shellFiles(c.Line)
		for _, r := range reads {
			if p, ok := realFile(r, c.Dir, s.ws.Home); ok {
				f.reads = append(f.reads, p)
			}
		}
		for _, w := range writes {
			if p, ok := realFile(w, c.Dir, s.ws.Home); ok {
				f.writes = append(f.writes, p)
			}
		}
	}
	*sf = f
	return f
}

func isWriteTool(t string) bool { return t == ToolEdit || t == ToolWrite }

// restrictive finds a deny or ask rule that matches any part of the call.
func (s *Set) restrictive(list []entry, c *Call, sf **shellFacts) *entry {
	for i := range list {
		e := &list[i]
		t := &e.r.target
		if t.spec == specPath && e.r.hasSpec {
			if !e.pathOK {
				continue
			}
			var paths []string
			switch {
			case t.covers(c.Tool, c.Server, c.MCPTool):
				paths = c.Paths
			case !t.write && isWriteTool(c.Tool):
				// A Read deny also refuses edits and writes of its files.
				paths = c.Paths
			case c.Tool == ToolShell && c.Line != nil:
				f := s.facts(c, sf)
				paths = f.writes
				if !t.write {
					paths = append(slices.Clip(f.reads), f.writes...)
				}
			}
			for _, p := range paths {
				if e.path.match(slash(p)) {
					return e
				}
			}
			continue
		}
		if !t.covers(c.Tool, c.Server, c.MCPTool) {
			continue
		}
		if !e.r.hasSpec || e.r.matchSpec(c) {
			return e
		}
	}
	return nil
}

// matchSpec reports whether a rule's specifier matches any part of a call
// (for a shell rule: any command the line runs).
func (r *Rule) matchSpec(c *Call) bool {
	switch r.target.spec {
	case specShell:
		if c.Line == nil {
			return false
		}
		n := 0
		for _, seg := range c.Line.Segments {
			if eachCommand(seg.Words, 0, &n, func(cmd []string) bool { return r.shell.match(render(cmd)) }) {
				return true
			}
		}
		return false
	case specDomain:
		return c.Host != "" && matchDomain(r.domain, c.Host)
	case specAgent:
		return c.Agent != "" && globMatch(r.agent, c.Agent)
	}
	return false
}

// allowed finds allow rules that cover the whole call.
func (s *Set) allowed(c *Call) ([]*Rule, bool) {
	for i := range s.allow {
		e := &s.allow[i]
		if !e.r.hasSpec && e.r.target.covers(c.Tool, c.Server, c.MCPTool) {
			return []*Rule{e.r}, true // the whole tool
		}
	}
	switch {
	case c.Tool == ToolShell:
		return s.allowedShell(c)
	case slices.Contains(readTools, c.Tool) || isWriteTool(c.Tool):
		if len(c.Paths) == 0 {
			return nil, false
		}
		var used []*Rule
		for _, p := range c.Paths {
			r := s.allowPath(c.Tool, slash(p), false)
			if r == nil {
				return nil, false
			}
			used = appendRule(used, r)
		}
		return used, true
	}
	for i := range s.allow {
		e := &s.allow[i]
		if e.r.hasSpec && e.r.target.covers(c.Tool, c.Server, c.MCPTool) && e.r.matchSpec(c) {
			return []*Rule{e.r}, true
		}
	}
	return nil, false
}

// allowPath is the allow rule that lets tool reach p; with inRoots the
// path must also lie inside the workspace roots (a shell redirection,
// which confinement does not check).
func (s *Set) allowPath(tool, p string, inRoots bool) *Rule {
	if inRoots && !s.inRoots(p) {
		return nil
	}
	for i := range s.allow {
		e := &s.allow[i]
		if !e.r.target.covers(tool, "", "") {
			continue
		}
		if !e.r.hasSpec || e.pathOK && e.path.match(p) {
			return e.r
		}
	}
	return nil
}

func (s *Set) inRoots(p string) bool {
	for _, r := range s.roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// allowedShell covers a command line with allow rules: every simple
// command must be allowed, and nothing may hide from the rules.
func (s *Set) allowedShell(c *Call) ([]*Rule, bool) {
	if c.Line == nil || len(c.Command) > maxCommandLen || len(c.Line.Segments) > maxSegments {
		return nil, false
	}
	var used []*Rule
	cd := false
	for _, seg := range c.Line.Segments {
		if !s.allowSegment(seg, c.Dir, &cd, 0, &used) {
			return nil, false
		}
	}
	return used, len(used) > 0
}

// allowSegment reports whether allow rules cover one simple command,
// adding the rules it took to used. cd tells that an earlier command may
// have changed the folder relative redirections are taken from.
func (s *Set) allowSegment(seg shellline.Segment, dir string, cd *bool, depth int, used *[]*Rule) bool {
	if seg.Hidden {
		return false // a substitution: what runs is decided when it runs
	}
	if seg.WriteRedirect {
		if len(seg.Targets) == 0 {
			return false
		}
		for _, t := range seg.Targets {
			if *cd && !filepath.IsAbs(t) {
				return false
			}
			p, ok := realFile(t, dir, s.ws.Home)
			if !ok {
				return false
			}
			r := s.allowPath(ToolEdit, p, true)
			if r == nil {
				return false
			}
			*used = appendRule(*used, r)
		}
	}
	assigns, cmd := seg.Command()
	var kept []string
	for _, a := range assigns {
		if !shellline.HarmlessAssignment(a) {
			kept = append(kept, a) // PATH=…, LD_PRELOAD=…: part of what must match
		}
	}
	if len(cmd) == 0 {
		return len(kept) == 0 // a lone VAR=… changes what later commands run
	}
	switch cmd[0] {
	case "cd", "pushd", "popd":
		*cd = true
	}
	if dynamic(cmd[0]) || strings.ContainsAny(cmd[0], "*?[~") {
		return false // the command is decided when the line runs
	}
	levels := [][]string{append(kept, cmd...)}
	if len(kept) == 0 {
		for w := cmd; ; {
			inner, ok := shellline.Unwrap(w)
			if !ok || dynamic(inner[0]) {
				break
			}
			levels = append(levels, inner)
			w = inner
		}
	}
	for _, w := range levels {
		line := render(w)
		for i := range s.allow {
			e := &s.allow[i]
			if e.r.target.spec == specShell && e.r.hasSpec && e.r.shell.match(line) {
				*used = appendRule(*used, e.r)
				return true
			}
		}
	}
	if len(kept) > 0 || depth >= maxNesting {
		return false
	}
	for _, w := range levels {
		script, ok := inlineScript(w)
		if !ok {
			continue
		}
		if dynamic(script) {
			return false // sh -c "$X": nothing a rule can read
		}
		inner := shellline.Parse(script)
		if len(inner.Segments) == 0 || len(inner.Segments) > maxSegments {
			return false
		}
		innerCd := *cd
		for _, is := range inner.Segments {
			if !s.allowSegment(is, dir, &innerCd, depth+1, used) {
				return false
			}
		}
		return true
	}
	return false
}

func appendRule(rs []*Rule, r *Rule) []*Rule {
	if slices.Contains(rs, r) {
		return rs
	}
	return append(rs, r)
}

// matchDomain matches a host against a WebFetch domain: case-insensitive,
// a trailing dot ignored; `*.example.com` is any subdomain at any depth
// but not the apex; a '*' elsewhere never crosses a dot.
func matchDomain(pat, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case pat == "*":
		return true
	case strings.HasPrefix(pat, "*."):
		return strings.HasSuffix(host, pat[1:]) && len(host) > len(pat)-1
	case !strings.Contains(pat, "*"):
		return host == pat
	}
	pl, hl := strings.Split(pat, "."), strings.Split(host, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, _ := path.Match(pl[i], hl[i]); !ok {
			return false
		}
	}
	return true
}
