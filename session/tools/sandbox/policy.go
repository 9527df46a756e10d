package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	// Proxy gives commands the network only through acpd's proxy
	// (tools.sandboxNetwork = "proxy"), with AllowedDomains passing
	// without a question (tools.sandboxAllowedDomains).
	Proxy          bool
	AllowedDomains []string
	// NewProxy makes a session's proxy (package netproxy, given by acpd's
	// main package); nil: proxied commands reach nothing.
	NewProxy func(ProxyConfig) ProxyServer
	// Env decides which of acpd's environment variables commands inherit,
	// in every mode, off included.
	Env EnvPolicy
	// DenyRead are the absolute paths confined commands may not read: the
	// user's credentials, acpd's own folders, the tool caches of other
	// workspaces (see readdeny.go and DefaultDenyRead).
	DenyRead []string
	// CacheDir is the acpd-owned folder holding the tool caches (Go
	// build cache, npm, pip, cargo, XDG_CACHE_HOME) commands are pointed
	// at: one subfolder per workspace (see Session.CacheDir), and only
	// that one is writable for a session's commands. Empty: no cache
	// redirection.
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
	// CacheNote says why there is no tool-cache folder, when NewPolicy
	// could not make it.
	CacheNote string
	// ShmProbe reports whether commands can get a private /dev/shm (nil
	// when they can); nil means the real probe, which runs the helper once
	// (see shm_linux.go). Tests inject a failing one.
	ShmProbe func() error

	shmOnce sync.Once
	shmErr  error

	// ports are the TCP ports commands may not connect to (DenyConnect).
	portsMu sync.Mutex
	ports   *portRules
}

// PrivateShm reports whether each session's commands get a /dev/shm of
// their own (nil), or why not. Decided once, like Landlock's support,
// before the first command: it runs the helper once as every command's is
// run, in new namespaces.
func (p *Policy) PrivateShm() error {
	p.shmOnce.Do(func() {
		if os.Getenv(NoNamespacesEnv) == "1" {
			p.shmErr = fmt.Errorf("namespaces disabled by %s=1 (simulated)", NoNamespacesEnv)
			return
		}
		if p.ShmProbe != nil {
			p.shmErr = p.ShmProbe()
		} else {
			p.shmErr = probeShm(p.Helper, p.TempRoot)
		}
	})
	return p.shmErr
}

// Settings are what the configuration says about the sandbox ([tools]
// sandbox, sandboxWritable, sandboxNetwork) and where acpd keeps its data.
type Settings struct {
	Mode     string
	Writable []string
	// Network is tools.sandboxNetwork: "true", "false" or "proxy";
	// AllowedDomains are tools.sandboxAllowedDomains.
	Network        string
	AllowedDomains []string
	NewProxy       func(ProxyConfig) ProxyServer
	DataDir        string
	// Env is the commands' environment policy.
	Env EnvPolicy
	// DenyRead are the paths commands may not read.
	DenyRead []string
	// Probe overrides the kernel probe (tests).
	Probe func() Status
}

