//go:build unix

package checkpoint

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time so far (benchmarks
// report it beside wall time, which a busy machine inflates).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
