//go:build unix

package checkpoint

import (
	"os"
	"syscall"
)

// lockShared marks a pack as in use by this process (released on close),
// so another process's Prune leaves it alone.
func lockShared(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) }

// tryLockExclusive takes a pack no one uses.
func tryLockExclusive(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
