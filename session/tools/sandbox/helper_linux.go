package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// writeRights are the filesystem rights the ruleset handles: every kind of
// write, and nothing else. Reading and executing are left unhandled, so they
// stay allowed everywhere without a rule on "/". IOCTL_DEV (ABI 5) is not
// handled, so terminals keep their raw mode; RESOLVE_UNIX (ABI 9) is not
// handled, so ssh-agent and friends keep working.
const writeRights = landlock.AccessFSSet(ll.AccessFSWriteFile | ll.AccessFSTruncate |
	ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSRefer |
	ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock |
	ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym)

// granted are the rights a writable folder gets: every handled right but
// making device nodes. MAKE_CHAR and MAKE_BLOCK are handled and granted
// nowhere, so mknod of a character or block device fails everywhere, even
// for root, who could otherwise make a node for the disk in the workspace
// (or /dev/shm) and write the raw device through it. FIFOs and sockets
// stay allowed.
const granted = writeRights &^ landlock.AccessFSSet(ll.AccessFSMakeChar|ll.AccessFSMakeBlock)

// deviceFiles are written by ordinary commands that only read: `>/dev/null`
// (which also truncates), `2>/dev/tty`, `head -c1 </dev/zero`.
var deviceFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx"}

// deviceDirs hold the pseudo-terminals. /dev/shm is not among them: a
// session's commands get a private one (--shm), or the shared one as a
// writable folder (--rw) when the kernel allows no private one in mode
// auto (see shm_linux.go).
var deviceDirs = []string{"/dev/pts"}

// HelperMain is the hidden subcommand: it confines its own thread and execs
// argv, or returns ExitUnavailable after saying why on the status fd and on
// stderr. It never falls back to running the command unconfined; the
// parent decides that (mode auto). It must run on the main goroutine.
func HelperMain(args []string) int {
	// Landlock and no_new_privs are per thread here: lock this goroutine to
	// its thread, restrict that thread, and execve from it, which turns it
	// into the whole new process. Never unlocked.
	runtime.LockOSThread()
	h, err := parseHelperArgs(args)
	if err == nil && h.serve {
		return serve(h)
	}
	var status *os.File
	if h.statusFD >= 0 {
		// Close-on-exec: the parent reads EOF and nothing else once execve
		// succeeded, or the reason it did not.
		unix.CloseOnExec(h.statusFD)
		status = os.NewFile(uintptr(h.statusFD), "status")
	}
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if status != nil {
			fmt.Fprint(status, msg)
		}
		if h.statusFile != "" {
			writeStatusFile(h.statusFile, msg)
		}
		fmt.Fprintln(os.Stderr, StderrPrefix+msg)
		return ExitUnavailable
	}
	if err != nil {
		return fail("usage: %v", err)
	}
	st := Probe()
	if !st.Usable() {
		return fail("sandbox unavailable: %v", st.Err)
	}
	path, err := exec.LookPath(h.argv[0])
	if err != nil {
		return fail("%v", err)
	}
	if h.shm != "" {
		// Before Landlock, which forbids mounting.
		if err := h.mountShm(true); err != nil {
			return fail("sandbox set-up failed: %v", err)
		}
	}
	if err := confine(h, st, false); err != nil {
		return fail("sandbox set-up failed: %v", err)
	}
	// Descriptors the helper inherited (from acpd's parent, or an editor
	// that leaks its own into terminal/create) do not reach the command.
	if err := InheritNoFiles(); err != nil {
		return fail("sandbox set-up failed: closing inherited files: %v", err)
	}
	leaveTerminal()
	// The environment is filtered here too: in the editor's terminal it
	// is the editor's, which acpd could only add to.
	environ, _ := EnvPolicy{Drop: h.envDrop, Pass: h.envPass}.Filter(os.Environ())
	err = syscall.Exec(path, h.argv, environ)
	return fail("exec %s: %v", path, err)
}

// leaveTerminal puts the helper in a session of its own unless it leads
// one already (acpd starts local commands so), detaching the command from
// the controlling terminal of whoever started it: an editor that runs
// terminal/create without a terminal of its own would otherwise share the
// user's terminal with the command. setsid fails for a process group
// leader; such a helper keeps its session, and the seccomp filter still
// refuses keystroke injection.
func leaveTerminal() {
	if sid, err := unix.Getsid(0); err == nil && sid != unix.Getpid() {
		_, _ = unix.Setsid()
	}
}

// writeStatusFile reports a set-up failure where the parent looks for it
// when it has no status pipe. The file must not exist yet: the folder is
// the daemon's and not writable by commands, so nothing but a helper
// creates files there, and O_EXCL|O_NOFOLLOW refuses anything planted.
func writeStatusFile(path, msg string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, StderrPrefix+"cannot write the status file: "+err.Error())
		return
	}
	_, _ = f.WriteString(msg)
	_ = f.Close()
}

// fileRights are the handled rights that apply to a file rather than a
// folder.
const fileRights = landlock.AccessFSSet(ll.AccessFSWriteFile | ll.AccessFSTruncate)

