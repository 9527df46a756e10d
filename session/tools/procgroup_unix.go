//go:build unix

package tools

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a session of its own, which is also a process
// group of its own, the whole group killed when its context ends. Without
// a controlling terminal the command cannot open acpd's terminal as
// /dev/tty to push keystrokes into the user's shell (TIOCSTI), confined or
// not; the sandbox's seccomp filter refuses that ioctl on any terminal
// besides.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killGroup kills every process of the group pgid.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }
