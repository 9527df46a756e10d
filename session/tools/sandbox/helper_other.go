//go:build !linux

package sandbox

import (
	"fmt"
	"os"
)

// HelperMain refuses: Landlock is Linux only. Probe reports it unavailable,
// so the parent never starts the helper on other systems.
func HelperMain([]string) int {
	fmt.Fprintln(os.Stderr, StderrPrefix+"sandbox unavailable: Landlock exists only on Linux")
	return ExitUnavailable
}