// NewPolicy is the one place a Policy is made from the configuration: the
// daemon's commands and `acpd doctor` get the same one, so what doctor
// reports is what commands get. It finds acpd's own executable (the
// helper) and makes the tool-cache folder now; a cache folder that cannot
// be made is dropped, with CacheNote saying why — commands stay confined,
// only without redirected caches.
func NewPolicy(s Settings) *Policy {
	p := &Policy{Mode: Mode(s.Mode), Writable: s.Writable, DenyNetwork: s.Network == "false", Proxy: s.Network == "proxy",
		AllowedDomains: s.AllowedDomains, NewProxy: s.NewProxy, Probe: s.Probe, Env: s.Env, DenyRead: s.DenyRead}
	if exe, err := os.Executable(); err == nil {
		p.Helper = exe
	} else if p.Enabled() {
		// Without its own binary acpd cannot start the helper: known at
		// start-up, like a kernel without Landlock.
		p.Probe = func() Status {
			return Status{Backend: "landlock", Err: fmt.Errorf("cannot find acpd's own executable to run the helper: %w", err)}
		}
	}
	if !p.Enabled() {
		return p
	}
	if c := DefaultCacheDir(s.DataDir); c != "" {
		if err := os.MkdirAll(c, 0o700); err != nil {
			p.CacheNote = fmt.Sprintf("no tool-cache folder (%v): caches stay where the tools put them, which is not writable", err)
		} else {
			p.CacheDir = c
		}
	}
	return p
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
		return "sandbox: off (commands run unconfined)\n  environment: " + p.Env.Describe()
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
		b.WriteString("\n  environment: " + p.Env.Describe())
		return b.String()
	}
	if n := len(p.DenyRead); n > 0 {
		fmt.Fprintf(&b, "\n  readable: everything but %d denied paths (your credentials, acpd's own folders; `acpd config` lists them)", n)
	} else {
		b.WriteString("\n  readable: everything")
	}
	b.WriteString("\n  writable: the session's workspace roots, a private per-session TMPDIR")
	if p.CacheDir != "" {
		fmt.Fprintf(&b, ", tool caches in %s (one folder per workspace)", p.CacheDir)
	}
	b.WriteString(", /dev/null, /dev/zero, /dev/full, /dev/tty, /dev/ptmx, /dev/pts")
	if err := p.PrivateShm(); err == nil {
		b.WriteString(", a private per-session /dev/shm")
	} else {
		fmt.Fprintf(&b, "\n  /dev/shm: not writable (no private one: %v; the machine's would be shared by every workspace's commands)", err)
	}
	extra, missing := p.extraWritable()
	for _, w := range extra {
		b.WriteString(", " + w)
	}
	for _, w := range missing {
		b.WriteString(", " + w + " (missing: skipped)")
	}
	if p.CacheNote != "" {
		b.WriteString("\n  " + p.CacheNote)
	}
	if st.SignalScoping() {
		b.WriteString("\n  signals: scoped (a command cannot signal acpd, the editor, the spawn server or other commands)")
	} else {
		fmt.Fprintf(&b, "\n  signals: not scoped (Landlock ABI %d < %d, Linux < 6.12: a command can signal or stop acpd)", st.ABI, scopeABI)
	}
	switch {
	case p.DenyNetwork:
		how := "seccomp socket filter"
		if st.NetworkRules() {
			how = "Landlock TCP rules + seccomp socket filter"
		}
		fmt.Fprintf(&b, "\n  network: denied (%s)", how)
	case p.Proxy && p.PrivateShm() != nil:
		fmt.Fprintf(&b, "\n  network: denied (proxy mode needs a network namespace, which the kernel refuses: %v)", p.PrivateShm())
	case p.Proxy:
		allowed := "none"
		if len(p.AllowedDomains) > 0 {
			allowed = strings.Join(p.AllowedDomains, ", ")
		}
		fmt.Fprintf(&b, "\n  network: only through acpd's proxy (a network namespace of their own; no unix sockets); allowed without asking: %s; other hosts asked about", allowed)
	default:
		b.WriteString("\n  network: allowed")
	}
	b.WriteString("\n  environment: " + p.Env.Describe())
	return b.String()
}

// Session is the sandbox of one ACP session: its workspace roots and its
// private temp folder, made at the first confined command and removed by
// Close. Safe for concurrent use.
type Session struct {
	p     *Policy
	roots []string
	// gitDirs are the linked git folders of the roots, decided once when
	// the session starts: a ".git" file a command plants later changes
	// nothing for this session.
	gitDirs []string
	// cache is the session's tool-cache folder in the policy's CacheDir
	// ("" without one), named after what its commands may write.
	cache string

	mu  sync.Mutex
	tmp string
	// shm is the session's private /dev/shm, made next to tmp.
	shm    string
	warned bool
	closed bool

	// status is the session's folder for the helpers' set-up failure
	// reports when there is no status pipe; statusSeq names its files;
	// statusErr is why there is none.
	status    string
	statusSeq int
	statusErr error

	// The session's proxy (proxy mode) and the commands running that
	// may be asked about a host (see netproxy.go).
	pmu     sync.Mutex
	proxy   ProxyServer
	running []*NetworkAsker

	// The deny list resolved (symlinks on the way followed) and the
	// stamp of the folders it splits (see deniedReal).
	dmu       sync.Mutex
	denyReal  []string
	denyStamp string

	// The session's spawn server (see zygote_linux.go).
	zmu     sync.Mutex
	zy      *zygote
	zfails  int
	zclosed bool
}

