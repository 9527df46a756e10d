package imported

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

// A ~/.claude.json as Claude Code writes it: its own state around the
// user scope's servers and, per project, the local scope's and the
// .mcp.json servers the user switched off.
const claudeJSON = `{
  "numStartups": 41,
  "installMethod": "native",
  "autoUpdates": false,
  "tipsHistory": {"new-user-warmup": 1},
  "mcpServers": {
    "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"},
    "fs": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"], "env": {}},
    "linear": {"type": "sse", "url": "https://mcp.linear.app/sse", "headers": {"Authorization": "Bearer ${LINEAR_TOKEN}"}}
  },
  "projects": {
    "/work/app": {
      "allowedTools": [],
      "history": [{"display": "fix the build", "pastedContents": {}}],
      "mcpServers": {"db": {"type": "stdio", "command": "/opt/db-mcp", "args": ["--dsn", "${DB_DSN:-postgres://localhost/app}"], "env": {"MODE": "ro"}}},
      "enabledMcpjsonServers": ["tracker"],
      "disabledMcpjsonServers": ["playwright"],
      "hasTrustDialogAccepted": true
    },
    "/work/other": {"mcpServers": {"elsewhere": {"command": "/bin/true"}}}
  }
}`

func TestClaudeGlobal(t *testing.T) {
	f, disabled, err := ClaudeGlobal([]byte(claudeJSON), "/home/u/.claude.json", "/work/app")
	require.NoError(t, err)
	assert.Empty(t, f.Problems)
	assert.Equal(t, []string{"playwright"}, disabled)
	require.Len(t, f.Servers, 4)
	db := f.Servers[0]
	assert.Equal(t, "db", db.Name, "the local scope first")
	assert.Equal(t, ScopeLocal, db.Scope)
	assert.Equal(t, acp.MCPServer{Name: "db", Command: "/opt/db-mcp", Args: []string{"--dsn", "${DB_DSN:-postgres://localhost/app}"},
		Env: []acp.EnvVariable{{Name: "MODE", Value: "ro"}}}, db.MCPServer)
	assert.Equal(t, []string{"DB_DSN"}, db.Vars)
	assert.Equal(t, "Claude Code, local scope, /home/u/.claude.json", db.Origin())
	byName := map[string]Server{}
	for _, s := range f.Servers[1:] {
		assert.Equal(t, ScopeUser, s.Scope)
		byName[s.Name] = s
	}
	assert.Equal(t, "npx", byName["fs"].Command)
	assert.Equal(t, "", byName["fs"].Type)
	assert.Equal(t, "http", byName["sentry"].Type)
	assert.Equal(t, "sse", byName["linear"].Type)
	assert.Equal(t, []acp.HTTPHeader{{Name: "Authorization", Value: "Bearer ${LINEAR_TOKEN}"}}, byName["linear"].Headers)
	assert.Equal(t, []string{"LINEAR_TOKEN"}, byName["linear"].Vars)

	// Another workspace sees only the user scope.
	f, disabled, err = ClaudeGlobal([]byte(claudeJSON), "/home/u/.claude.json", "/work/third")
	require.NoError(t, err)
	assert.Len(t, f.Servers, 3)
	assert.Empty(t, disabled)

	_, _, err = ClaudeGlobal([]byte(`{"mcpServers": [`), "/home/u/.claude.json", "/work/app")
	assert.ErrorContains(t, err, "/home/u/.claude.json")
}

func TestMCPJSON(t *testing.T) {
	f, err := MCPJSON([]byte(`{
  "mcpServers": {
    "tracker": {"command": "node", "args": ["./tools/tracker.js"], "env": {"TRACKER_URL": "${TRACKER_URL:-http://localhost:4000}"}},
    "docs": {"type": "http", "url": "${DOCS_URL}/mcp", "headers": {"X-Team": "$TEAM"}},
    "ws": {"type": "websocket", "url": "wss://x"},
    "nothing": {}
  }
}`), "/work/app/.mcp.json")
	require.NoError(t, err)
	require.Len(t, f.Servers, 2)
	assert.Equal(t, "docs", f.Servers[0].Name)
	assert.Equal(t, []string{"DOCS_URL"}, f.Servers[0].Vars, "a bare $VAR is not Claude Code's syntax")
	assert.Equal(t, ScopeProject, f.Servers[1].Scope)
	assert.ElementsMatch(t, []string{
		`/work/app/.mcp.json: mcp server "nothing": neither a command nor a url`,
		`/work/app/.mcp.json: mcp server "ws": transport "websocket" is not one acpd speaks (stdio, http, sse)`,
	}, f.Problems)
}

