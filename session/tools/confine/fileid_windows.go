package confine

import (
	"errors"
	"os"
)

// oNoFollow is 0 on Windows, whose open does not follow a symlink's
// reparse point silently the way Unix does; os.Root still refuses escapes.
const oNoFollow = 0

// statID has no device and inode to give on Windows, so the workspace root
// is opened by path each time rather than held open across calls.
func statID(string) (dev, ino uint64, err error) {
	return 0, 0, errors.New("no file identity on Windows")
}

func infoID(os.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
