package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// BenchmarkRunShellCommand_True runs `true` through run_shell_command,
// unconfined and through the sandbox with the built acpd binary as the
// helper (what a confined command really pays: exec of acpd, the helper's
// share of package initialization, the Landlock ruleset, the exec of sh).
// Target: sandboxed ≤ unconfined + 3 ms.
func BenchmarkRunShellCommand_True(b *testing.B) {
	b.Run("unconfined", func(b *testing.B) {
		benchShell(b, newWorkspace(b))
	})
	b.Run("sandboxed", func(b *testing.B) {
		sandboxtest.Require(b)
		benchShell(b, sandboxedWorkspace(b, sandbox.ModeRequired, buildAcpd(b)))
	})
	b.Run("sandboxed_nonet", func(b *testing.B) {
		sandboxtest.Require(b)
		w := sandboxedWorkspace(b, sandbox.ModeRequired, buildAcpd(b))
		p := &sandbox.Policy{Mode: sandbox.ModeRequired, Helper: buildAcpd(b), TempRoot: b.TempDir(), DenyNetwork: true,
			CacheDir: filepath.Join(b.TempDir(), "cache")}
		w.env.Sandbox = p.NewSession(w.env.Roots)
		b.Cleanup(func() { w.env.Sandbox.Close() })
		benchShell(b, w)
	})
}

func benchShell(b *testing.B, w *workspace) {
	c, err := tool(b, NameRunShellCommand).Build(w.env, args(b, map[string]any{"command": "true"}))
	require.NoError(b, err)
	before := childCPU(b)
	for b.Loop() {
		if res := c.Execute(b.Context(), w.env); res.Err != nil || res.RawOutput.(map[string]any)["exitCode"] == nil {
			b.Fatal(res.LLMContent)
		}
	}
	// The commands' own CPU time (user + system, helper and shell), which
	// a busy machine inflates much less than the wall time.
	b.ReportMetric(float64((childCPU(b)-before).Microseconds())/1000/float64(b.N), "child-cpu-ms/op")
}

// childCPU is the CPU time of this process's reaped children so far.
func childCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var acpdBuilt string

// buildAcpd builds cmd/acpd once per test binary.
func buildAcpd(b *testing.B) string {
	b.Helper()
	if acpdBuilt != "" {
		return acpdBuilt
	}
	dir, err := os.MkdirTemp("", "acpd-bench-")
	require.NoError(b, err)
	bin := filepath.Join(dir, "acpd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/acpd/acpd/cmd/acpd").CombinedOutput()
	require.NoError(b, err, "%s", out)
	acpdBuilt = bin
	return bin
}
