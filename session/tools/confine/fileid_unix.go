//go:build unix

package confine

import (
	"os"
	"syscall"
)

// oNoFollow makes an open fail on a symlink in the last component.
const oNoFollow = syscall.O_NOFOLLOW

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
