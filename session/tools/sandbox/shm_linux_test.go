package sandbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// shmUse is what a program that uses POSIX shared memory does: Python's
// multiprocessing makes a shared memory block (shm_open) and a lock
// (sem_open), both in /dev/shm, and a child process reads the block.
const shmUse = `
import multiprocessing as mp
from multiprocessing import shared_memory
def child(name, lock):
    with lock:
        s = shared_memory.SharedMemory(name=name)
        print("child-read", bytes(s.buf[:5]).decode())
        s.close()
if __name__ == "__main__":
    lock = mp.Lock()
    s = shared_memory.SharedMemory(create=True, size=16)
    s.buf[:5] = b"hello"
    p = mp.get_context("fork").Process(target=child, args=(s.name, lock))
    p.start(); p.join()
    s.close(); s.unlink()
    print("exit", p.exitcode)
`

// spawn runs a confined plan through the session's spawn server, as the
// local runner does, and returns its output and exit status.
func spawn(t *testing.T, s *sandbox.Session, dir string, plan sandbox.Plan) (string, int) {
	t.Helper()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	devnull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devnull.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	proc, err := s.Spawn(ctx, plan, append(os.Environ(), plan.Env...), dir, [3]*os.File{devnull, pw, pw})
	pw.Close()
	require.NoError(t, err, "the spawn server started the command")
	out := make(chan string, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				out <- b.String()
				return
			}
		}
	}()
	ws, err := proc.Wait(ctx)
	require.NoError(t, err)
	_ = syscall.Kill(-proc.Pid, syscall.SIGKILL)
	return <-out, ws.ExitStatus()
}

