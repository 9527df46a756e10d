package sandbox_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox"
	// This test binary is its own sandbox helper: the init of package
	// helper serves `<test binary> __sandbox-exec …`.
	_ "github.com/acpd/acpd/session/tools/sandbox/helper"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

func testPolicy(t *testing.T, mode sandbox.Mode) *sandbox.Policy {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return &sandbox.Policy{Mode: mode, Helper: exe, TempRoot: t.TempDir(), CacheDir: filepath.Join(t.TempDir(), "cache")}
}

func unusable() sandbox.Status {
	return sandbox.Status{Backend: "landlock", Err: errors.New("no Landlock here")}
}

func usable() sandbox.Status { return sandbox.Status{Backend: "landlock", ABI: 7, KernelABI: 7} }

// run starts plan as the local runner does, with the status pipe on fd 3,
// and returns the output, the exit status and the helper's set-up message.
func run(t *testing.T, dir string, plan sandbox.Plan, env ...string) (out string, code int, status string) {
	t.Helper()
	cmd := exec.Command(plan.Argv[0], plan.Argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), plan.Env...), env...)
	plan.Prepare(cmd)
	var b strings.Builder
	cmd.Stdout, cmd.Stderr = &b, &b
	var sr, sw *os.File
	if plan.Confined {
		var err error
		sr, sw, err = os.Pipe()
		require.NoError(t, err)
		defer sr.Close()
		cmd.ExtraFiles = []*os.File{sw}
	}
	require.NoError(t, cmd.Start())
	if sw != nil {
		sw.Close()
		msg, err := io.ReadAll(sr)
		require.NoError(t, err)
		status = string(msg)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return b.String(), code, status
}

func TestWrap_Off(t *testing.T) {
	p := testPolicy(t, sandbox.ModeOff)
	plan, err := p.NewSession([]string{"/ws"}).Wrap([]string{"/bin/sh", "-c", "true"}, 3)
	require.NoError(t, err)
	assert.Equal(t, sandbox.Plan{Argv: []string{"/bin/sh", "-c", "true"}}, plan)
	var nilSession *sandbox.Session
	plan, err = nilSession.Wrap([]string{"sh"}, 3)
	require.NoError(t, err)
	assert.False(t, plan.Confined)
	assert.Equal(t, "sandbox: off (commands run unconfined)\n  environment: "+p.Env.Describe(), p.Describe())
}

func TestWrap_Unavailable(t *testing.T) {
	auto := testPolicy(t, sandbox.ModeAuto)
	auto.Probe = unusable
	s := auto.NewSession([]string{"/ws"})
	plan, err := s.Wrap([]string{"sh", "-c", "x"}, 3)
	require.NoError(t, err)
	assert.False(t, plan.Confined)
	assert.Equal(t, []string{"sh", "-c", "x"}, plan.Argv)
	assert.Contains(t, plan.Warning, "no Landlock here")
	assert.Contains(t, plan.Warning, "UNCONFINED")
	plan, err = s.Wrap([]string{"sh", "-c", "y"}, 3)
	require.NoError(t, err)
	assert.Empty(t, plan.Warning, "one warning per session")
	assert.Contains(t, auto.Describe(), "commands run UNCONFINED")

	req := testPolicy(t, sandbox.ModeRequired)
	req.Probe = unusable
	_, err = req.NewSession([]string{"/ws"}).Wrap([]string{"sh", "-c", "x"}, 3)
	require.ErrorIs(t, err, sandbox.ErrRefused)
	assert.Contains(t, err.Error(), "no Landlock here")
	assert.Contains(t, err.Error(), "The command was not run")
	assert.Contains(t, err.Error(), `sandbox = "auto"`)
	assert.Contains(t, req.Describe(), "commands are refused")
}

