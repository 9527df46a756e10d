package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Policy is the sandbox configuration of one acpd process ([tools] sandbox,
// sandboxWritable, sandboxNetwork), plus where the helper is.
type Policy struct {
	Mode Mode
	// Writable are further folders commands may write (absolute paths;
	// tools.sandboxWritable). Missing ones are skipped with a note.
	Writable []string
	// DenyNetwork refuses IP sockets (tools.sandboxNetwork = false).
	DenyNetwork bool
	// CacheDir is the acpd-owned folder the tool caches (Go build cache,
	// npm, pip, cargo, XDG_CACHE_HOME) are pointed at; writable for
	// commands. Empty: no cache redirection.
	CacheDir string
	// Helper is the executable that understands Subcommand: acpd itself
	// (os.Executable). Tests inject a binary they built.
	Helper string
	// TempRoot is where per-session temp folders are made ("" = os.TempDir()).
	TempRoot string
	// Probe reports the kernel's support; nil means the package's Probe.
	Probe func() Status
	// NoSpawnServer runs every confined command through its own helper
	// process instead of the session's spawn server (benchmarks compare
	// the two; the per-command helper is also the fallback).
	NoSpawnServer bool
}

// Status is the kernel's support as this policy sees it.
func (p *Policy) Status() Status { return p.status() }

func (p *Policy) status() Status {
	if p.Probe != nil {
		return p.Probe()
	}
	return Probe()
}

// Enabled reports whether commands are to be confined at all (mode not off).
func (p *Policy) Enabled() bool { return p != nil && p.Mode != ModeOff && p.Mode != "" }

// Describe is the one-paragraph status for `acpd config` / `acpd doctor`:
// mode, backend and ABI, what commands may write, network.
func (p *Policy) Describe() string {
	if !p.Enabled() {
		return "sandbox: off (commands run unconfined)"
	}
	st := p.status()
	var b strings.Builder
	fmt.Fprintf(&b, "sandbox: mode %s, %s", p.Mode, st)
	if st.Simulated {
		fmt.Fprintf(&b, " (simulated by %s; kernel ABI %d)", ABIEnv, st.KernelABI)
	}
	if !st.Usable() {
		if p.Mode == ModeRequired {
			b.WriteString("\n  commands are refused")
		} else {
			b.WriteString("\n  commands run UNCONFINED")
		}
		return b.String()
	}
	b.WriteString("\n  writable: the session's workspace roots, a private per-session TMPDIR")
	if p.CacheDir != "" {
		fmt.Fprintf(&b, ", tool caches in %s", p.CacheDir)
	}
	b.WriteString(", /dev/null, /dev/zero, /dev/full, /dev/tty, /dev/ptmx, /dev/pts, /dev/shm")
	for _, w := range p.Writable {
		b.WriteString(", " + w)
	}
	if p.DenyNetwork {
		how := "seccomp socket filter"
		if st.NetworkRules() {
			how = "Landlock TCP rules + seccomp socket filter"
		}
		fmt.Fprintf(&b, "\n  network: denied (%s)", how)
	} else {
		b.WriteString("\n  network: allowed")
	}
	return b.String()
}

// Session is the sandbox of one ACP session: its workspace roots and its
// private temp folder, made at the first confined command and removed by
// Close. Safe for concurrent use.
type Session struct {
	p     *Policy
	roots []string

	mu     sync.Mutex
	tmp    string
	warned bool
	closed bool

	// The session's spawn server (see zygote_linux.go).
	zmu     sync.Mutex
	zy      *zygote
	zfails  int
	zclosed bool
}

// NewSession returns the sandbox of a session working in roots.
func (p *Policy) NewSession(roots []string) *Session {
	return &Session{p: p, roots: append([]string(nil), roots...)}
}

// Close stops the session's spawn server and removes its temp folder.
func (s *Session) Close() error {
	if s == nil {
		return nil
	}
	s.closeZygote()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.tmp == "" {
		return nil
	}
	err := os.RemoveAll(s.tmp)
	s.tmp = ""
	return err
}

// TempDir returns the session's private temp folder, making it if needed.
func (s *Session) TempDir() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("session closed")
	}
	if s.tmp == "" {
		d, err := os.MkdirTemp(s.p.TempRoot, "acpd-sandbox-")
		if err != nil {
			return "", fmt.Errorf("making the session's temp folder: %w", err)
		}
		s.tmp = d
	}
	return s.tmp, nil
}

