package imported

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxUserFileBytes bounds the user's own files. ~/.claude.json also holds
// Claude Code's per-project state and grows to megabytes; 64 MiB is far
// past any seen and still bounded.
const maxUserFileBytes = 64 << 20

// Options say which agents' files are read and where they are.
type Options struct {
	// Agents are the sources (the configuration's mcp.import); none: no
	// import.
	Agents []Agent
	// Home is the user's home folder.
	Home string
	// ClaudeConfigDir is $CLAUDE_CONFIG_DIR: when set, Claude Code keeps
	// its .claude.json and settings.json there.
	ClaudeConfigDir string
	// CodexHome is $CODEX_HOME (Codex's folder; ~/.codex when unset).
	CodexHome string
}

// Has reports whether the agent's files are read.
func (o Options) Has(a Agent) bool { return slices.Contains(o.Agents, a) }

// file is name in the agent's folder when its variable gives one, else
// the path under the home folder ("" without one).
func (o Options) file(dir, name string, inHome ...string) string {
	if dir != "" {
		return filepath.Join(dir, name)
	}
	if o.Home == "" {
		return ""
	}
	return filepath.Join(append([]string{o.Home}, inHome...)...)
}

// ClaudeGlobalFile is Claude Code's ~/.claude.json.
func (o Options) ClaudeGlobalFile() string {
	return o.file(o.ClaudeConfigDir, ".claude.json", ".claude.json")
}

// ClaudeSettingsFile is Claude Code's user settings file.
func (o Options) ClaudeSettingsFile() string {
	return o.file(o.ClaudeConfigDir, "settings.json", ".claude", "settings.json")
}

// GeminiSettingsFile is Gemini CLI's user settings file.
func (o Options) GeminiSettingsFile() string { return o.file("", "", ".gemini", "settings.json") }

// CodexConfigFile is Codex's user configuration.
func (o Options) CodexConfigFile() string {
	return o.file(o.CodexHome, "config.toml", ".codex", "config.toml")
}

// User is what the user's own files say for a workspace: the servers of
// Claude Code's user and local scopes and Gemini CLI's user settings, the
// names of the workspace's .mcp.json servers switched off there, and
// Gemini CLI's allowed and excluded lists.
type User struct {
	Found
	ClaudeDisabled []string
	GeminiLists    []GeminiLists
}

// ReadUser reads the user's files for the workspace (its real path).
func ReadUser(o Options, workspace string) User {
	var u User
	// read parses a file that exists; what fails is a problem.
	read := func(file string, parse func(data []byte) error) {
		if file == "" {
			return
		}
		data, err := readCached(file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			u.Problems = append(u.Problems, fmt.Sprintf("%s: %v", file, err))
		default:
			if err := parse(data); err != nil {
				u.Problems = append(u.Problems, err.Error())
			}
		}
	}
	if o.Has(Claude) {
		file := o.ClaudeGlobalFile()
		read(file, func(data []byte) error {
			f, disabled, err := ClaudeGlobal(data, file, workspace)
			u.add(f)
			u.ClaudeDisabled = append(u.ClaudeDisabled, disabled...)
			return err
		})
		read(o.ClaudeSettingsFile(), func(data []byte) error {
			u.ClaudeDisabled = append(u.ClaudeDisabled, ClaudeDisabled(data)...)
			return nil
		})
	}
	if o.Has(Gemini) {
		file := o.GeminiSettingsFile()
		read(file, func(data []byte) error {
			f, lists, err := GeminiSettings(data, file, ScopeUser)
			u.add(f)
			u.GeminiLists = append(u.GeminiLists, lists)
			return err
		})
	}
	if o.Has(Codex) {
		file := o.CodexConfigFile()
		read(file, func(data []byte) error {
			f, err := CodexConfig(data, file, ScopeUser)
			u.add(f)
			return err
		})
	}
	return u
}

// cache keeps the user's files as last read: ~/.claude.json may be
// megabytes and every session start reads it.
var cache struct {
	mu    sync.Mutex
	files map[string]cached
}

type cached struct {
	size int64
	mod  time.Time
	data []byte
}

// readCached reads a regular file of at most maxUserFileBytes, again only
// when its size or modification time changed.
func readCached(path string) ([]byte, error) {
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
		return nil, errors.New("not a regular file")
	}
	cache.mu.Lock()
	c, ok := cache.files[path]
	cache.mu.Unlock()
	if ok && c.size == st.Size() && c.mod.Equal(st.ModTime()) {
		return c.data, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxUserFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxUserFileBytes {
		return nil, fmt.Errorf("larger than %d MiB", maxUserFileBytes>>20)
	}
	cache.mu.Lock()
	if cache.files == nil {
		cache.files = map[string]cached{}
	}
	cache.files[path] = cached{size: st.Size(), mod: st.ModTime(), data: data}
	cache.mu.Unlock()
	return data, nil
}