func TestWrap_Confined(t *testing.T) {
	p := testPolicy(t, sandbox.ModeAuto)
	p.Probe = usable
	p.ShmProbe = func() error { return nil }
	p.DenyNetwork = true
	extra := t.TempDir()
	p.Writable = []string{extra, filepath.Join(extra, "missing")}
	s := p.NewSession([]string{"/ws", "/ws2"})
	plan, err := s.Wrap([]string{"/bin/sh", "-c", "true"}, 3)
	require.NoError(t, err)
	tmp, err := s.TempDir()
	require.NoError(t, err)
	assert.True(t, plan.Confined)
	require.NotEmpty(t, plan.Shm, "a private /dev/shm")
	assert.DirExists(t, plan.Shm)
	assert.Equal(t, []string{
		p.Helper, sandbox.Subcommand, "--status-fd", "3",
		"--rw", "/ws", "--rw", "/ws2", "--rw", tmp, "--rw", s.CacheDir(), "--rw", extra, "--rw", plan.Shm,
		"--no-net", "--shm", plan.Shm, "--", "/bin/sh", "-c", "true",
	}, plan.Argv, "a folder that does not exist is left out")
	again, err := s.Wrap([]string{"/bin/sh", "-c", "true"}, 3)
	require.NoError(t, err)
	assert.Equal(t, plan.Shm, again.Shm, "one /dev/shm per session")
	other := p.NewSession([]string{"/ws", "/ws2"})
	defer other.Close()
	otherPlan, err := other.Wrap([]string{"/bin/sh", "-c", "true"}, 3)
	require.NoError(t, err)
	assert.NotEqual(t, plan.Shm, otherPlan.Shm, "another session, even of the same workspace, has its own")
	assert.Contains(t, plan.Explain(), "/dev/shm (its session's own")
	assert.NotContains(t, plan.Explain(), plan.Shm)
	assert.Contains(t, p.Describe(), "a private per-session /dev/shm")
	assert.Contains(t, plan.Env, "TMPDIR="+tmp)
	assert.Equal(t, p.CacheDir, filepath.Dir(s.CacheDir()), "the session's own folder in acpd's cache folder")
	assert.Regexp(t, `^ws-[0-9a-f]{16}$`, filepath.Base(s.CacheDir()))
	assert.Contains(t, plan.Env, "GOCACHE="+filepath.Join(s.CacheDir(), "go-build"))
	assert.Contains(t, plan.Env, "npm_config_cache="+filepath.Join(s.CacheDir(), "npm"))
	assert.DirExists(t, s.CacheDir())
	assert.Contains(t, plan.Explain(), "/ws, /ws2, "+tmp)
	assert.Contains(t, plan.Explain(), "Network access is denied")
	d := p.Describe()
	assert.Contains(t, d, "mode auto, landlock ABI 7")
	assert.Contains(t, d, "network: denied (Landlock TCP rules + seccomp socket filter)")

	noPipe, err := s.Wrap([]string{"sh"}, -1)
	require.NoError(t, err)
	assert.False(t, slices.Contains(noPipe.Argv, "--status-fd"), "an editor terminal has no status pipe")

	require.NoError(t, s.Close())
	assert.NoDirExists(t, tmp, "the session's temp folder goes with it")
	assert.NoDirExists(t, plan.Shm, "and so does its /dev/shm")
}

// TestWrap_NoPrivateShm: where the kernel allows no private /dev/shm, no
// mode grants the machine's, which every workspace's commands would share.
func TestWrap_NoPrivateShm(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeAuto, sandbox.ModeRequired} {
		p := testPolicy(t, mode)
		p.Probe = usable
		p.ShmProbe = func() error { return errors.New("no namespaces here") }
		s := p.NewSession([]string{"/ws"})
		plan, err := s.Wrap([]string{"/bin/sh", "-c", "true"}, 3)
		require.NoError(t, err)
		assert.Empty(t, plan.Shm)
		assert.False(t, slices.Contains(plan.Argv, "--shm"))
		assert.Contains(t, plan.ShmNote, "no namespaces here")
		assert.Contains(t, plan.Explain(), plan.ShmNote)
		assert.NotContains(t, plan.Writable, "/dev/shm")
		assert.Contains(t, plan.ShmNote, "not writable")
		assert.Contains(t, p.Describe(), "/dev/shm: not writable (no private one: no namespaces here")
		require.NoError(t, s.Close())
	}
}

