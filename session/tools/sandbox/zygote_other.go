//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"syscall"
)

// Process is a command a spawn server started; there is none off Linux.
type Process struct{ Pid int }

// Wait is never reached: Spawn always fails off Linux.
func (p *Process) Wait() (syscall.WaitStatus, error) { return 0, errors.New("no spawn server") }

type zygote struct{}

// Spawn always fails off Linux, where nothing is confined.
func (s *Session) Spawn(Plan, []string, string, [3]*os.File) (*Process, error) {
	return nil, errors.New("spawn server unavailable: Landlock exists only on Linux")
}

func (s *Session) closeZygote() {}

// ServerPid is always 0 off Linux.
func (s *Session) ServerPid() int { return 0 }
