//go:build unix

package store

import (
	"errors"
	"os"
	"syscall"
)

// fileIno is the inode number of fi, which tells a replaced file from one
// rewritten in place with the same size and time.
func fileIno(fi os.FileInfo) uint64 {
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Ino)
	}
	return 0
}

// lockExclusive waits for an exclusive advisory lock on f, held until f is
// closed.
func lockExclusive(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// tryLockExclusive takes an exclusive advisory lock on f, held until f is
// closed, without waiting: false when another open file holds it.
func tryLockExclusive(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		default:
			return false, err
		}
	}
}

// LockFile waits for an exclusive advisory lock on f, held until f is
// closed: what keeps two acpd processes from writing one state file at
// once (the permission rules files).
func LockFile(f *os.File) error { return lockExclusive(f) }