// TestHelper_Confines runs the real helper: writes inside the roots work,
// writes, truncation, links and removals outside fail, and a background
// child is confined too.
func TestHelper_Confines(t *testing.T) {
	sandboxtest.Require(t)
	ws, outside := t.TempDir(), t.TempDir()
	keep := filepath.Join(outside, "keep.txt")
	require.NoError(t, os.WriteFile(keep, []byte("keep\n"), 0o644))
	p := testPolicy(t, sandbox.ModeRequired)
	s := p.NewSession([]string{ws})
	defer s.Close()
	plan, err := s.Wrap([]string{"/bin/sh", "-c", `
echo in > in.txt && echo in-ok
echo tmp > "$TMPDIR/t" && echo tmp-ok
echo x > /dev/null && echo null-ok
echo out > ` + outside + `/out.txt || echo out-denied
truncate -s 0 ` + keep + ` || echo truncate-denied
ln in.txt ` + outside + `/link || echo link-denied
rm -f ` + keep + ` || echo rm-denied
(echo bg > ` + outside + `/bg.txt || echo bg-denied) & wait
`}, 3)
	require.NoError(t, err)
	out, code, status := run(t, ws, plan)
	assert.Empty(t, status, "the helper exec'd the shell")
	assert.Equal(t, 0, code, out)
	for _, want := range []string{"in-ok", "tmp-ok", "null-ok", "out-denied", "truncate-denied", "link-denied", "rm-denied", "bg-denied"} {
		assert.Contains(t, out, want)
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only keep.txt")
	b, err := os.ReadFile(keep)
	require.NoError(t, err)
	assert.Equal(t, "keep\n", string(b))
}

// TestHelper_SetupFailure: a helper that cannot confine says so on the
// status pipe and exits 125 without running the command; a command that
// itself exits 125 is not mistaken for it.
func TestHelper_SetupFailure(t *testing.T) {
	ws := t.TempDir()
	p := testPolicy(t, sandbox.ModeRequired)
	p.Probe = usable // the daemon believes it can; the helper finds out
	s := p.NewSession([]string{ws})
	defer s.Close()
	plan, err := s.Wrap([]string{"/bin/sh", "-c", "echo ran > ran.txt"}, 3)
	require.NoError(t, err)
	out, code, status := run(t, ws, plan, sandbox.ABIEnv+"=0")
	assert.Equal(t, sandbox.ExitUnavailable, code)
	assert.Contains(t, status, "sandbox unavailable: Landlock disabled by ACPD_SANDBOX_ABI=0")
	assert.Contains(t, out, sandbox.StderrPrefix+"sandbox unavailable")
	assert.NoFileExists(t, filepath.Join(ws, "ran.txt"))

	plan, err = s.Wrap([]string{"/no/such/shell"}, 3)
	require.NoError(t, err)
	_, code, status = run(t, ws, plan)
	assert.Equal(t, sandbox.ExitUnavailable, code)
	assert.Contains(t, status, "/no/such/shell")

	err = sandbox.SetupError(status)
	require.ErrorIs(t, err, sandbox.ErrSetupFailed)
	assert.Contains(t, err.Error(), "The command was not run")

	sandboxtest.Require(t)
	plan, err = s.Wrap([]string{"/bin/sh", "-c", "exit 125"}, 3)
	require.NoError(t, err)
	_, code, status = run(t, ws, plan)
	assert.Equal(t, 125, code)
	assert.Empty(t, status, "the command's own 125")
}

func TestLooksRefused(t *testing.T) {
	assert.True(t, sandbox.LooksRefused("touch: cannot touch '/x': Permission denied"))
	assert.True(t, sandbox.LooksRefused("PermissionError: [Errno 13]"))
	assert.True(t, sandbox.LooksRefused("Error: EACCES: permission denied, open '/x'"))
	assert.False(t, sandbox.LooksRefused("all good"))
}

// TestWrap_StatusFile: without a status pipe (an editor terminal) the
// helper reports a failed set-up in a file of the daemon's that the
// confined command cannot write; what a command prints and how it exits
// never counts as a set-up failure.
func TestWrap_StatusFile(t *testing.T) {
	sandboxtest.Require(t)
	ws := t.TempDir()
	p := testPolicy(t, sandbox.ModeAuto)
	s := p.NewSession([]string{ws})
	defer s.Close()

	// A command that fakes the helper's failure: exit 125 and its line.
	fake := `echo "` + sandbox.StderrPrefix + `sandbox unavailable: fake" >&2; exit 125`
	plan, err := s.Wrap([]string{"/bin/sh", "-c", fake}, -1)
	require.NoError(t, err)
	require.NotEmpty(t, plan.StatusFile)
	assert.True(t, slices.Contains(plan.Argv, "--status-file"))
	assert.False(t, slices.Contains(plan.Argv, "--status-fd"))
	out, code, _ := run(t, ws, plan)
	assert.Equal(t, 125, code)
	assert.Contains(t, out, "fake")
	msg, failed := plan.SetupFailure()
	assert.False(t, failed, "a command's own output and status: %q", msg)

	// The confined command cannot write the report itself, even knowing
	// where it goes.
	plan, err = s.Wrap([]string{"/bin/sh", "-c", `echo forged > "$STATUS" || echo cannot-forge; ls "$(dirname "$STATUS")" >/dev/null && echo can-read`}, -1)
	require.NoError(t, err)
	out, code, _ = run(t, ws, plan, "STATUS="+plan.StatusFile)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "cannot-forge")
	_, failed = plan.SetupFailure()
	assert.False(t, failed)
	assert.NoFileExists(t, plan.StatusFile)

	// The helper's own failure is reported there.
	plan, err = s.Wrap([]string{"/bin/sh", "-c", "echo ran > ran.txt"}, -1)
	require.NoError(t, err)
	_, code, _ = run(t, ws, plan, sandbox.ABIEnv+"=0")
	assert.Equal(t, sandbox.ExitUnavailable, code)
	msg, failed = plan.SetupFailure()
	assert.True(t, failed)
	assert.Contains(t, msg, "Landlock disabled by ACPD_SANDBOX_ABI=0")
	assert.NoFileExists(t, filepath.Join(ws, "ran.txt"))
	assert.NoFileExists(t, plan.StatusFile, "read once")

	// A status folder commands could write (the temp root is inside the
	// workspace) gives no status file rather than a forgeable one.
	inside := p.NewSession([]string{filepath.Dir(p.TempRoot)})
	defer inside.Close()
	plan, err = inside.Wrap([]string{"/bin/sh", "-c", "true"}, -1)
	require.NoError(t, err)
	assert.Empty(t, plan.StatusFile)
}

