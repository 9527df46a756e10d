//go:build !unix

package agentconfine

import "syscall"

// setpgid does nothing where there are no process groups.
func setpgid(*syscall.SysProcAttr) {}
