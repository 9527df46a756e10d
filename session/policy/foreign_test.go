package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/rules"
	"github.com/acpd/acpd/session/toolcall"
)

// foreignSession is the policy of a guarded session in ws with the rules
// ("allow:Bash(x)") of acpd's configuration.
func foreignSession(t *testing.T, ws string, specs ...string) *Session {
	t.Helper()
	var rs []rules.Rule
	for _, s := range specs {
		for k := rules.Allow; k <= rules.Deny; k++ {
			if p := k.String() + ":"; len(s) > len(p) && s[:len(p)] == p {
				r, err := rules.Parse(s[len(p):], k, rules.Source{Scope: rules.ScopeConfig})
				require.NoError(t, err, s)
				rs = append(rs, r)
			}
		}
	}
	e := New(Options{StateDir: t.TempDir(), Rules: rs, Home: t.TempDir()})
	return e.Workspace(ws).Session("s1", "", []string{ws})
}

func input(t *testing.T, v any) json.RawMessage {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// Another agent's calls are judged by what their permission requests show:
// a command line (a string, or Codex's argv), a path, a URL, an MCP title;
// without its content only a rule naming the whole tool can answer.
func TestCheckForeign(t *testing.T) {
	ws := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	s := foreignSession(t, ws, "allow:Bash(go test:*)", "deny:Bash(curl:*)", "allow:Edit(src/**)", "allow:mcp__github__get_issue",
		"deny:WebFetch(domain:evil.example)")
	exec := func(in any) Foreign {
		f := Foreign{Kind: acp.KindExecute, Title: "run", Cwd: ws}
		if in != nil {
			f.RawInput = input(t, in)
		}
		return f
	}
	tests := []struct {
		name string
		f    Foreign
		want toolcall.Verdict
	}{
		{"allowed command", exec(map[string]any{"command": "go test ./..."}), toolcall.Allow},
		{"compound", exec(map[string]any{"command": "go test ./... && rm -rf x"}), toolcall.Abstain},
		{"denied in a list", exec(map[string]any{"command": "ls; curl https://x"}), toolcall.Deny},
		{"codex argv", exec(map[string]any{"command": []string{"bash", "-lc", "go test ./pkg"}}), toolcall.Allow},
		{"argv words", exec(map[string]any{"command": []string{"go", "test", "x && rm -rf /"}}), toolcall.Allow},
		{"argv denied", exec(map[string]any{"command": []string{"curl", "https://x"}}), toolcall.Deny},
		{"no input: content rules cannot answer", exec(nil), toolcall.Abstain},
		{"edit in src", Foreign{Kind: acp.KindEdit, RawInput: input(t, map[string]any{"file_path": filepath.Join(ws, "src", "a.go")}), Cwd: ws}, toolcall.Allow},
		{"edit out by ..", Foreign{Kind: acp.KindEdit, Locations: []string{filepath.Join(ws, "src", "..", "b.go")}, Cwd: ws}, toolcall.Abstain},
		{"edit without a path", Foreign{Kind: acp.KindEdit, Cwd: ws}, toolcall.Abstain},
		{"protected", Foreign{Kind: acp.KindEdit, RawInput: input(t, map[string]any{"file_path": ".claude/settings.json"}), Cwd: ws}, toolcall.Ask},
		{"mcp by title", Foreign{Kind: acp.KindOther, Title: "mcp__github__get_issue", Cwd: ws}, toolcall.Allow},
		{"fetch denied", Foreign{Kind: acp.KindFetch, RawInput: input(t, map[string]any{"url": "https://evil.example/x"}), Cwd: ws}, toolcall.Deny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := s.CheckForeign(tt.f)
			assert.Equal(t, tt.want, v.Verdict, v.Reason)
			if v.Verdict == toolcall.Deny {
				assert.Contains(t, v.Reason, "deny rule")
			}
		})
	}

	// A bare tool rule answers a call whose content is not shown.
	bare := foreignSession(t, ws, "deny:Bash")
	assert.Equal(t, toolcall.Deny, bare.CheckForeign(exec(nil)).Verdict)
}

// The editor's "always allow" to another agent's command is kept as the
// command roots the line shows, in the workspace's rules file.
func TestGrantForeign(t *testing.T) {
	ws := t.TempDir()
	s := foreignSession(t, ws)
	added, err := s.GrantForeign(Foreign{Kind: acp.KindExecute, RawInput: input(t, map[string]any{"command": "npm test -- --watch && git status"}), Cwd: ws})
	require.NoError(t, err)
	assert.Equal(t, []string{"Bash(npm test:*)", "Bash(git status:*)"}, added)
	assert.Equal(t, toolcall.Allow, s.CheckForeign(Foreign{Kind: acp.KindExecute, RawInput: input(t, map[string]any{"command": "npm test"}), Cwd: ws}).Verdict)
	added, err = s.GrantForeign(Foreign{Kind: acp.KindExecute, RawInput: input(t, map[string]any{"command": "ls $(id)"}), Cwd: ws})
	require.NoError(t, err)
	assert.Empty(t, added, "a line no rule can spell keeps no rule")
}
