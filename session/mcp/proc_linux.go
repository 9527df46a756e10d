//go:build linux

package mcp

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts a stdio server in its own session (and so its own
// process group, so Close can kill what it spawned), and has the kernel
// kill it if the daemon dies without closing it. A session of its own has
// no controlling terminal: the server cannot open acpd's terminal
// (/dev/tty) to read the user's keys or push keystrokes into it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills what is left of a stdio server's process group (its
// grandchildren); the server itself was already stopped by the SDK.
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