func TestGeminiSettings(t *testing.T) {
	f, lists, err := GeminiSettings([]byte(`{
  "general": {"vimMode": true},
  "ui": {"theme": "GitHub"},
  "mcpServers": {
    "github": {"httpUrl": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer $GITHUB_PAT"}, "timeout": 5000, "trust": false,
      "includeTools": ["get_issue", "list_issues"], "excludeTools": ["list_issues"]},
    "events": {"url": "http://localhost:8080/sse"},
    "py": {"command": "python", "args": ["-m", "my_server"], "cwd": "./server", "env": {"API_KEY": "${MY_KEY}"}},
    "old": {"command": "/bin/old", "disabled": true}
  },
  "mcp": {"allowed": ["github", "py", "events"], "excluded": ["events"]}
}`), "/home/u/.gemini/settings.json", ScopeUser)
	require.NoError(t, err)
	assert.Equal(t, GeminiLists{Allowed: []string{"github", "py", "events"}, Excluded: []string{"events"}, HasAllowed: true}, lists)
	require.Len(t, f.Servers, 3)
	byName := map[string]Server{}
	for _, s := range f.Servers {
		byName[s.Name] = s
	}
	gh := byName["github"]
	assert.Equal(t, "http", gh.Type, "httpUrl is Streamable HTTP")
	assert.Equal(t, 5*time.Second, gh.Timeout)
	assert.Equal(t, []string{"get_issue", "list_issues"}, gh.IncludeTools)
	assert.Equal(t, []string{"GITHUB_PAT"}, gh.Vars, "Gemini CLI reads a bare $VAR")
	assert.Equal(t, "sse", byName["events"].Type, "url is SSE in Gemini CLI")
	assert.Equal(t, "./server", byName["py"].Dir)
	assert.Equal(t, []Off{{Name: "old", File: "/home/u/.gemini/settings.json", Why: "disabled in its entry"}}, f.Off)

	ApplyGemini(&f, []GeminiLists{lists, {Excluded: []string{"py"}}})
	require.Len(t, f.Servers, 1)
	assert.Equal(t, "github", f.Servers[0].Name)
	assert.Contains(t, f.Off, Off{Name: "events", File: "/home/u/.gemini/settings.json", Why: "listed in mcp.excluded"})
	assert.Contains(t, f.Off, Off{Name: "py", File: "/home/u/.gemini/settings.json", Why: "listed in mcp.excluded"})
}