// TestHelper_SignalScoping: on a kernel with signal scoping (Landlock ABI
// ≥ 6) a confined command cannot signal a process outside its domain —
// here a sleeper the test started, standing for acpd or the editor — while
// it still signals its own children.
func TestHelper_SignalScoping(t *testing.T) {
	st := sandboxtest.Require(t)
	if !st.SignalScoping() {
		t.Skipf("this kernel has Landlock ABI %d, signal scoping needs 6", st.ABI)
	}
	sleeper := exec.Command("sleep", "30")
	require.NoError(t, sleeper.Start())
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	ws := t.TempDir()
	s := testPolicy(t, sandbox.ModeRequired).NewSession([]string{ws})
	defer s.Close()
	pid := strconv.Itoa(sleeper.Process.Pid)
	plan, err := s.Wrap([]string{"/bin/sh", "-c", `
kill -STOP ` + pid + ` || echo stop-denied
kill -KILL ` + pid + ` || echo kill-denied
sleep 30 & kill $! && echo own-child-killed
`}, 3)
	require.NoError(t, err)
	out, code, status := run(t, ws, plan)
	assert.Empty(t, status)
	assert.Equal(t, 0, code, out)
	for _, want := range []string{"stop-denied", "kill-denied", "own-child-killed"} {
		assert.Contains(t, out, want)
	}
	state, err := os.ReadFile("/proc/" + pid + "/stat")
	require.NoError(t, err)
	assert.NotContains(t, string(state), ") T ", "the sleeper did not stop")

	// The control: without scoping (an ABI 5 kernel, simulated in the
	// helper) the same command stops it.
	plan, err = s.Wrap([]string{"/bin/sh", "-c", "kill -STOP " + pid + " && echo stopped"}, 3)
	require.NoError(t, err)
	out, _, _ = run(t, ws, plan, sandbox.ABIEnv+"=5")
	assert.Contains(t, out, "stopped")
	assert.Eventually(t, func() bool {
		state, err := os.ReadFile("/proc/" + pid + "/stat")
		return err == nil && strings.Contains(string(state), ") T ")
	}, 5*time.Second, 5*time.Millisecond, "the sleeper stops")
}

