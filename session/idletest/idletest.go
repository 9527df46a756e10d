// Package idletest holds what the idle-session benchmarks share, in process
// and through the built binary over stdio or `acpd serve`: the workspace
// the sessions open in and the reading of a daemon's anonymous resident
// memory as the operating system sees it.
package idletest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/instructions/gittest"
)

// Workspace is a committed git repository as a team keeps one: 200 source
// files, an AGENTS.md importing a second file, and three command files in
// .acpd/commands.
func Workspace(tb testing.TB) string {
	tb.Helper()
	gittest.Require(tb)
	dir := tb.TempDir()
	for i := range 200 {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%20))
		require.NoError(tb, os.MkdirAll(sub, 0o755))
		require.NoError(tb, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.go", i)), []byte("package p\n"), 0o644))
	}
	agents := "# Rules\n\nRun `go test ./...` before every commit. Keep functions short.\n\nSee @docs/style.md for the style.\n"
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte(agents), 0o644))
	require.NoError(tb, os.MkdirAll(filepath.Join(dir, "docs"), 0o755))
	style := ""
	for i := range 20 {
		style += fmt.Sprintf("- Style rule %d: name things for what they hold, not for their type.\n", i)
	}
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "docs", "style.md"), []byte(style), 0o644))
	cmds := filepath.Join(dir, ".acpd", "commands")
	require.NoError(tb, os.MkdirAll(cmds, 0o755))
	for _, n := range []string{"review", "release", "triage"} {
		body := fmt.Sprintf("---\ndescription: %s the current change\nargument-hint: [focus]\n---\nPlease %s the change, focusing on $ARGUMENTS.\n", n, n)
		require.NoError(tb, os.WriteFile(filepath.Join(cmds, n+".md"), []byte(body), 0o644))
	}
	gittest.Seed(tb, dir)
	return dir
}

// RSSAnonKB is a live process's anonymous resident memory in KiB (RssAnon
// in /proc/PID/status: heap, stacks and whatever the Go runtime keeps of
// freed heap).
func RSSAnonKB(tb testing.TB, pid int) int64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(tb, err)
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			var kb int64
			_, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			require.NoError(tb, err)
			return kb
		}
	}
	tb.Fatal("no RssAnon in /proc status")
	return 0
}

// Settled is how long after a burst of sessions a daemon is read as idle:
// past the 2 s of quiet after which a served daemon hands the burst's
// garbage back (session/server's releaser).
const Settled = 4 * time.Second

// Growth reads a process's anonymous RSS before a burst of sessions and at
// points in time after it, each growth divided by the sessions.
type Growth struct {
	pid    int
	before int64
	at     time.Time
}

// Start reads the baseline of process pid.
func Start(tb testing.TB, pid int) *Growth {
	return &Growth{pid: pid, before: RSSAnonKB(tb, pid)}
}

// Burst marks the end of the burst: After counts from here.
func (g *Growth) Burst() { g.at = time.Now() }

// After sleeps until d has passed since Burst and returns the growth in
// KiB per session of n.
func (g *Growth) After(tb testing.TB, d time.Duration, n int) float64 {
	time.Sleep(time.Until(g.at.Add(d)))
	return float64(RSSAnonKB(tb, g.pid)-g.before) / float64(n)
}
