//go:build unix

package agentconfine

import "syscall"

func setpgid(a *syscall.SysProcAttr) { a.Setpgid = true }
