package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOwnPackageInits_Small keeps acpd's own package initialisation cheap:
// every acpd process (an editor starts one per thread) runs it before main.
// A regexp compiled in a package variable, a table computed at start, costs
// there whether or not the session ever uses it; such things are built at
// first use instead. GODEBUG=inittrace=1 gives each package init's heap
// bytes, which unlike its time do not depend on the machine's load. The
// limits leave room over today's (config's field table, 11 KB, is the
// largest; all together 22 KB), not for a table that belongs in a
// sync.OnceValue.
func TestOwnPackageInits_Small(t *testing.T) {
	t.Parallel()
	bin := acpdBinary(t)
	cmd := exec.Command(bin, "--version")
	cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	const perPackage, total = 16 << 10, 32 << 10
	sum, seen := 0, 0
	for line := range strings.Lines(string(out)) {
		// init github.com/acpd/acpd/config @2.1 ms, 0.036 ms clock, 11800 bytes, 236 allocs
		f := strings.Fields(line)
		if len(f) < 10 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/acpd/acpd/") {
			continue
		}
		n, err := strconv.Atoi(f[7])
		require.NoError(t, err, line)
		seen++
		sum += n
		if n > perPackage {
			t.Errorf("%s allocates %d bytes in its init (more than %d): build it at first use", f[1], n, perPackage)
		}
	}
	require.NotZero(t, seen, "no acpd package in the init trace:\n%s", out)
	if sum > total {
		t.Errorf("acpd's own package inits allocate %d bytes in all (more than %d)", sum, total)
	}
}
