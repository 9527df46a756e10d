package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model/modeltest"
)

// procCPU is the user plus system CPU time a live process has used, from
// /proc/<pid>/stat (in clock ticks of 1/100 s, Linux's USER_HZ).
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(tb, err)
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	require.NoError(tb, err)
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	require.NoError(tb, err)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// TestE2E_ImportBomb: AGENTS.md imports b.md 60 times, b.md imports c.md
// 60 times, c.md imports a 10 KB d.md 60 times. Through the built binary,
// the first prompt is answered with d.md's text in the system prompt once,
// costing acpd well under a second of CPU and no memory to speak of
// (before: 55 s and 6 GB); /context shows the warnings.
func TestE2E_ImportBomb(t *testing.T) {
	cwd := t.TempDir()
	fan := func(name string) string { return strings.Repeat("See @"+name+" now.\n", 60) }
	writeFile(t, filepath.Join(cwd, "AGENTS.md"), fan("b.md"))
	writeFile(t, filepath.Join(cwd, "b.md"), fan("c.md"))
	writeFile(t, filepath.Join(cwd, "c.md"), fan("d.md"))
	writeFile(t, filepath.Join(cwd, "d.md"), strings.Repeat("d is ten kilobytes of rules\n", 10240/28))

	d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{{Text: "ok"}})
	sid := d.session(t)
	resp, err := d.cc.Prompt(ctxFor(t), sid, "hello")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	cpu := procCPU(t, d.cmd.Process.Pid)
	peakMB := float64(vmHWM(t, d.cmd.Process.Pid)) / 1024
	t.Logf("acpd after the first prompt: %v CPU, peak RSS %.1f MB", cpu, peakMB)
	assert.Less(t, cpu, time.Second, "acpd's own CPU time up to the first answer")
	assert.Less(t, peakMB, 64.0, "peak RSS")

	sys := d.model.Requests()[0].Messages[0].Text()
	assert.Equal(t, 10240/28, strings.Count(sys, "d is ten kilobytes of rules"), "d.md's text once")
	assert.Less(t, len(sys), 64<<10)

	before := len(d.cc.Updates())
	_, err = d.cc.Prompt(ctxFor(t), sid, "/context")
	require.NoError(t, err)
	text := turnText(d, sid, before)
	for _, n := range []string{"b.md", "c.md", "d.md"} {
		assert.Contains(t, text, filepath.Join(cwd, n)+": imported 59 more times; its text is included once")
	}
}