// Plan is how to run one command.
type Plan struct {
	// Confined: Argv starts the helper. Otherwise Argv is the command itself.
	Confined bool
	Argv     []string
	// Command is the command Argv confines (set when Confined), for the
	// session's spawn server ([Session.Spawn]).
	Command []string
	// Env is added to the command's environment (TMPDIR, cache locations).
	Env []string
	// Writable lists the folders the command may write, for messages.
	Writable []string
	// Warning, when set, is shown with the result: the command ran
	// unconfined in mode auto, and why.
	Warning string
	// DenyNetwork is set when the command has no network.
	DenyNetwork bool
}

// ErrRefused is wrapped by the error Wrap returns in mode required when the
// kernel cannot confine the command.
var ErrRefused = errors.New("sandbox unavailable")

// Wrap decides how to run argv (e.g. /bin/sh -c CMD). statusFD is the file
// descriptor the helper reports set-up failures on (-1: none, as in an
// editor terminal). In mode required on a kernel without Landlock it
// returns an error wrapping ErrRefused, whose text says why and what the
// user can change.
func (s *Session) Wrap(argv []string, statusFD int) (Plan, error) {
	if s == nil || !s.p.Enabled() {
		return Plan{Argv: argv}, nil
	}
	st := s.p.status()
	if !st.Usable() {
		return s.unconfined(argv, st.Err)
	}
	tmp, err := s.TempDir()
	if err != nil {
		return Plan{}, err
	}
	writable := append([]string(nil), s.roots...)
	for _, r := range s.roots {
		writable = append(writable, linkedGitDirs(r)...)
	}
	writable = append(writable, tmp)
	env := []string{"TMPDIR=" + tmp, "TMP=" + tmp, "TEMP=" + tmp}
	if c := s.p.CacheDir; c != "" {
		if err := os.MkdirAll(c, 0o700); err != nil {
			return s.unconfined(argv, fmt.Errorf("making the tool-cache folder: %w", err))
		}
		writable = append(writable, c)
		env = append(env, CacheEnv(c)...)
	}
	for _, w := range s.p.Writable {
		if _, err := os.Stat(w); err == nil {
			writable = append(writable, w)
		}
	}
	helper := []string{s.p.Helper, Subcommand}
	if statusFD >= 0 {
		helper = append(helper, "--status-fd", strconv.Itoa(statusFD))
	}
	for _, w := range writable {
		helper = append(helper, "--rw", w)
	}
	if s.p.DenyNetwork {
		helper = append(helper, "--no-net")
	}
	helper = append(append(helper, "--"), argv...)
	return Plan{Confined: true, Argv: helper, Command: argv, Env: env, Writable: writable, DenyNetwork: s.p.DenyNetwork}, nil
}

// Fallback is what to do when the helper reported a set-up failure (msg):
// in mode required an error wrapping ErrRefused, in mode auto a plan that
// runs argv unconfined with a warning.
func (s *Session) Fallback(argv []string, msg string) (Plan, error) {
	return s.unconfined(argv, errors.New(msg))
}

func (s *Session) unconfined(argv []string, why error) (Plan, error) {
	if s.p.Mode == ModeRequired {
		return Plan{}, fmt.Errorf("%w: %v. The command was not run: [tools] sandbox = \"required\" refuses to run commands unconfined. "+
			"The user can set [tools] sandbox = \"auto\" (run unconfined with a warning) or \"off\" in acpd's configuration", ErrRefused, why)
	}
	s.mu.Lock()
	first := !s.warned
	s.warned = true
	s.mu.Unlock()
	p := Plan{Argv: argv}
	if first {
		p.Warning = fmt.Sprintf("[sandbox: %v; this and later commands of the session run UNCONFINED ([tools] sandbox = \"auto\"); set sandbox = \"required\" to refuse instead]", why)
	}
	return p, nil
}

