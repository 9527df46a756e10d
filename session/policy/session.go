package policy

import (
	"path/filepath"
	"sync"

	"github.com/acpd/acpd/session/mcp/imported"
	"github.com/acpd/acpd/session/rules"
)

// Session is the policy of one ACP session (and of its subagents' runs):
// the workspace's rules compiled for the session's roots.
type Session struct {
	ws *Workspace
	// ID and Transcript are what hooks are told of the session.
	ID, Transcript string
	roots          []string // real paths, the cwd first

	mu  sync.Mutex
	gen uint64
	set *rules.Set
	// pending holds PreToolUse context until its call has a result.
	pending map[string]string
}

// Session is the policy of a session of this workspace with roots (its
// cwd first, then its additional directories).
func (w *Workspace) Session(id, transcript string, roots []string) *Session {
	s := &Session{ws: w, ID: id, Transcript: transcript}
	for _, r := range roots {
		s.roots = append(s.roots, realDir(r))
	}
	if len(s.roots) == 0 {
		s.roots = []string{w.Root}
	}
	return s
}

// Workspace is the session's workspace.
func (s *Session) Workspace() *Workspace { return s.ws }

// current is the workspace's snapshot with its rules compiled for the
// session (compiled again only when the snapshot changed).
func (s *Session) current() (*Snapshot, *rules.Set) {
	snap := s.ws.Snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil || s.gen != snap.Gen {
		s.set = rules.NewSet(rules.Workspace{Root: s.ws.Root, Home: s.ws.e.opts.Home}, s.roots, snap.Rules)
		s.gen = snap.Gen
	}
	return snap, s.set
}

// inRoot reports whether p lies in the workspace's root folder, and its
// path relative to it.
func (s *Session) inRoot(p string) (string, bool) {
	r, err := filepath.Rel(s.ws.Root, p)
	if err != nil || r == ".." || len(r) > 2 && r[:3] == ".."+string(filepath.Separator) || filepath.IsAbs(r) {
		return "", false
	}
	return r, true
}

// ProjectMCP is what the workspace's files say of MCP servers, and
// whether the user trusted them as they are (only then do they start).
func (s *Session) ProjectMCP() (*imported.Project, bool) {
	if s == nil {
		return nil, false
	}
	snap := s.ws.Snapshot()
	if snap.Project == nil {
		return nil, false
	}
	return &snap.Project.MCP, snap.Trusted
}
