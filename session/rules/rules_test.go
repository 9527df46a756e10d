package rules

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// set compiles rules "allow:Bash(x)" for a workspace at ws.
func set(t testing.TB, ws string, specs ...string) *Set {
	t.Helper()
	var rs []Rule
	for _, s := range specs {
		kind, text := Allow, s
		for k := Allow; k <= Deny; k++ {
			if p := k.String() + ":"; len(s) > len(p) && s[:len(p)] == p {
				kind, text = k, s[len(p):]
			}
		}
		r, err := Parse(text, kind, Source{Scope: ScopeConfig, File: "/etc/acpd.toml"})
		require.NoError(t, err, s)
		rs = append(rs, r)
	}
	return NewSet(Workspace{Root: ws, Home: "/home/u"}, []string{ws}, rs)
}

func shell(s *Set, cmd, dir string) Result {
	return s.Check(&Call{Tool: ToolShell, Command: cmd, Dir: dir})
}

func TestParse(t *testing.T) {
	for _, bad := range []string{"", "Bash(", "Bash()", "Nope Tool", "WebFetch(example.com)", "TodoWrite(x)", "Read([)"} {
		_, err := Parse(bad, Deny, Source{})
		assert.Error(t, err, bad)
	}
	_, err := Parse("*", Allow, Source{})
	assert.Error(t, err, "a bare * allow")
	_, err = Parse("mcp__*", Allow, Source{})
	assert.Error(t, err)
	_, err = Parse("mcp__github__*", Allow, Source{})
	assert.NoError(t, err)
	r, err := Parse("Bash(git * main)", Allow, Source{})
	require.NoError(t, err)
	assert.Contains(t, r.Warning, "not options")
	r, err = Parse("WebSearch", Deny, Source{})
	require.NoError(t, err)
	assert.Contains(t, r.Warning, "no tool acpd has")
	for _, own := range []string{"run_shell_command(go test:*)", "edit(src/**)", "read_file(.env)", "web_fetch(domain:x.org)", "write_file"} {
		_, err := Parse(own, Allow, Source{})
		assert.NoError(t, err, own)
	}
}

