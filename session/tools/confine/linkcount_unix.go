//go:build unix

package confine

import (
	"os"
	"syscall"
)

// linkCount is the number of hard links of the file fi describes.
func linkCount(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}
