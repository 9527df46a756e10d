package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/acpd/acpd/session/hooks"
	"github.com/acpd/acpd/session/rules"
)

// recheck is how long a workspace's sources are taken as read before
// their files are looked at again: an answer this process wrote counts at
// once, another process's (or a hand edit) within this delay.
const recheck = 500 * time.Millisecond

// Workspace is the policy of one workspace, shared by its sessions.
type Workspace struct {
	e *Engine
	// Root is the workspace's real path.
	Root string

	mu     sync.Mutex
	snap   *Snapshot
	due    time.Time
	stamps []stamp
	gen    uint64
}

// Snapshot is the policy of a workspace at one moment.
type Snapshot struct {
	// Gen changes whenever the snapshot does.
	Gen uint64
	// Rules are the rules in force, in the order acpd permissions lists
	// their sources.
	Rules []rules.Rule
	// Hooks are the hooks in force.
	Hooks hooks.Config
	// Project is what the workspace's settings files say; Trusted whether
	// the user trusted them as they are.
	Project *Project
	Trusted bool
	// Problems are the files and rules that could not be read.
	Problems []string
}

// stamp is what is known of a source file without reading it.
type stamp struct {
	path string
	size int64
	mod  time.Time
	ok   bool
}

func stampOf(path string) stamp {
	st, err := os.Stat(path)
	if err != nil {
		return stamp{path: path}
	}
	return stamp{path: path, size: st.Size(), mod: st.ModTime(), ok: true}
}

// UserRulesFile and RulesFile are the workspace's two rules files of
// "always" answers ("" without a state folder).
func (w *Workspace) UserRulesFile() string {
	if w.e.opts.StateDir == "" {
		return ""
	}
	return UserFile(w.e.opts.StateDir)
}

func (w *Workspace) RulesFile() string {
	if w.e.opts.StateDir == "" {
		return ""
	}
	return WorkspaceFile(w.e.opts.StateDir, w.Root)
}

// claudeUserFile is Claude Code's user settings file, when opted in.
func (w *Workspace) claudeUserFile() string {
	if !w.e.opts.ClaudeUser || w.e.opts.ClaudeDir == "" {
		return ""
	}
	return filepath.Join(w.e.opts.ClaudeDir, "settings.json")
}

// watched are the files whose change makes a new snapshot.
func (w *Workspace) watched(scripts []string) []string {
	var out []string
	for _, p := range []string{w.UserRulesFile(), w.RulesFile(), w.claudeUserFile()} {
		if p != "" {
			out = append(out, p)
		}
	}
	if w.e.opts.StateDir != "" {
		out = append(out, TrustFile(w.e.opts.StateDir))
	}
	for _, pf := range ProjectFiles {
		out = append(out, filepath.Join(w.Root, pf.Rel))
	}
	return append(out, scripts...)
}

// Invalidate makes the next Snapshot read the sources again.
func (w *Workspace) Invalidate() {
	w.mu.Lock()
	w.due = time.Time{}
	w.stamps = nil
	w.mu.Unlock()
}

// Snapshot is the workspace's policy now: read again when a source file
// changed (looked at once per recheck).
func (w *Workspace) Snapshot() *Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if w.snap != nil && now.Before(w.due) {
		return w.snap
	}
	w.due = now.Add(recheck)
	if w.snap != nil && w.stamps != nil && !w.changed() {
		return w.snap
	}
	w.gen++
	w.snap = w.load()
	w.snap.Gen = w.gen
	return w.snap
}

// changed reports whether a watched file changed since the snapshot.
func (w *Workspace) changed() bool {
	for _, s := range w.stamps {
		if stampOf(s.path) != s {
			return true
		}
	}
	return false
}

// load reads every source. The files' stamps are taken before they are
// read, so a change while reading makes the next snapshot read again.
func (w *Workspace) load() *Snapshot {
	o := w.e.opts
	pre := w.watched(nil)
	stamps := make([]stamp, 0, len(pre)+2)
	for _, p := range pre {
		stamps = append(stamps, stampOf(p))
	}
	s := &Snapshot{}
	s.Rules = append(s.Rules, o.Rules...)
	s.Hooks = append(s.Hooks, o.Hooks...)
	for _, f := range []struct {
		path  string
		scope rules.Scope
	}{{w.UserRulesFile(), rules.ScopeUser}, {w.RulesFile(), rules.ScopeWorkspace}} {
		if f.path == "" {
			continue
		}
		rs, bad, err := ReadRulesFile(f.path, f.scope)
		if err != nil {
			s.Problems = append(s.Problems, err.Error())
		}
		for _, b := range bad {
			s.Problems = append(s.Problems, b.Error())
		}
		s.Rules = append(s.Rules, rs...)
	}
	if cf := w.claudeUserFile(); cf != "" {
		data, err := readBounded(cf)
		switch {
		case os.IsNotExist(err):
		case err != nil:
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", cf, err))
		default:
			st, err := claudeSettings(data)
			if err != nil {
				s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", cf, err))
				break
			}
			rs, bad := st.rules(rules.Source{Scope: rules.ScopeClaudeUser, File: cf, Anchor: o.ClaudeDir})
			s.Problems = append(s.Problems, bad...)
			s.Rules = append(s.Rules, rs...)
			if st.hooks != nil {
				hs, errs := hooks.Decode(st.hooks, hooks.Source{File: cf})
				for _, e := range errs {
					s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", cf, e))
				}
				s.Hooks = append(s.Hooks, hs...)
			}
		}
	}
	p := loadProject(w.Root, w.e.opts.MCPImport)
	s.Project = p
	s.Problems = append(s.Problems, p.Problems...)
	s.Rules = append(s.Rules, p.Narrow...)
	if p.Widens() && p.Digest != "" && w.e.trustedDigest(w.Root) == p.Digest {
		s.Trusted = true
		s.Rules = append(s.Rules, p.Allow...)
		s.Hooks = append(s.Hooks, p.Hooks...)
	}
	for _, sc := range p.Scripts {
		stamps = append(stamps, stampOf(sc))
	}
	w.stamps = slices.Clip(stamps)
	for _, pr := range s.Problems {
		w.e.log.Warn("permission settings", "problem", pr)
	}
	return s
}
