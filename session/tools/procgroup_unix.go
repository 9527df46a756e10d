//go:build unix

package tools

import (
	"os"
	"os/exec"
	"syscall"
)

// oNoFollow makes an open fail on a symlink in the last component.
const oNoFollow = syscall.O_NOFOLLOW

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

// statID is the device and inode of the file at path.
func statID(path string) (dev, ino uint64, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Dev), uint64(st.Ino), nil
}

// infoID is the device and inode fi describes, ok false when it has none.
func infoID(fi os.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}
