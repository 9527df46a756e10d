package session

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/idletest"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
)

// discardClient drops every update; permission requests are refused.
type discardClient struct{ recClient }

func (*discardClient) SessionUpdate(context.Context, *acp.SessionNotification) error { return nil }

// idleWorkspace is the benchmarks' git workspace (idletest.Workspace).
func idleWorkspace(tb testing.TB) string { return idletest.Workspace(tb) }

// idleManager is a Manager configured as the daemon configures one (a
// durable store, the built-in tools), with a discarding client.
func idleManager(tb testing.TB) *Manager {
	st, err := store.Open(tb.TempDir(), store.Options{})
	require.NoError(tb, err)
	return NewManager(&discardClient{}, Options{
		Provider: &scriptProvider{}, Model: "m", Store: st, ConfigDir: tb.TempDir(),
		Tools: func() *tools.Registry { return tools.NewBuiltinRegistry(nil) },
	})
}

// openIdle opens n sessions in ws and waits until each has gathered its
// environment and instruction files and announced its commands: what an
// editor's open but unused sessions hold.
func openIdle(tb testing.TB, m *Manager, ws string, n int) []*Session {
	tb.Helper()
	ctx := context.Background()
	out := make([]*Session, 0, n)
	for range n {
		r, err := m.NewSession(ctx, &acp.NewSessionRequest{Cwd: ws, MCPServers: []acp.MCPServer{}})
		require.NoError(tb, err)
		s := m.session(r.SessionID)
		require.True(tb, s.waitPrep(ctx))
		require.True(tb, s.waitCommands(ctx))
		out = append(out, s)
	}
	return out
}

// liveBytes is the heap in use plus goroutine stacks, after collecting.
func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// BenchmarkIdleSessions_Memory opens 1,000 sessions in one git workspace
// (instruction files, command files) and reports what each costs while it
// sits idle: live heap plus goroutine stacks, divided by the sessions.
// Target: ≤ 32 KB a session (as the operating system sees it:
// BenchmarkDaemon_IdleSessions).
func BenchmarkIdleSessions_Memory(b *testing.B) {
	const n = 1000
	ws := idleWorkspace(b)
	if os.Getenv("IDLE_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 1
	}
	var per float64
	for b.Loop() {
		b.StopTimer()
		m := idleManager(b)
		before := liveBytes()
		b.StartTimer()
		ss := openIdle(b, m, ws, n)
		b.StopTimer()
		after := liveBytes()
		per = float64(int64(after)-int64(before)) / n
		if f := os.Getenv("IDLE_HEAPPROFILE"); f != "" {
			out, err := os.Create(f)
			require.NoError(b, err)
			require.NoError(b, pprof.Lookup("heap").WriteTo(out, 0))
			out.Close()
		}
		runtime.KeepAlive(ss)
		m.Close()
		b.StartTimer()
	}
	b.ReportMetric(per, "bytes/session")
}

// BenchmarkIdleSessions_CPU opens 1,000 sessions in one git workspace,
// lets their start-up work finish, then measures the CPU time (user +
// system, getrusage) the whole process spends over 20 s in which nothing
// happens; sessions=0 is the same process with no session open, the Go
// runtime's own background work. Target: nothing measurable beyond that
// (getrusage counts in ticks of 1–10 ms). Each iteration takes 20 s: run
// with -benchtime 1x.
func BenchmarkIdleSessions_CPU(b *testing.B) {
	ws := idleWorkspace(b)
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchIdleCPU(b, ws, n) })
	}
}

func benchIdleCPU(b *testing.B, ws string, n int) {
	const idle = 20 * time.Second
	var used time.Duration
	for b.Loop() {
		b.StopTimer()
		m := idleManager(b)
		ss := openIdle(b, m, ws, n)
		time.Sleep(time.Second) // the last sessions' background work ends
		runtime.GC()
		before := cpuTime(b)
		b.StartTimer()
		time.Sleep(idle)
		b.StopTimer()
		used = cpuTime(b) - before
		runtime.KeepAlive(ss)
		m.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(used.Microseconds())/1000, "cpu-ms/20s")
}

// cpuTime is the user plus system time this process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
