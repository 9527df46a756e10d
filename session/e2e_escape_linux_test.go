//go:build linux

package session_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// openPty opens a new pseudo-terminal: its master, its slave and the
// slave's path, all pollable (reads honour deadlines).
func openPty(t *testing.T) (master, slave *os.File, name string) {
	t.Helper()
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	require.NoError(t, err)
	name = "/dev/pts/" + strconv.Itoa(n)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	master, slave = os.NewFile(uintptr(mfd), "ptmx"), os.NewFile(uintptr(sfd), name)
	t.Cleanup(func() { slave.Close(); master.Close() })
	return master, slave, name
}

// withTerminal makes the daemon lead a session whose controlling terminal
// is slave, as acpd has when a user starts `acpd run` (or a terminal
// editor starts acpd) in a terminal.
func withTerminal(slave *os.File) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		cmd.ExtraFiles = []*os.File{slave}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	}
}

// pending is what is waiting to be read from f within a short while.
func pending(f *os.File) string {
	_ = f.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return string(out)
		}
	}
}

// injectProbe pushes a line into the terminal at argv[1] with TIOCSTI, as
// if the user typed it: the shell reading that terminal would run it.
const injectProbe = `import fcntl, os, sys, termios
try:
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY)
    for c in sys.argv[2].encode() + b"\n":
        fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
    print("typed into", sys.argv[1])
except OSError as e:
    print("refused:", e.strerror)
`

// TestE2E_Escape_KeystrokeInjection: with acpd running in a terminal, a
// command cannot type a line into it — not through /dev/tty (each command
// leads a session of its own, so it has no controlling terminal), and,
// confined, not through the terminal's own path either (the seccomp
// filter refuses TIOCSTI, which root could otherwise use on any
// terminal). Unconfined commands (sandbox off) get their own session too.
func TestE2E_Escape_KeystrokeInjection(t *testing.T) {
	sandboxtest.Require(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed for the probe: %v", err)
	}
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		paths func(pts string) []string
	}{
		{"confined", nil, func(pts string) []string { return []string{"/dev/tty", pts} }},
		{"sandbox off", []string{"--sandbox", "off"}, func(string) []string { return []string{"/dev/tty"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newSbxLayout(t)
			writeFile(t, filepath.Join(l.ws, "probe.py"), injectProbe)
			master, slave, pts := openPty(t)
			d := startDaemonCmd(t, l.ws, t.TempDir(), l.env(), nil, nil, withTerminal(slave), tc.flags...)
			var steps []string
			for _, p := range tc.paths(pts) {
				steps = append(steps, "python3 probe.py "+p+" 'touch "+l.sibling+"/typed'")
			}
			_, results := shellTurn(t, d, localCaps, steps)
			for i, r := range results {
				assert.Contains(t, r, "Output: refused: ", "%s: %s", steps[i], r)
				assert.NotContains(t, r, "typed into")
			}
			assert.NotContains(t, pending(slave), "typed", "nothing reached the terminal's input")
			assert.NotContains(t, pending(master), "typed", "nor its echo")
		})
	}
}

// TestE2E_Escape_DeviceNodes: a confined command cannot make a device node
// — as root, a block node for a disk in the workspace or /dev/shm would
// give raw writes to it — while FIFOs still work. Landlock refuses mknod
// of a device before the capability check, so the refusal reads the same
// for root and for anyone else.
func TestE2E_Escape_DeviceNodes(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	l := newSbxLayout(t)
	shm := filepath.Join("/dev/shm", "acpd-e2e-"+filepath.Base(filepath.Dir(l.root)))
	t.Cleanup(func() { os.Remove(shm) })
	d := startDaemonEnv(t, l.ws, t.TempDir(), l.env(), nil, nil)
	_, results := shellTurn(t, d, localCaps, []string{
		"mknod blk b 7 0 && echo made",
		"mknod chr c 1 3 && echo made",
		"mknod " + shm + " b 7 0 && echo made",
		"mkfifo fifo && echo fifo-made",
	})
	for _, r := range results[:3] {
		assert.Contains(t, r, "Permission denied", r)
		assert.NotContains(t, r, "\nmade")
	}
	assert.Contains(t, results[3], "Output: fifo-made", results[3])
	for _, p := range []string{filepath.Join(l.ws, "blk"), filepath.Join(l.ws, "chr"), shm} {
		_, err := os.Lstat(p)
		assert.ErrorIs(t, err, os.ErrNotExist, p)
	}
}

// TestE2E_Escape_InheritedFiles: a descriptor acpd's parent left open (fd
// 7, a log outside the workspace) does not reach commands, confined or
// not: `echo … >&7` fails and the log is unchanged.
func TestE2E_Escape_InheritedFiles(t *testing.T) {
	sandboxtest.Require(t)
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
	}{{"confined", nil}, {"sandbox off", []string{"--sandbox", "off"}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newSbxLayout(t)
			logPath := filepath.Join(l.sibling, "parent.log")
			writeFile(t, logPath, "parent log\n")
			logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			t.Cleanup(func() { logf.Close() })
			leak := func(cmd *exec.Cmd) { cmd.ExtraFiles = []*os.File{nil, nil, nil, nil, logf} } // fd 7
			d := startDaemonCmd(t, l.ws, t.TempDir(), l.env(), nil, nil, leak, tc.flags...)
			_, results := shellTurn(t, d, localCaps, []string{
				"echo leaked >&7 && echo wrote",
				"ls /proc/self/fd | sort -n | tr '\\n' ' '",
			})
			assert.Contains(t, results[0], "Bad file descriptor", results[0])
			assert.NotContains(t, results[0], "\nwrote")
			assert.NotContains(t, results[1], " 7 ", results[1])
			b, err := os.ReadFile(logPath)
			require.NoError(t, err)
			assert.Equal(t, "parent log\n", string(b))
		})
	}
}
