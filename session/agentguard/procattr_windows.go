package agentguard

import (
	"errors"
	"os"
	"syscall"
)

// agentProcAttr has nothing to set on Windows, which has neither process
// groups as Unix has them nor a parent-death signal: an agent that ignores
// EOF outlives a guard killed outright.
func agentProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup ends the agent's own process for any signal but 0 (Windows
// can neither signal a group nor ask a process to terminate); 0 reports
// an error, since whether the agent's children live on cannot be told, so
// reapGroup has nothing it can do.
func signalGroup(pid int, sig syscall.Signal) error {
	if sig == 0 {
		return errors.New("process groups are not supported on Windows")
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
