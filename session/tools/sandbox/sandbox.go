// Package sandbox confines the commands run_shell_command runs with Landlock
// (Linux ≥ 6.2, Landlock ABI ≥ 3), so a command may read everywhere but write
// only in the session's workspace roots, a private per-session temp folder,
// an acpd-owned cache folder, the devices a shell needs and the folders the
// user added. With network denied it may not open IP sockets either.
//
// The daemon is never restricted. A session's local commands are started
// by its spawn server ([Session.Spawn], zygote_linux.go): one re-exec of
// acpd's own binary with the hidden subcommand [Subcommand] and --serve,
// which confines its whole process and then forks each command on request,
// so a command costs about what an unconfined one does. When there is no
// server (it failed or died, or the editor's terminal runs the command),
// each command starts as its own re-exec of the helper (see [HelperMain]),
// which locks its OS thread, sets no_new_privs, installs the seccomp filter
// (network denied only), restricts that thread with a Landlock ruleset and
// execve()s the shell. Either way the whole command and every process it
// starts, background ones included, run in the domain and cannot leave it.
//
// With signal scoping (Landlock ABI ≥ 6) each command also runs in a fresh
// domain of its own, so it can signal only itself and its descendants:
// not acpd, not the editor, not the spawn server, not another command.
// Every wait on the spawn server is bounded, so a server stopped anyway
// (older kernels) is found, killed and replaced while the turn goes on.
//
// Whether a command may run unconfined is decided once, from the kernel,
// before any command runs (mode auto on a kernel without usable Landlock).
// A helper that fails to set up reports it on a channel the command cannot
// write — a close-on-exec pipe locally, a file in a folder of acpd's that
// confined commands cannot write for the editor's terminal — and the
// command is then not run, never run unconfined.
//
// [Policy.RunReadOnly] runs the programs acpd starts on its own initiative
// (git, for the environment block) confined further: no execution of any
// other file, no writes, no network.
//
// The parent side is [Policy] (from configuration) and [Session] (one per
// ACP session: its roots and temp folder), whose Command wraps an argv.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Mode is the [tools] sandbox setting.
type Mode string

const (
	// ModeAuto confines commands when the kernel can, and otherwise runs
	// them unconfined after one clear warning. The default.
	ModeAuto Mode = "auto"
	// ModeRequired refuses to run a command the kernel cannot confine.
	ModeRequired Mode = "required"
	// ModeOff runs commands unconfined, as acpd did before the sandbox.
	ModeOff Mode = "off"
)

// Subcommand is the hidden acpd subcommand the helper runs as:
//
//	acpd __sandbox-exec [--status-fd N] [--rw DIR]... [--no-net] -- CMD ARGS...
const Subcommand = "__sandbox-exec"

// ExitUnavailable is the helper's exit status when it did not run the
// command because the sandbox could not be set up. The local runner learns
// it from the status pipe instead, so a command's own 125 is never mistaken
// for it; an editor terminal has no pipe, so there the "acpd-sandbox:" line
// the helper prints on stderr says which it was.
const ExitUnavailable = 125

// ProbeShmEnv, set to a folder, makes acpd's binary probe whether commands
// can get a private /dev/shm (see [ProbeShmMain]) instead of anything else.
const ProbeShmEnv = "ACPD_SANDBOX_PROBE_SHM"

// probeOK is what the probe prints when it succeeded.
const probeOK = "acpd-sandbox-probe: private /dev/shm ok"

// StderrPrefix starts every line the helper itself prints.
const StderrPrefix = "acpd-sandbox: "

// MinABI is the lowest Landlock ABI acpd accepts. Before ABI 3 (Linux 6.2)
// truncate(2) is not restricted, so a command could empty any file the user
// can write outside the workspace.
const MinABI = 3

// netABI is the first ABI with TCP bind/connect rules.
const netABI = 4

// scopeABI is the first ABI with signal scoping (Linux 6.12).
const scopeABI = 6