// splitFiles separates the writable paths that are files (not folders)
// from the rest; a path that does not exist stays with the folders, where
// IgnoreIfMissing skips it.
func splitFiles(rw []string) (dirs, files []string) {
	for _, p := range rw {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			files = append(files, p)
			continue
		}
		dirs = append(dirs, p)
	}
	return dirs, files
}

// execute is the right to execve a file, handled only when the helper is
// told which programs may run (--exec).
const execute = landlock.AccessFSSet(ll.AccessFSExecute)

// confine applies the policy to the calling (locked) thread, or with
// allThreads to every thread of the process (the spawn server, whose
// commands may be forked from any of its threads).
func confine(h helperArgs, st Status, allThreads bool) error {
	// Strict, not best effort: every right asked for exists from ABI 3 on
	// (TCP from ABI 4, signal scoping from ABI 6), and a failure is an
	// error, never a silent no-op.
	cfg := landlock.Config{HandledAccessFS: writeRights}
	if h.noNet && st.NetworkRules() {
		// Handled and never granted: every TCP bind and connect is refused.
		cfg.HandledAccessNet = landlock.AccessNetSet(ll.AccessNetBindTCP | ll.AccessNetConnectTCP)
	}
	if st.SignalScoping() && !allThreads {
		// The domain's processes may signal only processes of the same
		// domain or of domains nested in it: not acpd, not the editor,
		// not the spawn server (each command gets a nested domain of its
		// own, see spawnScoped), not another command.
		cfg.Scoped = landlock.ScopedSet(ll.ScopeSignal)
	}
	var extra []landlock.Rule
	if len(h.exec) > 0 {
		cfg.HandledAccessFS |= execute
		// Not IgnoreIfMissing: a program that cannot be granted must fail
		// the set-up rather than leave execution unrestricted.
		extra = append(extra, landlock.PathAccess(execute, h.exec...))
	}
	// Reading: everywhere unless paths are denied; then only what the
	// read plan grants (see readdeny.go), the writable folders that hold
	// no denied path, and the devices.
	var reads landlock.AccessFSSet
	var readRules []landlock.Rule
	if plan := planReads(newDenyTree(h.denyRead, deniedAliases())); len(plan.split) > 0 {
		reads = readRight
		cfg.HandledAccessFS |= reads
		readRules = append(readRules, landlock.PathAccess(reads, plan.grants...).IgnoreIfMissing())
		var readable []string
		for _, w := range h.rw {
			if len(deniedWithin(h.denyRead, []string{w})) == 0 {
				readable = append(readable, w)
			}
		}
		readRules = append(readRules, landlock.PathAccess(reads, readable...).IgnoreIfMissing())
	}
	dirs, files := splitFiles(h.rw)
	rules := []landlock.Rule{
		// A folder that vanished since the parent listed it (a removed
		// root) is simply not writable; it must not fail the set-up, which
		// in mode auto would run the command unconfined.
		landlock.PathAccess(granted, dirs...).IgnoreIfMissing(),
		// A writable file (a guarded agent's ~/.claude.json) gets the
		// rights a file can hold: the kernel refuses folder rights on it.
		landlock.PathAccess(granted&fileRights, files...).IgnoreIfMissing(),
		landlock.PathAccess(reads|landlock.AccessFSSet(ll.AccessFSWriteFile|ll.AccessFSTruncate), deviceFiles...).IgnoreIfMissing(),
		landlock.PathAccess(reads|granted, deviceDirs...).IgnoreIfMissing(),
	}
	rules = append(rules, readRules...)
	fd, flags, err := cfg.NewRulesetFD(append(rules, extra...)...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return fmt.Errorf("landlock would enforce nothing on this kernel")
	}
	defer unix.Close(fd)
	// no_new_privs: required for an unprivileged landlock_restrict_self and
	// seccomp, and it makes set-uid programs (sudo) unable to escape.
	prctl, restrict := unix.Prctl, ll.LandlockRestrictSelf
	if allThreads {
		prctl, restrict = ll.AllThreadsPrctl, ll.AllThreadsLandlockRestrictSelf
	}
	if err := dropRootCaps(allThreads); err != nil {
		return err
	}
	if err := prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	// Keystroke injection (TIOCSTI) is refused always; with the network
	// denied, so is every socket family but unix and netlink, which
	// Landlock's TCP rules miss (UDP, MPTCP, raw); behind the proxy, unix
	// sockets and setns (see proxy_linux.go).
	filter := netOpen
	switch {
	case h.noNet:
		filter = netOff
	case h.proxy:
		filter = netProxy
	}
	if err := installFilter(filter, allThreads); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	if err := restrict(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	if !h.noNet && !h.proxy {
		if h.portFD >= 0 {
			unix.CloseOnExec(h.portFD)
		}
		if err := restrictPorts(h.portFD, h.denyPorts, allThreads); err != nil {
			return err
		}
	}
	return nil
}
