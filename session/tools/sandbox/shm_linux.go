package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A private /dev/shm. POSIX shared memory (shm_open, sem_open: Python's
// multiprocessing, Node, browsers, databases) is a folder with one fixed
// name, /dev/shm, which programs do not let an environment variable move.
// Granting it as it is would give every confined command of the machine —
// of every workspace and session — one folder to plant in and read from.
// So each session gets a folder of its own (made in the real /dev/shm, so
// it is memory like the rest, removed when the session closes, like its
// TMPDIR), and its helpers mount it over /dev/shm in a mount namespace of
// their own before they confine themselves. The Landlock rule is on that
// folder, not on the path: a command that reaches the machine's /dev/shm
// some other way still cannot write there, nor in another session's
// folder. Landlock then forbids every mount and unmount, so a command
// cannot take the mount away either.
//
// An unprivileged process may only mount in a mount namespace owned by a
// user namespace of its own, so for a user other than root the daemon
// starts the helper in a new user namespace that maps the user to itself
// (files of other users show as "nobody" to the command; access checks are
// the kernel's as before), with CAP_SYS_ADMIN in that namespace as an
// ambient capability, which survives the helper's execve where the
// namespace's full set would not. The helper drops it once mounted, so
// the command it execs, or forks and execs, has no capability at all.
// Root gets only the mount namespace: a user namespace would cost it the
// files of users it does not map.

// shmRoot is where the sessions' folders are made: the machine's /dev/shm
// when it is a folder acpd can write, otherwise the temp root.
func shmRoot(tempRoot string) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && unix.Access("/dev/shm", unix.W_OK|unix.X_OK) == nil {
		return "/dev/shm"
	}
	return tempRoot
}

// namespaces adds to attr the namespaces a helper needs: a mount namespace
// for a private /dev/shm (mount), a network namespace for proxy mode
// (network), owned by a new user namespace unless acpd runs as root, with
// the capabilities the helper needs in it to set them up as ambient ones
// (the helper drops them before anything runs).
func namespaces(attr *syscall.SysProcAttr, mount, network bool) {
	var caps []uintptr
	if mount {
		attr.Cloneflags |= syscall.CLONE_NEWNS
		caps = append(caps, unix.CAP_SYS_ADMIN)
	}
	if network {
		attr.Cloneflags |= syscall.CLONE_NEWNET
		caps = append(caps, unix.CAP_NET_ADMIN)
	}
	if uid := os.Geteuid(); uid != 0 && (mount || network) {
		gid := os.Getegid()
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.AmbientCaps = caps
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		// Without setgroups the user keeps the groups it has and cannot
		// drop one to get past a "deny this group" file mode.
		attr.GidMappingsEnableSetgroups = false
	}
}

// Prepare sets on cmd, which runs p.Argv, what the helper needs from the
// process that starts it: the variables only it needs, and the namespaces
// for a private /dev/shm and for proxy mode. Call it after setting cmd.Env
// and cmd.SysProcAttr's other fields.
func (p *Plan) Prepare(cmd *exec.Cmd) {
	if p.Confined && len(p.HelperEnv) > 0 {
		base := cmd.Env
		if base == nil {
			base = os.Environ()
		}
		cmd.Env = append(slices.Clip(base), p.HelperEnv...)
	}
	if p.Shm == "" && !p.Proxy {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	namespaces(cmd.SysProcAttr, p.Shm != "", p.Proxy)
}

// mountShm mounts h.shm over /dev/shm (see mountShmDir) and grants
// /dev/shm in its place: a folder in the machine's /dev/shm is out of
// sight under the mount, and Landlock's rule must name what the command
// sees. The rule lands on the same folder.
func (h *helperArgs) mountShm(thread bool) error {
	var want, got unix.Stat_t
	if err := unix.Stat(h.shm, &want); err != nil {
		return fmt.Errorf("private /dev/shm: %w", err)
	}
	if !thread {
		if err := ownMountNamespace(h.outerNS); err != nil {
			return fmt.Errorf("private /dev/shm: %w", err)
		}
	}
	if err := mountShmDir(h.shm, thread); err != nil {
		return err
	}
	// What the helper runs gets no capability: with the ambient set
	// empty, an execve by a user other than root keeps none. (The spawn
	// server clears it itself, after its proxy's set-up.)
	if thread {
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return fmt.Errorf("private /dev/shm: dropping the ambient capabilities: %w", err)
		}
	}
	// Granting /dev/shm when the mount did not take would grant the
	// machine's.
	if err := unix.Stat("/dev/shm", &got); err != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		return fmt.Errorf("private /dev/shm: %s is not mounted over /dev/shm (%v)", h.shm, err)
	}
	for i, w := range h.rw {
		if w == h.shm {
			h.rw[i] = "/dev/shm"
		}
	}
	return nil
}

