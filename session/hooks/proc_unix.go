//go:build unix

package hooks

import (
	"os/exec"
	"syscall"
)

// ownGroup starts a hook in a process group of its own, without a
// controlling terminal, and makes its timeout kill the whole group: a hook
// that started children leaves none behind.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