// ABIEnv is a test hook: when set to a number, the probe reports at most
// that Landlock ABI (0 means "no Landlock"), to simulate an older kernel.
// It can only lower what the kernel offers, never raise it.
const ABIEnv = "ACPD_SANDBOX_ABI"

// NoNamespacesEnv, set to 1, is a test hook like ABIEnv: acpd behaves as
// on a kernel that gives it no user or mount namespace (no private
// /dev/shm, no network namespace for the proxy).
const NoNamespacesEnv = "ACPD_SANDBOX_NO_NAMESPACES"

// Status is what the kernel offers, as found by [Probe].
type Status struct {
	// Backend names the mechanism: "landlock".
	Backend string
	// ABI is the Landlock ABI version, 0 when Landlock is unavailable.
	ABI int
	// KernelABI is what the kernel reported before ABIEnv lowered it.
	KernelABI int
	// Simulated is set when ABIEnv lowered the ABI.
	Simulated bool
	// Err says why Landlock is unavailable (nil when ABI ≥ MinABI).
	Err error
}

// Usable reports whether commands can be confined.
func (s Status) Usable() bool { return s.Err == nil }

// NetworkRules reports whether Landlock can also deny TCP (ABI ≥ 4); UDP and
// the other families are denied by the seccomp filter at any ABI.
func (s Status) NetworkRules() bool { return s.Usable() && s.ABI >= netABI }

// SignalScoping reports whether Landlock can keep commands from signalling
// processes outside their own domain (ABI ≥ 6): acpd, the editor, the spawn
// server. Before it, a command can stop acpd with kill -STOP.
func (s Status) SignalScoping() bool { return s.Usable() && s.ABI >= scopeABI }

func (s Status) String() string {
	if !s.Usable() {
		return fmt.Sprintf("%s unavailable: %v", s.Backend, s.Err)
	}
	return fmt.Sprintf("%s ABI %d", s.Backend, s.ABI)
}

var (
	probeOnce sync.Once
	probed    Status
)

// Probe returns the kernel's Landlock support, queried once per process.
func Probe() Status {
	probeOnce.Do(func() { probed = probe(os.Getenv(ABIEnv)) })
	return probed
}

// probe asks the kernel (landlock_create_ruleset with the VERSION flag) and
// applies the ABIEnv override. go-landlock's best-effort mode would silently
// enforce nothing on a kernel without Landlock, so the decision is made here.
func probe(override string) Status {
	st := Status{Backend: "landlock"}
	if runtime.GOOS != "linux" {
		// Said plainly: off Linux go-landlock answers ABI -1 and ENOSYS,
		// which would read as an old Linux kernel.
		st.Err = fmt.Errorf("Landlock exists only on Linux; on %s shell commands run unconfined", runtime.GOOS)
		return st
	}
	abi, err := ll.LandlockGetABIVersion()
	if err == nil {
		st.ABI, st.KernelABI = abi, abi
	}
	if override != "" {
		n, perr := strconv.Atoi(strings.TrimSpace(override))
		if perr != nil || n < 0 {
			st.Err = fmt.Errorf("%s=%q is not a non-negative number", ABIEnv, override)
			st.ABI = 0
			return st
		}
		if n < st.ABI || err != nil {
			st.ABI, st.Simulated = min(n, st.ABI), true
			if st.ABI == 0 {
				err = fmt.Errorf("Landlock disabled by %s=%s (simulated)", ABIEnv, override)
			}
		}
	}
	switch {
	case err != nil && st.ABI == 0:
		st.Err = explainProbe(err)
	case st.ABI < MinABI:
		st.Err = fmt.Errorf("the kernel offers Landlock ABI %d, acpd needs ABI %d or newer (Linux 6.2+) to confine truncate(2)", st.ABI, MinABI)
	}
	return st
}

func explainProbe(err error) error {
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return fmt.Errorf("the kernel has no Landlock support (Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK; acpd needs 6.2+): %w", err)
	case errors.Is(err, syscall.EOPNOTSUPP):
		return fmt.Errorf("Landlock is built into the kernel but not enabled at boot (add landlock to the lsm= kernel parameter): %w", err)
	}
	return err
}