// NewSession returns the sandbox of a session working in roots.
func (p *Policy) NewSession(roots []string) *Session {
	s := &Session{p: p, roots: append([]string(nil), roots...)}
	if !p.Enabled() {
		// Mode off confines nothing; the session still filters the
		// commands' environment.
		return s
	}
	for _, r := range roots {
		s.gitDirs = append(s.gitDirs, linkedGitDirs(r)...)
	}
	if p.CacheDir != "" && len(roots) > 0 {
		s.cache = filepath.Join(p.CacheDir, cacheKey(roots, s.gitDirs, p.Writable, p.DenyNetwork))
	}
	return s
}

// CommandEnv is environ without what commands must not inherit (see
// EnvPolicy). A nil session filters with the built-in rules only.
func (s *Session) CommandEnv(environ []string) []string {
	var e EnvPolicy
	if s != nil {
		e = s.p.Env
	}
	kept, _ := e.Filter(environ)
	return kept
}

// DroppedEnv lists the names of environ that commands do not inherit and
// that hold a value.
func (s *Session) DroppedEnv(environ []string) []string {
	var e EnvPolicy
	if s != nil {
		e = s.p.Env
	}
	var set []string
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); v != "" && e.Drops(k) {
			set = append(set, k)
		}
	}
	return set
}

// CacheDir is the session's tool-cache folder ("" when there is none).
func (s *Session) CacheDir() string { return s.cache }

// cacheKey names the tool-cache folder of sessions that may write exactly
// these folders, with or without network. A cache is code other builds
// trust — a cargo config naming a rustc-wrapper, a Go build cache entry, an
// npm or pip package — so a command that plants one must not reach a
// session that may do more than it: another workspace, or the same one
// with more folders or the network. Sessions of one workspace, alike in
// both, share their caches; one confined differently starts cold. The
// name starts with the first root's name, for whoever looks in the folder.
func cacheKey(roots, gitDirs, extra []string, denyNet bool) string {
	realPath := func(d string) string {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return r
		}
		return filepath.Clean(d)
	}
	var parts []string
	for _, group := range [][]string{roots, gitDirs, extra} {
		var real []string
		for _, d := range group {
			real = append(real, realPath(d))
		}
		slices.Sort(real)
		parts = append(parts, strings.Join(slices.Compact(real), "\x00"))
	}
	parts = append(parts, strconv.FormatBool(denyNet))
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x01")))
	name := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, filepath.Base(realPath(roots[0])))
	if len(name) > 32 {
		name = name[:32]
	}
	return strings.TrimLeft(name, ".") + "-" + hex.EncodeToString(sum[:8])
}

// Close stops the session's spawn server and removes its temp folder.
func (s *Session) Close() error {
	if s == nil {
		return nil
	}
	s.closeZygote()
	s.closeProxy()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, d := range []*string{&s.tmp, &s.shm, &s.status} {
		if *d != "" {
			errs = append(errs, os.RemoveAll(*d))
			*d = ""
		}
	}
	return errors.Join(errs...)
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

// shmDir returns the session's private /dev/shm folder, making it if
// needed: in the machine's /dev/shm, so that it is memory too.
func (s *Session) shmDir() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("session closed")
	}
	if s.shm == "" {
		d, err := os.MkdirTemp(shmRoot(s.p.TempRoot), "acpd-shm-")
		if err != nil {
			return "", fmt.Errorf("making the session's /dev/shm folder: %w", err)
		}
		s.shm = d
	}
	return s.shm, nil
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
	// Proxy is set when the command reaches the network only through
	// acpd's proxy: its spawn server runs in a network namespace of its
	// own (the per-command helper, which cannot host the proxy, gets no
	// network instead). NetNote says why a proxied command has no network.
	Proxy   bool
	NetNote string
	// StatusFile, when set, is where the helper reports a set-up failure
	// for lack of a status pipe (see SetupFailure).
	StatusFile string
	// ScopedSignals is set when the command may signal only the
	// processes it started (Landlock ABI ≥ 6).
	ScopedSignals bool
	// Shm is the session's folder the helper mounts over /dev/shm ("":
	// none). Whoever starts Argv calls Prepare on its exec.Cmd.
	Shm string
	// ShmNote says what /dev/shm is when it is not private, for messages.
	ShmNote string
	// HelperEnv are variables the helper needs and the command does not
	// get (the helper drops them before it runs the command); Prepare
	// adds them.
	HelperEnv []string
	// DenyRead are the paths the command may not read; denyStamp is the
	// state of the folders its rules split (readStamp), so a server built
	// for another state is replaced.
	DenyRead  []string
	denyStamp string
	// DenyPorts are TCP ports the command may not connect to (the served
	// daemon's own), when the network is open.
	DenyPorts []uint16
	// DenyGaps are denied paths that lie in a folder the command may write:
	// they stay unreadable, but a command may move them to a name there
	// that a later command reads (see readdeny.go).
	DenyGaps []string
}

