//go:build !unix

package checkpoint

import (
	"io/fs"
	"os"
)

func inode(fs.FileInfo) uint64 { return 0 }

// noFollow: the listing's lstat already told a regular file.
const noFollow = 0

func allocated(fi os.FileInfo) int64 { return fi.Size() }
