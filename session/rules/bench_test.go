package rules

import (
	"path/filepath"
	"testing"

	"github.com/acpd/acpd/session/shellline"
)

// benchRules is a sizeable policy: what a team's settings and a few weeks
// of "always allow" answers add up to.
var benchRules = []string{
	"allow:Bash(go test:*)", "allow:Bash(go build:*)", "allow:Bash(go vet:*)", "allow:Bash(npm run lint)",
	"allow:Bash(npm test:*)", "allow:Bash(git status:*)", "allow:Bash(git diff:*)", "allow:Bash(git log:*)",
	"allow:Bash(make:*)", "allow:Bash(ls:*)", "allow:Bash(cat:*)", "allow:Bash(grep:*)", "allow:Bash(sort:*)",
	"allow:Edit(src/**)", "allow:Edit(docs/**)", "allow:Read(**)", "allow:WebFetch(domain:pkg.go.dev)",
	"allow:mcp__github__get_issue", "allow:mcp__github__list_issues",
	"ask:Bash(git push:*)", "ask:Edit(.github/**)", "ask:mcp__github__create_issue",
	"deny:Bash(curl:*)", "deny:Bash(wget:*)", "deny:Bash(rm -rf:*)", "deny:Read(.env)", "deny:Read(~/.ssh/**)",
	"deny:Edit(secrets/**)", "deny:WebFetch(domain:*.evil.example)", "deny:mcp__danger",
}

// BenchmarkCheck is the rule check of one tool call, the work the rules
// decider adds to every call (target: at most 50 µs). The shell line comes
// parsed, as the shell tool's confirmation hands it to the decider.
//
//	go test -run '^$' -bench BenchmarkCheck -count 6 ./session/rules/
func BenchmarkCheck(b *testing.B) {
	ws := b.TempDir()
	s := set(b, ws, benchRules...)
	const cmd = "go test ./... 2>&1 | grep -v '^ok' | sort && git status --short; make lint"
	line := shellline.Parse(cmd)
	calls := map[string]*Call{
		"shell_compound": {Tool: ToolShell, Command: cmd, Line: &line, Dir: ws},
		"edit":           {Tool: ToolEdit, Paths: []string{filepath.Join(ws, "src", "pkg", "a.go")}},
		"read":           {Tool: ToolRead, Paths: []string{filepath.Join(ws, "internal", "deep", "x", "y.go")}},
		"mcp":            {Tool: "mcp__github__get_issue", Server: "github", MCPTool: "get_issue"},
		"fetch":          {Tool: ToolFetch, Host: "pkg.go.dev"},
	}
	for name, c := range calls {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if s.Check(c).Kind == 0 {
					b.Fatal("no rule spoke")
				}
			}
		})
	}
}