// SetupFailure reads (and removes) the report the helper wrote in
// StatusFile: the sandbox could not be set up and the command did not run.
// The folder is not writable by confined commands, so a command cannot
// forge this, whatever it prints or however it exits.
func (p *Plan) SetupFailure() (string, bool) {
	if p.StatusFile == "" {
		return "", false
	}
	b, err := os.ReadFile(p.StatusFile)
	if err != nil {
		return "", false
	}
	_ = os.Remove(p.StatusFile)
	return string(b), true
}

// deniedReal is the deny list resolved and the stamp of the folders it
// splits. Resolving some fifty paths costs hundreds of lstat calls, which a
// command's plan does not pay again unless the stamp changed: any change on
// the way to a denied path (a folder or link swapped for another) is a
// change of an entry in a folder the stamp covers, so a stamp computed from
// a stale resolution differs from the last one, and the list is resolved
// again. The helper resolves the list itself when it builds its rules.
func (s *Session) deniedReal() (real []string, stamp string) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.denyReal != nil {
		if st := resolvedReadStamp(s.denyReal); st == s.denyStamp {
			return s.denyReal, st
		}
	}
	s.denyReal = resolveAll(s.p.DenyRead)
	s.denyStamp = resolvedReadStamp(s.denyReal)
	return s.denyReal, s.denyStamp
}

// ErrRefused is wrapped by the error Wrap returns in mode required when the
// kernel cannot confine the command.
var ErrRefused = errors.New("sandbox unavailable")

