//go:build unix

package agentguard

import "syscall"

// signalGroup sends sig to every process of the group pgid (0 only checks
// that one is left).
func signalGroup(pgid int, sig syscall.Signal) error {
	return syscall.Kill(-pgid, sig)
}