// The cases, and the pitfalls of the policy spec's table.
func TestShellRules(t *testing.T) {
	ws := t.TempDir()
	tests := []struct {
		rules []string
		cmd   string
		want  Kind
	}{
		// allow Bash(go test:*)
		{[]string{"Bash(go test:*)"}, "go test ./...", Allow},
		{[]string{"Bash(go test:*)"}, "go test", Allow},
		{[]string{"Bash(go test:*)"}, "go testx", 0},
		{[]string{"Bash(go test:*)"}, "go test ./... && rm -rf x", 0},
		{[]string{"Bash(go test:*)"}, "go test $(touch y)", 0},
		{[]string{"Bash(go test:*)"}, "go test `touch y`", 0},
		{[]string{"Bash(go test:*)"}, "go test ./... > /etc/z", 0},
		{[]string{"Bash(go test:*)"}, "go test ./... > /dev/null 2>&1", Allow},
		{[]string{"Bash(go test:*)"}, `"go test" ./...`, 0},
		{[]string{"Bash(go test:*)", "Edit(out/**)"}, "go test ./... > out/log.txt", Allow},
		{[]string{"Bash(go test:*)", "Edit(out/**)"}, "go test ./... > out/../../z", 0},
		{[]string{"Bash(go test:*)", "Edit(out/**)"}, "cd sub && go test > out/log.txt", 0},
		// deny Bash(curl:*)
		{[]string{"deny:Bash(curl:*)"}, "curl https://x", Deny},
		{[]string{"deny:Bash(curl:*)"}, "ls; curl https://x", Deny},
		{[]string{"deny:Bash(curl:*)"}, "ls | /usr/bin/curl x", Deny},
		{[]string{"deny:Bash(curl:*)"}, "echo $(curl evil)", Deny},
		// A substitution inside double quotes or a here-document runs too.
		{[]string{"deny:Bash(curl:*)"}, `echo "$(curl evil)"`, Deny},
		{[]string{"deny:Bash(curl:*)"}, "echo \"`curl evil`\"", Deny},
		{[]string{"deny:Bash(curl:*)"}, `git log --format="%H ${x:-$(curl evil)}"`, Deny},
		{[]string{"deny:Bash(curl:*)"}, "cat <<EOF\n$(curl evil)\nEOF", Deny},
		{[]string{"deny:Bash(curl:*)"}, "sh -c 'curl x'", Deny},
		{[]string{"deny:Bash(curl:*)"}, "sudo -u root curl x", Deny},
		{[]string{"deny:Bash(curl:*)"}, "FOO=1 curl x", Deny},
		{[]string{"deny:Bash(curl:*)"}, "curly", 0},
		// compound deny
		{[]string{"deny:Bash(rm *)"}, "make; rm -rf x", Deny},
		{[]string{"deny:Bash(rm *)"}, "ls | xargs rm", Deny},
		{[]string{"deny:Bash(rm *)"}, "find . -exec rm {} +", Deny},
		{[]string{"deny:Bash(rm *)"}, "X=1 rm y", Deny},
		{[]string{"deny:Bash(rm *)"}, "nice -n5 sh -c 'rm x'", Deny},
		{[]string{"deny:Bash(rm *)"}, "eval rm x", Deny},
		{[]string{"deny:Bash(rm *)"}, "{ rm x; }", Deny},
		{[]string{"deny:Bash(rm *)"}, "(rm x)", Deny},
		// compound allow
		{[]string{"Bash(git status *)"}, "git status && rm -rf x", 0},
		{[]string{"Bash(git status *)", "Bash(npm test *)"}, "git status && npm test", Allow},
		// first-segment cd and ask
		{[]string{"ask:Bash(git push *)", "Bash(*)"}, "cd /tmp && git push", Ask},
		{[]string{"ask:Bash(git push:*)", "Bash(git push:*)"}, "git push", Ask},
		// substitution
		{[]string{"Bash(echo *)"}, "echo $(curl evil)", 0},
		{[]string{"Bash(echo *)"}, "cat <(ls) f", 0},
		// env assignment
		{[]string{"Bash(npm test *)"}, "PATH=/evil npm test", 0},
		{[]string{"Bash(npm test *)"}, "LD_PRELOAD=x npm test", 0},
		{[]string{"Bash(npm test *)"}, "LC_ALL=C npm test", Allow},
		{[]string{"Bash(npm test *)"}, "PATH=/evil; npm test", 0},
		// wrappers
		{[]string{"Bash(npm test *)"}, "timeout 5 npm test", Allow},
		{[]string{"Bash(npm test *)"}, "sudo npm test", 0},
		{[]string{"Bash(npm test *)"}, "nice -n5 sh -c 'rm x'", 0},
		{[]string{"Bash(npm test *)"}, "nice -n5 sh -c 'npm test'", Allow},
		{[]string{"Bash(npm test *)"}, `sh -c "$CMD"`, 0},
		{[]string{"Bash(npm test *)"}, `eval "$CMD"`, 0},
		// sh -c
		{[]string{"Bash(echo *)"}, `bash -c "rm x"`, 0},
		{[]string{"Bash(echo *)"}, `bash -c "echo hi; echo there"`, Allow},
		// aliases and functions
		{[]string{"Bash(ls *)"}, "alias ls=rm; ls x", 0},
		{[]string{"Bash(ls *)"}, "f(){ rm x; }; f", 0},
		{[]string{"Bash(ls *)"}, ". ./script", 0},
		// option injection
		{[]string{"Bash(git * main)"}, "git diff main", Allow},
		{[]string{"Bash(git * main)"}, "git -c core.fsmonitor=./x diff main", 0},
		// redirects
		{[]string{"Bash(echo *)"}, "echo x > ~/.bashrc", 0},
		{[]string{"Bash(echo *)"}, "echo x > .acpd/policy.json", 0},
		{[]string{"deny:Edit(.acpd/**)"}, "echo x > .acpd/policy.json", Deny},
		{[]string{"deny:Read(.env)"}, "cat .env", Deny},
		{[]string{"deny:Read(.env)"}, "{ cat .env; }", Deny},
		{[]string{"deny:Read(.env)"}, "sort < .env", Deny},
		{[]string{"deny:Read(.env)"}, "echo >> .env", Deny},
		// patterns
		{[]string{"Bash(ls *)"}, "ls", Allow},
		{[]string{"Bash(ls *)"}, "lsof", 0},
		{[]string{"Bash(ls*)"}, "lsof", Allow},
		{[]string{"Bash(npm run build)"}, "npm run build", Allow},
		{[]string{"Bash(npm run build)"}, "npm run build --prod", 0},
		{[]string{"Bash"}, "go test $(touch y)", Allow},
		{[]string{"Bash(*)"}, "anything > /etc/x", Allow},
		{[]string{"run_shell_command(go test:*)"}, "go test ./...", Allow},
		// unparseable and long
		{[]string{"Bash(echo *)"}, "echo 'unterminated", 0},
	}
	for _, tt := range tests {
		got := shell(set(t, ws, tt.rules...), tt.cmd, ws)
		assert.Equal(t, tt.want, got.Kind, "%v %q", tt.rules, tt.cmd)
	}
	long := "echo x"
	for range 60 {
		long += "; echo x"
	}
	assert.Equal(t, Kind(0), shell(set(t, ws, "Bash(echo *)"), long, ws).Kind, "60 commands ask")
}