// Wrap decides how to run argv (e.g. /bin/sh -c CMD). statusFD is the file
// descriptor the helper reports set-up failures on; -1 means there is no
// pipe (an editor terminal), and the plan then names a status file in a
// folder of the daemon's that confined commands cannot write.
//
// Whether a command may run unconfined is decided here, from the kernel
// probed before any command ran, and nowhere else: in mode required on a
// kernel without usable Landlock it returns an error wrapping ErrRefused,
// whose text says why and what the user can change; in mode auto there it
// runs unconfined with one warning. A helper that fails later is a failed
// command, never a reason to run it unconfined.
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
	writable := append(append([]string(nil), s.roots...), s.gitDirs...)
	writable = append(writable, tmp)
	env := []string{"TMPDIR=" + tmp, "TMP=" + tmp, "TEMP=" + tmp}
	if c := s.cache; c != "" {
		// Made at the first command, and again when gone since (cleaned
		// by the user); if it cannot be, the command runs without it,
		// confined all the same.
		if err := os.MkdirAll(c, 0o700); err == nil {
			writable = append(writable, c)
			env = append(env, CacheEnv(c)...)
		}
	}
	extra, _ := s.p.extraWritable()
	writable = append(writable, extra...)
	plan := Plan{Confined: true, Command: argv, Env: env, DenyNetwork: s.p.DenyNetwork, ScopedSignals: st.SignalScoping()}
	switch err := s.p.PrivateShm(); {
	case err == nil && (statusFD >= 0 || os.Geteuid() == 0):
		shm, err := s.shmDir()
		if err != nil {
			return Plan{}, err
		}
		plan.Shm = shm
		writable = append(writable, shm)
	case err == nil:
		// The editor starts this helper, not acpd: it cannot give it
		// the user namespace that a user other than root needs to mount.
		err = errors.New("the editor's terminal starts this command, and only acpd can give it the namespaces")
		fallthrough
	default:
		// Never the machine's: one workspace's commands would plant there
		// what another's read (POSIX shared memory names are global).
		plan.ShmNote = fmt.Sprintf("/dev/shm is not writable (no private /dev/shm: %v), so POSIX shared memory (Python multiprocessing) fails", err)
	}
	plan.Writable = writable
	if s.p.Proxy {
		// The proxy's namespace needs what the private /dev/shm needs
		// (a user namespace for a user other than root), and a process
		// acpd starts itself.
		switch err := s.p.PrivateShm(); {
		case err != nil:
			plan.DenyNetwork, plan.NetNote = true, fmt.Sprintf("proxy mode needs a network namespace, which the kernel refuses (%v), so commands get no network at all", err)
		case statusFD < 0:
			plan.DenyNetwork, plan.NetNote = true, "proxy mode needs a command acpd starts itself, so this one gets no network"
		default:
			plan.Proxy = true
		}
	}
	if !s.p.DenyNetwork && !s.p.Proxy {
		plan.DenyPorts = s.p.deniedPorts()
	}
	if len(s.p.DenyRead) > 0 {
		plan.DenyRead = s.p.DenyRead
		real, stamp := s.deniedReal()
		plan.denyStamp = stamp
		plan.DenyGaps = resolvedDeniedWithin(s.p.DenyRead, real, resolveAll(writable))
	}
	if v, ok := os.LookupEnv(ABIEnv); ok {
		// A simulated kernel is the helper's too.
		plan.HelperEnv = append(plan.HelperEnv, ABIEnv+"="+v)
	}
	helper := append([]string{s.p.Helper, Subcommand}, s.p.Env.helperArgs()...)
	if statusFD >= 0 {
		helper = append(helper, "--status-fd", strconv.Itoa(statusFD))
	} else if f := s.statusFile(writable); f != "" {
		plan.StatusFile = f
		helper = append(helper, "--status-file", f)
	}
	helper = append(helper, plan.confinementArgs(false)...)
	if plan.Shm != "" {
		helper = append(helper, "--shm", plan.Shm)
	}
	plan.Argv = append(append(helper, "--"), argv...)
	return plan, nil
}

// confinementArgs are the helper's flags that say what the command may do,
// for the per-command helper and the spawn server (server) alike: writable
// folders, denied reads, network. Only the server can host the proxy: the
// per-command helper of a proxied plan gets no network.
func (p *Plan) confinementArgs(server bool) []string {
	var out []string
	for _, w := range p.Writable {
		out = append(out, "--rw", w)
	}
	for _, d := range p.DenyRead {
		out = append(out, "--deny-read", d)
	}
	for _, port := range p.DenyPorts {
		out = append(out, "--deny-port", strconv.Itoa(int(port)))
	}
	switch {
	case p.Proxy && server:
		out = append(out, "--proxy")
	case p.DenyNetwork || p.Proxy:
		out = append(out, "--no-net")
	}
	return out
}

// extraWritable splits tools.sandboxWritable into the folders that exist
// and those that do not (skipped: Landlock can only grant existing paths).
func (p *Policy) extraWritable() (exist, missing []string) {
	for _, w := range p.Writable {
		if _, err := os.Stat(w); err == nil {
			exist = append(exist, w)
		} else {
			missing = append(missing, w)
		}
	}
	return exist, missing
}

// statusFile names a new file in the session's status folder, made at the
// first call next to its temp folder; "" when the folder cannot be made or
// lies inside a folder commands may write (then they could forge a report,
// so there is none and a failed set-up reads as the command's own failure).
func (s *Session) statusFile(writable []string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == "" && s.statusErr == nil {
		d, err := os.MkdirTemp(s.p.TempRoot, "acpd-status-")
		if err == nil && within(d, writable) {
			os.Remove(d)
			err = fmt.Errorf("%s is inside a folder commands may write", d)
		}
		s.status, s.statusErr = d, err
		if err != nil {
			s.status = ""
		}
	}
	if s.status == "" || within(s.status, writable) {
		return ""
	}
	s.statusSeq++
	return filepath.Join(s.status, strconv.Itoa(s.statusSeq))
}

