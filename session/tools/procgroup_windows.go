package tools

import (
	"os"
	"os/exec"
)

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
