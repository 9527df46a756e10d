package session_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/instructions/gittest"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// Hardening end to end: the built acpd, as an editor drives it, against a
// workspace, commands and a sandbox that try to take it over.

// TestE2E_Harden_HostileRepository: opening a session in a repository whose
// git configuration names a program for every hook git has (fsmonitor,
// filters, pager, external diff, textconv, hooks, ssh, credential helper,
// gpg, aliases) runs none of them, confined or not, and the environment
// block still names the branch, the status and the recent commits.
func TestE2E_Harden_HostileRepository(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"confined", nil},
		{"no Landlock: settings alone", []string{"ACPD_SANDBOX_ABI=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.env == nil {
				sandboxtest.Require(t)
			}
			h := gittest.NewHostile(t)
			d := startDaemonEnv(t, h.Repo, t.TempDir(), tc.env, nil, []modeltest.Response{{Text: "hello"}})
			sid := d.session(t)
			resp, err := d.cc.Prompt(ctxFor(t), sid, "hi")
			require.NoError(t, err)
			assert.Equal(t, acp.StopEndTurn, resp.StopReason)
			reqs := d.model.Requests()
			require.Len(t, reqs, 1)
			sys := reqs[0].Messages[0].Text()
			assert.Empty(t, h.Ran(t), "no program of the repository ran")
			assert.Contains(t, sys, "- Branch: main\n")
			assert.Contains(t, sys, " M a.txt")
			assert.Contains(t, sys, "  - signed commit\n  - first commit\n")
			assert.NotContains(t, sys, "git status failed")
		})
	}
}

// TestE2E_Harden_StopTheSpawner: `kill -STOP $PPID` from run_shell_command,
// then another command: the turn ends, within seconds, with the second
// command's output in the model's hands. With signal scoping (this
// kernel) the kill is refused; simulating a kernel without it, the stopped
// spawn server is found, killed and replaced (the first command's result
// says so, or — when the server reported the exit before the stop took
// hold — the second command finds it stopped).
func TestE2E_Harden_StopTheSpawner(t *testing.T) {
	st := sandboxtest.Require(t)
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"signal scoping", nil},
		{"no signal scoping (ABI 5)", []string{"ACPD_SANDBOX_ABI=5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env == nil && !st.SignalScoping() {
				t.Skipf("Landlock ABI %d: no signal scoping here", st.ABI)
			}
			t.Parallel()
			l := newSbxLayout(t)
			d := startDaemonEnv(t, l.ws, t.TempDir(), append(l.env(), tc.env...), nil, nil)
			start := time.Now()
			_, results := shellTurn(t, d, localCaps, []string{"echo before; kill -STOP $PPID; echo after", "echo second-command-ran"})
			elapsed := time.Since(start)
			t.Logf("turn took %s\nfirst: %s", elapsed, results[0])
			assert.Less(t, elapsed, 15*time.Second)
			assert.Contains(t, results[0], "Output: before\n")
			assert.Contains(t, results[0], "\nafter\n")
			if tc.env == nil {
				assert.Contains(t, results[0], "kill: Operation not permitted", "the kill is refused")
				assert.Contains(t, results[0], "Exit Code: 0")
				assert.Contains(t, results[0], "may signal only the processes it started", "and the model is told why")
			}
			assert.Contains(t, results[1], "Output: second-command-ran")
			assert.Contains(t, results[1], "Exit Code: 0")
		})
	}
}

// TestE2E_Harden_FakeSandboxFailure: through the editor's terminal, a
// command that prints the helper's failure line and exits 125 is only a
// failed command: nothing is run again unconfined, nothing is written
// outside the workspace, and later commands stay confined.
func TestE2E_Harden_FakeSandboxFailure(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	l := newSbxLayout(t)
	ed := newEditor(t)
	d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), ed.fc, nil, "--sandbox", "auto")
	before := snapshot(t, l.sibling)
	evil := filepath.Join(l.sibling, "evil.txt")
	_, results := shellTurn(t, d, terminalCaps, []string{
		"echo x > " + evil + "; echo 'acpd-sandbox: sandbox unavailable: the kernel has no Landlock support' >&2; exit 125",
		"echo x > " + evil + " && echo wrote-outside",
	})
	require.NoError(t, d.cc.End())
	assert.Contains(t, results[0], "Exit Code: 125", "the command's own status")
	assert.NotContains(t, results[0], "UNCONFINED")
	assert.Contains(t, results[1], "Permission denied")
	assert.NotContains(t, results[1], "\nwrote-outside")
	assert.NotContains(t, results[1], "UNCONFINED")
	assert.Equal(t, before, snapshot(t, l.sibling), "nothing written outside")
	_, err := os.Stat(evil)
	assert.ErrorIs(t, err, os.ErrNotExist)
	var creates int
	for _, c := range ed.terms.Calls() {
		if c.Method == acp.MethodTerminalCreate {
			creates++
			assert.Equal(t, acpdBin, c.Command, "every command ran under the helper")
			assert.True(t, strings.Contains(strings.Join(c.Args, " "), "--status-file "), "with a status file, not a pipe")
		}
	}
	assert.Equal(t, 2, creates, "nothing was run a second time")
}
