//go:build unix && !linux

package agentguard

import "syscall"

// agentProcAttr starts the agent in a process group of its own. Without
// Linux's parent-death signal, an agent that ignores EOF outlives a guard
// killed outright.
func agentProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