// TestRunReadOnly: a program acpd runs on its own initiative executes no
// other file, writes nothing and has no network, whatever it is told.
func TestRunReadOnly(t *testing.T) {
	sandboxtest.Require(t)
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	sh, err = filepath.EvalSymlinks(sh)
	require.NoError(t, err)
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "marker")
	p := testPolicy(t, sandbox.ModeOff) // the mode governs the model's commands, not these
	out, err := p.RunReadOnly(t.Context(), dir, os.Environ(), []string{sh, "-c",
		"echo started; touch " + marker + " || echo no-exec; echo x > " + dir + "/w || echo no-write; read -r l < /proc/self/status && echo read-ok"})
	require.NoError(t, err)
	assert.Contains(t, string(out), "started")
	assert.Contains(t, string(out), "no-exec", "touch is another program")
	assert.Contains(t, string(out), "no-write")
	assert.Contains(t, string(out), "read-ok", "reading is not restricted")
	assert.NoFileExists(t, marker)
	assert.NoFileExists(t, filepath.Join(dir, "w"))

	_, err = p.RunReadOnly(t.Context(), dir, os.Environ(), []string{"sh", "-c", "true"})
	assert.Error(t, err, "a relative program is refused")

	none := testPolicy(t, sandbox.ModeAuto)
	none.Probe = unusable
	_, err = none.RunReadOnly(t.Context(), dir, os.Environ(), []string{sh, "-c", "true"})
	assert.ErrorIs(t, err, sandbox.ErrCannotConfine)
	var nilPolicy *sandbox.Policy
	_, err = nilPolicy.RunReadOnly(t.Context(), dir, os.Environ(), []string{sh, "-c", "true"})
	assert.ErrorIs(t, err, sandbox.ErrCannotConfine)
}

// What RunUnconfined (and RunReadOnly) keeps of a program's output is
// bounded: a repository can make git print a commit subject of any length.
// The rest is drained, so the program ends normally.
func TestRunUnconfined_OutputBounded(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	out, err := sandbox.RunUnconfined(t.Context(), t.TempDir(), os.Environ(),
		[]string{sh, "-c", "head -c 20000000 /dev/zero; head -c 20000000 /dev/zero >&2; exit 3"})
	require.Error(t, err)
	assert.Equal(t, 1<<20, len(out))
	assert.Contains(t, err.Error(), "exit status 3")
}
