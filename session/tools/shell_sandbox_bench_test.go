package tools

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// BenchmarkRunShellCommand_True runs `true` through run_shell_command,
// unconfined and through the sandbox with the built acpd binary as the
// helper. "sandboxed" is what a confined command pays: a request to the
// session's spawn server (started once, by the warm-up command, outside
// the measured loop), which forks sh already confined; "per_command" is the
// fallback, one helper per command (exec of acpd, the helper's share of
// package initialization, the Landlock ruleset, the exec of sh).
// Target: sandboxed ≤ unconfined + 3 ms.
func BenchmarkRunShellCommand_True(b *testing.B) {
	b.Run("unconfined", func(b *testing.B) {
		benchShell(b, newWorkspace(b))
	})
	b.Run("sandboxed", func(b *testing.B) {
		sandboxtest.Require(b)
		benchShell(b, sandboxedWorkspace(b, sandbox.ModeRequired, acptest.Acpd(b)))
	})
	b.Run("sandboxed_nonet", func(b *testing.B) {
		sandboxtest.Require(b)
		w := sandboxedWorkspace(b, sandbox.ModeRequired, acptest.Acpd(b))
		p := &sandbox.Policy{Mode: sandbox.ModeRequired, Helper: acptest.Acpd(b), TempRoot: b.TempDir(), DenyNetwork: true,
			CacheDir: filepath.Join(b.TempDir(), "cache")}
		w.env.Sandbox = p.NewSession(w.env.Roots)
		b.Cleanup(func() { w.env.Sandbox.Close() })
		benchShell(b, w)
	})
	b.Run("sandboxed_per_command", func(b *testing.B) {
		sandboxtest.Require(b)
		w := newWorkspace(b)
		p := &sandbox.Policy{Mode: sandbox.ModeRequired, Helper: acptest.Acpd(b), TempRoot: b.TempDir(),
			CacheDir: filepath.Join(b.TempDir(), "cache"), NoSpawnServer: true}
		w.env.Sandbox = p.NewSession(w.env.Roots)
		b.Cleanup(func() { w.env.Sandbox.Close() })
		benchShell(b, w)
	})
}

func benchShell(b *testing.B, w *workspace) {
	c, err := tool(b, NameRunShellCommand).Build(w.env, args(b, map[string]any{"command": "true"}))
	require.NoError(b, err)
	exec := func() {
		if res := c.Execute(b.Context(), w.env); res.Err != nil || res.RawOutput.(map[string]any)["exitCode"] == nil {
			b.Fatal(res.LLMContent)
		}
	}
	exec() // starts the session's spawn server, if any
	server := 0
	if w.env.Sandbox != nil {
		server = w.env.Sandbox.ServerPid()
	}
	before := childCPU(b) + serverCPU(b, server)
	for b.Loop() {
		exec()
	}
	// The commands' own CPU time (user + system: helper or server, and
	// shell), which a busy machine inflates much less than the wall time.
	used := childCPU(b) + serverCPU(b, server) - before
	b.ReportMetric(float64(used.Microseconds())/1000/float64(b.N), "child-cpu-ms/op")
}

// serverCPU is the CPU time of the spawn server pid (0: none) and of the
// children it reaped, from /proc (clock ticks of 10 ms; the loop runs long
// enough for that to average out).
func serverCPU(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(b, err)
	// pid (comm) state ppid … utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
	var ticks int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(b, err)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// childCPU is the CPU time of this process's reaped children so far.
func childCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
