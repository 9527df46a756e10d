//go:build windows

package confine

import "os"

// linkCount is not known on Windows (os.FileInfo does not carry it there):
// files are written in place, as before.
func linkCount(os.FileInfo) (uint64, bool) { return 0, false }