func TestExpand(t *testing.T) {
	env := map[string]string{"HOME": "/home/u", "EMPTY": "", "TOKEN": "t0k"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, c := range []struct {
		in, want string
		bare     bool
		missing  []string
	}{
		{"${HOME}/x", "/home/u/x", false, nil},
		{"$HOME/x", "$HOME/x", false, nil},
		{"$HOME/x", "/home/u/x", true, nil},
		{"${NOPE:-d}", "d", false, nil},
		{"${EMPTY:-d}", "d", false, nil},
		{"${EMPTY}", "", false, nil},
		{"a${NOPE}b", "a${NOPE}b", false, []string{"NOPE"}},
		{"$NOPE", "$NOPE", true, []string{"NOPE"}},
		{"${1x}", "${1x}", false, nil},
		{"cost $5", "cost $5", true, nil},
		{"Bearer ${TOKEN}", "Bearer t0k", true, nil},
		{"${unterminated", "${unterminated", false, nil},
	} {
		got, missing := expand(c.in, c.bare, lookup)
		assert.Equal(t, c.want, got, c.in)
		assert.Equal(t, c.missing, missing, c.in)
	}
	s := Server{MCPServer: acp.MCPServer{Name: "x", Type: "http", URL: "https://h/${NOPE}"}, File: "f"}
	_, err := Expand(s, lookup)
	assert.EqualError(t, err, `mcp server "x" (f): environment variable NOPE is not set and has no default`)
}

// TestMergeAndResolve: the client's names win, Claude Code's scopes come
// before Gemini CLI's, an untrusted workspace's servers stay off, the
// switched-off ones too, and commands and folders are made absolute.
func TestMergeAndResolve(t *testing.T) {
	u := User{Found: Found{Servers: []Server{
		{MCPServer: acp.MCPServer{Name: "db", Command: "/opt/db"}, Agent: Claude, Scope: ScopeLocal, File: "c"},
		{MCPServer: acp.MCPServer{Name: "fs", Command: "npx"}, Agent: Claude, Scope: ScopeUser, File: "c"},
		{MCPServer: acp.MCPServer{Name: "editor", Command: "/bin/e"}, Agent: Claude, Scope: ScopeUser, File: "c"},
		{MCPServer: acp.MCPServer{Name: "fs", Command: "/bin/fs2"}, Agent: Gemini, Scope: ScopeUser, File: "g"},
		{MCPServer: acp.MCPServer{Name: "rel", Command: "bin/x"}, Agent: Gemini, Scope: ScopeUser, File: "g"},
	}}, ClaudeDisabled: []string{"tracker"}}
	p := &Project{Found: Found{Servers: []Server{
		{MCPServer: acp.MCPServer{Name: "tracker", Command: "node", Args: []string{"t.js"}}, Agent: Claude, Scope: ScopeProject, File: "/w/.mcp.json"},
		{MCPServer: acp.MCPServer{Name: "local", Command: "./bin/srv"}, Agent: Claude, Scope: ScopeProject, File: "/w/.mcp.json"},
	}}}

	f := Merge(u, p, false, []string{"editor"})
	var names []string
	for _, s := range f.Servers {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"db", "fs", "rel"}, names)
	assert.Contains(t, f.Off, Off{Name: "local", File: "/w/.mcp.json", Why: "the workspace is not trusted"})
	assert.Contains(t, f.Off, Off{Name: "editor", File: "c", Why: "a server of the same name comes first"})
	assert.Contains(t, f.Off, Off{Name: "fs", File: "g", Why: "a server of the same name comes first"})

	f = Merge(u, p, true, []string{"editor"})
	names = nil
	for _, s := range f.Servers {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"db", "local", "fs", "rel"}, names, "local, project, user; tracker switched off")
	assert.Contains(t, f.Off, Off{Name: "tracker", File: "/w/.mcp.json", Why: "listed in disabledMcpjsonServers"})

	lookPath := func(name string) (string, error) {
		if name == "npx" {
			return "/usr/bin/npx", nil
		}
		return "", errors.New("not found")
	}
	r := Resolve(f, "/w", os.LookupEnv, lookPath)
	require.Len(t, r.Servers, 3)
	assert.Equal(t, "/opt/db", r.Servers[0].Command)
	assert.Equal(t, "", r.Servers[0].Dir, "a user-scope server runs outside the workspace")
	assert.Equal(t, filepath.Join("/w", "bin", "srv"), r.Servers[1].Command, "a project's relative command is the project's")
	assert.Equal(t, "/w", r.Servers[1].Dir)
	assert.Equal(t, "/usr/bin/npx", r.Servers[2].Command)
	assert.Equal(t, []string{`mcp server "rel" (g): command "bin/x" is relative and the server has no folder; give an absolute path`}, r.Problems)
}

