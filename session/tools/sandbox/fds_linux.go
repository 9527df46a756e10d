package sandbox

import (
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// InheritNoFiles marks every file descriptor above 2 close-on-exec, so a
// program this process starts gets its stdin, stdout and stderr and the
// files it is handed explicitly, nothing else. Whoever started acpd may
// have left descriptors open without close-on-exec (a log, a socket, a
// terminal); every child would otherwise inherit them, and a confined
// command could write through one to a file outside the workspace — the
// sandbox checks paths at open, not descriptors already open. This process
// keeps them open.
func InheritNoFiles() error {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	// Linux before 5.11, or a seccomp profile that refuses close_range:
	// each open descriptor in turn.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}