// mountShmDir puts dir over /dev/shm for this helper and what it runs. With
// thread, the calling thread (locked, about to execve) first gets a mount
// namespace of its own, which a root helper can make itself and one in a
// user namespace the daemon made can too; the spawn server, whose commands
// are forked from any of its threads, must have been started in one, and
// checks it was (ownMountNamespace) so that it never mounts in the daemon's.
func mountShmDir(dir string, thread bool) error {
	if thread {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("private /dev/shm: unshare(CLONE_NEWNS): %w", err)
		}
	}
	// Slave: the mount below must not travel back to the namespace the
	// helper came from, which shares its mounts with the machine's.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("private /dev/shm: making mounts private: %w", err)
	}
	if err := unix.Mount(dir, "/dev/shm", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("private /dev/shm: bind-mounting %s: %w", dir, err)
	}
	return nil
}

// mountNamespace names the calling thread's mount namespace ("mnt:[N]").
func mountNamespace() (string, error) { return os.Readlink("/proc/thread-self/ns/mnt") }

// ownMountNamespace reports an error unless this process's mount namespace
// differs from outer, the daemon's, which the daemon passed (the server
// cannot read it itself from inside a user namespace).
func ownMountNamespace(outer string) error {
	mine, err := mountNamespace()
	if err != nil {
		return err
	}
	if outer == "" || mine == outer {
		return errors.New("the spawn server was not started in a mount namespace of its own")
	}
	return nil
}

// ProbeShmMain is the probe's helper (ProbeShmEnv set to dir): set up the
// private /dev/shm as a command's helper would and check that a file made
// there is dir's. It must run on the main goroutine.
func ProbeShmMain(dir string) int {
	runtime.LockOSThread() // the namespace is this thread's; never unlocked
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, StderrPrefix+err.Error())
		return ExitUnavailable
	}
	// Opened first: once mounted, dir's own path lies under the mount.
	d, err := os.Open(dir)
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	if err := mountShmDir(dir, true); err != nil {
		return fail(err)
	}
	if err := os.WriteFile("/dev/shm/probe", nil, 0o600); err != nil {
		return fail(fmt.Errorf("private /dev/shm: %w", err))
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(d.Fd()), "probe", &st, 0); err != nil {
		return fail(fmt.Errorf("private /dev/shm: the mount did not take: %w", err))
	}
	fmt.Println(probeOK)
	return 0
}

// shmProbeTimeout bounds the probe's helper.
const shmProbeTimeout = 10 * time.Second

// probeShm runs the helper once with ProbeShmEnv, started the way every
// helper with a private /dev/shm is: nil when commands can have one. The
// probe is asked for in the environment, not with Subcommand, and its
// arguments run no test: a test binary standing in for acpd that does not
// serve the helper (the package's tests of doctor, say) then runs none of
// its tests again in the child, prints no probeOK, and the answer is no.
func probeShm(helper, tempRoot string) error {
	if helper == "" {
		return errors.New("no sandbox helper")
	}
	dir, err := os.MkdirTemp(shmRoot(tempRoot), "acpd-shm-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), shmProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, helper, "-test.run=^$")
	cmd.Env = append(os.Environ(), ProbeShmEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	namespaces(cmd.SysProcAttr, true, false)
	out, err := cmd.CombinedOutput()
	if err == nil && !strings.Contains(string(out), probeOK) {
		err = fmt.Errorf("%s does not serve acpd's sandbox helper", helper)
		out = nil
	}
	if err != nil {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), StderrPrefix))
		if msg == "" {
			msg = err.Error()
		}
		how := "a mount namespace"
		if os.Geteuid() != 0 {
			how = "a user and a mount namespace (unprivileged user namespaces may be disabled: sysctl user.max_user_namespaces, kernel.apparmor_restrict_unprivileged_userns, or a container's seccomp profile)"
		}
		return fmt.Errorf("the kernel does not let acpd make %s: %s", how, msg)
	}
	return nil
}
