package tools

import (
	"errors"
	"os"
	"os/exec"
)

// oNoFollow is 0 on Windows, whose open does not follow a symlink's
// reparse point silently the way Unix does; os.Root still refuses escapes.
const oNoFollow = 0

// ownGroup leaves cmd as exec.CommandContext made it, killed alone when its
// context ends: Windows has no process groups to kill at once. Shell
// commands run unconfined there (the sandbox reports itself unavailable).
func ownGroup(*exec.Cmd) {}

// killGroup kills the process pgid, what Windows can do of a group kill.
func killGroup(pgid int) {
	if p, err := os.FindProcess(pgid); err == nil {
		_ = p.Kill()
	}
}

// statID has no device and inode to give on Windows, so the workspace root
// is opened by path each time rather than held open across calls.
func statID(string) (dev, ino uint64, err error) {
	return 0, 0, errors.New("no file identity on Windows")
}

func infoID(os.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
