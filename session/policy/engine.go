// Package policy puts acpd's permission rules (package rules) and hooks
// (package hooks) in front of every tool call: it gathers them from their
// sources for each workspace, keeps the "always allow" answers in acpd's
// state folder, holds project settings back until the user trusts the
// workspace, and plugs into the tool-call lifecycle (package toolcall) as
// deciders, a granter and a reviewer.
//
// The sources of a workspace, in the order `acpd permissions` lists them:
//
//	acpd's configuration          [permissions], [hooks] (user file, --config)
//	"always allow for user"       <state>/permissions/user.toml
//	"always allow in project"     <state>/permissions/<workspace>-<digest>.toml
//	Claude Code's user settings   ~/.claude/settings.json (opt-in)
//	the project's settings        .claude/settings.json, .claude/settings.local.json,
//	                              .gemini/settings.json, .acpd/settings.toml
//	                              (and .mcp.json, .codex/config.toml, for their MCP servers)
//
// A project's deny and ask rules apply at once: they only narrow. Its
// allow rules and hooks apply only once the user trusted the workspace,
// and trust is bound to the content of the files that enabled it (and the
// hook scripts they name inside the workspace): a change asks again.
package policy

import (
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/acpd/acpd/session/hooks"
	"github.com/acpd/acpd/session/mcp/imported"
	"github.com/acpd/acpd/session/rules"
)

// Options configure an Engine.
type Options struct {
	// StateDir is acpd's state folder (session.dataDir): the rules files
	// and the trust store live there. "" keeps nothing: "always" answers
	// last for the session, and no workspace is trusted.
	StateDir string
	// Rules and Hooks are acpd's configuration's.
	Rules []rules.Rule
	Hooks hooks.Config
	// ClaudeUser reads ClaudeDir/settings.json as the user's own.
	ClaudeUser bool
	// ClaudeDir is Claude Code's user folder ($CLAUDE_CONFIG_DIR, else
	// ~/.claude).
	ClaudeDir string
	// MCPImport names the agents whose MCP servers a workspace's files
	// configure (.mcp.json, .gemini/settings.json) are read: they start
	// once the workspace is trusted, and trusting it says so.
	MCPImport []imported.Agent
	// Home anchors `~/` in path rules.
	Home   string
	Logger *slog.Logger
}

// Engine is one acpd process's policy: the workspaces its sessions work
// in, each read once and shared.
type Engine struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	spaces map[string]*Workspace
	// declined holds, per workspace, the settings' digest the user
	// declined to trust in this process: not asked again until the files
	// change or acpd restarts.
	declined map[string]string
	// asking marks a workspace whose trust question is on the screen, so
	// two sessions do not ask at once.
	asking map[string]bool
}

// New returns an engine.
func New(o Options) *Engine {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ClaudeDir == "" && o.Home != "" {
		o.ClaudeDir = filepath.Join(o.Home, ".claude")
	}
	return &Engine{opts: o, log: o.Logger, spaces: map[string]*Workspace{}, declined: map[string]string{}, asking: map[string]bool{}}
}

// Workspace is the shared state of the workspace at dir (resolved to its
// real path).
func (e *Engine) Workspace(dir string) *Workspace {
	root := realDir(dir)
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.spaces[root]
	if w == nil {
		w = &Workspace{e: e, Root: root}
		e.spaces[root] = w
	}
	return w
}

// realDir is dir with its symlinks resolved; dir itself (cleaned) when it
// cannot be resolved.
func realDir(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return filepath.Clean(dir)
}
