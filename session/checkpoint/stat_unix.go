//go:build unix

package checkpoint

import (
	"io/fs"
	"os"
	"syscall"
)

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// noFollow opens a file without following a symlink at its name, and
// without blocking on a FIFO.
const noFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// allocated is the disk space a file takes (its blocks).
func allocated(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