// linkedGitDirs returns the git folders outside root that git writes when
// root is (in) a linked worktree or a submodule: their ".git" is a file
// naming the real git folder elsewhere ("gitdir: …"), and a commit writes
// there (index, HEAD, logs) and in the common folder it names (objects,
// refs). Without them `git commit` fails in every linked worktree, as it did
// for peers' sandboxes. An ordinary ".git" folder is not followed: inside the
// root it is writable already, and above it (a workspace that is a subfolder
// of a repository, or a home folder under git) it is left to
// tools.sandboxWritable.
func linkedGitDirs(root string) []string {
	for dir := root; ; {
		p := filepath.Join(dir, ".git")
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return nil
		case err == nil && fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			line, _, _ := strings.Cut(string(b), "\n")
			gitdir, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
			if !ok {
				return nil
			}
			gitdir = strings.TrimSpace(gitdir)
			if !filepath.IsAbs(gitdir) {
				gitdir = filepath.Join(dir, gitdir)
			}
			if _, err := os.Stat(gitdir); err != nil {
				return nil
			}
			out := []string{filepath.Clean(gitdir)}
			if c, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
				common := strings.TrimSpace(string(c))
				if !filepath.IsAbs(common) {
					common = filepath.Join(gitdir, common)
				}
				out = append(out, filepath.Clean(common))
			}
			return out
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// DefaultCacheDir is the acpd-owned folder for confined commands' tool
// caches: $XDG_CACHE_HOME/acpd/sandbox (~/.cache/acpd/sandbox), or a folder
// in dataDir when there is no cache home.
func DefaultCacheDir(dataDir string) string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "acpd", "sandbox")
	}
	if dataDir != "" {
		return filepath.Join(dataDir, "sandbox-cache")
	}
	return ""
}

// CacheEnv points the usual tool caches into dir, so builds and tests work
// in the sandbox without write access to the user's own caches (a build
// cache written by a confined command would be trusted by later unconfined
// builds). Module and package caches that are only read (GOMODCACHE) keep
// their place.
func CacheEnv(dir string) []string {
	j := func(name string) string { return filepath.Join(dir, name) }
	return []string{
		"GOCACHE=" + j("go-build"),
		"npm_config_cache=" + j("npm"),
		"YARN_CACHE_FOLDER=" + j("yarn"),
		"PIP_CACHE_DIR=" + j("pip"),
		"CARGO_HOME=" + j("cargo"),
		"XDG_CACHE_HOME=" + j("xdg"),
	}
}

// Explain is the note added to a confined command's failed result when its
// output shows a refused write: what the sandbox allows and how the user
// can change it.
func (p *Plan) Explain() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[sandbox: this command ran confined by acpd's Landlock sandbox. It may read everywhere but write only in: %s, and /dev/null, /dev/tty, /dev/pts, /dev/shm; ",
		strings.Join(p.Writable, ", "))
	b.WriteString("writes elsewhere fail with \"Permission denied\". Use $TMPDIR for temporary files, not /tmp.")
	if p.DenyNetwork {
		b.WriteString(" Network access is denied ([tools] sandboxNetwork = false).")
	}
	b.WriteString(" Do not retry the same write elsewhere outside these folders. The user can allow more folders with [tools] sandboxWritable = [\"/path\"] or turn the sandbox off with [tools] sandbox = \"off\" in acpd's configuration.]")
	return b.String()
}

// LooksRefused reports whether a command's output shows a write or network
// access the sandbox refused (EACCES from Landlock and seccomp; EPERM and
// EROFS are matched too, as other sandboxes report those).
func LooksRefused(output string) bool {
	for _, s := range []string{"Permission denied", "Operation not permitted", "Read-only file system", "EACCES", "PermissionError"} {
		if strings.Contains(output, s) {
			return true
		}
	}
	return false
}