func TestRuleQuoted(t *testing.T) {
	ws := t.TempDir()
	res := shell(set(t, ws, "deny:Bash(curl:*)"), "ls; curl x", ws)
	assert.Equal(t, `the deny rule "Bash(curl:*)" of /etc/acpd.toml`, res.Describe())
	res = shell(set(t, ws, "Bash(git status *)", "Bash(npm test *)"), "git status && npm test", ws)
	require.Len(t, res.Rules, 2)
}

func TestPathRules(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	out, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "src", "deep", "src"), 0o755))
	require.NoError(t, os.Symlink(out, filepath.Join(ws, "src", "link")))
	p := func(rel string) string { return filepath.Join(ws, rel) }
	check := func(s *Set, tool, path string) Kind {
		return s.Check(&Call{Tool: tool, Paths: []string{path}}).Kind
	}
	edit := set(t, ws, "Edit(src/**)")
	assert.Equal(t, Allow, check(edit, ToolEdit, p("src/a.go")))
	assert.Equal(t, Allow, check(edit, ToolWrite, p("src/deep/b.go")))
	// What the tools report: the real path, `..` collapsed, symlinks resolved.
	assert.Equal(t, Kind(0), check(edit, ToolEdit, filepath.Clean(p("src/../secret"))))
	real, err := filepath.EvalSymlinks(p("src/link"))
	require.NoError(t, err)
	assert.Equal(t, Kind(0), check(edit, ToolEdit, filepath.Join(real, "x")))
	assert.Equal(t, Kind(0), check(edit, ToolEdit, p("deep/src/a.go")), "an allow of src/** is the root's src")

	deny := set(t, ws, "deny:Edit(src/**)")
	assert.Equal(t, Deny, check(deny, ToolEdit, p("deep/src/a.go")), "a deny of src/** is any src")

	env := set(t, ws, "deny:Read(.env)")
	assert.Equal(t, Deny, check(env, ToolRead, p(".env")))
	assert.Equal(t, Deny, check(env, ToolRead, p("sub/.env")))
	assert.Equal(t, Deny, check(env, ToolEdit, p(".env")), "a Read deny refuses writes too")
	assert.Equal(t, Kind(0), check(env, ToolRead, p(".envrc")))

	dir := set(t, ws, "deny:Read(secrets)")
	assert.Equal(t, Deny, check(dir, ToolRead, p("secrets/key.pem")), "a folder covers what is in it")
	assert.Equal(t, Deny, check(dir, ToolList, p("secrets")))

	abs := set(t, ws, "deny:Read(//etc/**)", "deny:Read(~/.ssh/**)", "Edit(/docs/*.md)")
	assert.Equal(t, Deny, check(abs, ToolRead, "/etc/passwd"))
	assert.Equal(t, Deny, check(abs, ToolRead, "/home/u/.ssh/id_rsa"))
	assert.Equal(t, Allow, check(abs, ToolEdit, p("docs/a.md")))
	assert.Equal(t, Kind(0), check(abs, ToolEdit, p("docs/sub/a.md")))
}

func TestOtherRules(t *testing.T) {
	ws := t.TempDir()
	s := set(t, ws, "WebFetch(domain:*.example.com)", "deny:WebFetch(domain:evil.org)", "mcp__github__create_issue",
		"deny:mcp__fs", "Agent(Explore)", "ask:TodoWrite")
	check := func(c Call) Kind { return s.Check(&c).Kind }
	assert.Equal(t, Allow, check(Call{Tool: ToolFetch, Host: "docs.example.com"}))
	assert.Equal(t, Allow, check(Call{Tool: ToolFetch, Host: "A.B.Example.COM."}))
	assert.Equal(t, Kind(0), check(Call{Tool: ToolFetch, Host: "example.com"}))
	assert.Equal(t, Deny, check(Call{Tool: ToolFetch, Host: "evil.org"}))
	assert.Equal(t, Allow, check(Call{Tool: "mcp__github__create_issue"}))
	assert.Equal(t, Kind(0), check(Call{Tool: "mcp__github__delete_repo"}))
	assert.Equal(t, Allow, check(Call{Tool: "mcp__github_ab12cd34", Server: "github", MCPTool: "create_issue"}),
		"a shortened name is matched by its server and tool")
	assert.Equal(t, Deny, check(Call{Tool: "mcp__fs__write"}))
	assert.Equal(t, Allow, check(Call{Tool: ToolAgent, Agent: "Explore"}))
	assert.Equal(t, Kind(0), check(Call{Tool: ToolAgent, Agent: "general-purpose"}))
	assert.Equal(t, Ask, check(Call{Tool: ToolTodo}))
	assert.Equal(t, Deny, set(t, ws, "deny:*").Check(&Call{Tool: ToolRead}).Kind)
	assert.Equal(t, Deny, set(t, ws, "deny:mcp__*").Check(&Call{Tool: "mcp__a__b"}).Kind)
}