// Project is what a workspace's files say (read by package policy, which
// binds trust to them).
type Project struct {
	Found
	ClaudeDisabled []string
	GeminiLists    []GeminiLists
}

// Merge is the imported servers of a session, in the order they are taken
// and with the switched-off ones removed: Claude Code's local scope, its
// project scope (when trusted), its user scope, then Gemini CLI's project
// settings (when trusted) and user settings, then Codex's project and user
// configuration. A name already taken (by the
// client's session/new, passed as taken, or by an earlier scope) shadows
// the later server, reported in Off.
func Merge(u User, p *Project, trusted bool, taken []string) Found {
	var all Found
	all.Problems = append(all.Problems, u.Problems...)
	all.Off = append(all.Off, u.Off...)
	var proj []Server
	disabled := u.ClaudeDisabled
	lists := u.GeminiLists
	if p != nil {
		all.Problems = append(all.Problems, p.Problems...)
		all.Off = append(all.Off, p.Off...)
		disabled = append(slices.Clip(disabled), p.ClaudeDisabled...)
		lists = append(slices.Clip(lists), p.GeminiLists...)
		if trusted {
			proj = p.Servers
		} else {
			for _, s := range p.Servers {
				all.Off = append(all.Off, Off{Name: s.Name, File: s.File, Why: "the workspace is not trusted"})
			}
		}
	}
	rank := func(s Server) int {
		r := map[Scope]int{ScopeLocal: 0, ScopeProject: 1, ScopeUser: 2}[s.Scope]
		switch s.Agent {
		case Gemini:
			r += 3
		case Codex:
			r += 6
		}
		return r
	}
	cands := append(slices.Clip(u.Servers), proj...)
	slices.SortStableFunc(cands, func(a, b Server) int { return rank(a) - rank(b) })
	all.Servers = cands
	ApplyClaudeDisabled(&all, disabled)
	ApplyGemini(&all, lists)
	seen := map[string]bool{}
	for _, n := range taken {
		seen[n] = true
	}
	keep := all.Servers[:0]
	for _, s := range all.Servers {
		if seen[s.Name] {
			all.Off = append(all.Off, Off{Name: s.Name, File: s.File, Why: "a server of the same name comes first"})
			continue
		}
		seen[s.Name] = true
		keep = append(keep, s)
	}
	all.Servers = keep
	return all
}

// Resolve makes merged servers ready to start for the workspace at root:
// their variables expanded from lookup; a project server's folder the
// workspace (or its cwd there), another's its cwd when it names one; a
// stdio command that is a bare name found by lookPath, a relative path
// taken from the server's folder. A server that cannot be made ready is
// left out, with a problem.
func Resolve(f Found, root string, lookup func(string) (string, bool), lookPath func(string) (string, error)) Found {
	keep := f.Servers[:0:0]
	for _, s := range f.Servers {
		s, err := Expand(s, lookup)
		if err != nil {
			f.Problems = append(f.Problems, err.Error())
			continue
		}
		if s.Dir != "" && !filepath.IsAbs(s.Dir) {
			s.Dir = filepath.Join(root, s.Dir)
		}
		if s.Dir == "" && s.Scope == ScopeProject {
			// Claude Code runs a project's servers in the project, and
			// .mcp.json files name their scripts from there.
			s.Dir = root
		}
		if s.Type == "" {
			switch {
			case filepath.IsAbs(s.Command):
			case !strings.ContainsRune(s.Command, '/') && !strings.ContainsRune(s.Command, filepath.Separator):
				p, err := lookPath(s.Command)
				if err == nil && !filepath.IsAbs(p) {
					p, err = filepath.Abs(p)
				}
				if err != nil {
					f.Problems = append(f.Problems, fmt.Sprintf("mcp server %q (%s): command %q: %v", s.Name, s.File, s.Command, err))
					continue
				}
				s.Command = p
			case s.Dir != "":
				s.Command = filepath.Join(s.Dir, s.Command)
			default:
				f.Problems = append(f.Problems, fmt.Sprintf("mcp server %q (%s): command %q is relative and the server has no folder; give an absolute path", s.Name, s.File, s.Command))
				continue
			}
		}
		keep = append(keep, s)
	}
	f.Servers = keep
	return f
}
