package agentguard

import "syscall"

// agentProcAttr starts the agent in a process group of its own, so what it
// starts can be ended with it. Pdeathsig covers the guard dying without its
// cleanup (SIGKILL): the agent, which may ignore EOF, still gets SIGTERM.
func agentProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
