package store

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// fileIno is 0 on Windows: os.FileInfo carries no file index there, so a
// file's stamp rests on its size and modification time alone.
func fileIno(os.FileInfo) uint64 { return 0 }

// Windows locks are mandatory over the bytes they cover, so the lock sits
// on one byte far past any transcript's end: readers of the file (another
// acpd's session/load listing, acpd stats) are never refused, while two
// lockers still exclude each other as flock's do on Unix.
const lockOffsetHigh = 0x7fffffff

func lockRange(f *os.File, flags uint32) error {
	ol := &windows.Overlapped{OffsetHigh: lockOffsetHigh}
	return windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, ol)
}

// lockExclusive waits for an exclusive lock on f, held until f is closed.
func lockExclusive(f *os.File) error {
	return lockRange(f, windows.LOCKFILE_EXCLUSIVE_LOCK)
}

// tryLockExclusive takes an exclusive lock on f, held until f is closed,
// without waiting: false when another open file holds it.
func tryLockExclusive(f *os.File) (bool, error) {
	err := lockRange(f, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION), errors.Is(err, windows.ERROR_IO_PENDING):
		return false, nil
	default:
		return false, err
	}
}

// LockFile waits for an exclusive lock on f, held until f is closed: what
// keeps two acpd processes from writing one state file at once (the
// permission rules files).
func LockFile(f *os.File) error { return lockExclusive(f) }
