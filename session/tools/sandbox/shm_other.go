//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
)

// Prepare does nothing off Linux, where nothing is confined.
func (p *Plan) Prepare(*exec.Cmd) {}

// probeShm fails off Linux: there are no mount namespaces.
func probeShm(string, string) error {
	return errors.New("mount namespaces exist only on Linux")
}

func shmRoot(tempRoot string) string { return tempRoot }

// ProbeShmMain refuses off Linux.
func ProbeShmMain(string) int { return ExitUnavailable }
