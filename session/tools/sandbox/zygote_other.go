//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// Process is a command a spawn server started; there is none off Linux.
type Process struct{ Pid int }

// Wait is never reached: Spawn always fails off Linux.
func (p *Process) Wait(context.Context) (ws syscall.WaitStatus, err error) {
	return ws, errors.New("no spawn server")
}

type zygote struct{}

var errSpawnFallback = errors.New("spawn server unavailable: Landlock exists only on Linux")

// NothingStarted reports whether err, from [Session.Spawn], means the
// command was not started; off Linux it always is.
func NothingStarted(err error) bool { return errors.Is(err, errSpawnFallback) }

// ErrServerFrozen is never returned off Linux.
var ErrServerFrozen = errors.New("the sandbox's spawn server stopped answering")

// Spawn always fails off Linux, where nothing is confined.
func (s *Session) Spawn(context.Context, Plan, []string, string, [3]*os.File) (*Process, error) {
	return nil, errSpawnFallback
}

func (s *Session) closeZygote() {}

// KillHolders does nothing off Linux, where there is no spawn server.
func KillHolders(*os.File) {}

// ServerPid is always 0 off Linux.
func (s *Session) ServerPid() int { return 0 }
