package lifeline

import (
	"fmt"
	"os"
)

// Enable does nothing on Windows: there is no watcher there (see the
// package comment).
func Enable() {}

// Watch does nothing on Windows, which has no process groups to kill; a
// Job object closed with acpd would be the way, and is not done.
func Watch(int) (release func()) { return func() {} }

// Main refuses on Windows.
func Main([]string) int {
	fmt.Fprintln(os.Stderr, "acpd "+Subcommand+": not available on Windows")
	return 2
}