// TestReadUser reads the files of a fake home: Claude Code's
// CLAUDE_CONFIG_DIR moves .claude.json; a file that cannot be parsed is a
// problem, not a failure of the others.
func TestReadUser(t *testing.T) {
	home, cfgDir := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".gemini"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".claude.json"), []byte(claudeJSON), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, ".claude.json"), []byte(`{"mcpServers": {"moved": {"command": "/bin/m"}}}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(`{"mcpServers": {`), 0o600))

	u := ReadUser(Options{Agents: Agents, Home: home}, "/work/app")
	assert.Len(t, u.Servers, 4)
	assert.Equal(t, []string{"playwright"}, u.ClaudeDisabled)
	require.Len(t, u.Problems, 1)
	assert.Contains(t, u.Problems[0], filepath.Join(home, ".gemini", "settings.json"))

	u = ReadUser(Options{Agents: []Agent{Claude}, Home: home, ClaudeConfigDir: cfgDir}, "/work/app")
	require.Len(t, u.Servers, 1)
	assert.Equal(t, "moved", u.Servers[0].Name)
	assert.Empty(t, u.Problems, "gemini is not read")

	assert.Empty(t, ReadUser(Options{Home: home}, "/work/app").Servers, "no agents: nothing")
}

// A ~/.codex/config.toml as Codex writes it, with its other settings.
const codexTOML = `model = "gpt-5-codex"
approval_policy = "on-request"

[mcp_servers.docs]
command = "npx"
args = ["-y", "@acme/docs-mcp"]
env_vars = ["DOCS_TOKEN", { name = "DOCS_REGION", source = "local" }]
cwd = "/srv/docs"
tool_timeout_sec = 30
enabled_tools = ["search"]

[mcp_servers.docs.env]
LOG = "warn"

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
bearer_token_env_var = "FIGMA_TOKEN"
http_headers = { "X-Client" = "acpd" }
env_http_headers = { "X-Team" = "FIGMA_TEAM" }
startup_timeout_sec = 20

[mcp_servers.old]
command = "/bin/old"
enabled = false

[mcp_servers.both]
command = "/bin/x"
url = "https://x"
`

func TestCodexConfig(t *testing.T) {
	f, err := CodexConfig([]byte(codexTOML), "/home/u/.codex/config.toml", ScopeUser)
	require.NoError(t, err)
	assert.Equal(t, []string{`/home/u/.codex/config.toml: mcp server "both": both a command and a url`}, f.Problems)
	assert.Equal(t, []Off{{Name: "old", File: "/home/u/.codex/config.toml", Why: "enabled = false"}}, f.Off)
	require.Len(t, f.Servers, 2)
	docs, figma := f.Servers[0], f.Servers[1]
	assert.Equal(t, acp.MCPServer{Name: "docs", Command: "npx", Args: []string{"-y", "@acme/docs-mcp"}, Env: []acp.EnvVariable{
		{Name: "LOG", Value: "warn"}, {Name: "DOCS_TOKEN", Value: "${DOCS_TOKEN:-}"}, {Name: "DOCS_REGION", Value: "${DOCS_REGION:-}"}}}, docs.MCPServer)
	assert.Equal(t, "/srv/docs", docs.Dir)
	assert.Equal(t, 30*time.Second, docs.Timeout)
	assert.Equal(t, []string{"search"}, docs.IncludeTools)
	assert.Equal(t, "Codex, user scope, /home/u/.codex/config.toml", docs.Origin())
	assert.Equal(t, "http", figma.Type)
	assert.Equal(t, []acp.HTTPHeader{{Name: "X-Client", Value: "acpd"}, {Name: "X-Team", Value: "${FIGMA_TEAM}"},
		{Name: "Authorization", Value: "Bearer ${FIGMA_TOKEN}"}}, figma.Headers)

	env := map[string]string{"FIGMA_TOKEN": "f1", "FIGMA_TEAM": "t1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	x, err := Expand(figma, lookup)
	require.NoError(t, err)
	assert.Equal(t, "Bearer f1", x.Headers[2].Value)
	x, err = Expand(docs, lookup)
	require.NoError(t, err)
	assert.Equal(t, "", x.Env[1].Value, "an env_vars name that is unset passes nothing")

	_, err = CodexConfig([]byte("[mcp_servers\n"), "/c.toml", ScopeUser)
	assert.ErrorContains(t, err, "/c.toml")
}