// within reports whether path is one of dirs or inside one, comparing real
// paths (symlinks resolved), as Landlock does.
func within(path string, dirs []string) bool {
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	path = real(path)
	for _, d := range dirs {
		d = real(d)
		if path == d || strings.HasPrefix(path, d+string(filepath.Separator)) || d == string(filepath.Separator) {
			return true
		}
	}
	return false
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

// ErrSetupFailed wraps the report of a helper that could not set up the
// sandbox after the kernel was found able to: the command did not run, and
// is not run unconfined instead (the decision to run unconfined is taken
// from the kernel before any command, never from a command's run).
var ErrSetupFailed = errors.New("sandbox set-up failed")

// SetupError is the error for a helper's set-up failure report msg.
func SetupError(msg string) error {
	return fmt.Errorf("%w: %s. The command was not run; commands stay confined (acpd never runs one unconfined because its sandbox failed to start)", ErrSetupFailed, strings.TrimSpace(msg))
}

// linkedGitDirs returns the git folders outside root that git writes when
// root is (in) a linked worktree or a submodule: their ".git" is a file
// naming the real git folder elsewhere ("gitdir: …"), and a commit writes
// there (index, HEAD, logs) and in the common folder it names (objects,
// refs). Without them `git commit` fails in every linked worktree, as it did
// for peers' sandboxes. The ".git" file is workspace content, so what it
// names counts only when it passes [ReadGitLink]: a git folder that points
// back at this work tree, never "/", the home folder or a folder above the
// work tree. An ordinary ".git" folder is not followed: inside the root it
// is writable already, and above it (a workspace that is a subfolder of a
// repository, or a home folder under git) it is left to
// tools.sandboxWritable; nor is a ".git" symlink.
func linkedGitDirs(root string) []string {
	for dir := root; ; {
		fi, err := os.Lstat(filepath.Join(dir, ".git"))
		switch {
		case err == nil && fi.Mode().IsRegular():
			link, err := ReadGitLink(dir)
			if err != nil {
				return nil
			}
			return link.Dirs()
		case err == nil:
			return nil
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
	var folders []string
	for _, w := range p.Writable {
		if w == p.Shm {
			w = "/dev/shm (its session's own, for POSIX shared memory)"
		}
		folders = append(folders, w)
	}
	reads := "everywhere"
	if len(p.DenyRead) > 0 {
		reads = "everywhere except the user's credentials and acpd's own folders (" + strings.Join(shortList(p.DenyRead, 6), ", ") +
			"; reading them fails with \"Permission denied\", which is on purpose: do not try other ways to read them)"
	}
	fmt.Fprintf(&b, "[sandbox: this command ran confined by acpd's Landlock sandbox. It may read %s but write only in: %s, and /dev/null, /dev/tty, /dev/pts; ",
		reads, strings.Join(folders, ", "))
	if p.ShmNote != "" {
		b.WriteString(p.ShmNote + "; ")
	}
	b.WriteString("writes elsewhere fail with \"Permission denied\". Use $TMPDIR for temporary files, not /tmp.")
	switch {
	case p.NetNote != "":
		b.WriteString(" Network access is denied: " + p.NetNote + ".")
	case p.DenyNetwork:
		b.WriteString(" Network access is denied ([tools] sandboxNetwork = false).")
	case p.Proxy:
		b.WriteString(" It reaches the network only through acpd's HTTP proxy (HTTP_PROXY, HTTPS_PROXY), and only hosts the user allows; no direct connection, no unix socket.")
	}
	if p.ScopedSignals {
		b.WriteString(" It may signal only the processes it started (kill of anything else: \"Operation not permitted\").")
	}
	b.WriteString(" Do not retry the same write elsewhere outside these folders. The user can allow more folders with [tools] sandboxWritable = [\"/path\"] or turn the sandbox off with [tools] sandbox = \"off\" in acpd's configuration.]")
	return b.String()
}

// shortList is the first n of list, and how many more there are.
func shortList(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	return append(slices.Clone(list[:n]), fmt.Sprintf("and %d more", len(list)-n))
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