// TestHelper_PrivateShm: each session's commands see a /dev/shm of their
// own. A command of one session creates, writes and reads a file there and
// uses POSIX shared memory and semaphores through Python; a later command
// of the same session, started the other way (spawn server or per-command
// helper), finds it; no command of another session does, nor does the
// machine's /dev/shm hold it, nor can a command write the machine's
// through another path. Closing the session removes its folder.
func TestHelper_PrivateShm(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	sandboxtest.RequirePrivateShm(t, exe)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	m := "acpd-shm-test-" + hex.EncodeToString(rnd[:])
	t.Cleanup(func() { _ = os.Remove(filepath.Join("/dev/shm", m)) })

	p := testPolicy(t, sandbox.ModeRequired)
	wsA, wsB := t.TempDir(), t.TempDir()
	a, b := p.NewSession([]string{wsA}), p.NewSession([]string{wsB})
	defer b.Close()

	plant := `echo "$M" > /dev/shm/$M && cat /dev/shm/$M && echo appended >> /dev/shm/$M && rm -f /dev/shm/gone && echo planted
grep -E '^Cap(Eff|Amb):' /proc/self/status`
	for _, via := range []string{"helper", "server"} {
		plan, err := a.Wrap([]string{"/bin/sh", "-c", plant}, 3)
		require.NoError(t, err)
		require.NotEmpty(t, plan.Shm)
		var out string
		var code int
		if via == "helper" {
			var status string
			out, code, status = run(t, wsA, plan, "M="+m)
			require.Empty(t, status)
		} else {
			plan.Env = append(plan.Env, "M="+m)
			out, code = spawn(t, a, wsA, plan)
		}
		require.Equal(t, 0, code, "%s: %s", via, out)
		assert.Contains(t, out, m+"\n", via)
		assert.Contains(t, out, "planted", via)
		if os.Geteuid() != 0 {
			// The user namespace's CAP_SYS_ADMIN stayed with the helper.
			assert.Regexp(t, `CapEff:\s+0+\n`, out, via)
			assert.Regexp(t, `CapAmb:\s+0+\n`, out, via)
		}
		got, err := os.ReadFile(filepath.Join(plan.Shm, m))
		require.NoError(t, err, "the plant is in the session's folder")
		assert.Equal(t, m+"\nappended\n", string(got))
		require.NoError(t, os.Remove(filepath.Join(plan.Shm, m)))
	}
	assert.NoFileExists(t, filepath.Join("/dev/shm", m), "not in the machine's /dev/shm")

	// One session, both ways: what the spawn server's command leaves, the
	// per-command helper's sees.
	plan, err := a.Wrap([]string{"/bin/sh", "-c", `echo kept > /dev/shm/$M`}, 3)
	require.NoError(t, err)
	plan.Env = append(plan.Env, "M="+m)
	out, code := spawn(t, a, wsA, plan)
	require.Equal(t, 0, code, out)
	plan, err = a.Wrap([]string{"/bin/sh", "-c", `cat /dev/shm/$M`}, 3)
	require.NoError(t, err)
	out, code, _ = run(t, wsA, plan, "M="+m)
	assert.Equal(t, 0, code, out)
	assert.Equal(t, "kept\n", out)

	aShm := plan.Shm
	if py, err := exec.LookPath("python3"); err == nil {
		plan, err := a.Wrap([]string{py, "-c", shmUse}, 3)
		require.NoError(t, err)
		out, code, status := run(t, wsA, plan)
		require.Empty(t, status)
		assert.Equal(t, 0, code, out)
		assert.Contains(t, out, "child-read hello")
		assert.Contains(t, out, "exit 0")
	}

	// Another session sees none of it, either way, and cannot write the
	// machine's /dev/shm through a path that reaches it.
	look := `ls -A /dev/shm | sed 's/^/entry:/'; cat /dev/shm/$M 2>/dev/null && echo seen
echo x > /proc/1/root/dev/shm/$M 2>/dev/null && echo wrote-machine
echo x > /proc/1/root` + aShm + `/$M 2>/dev/null && echo wrote-other
echo x > ` + aShm + `/$M 2>/dev/null && echo wrote-other
echo mine > /dev/shm/$M && echo own-ok`
	for _, via := range []string{"helper", "server"} {
		plan, err := b.Wrap([]string{"/bin/sh", "-c", look}, 3)
		require.NoError(t, err)
		var out string
		var code int
		if via == "helper" {
			out, code, _ = run(t, wsB, plan, "M="+m)
		} else {
			plan.Env = append(plan.Env, "M="+m)
			out, code = spawn(t, b, wsB, plan)
		}
		assert.Equal(t, 0, code, out)
		assert.NotContains(t, out, "seen", via)
		assert.NotContains(t, out, "entry:", "%s: B's /dev/shm starts empty and stays its own", via)
		assert.NotContains(t, out, "wrote-machine", via)
		assert.NotContains(t, out, "wrote-other", via)
		assert.Contains(t, out, "own-ok", via)
		assert.NotEqual(t, aShm, plan.Shm)
		got, err := os.ReadFile(filepath.Join(plan.Shm, m))
		require.NoError(t, err)
		assert.Equal(t, "mine\n", string(got))
		require.NoError(t, os.Remove(filepath.Join(plan.Shm, m)))
	}
	assert.NoFileExists(t, filepath.Join("/dev/shm", m))
	got, err := os.ReadFile(filepath.Join(aShm, m))
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(got), "B's commands did not touch A's")

	require.NoError(t, a.Close())
	assert.NoDirExists(t, aShm, "the session's /dev/shm goes with it")
}

// TestPrivateShm_NotAHelper: a helper that does not serve the probe (a
// program that only exits 0, like a test binary without package helper)
// gives no private /dev/shm, rather than a false yes.
func TestPrivateShm_NotAHelper(t *testing.T) {
	tru, err := exec.LookPath("true")
	require.NoError(t, err)
	p := &sandbox.Policy{Mode: sandbox.ModeAuto, Helper: tru, TempRoot: t.TempDir()}
	err = p.PrivateShm()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not serve acpd's sandbox helper")
}
