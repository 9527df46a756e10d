//go:build !linux

package sandboxtest

import "testing"

// denyByKernel is never reached off Linux: Require skips first.
func denyByKernel(t testing.TB, _ Denial, _ func()) {
	t.Helper()
	Require(t)
}
