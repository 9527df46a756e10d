//go:build linux

package sandbox_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// ioctlProbe tries the keystroke ioctls and an ordinary one on stdin
// (/dev/null, not a terminal) and prints the errno of each: a filtered
// ioctl fails with EPERM before the device is asked, an unfiltered one
// with ENOTTY from the device.
const ioctlProbe = `
import errno, fcntl, os, termios
for name, req in (("sti", termios.TIOCSTI), ("linux", 0x541C), ("tcgets", termios.TCGETS)):
    try:
        fcntl.ioctl(0, req, b"x" * 64)
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
print("leader", os.getsid(0) == os.getpid())
`

// TestHelper_RefusesKeystrokeInjection: under the helper TIOCSTI and
// TIOCLINUX are refused by the seccomp filter whatever the network
// setting, other ioctls reach the device, and the command leads a session
// of its own (no controlling terminal of its starter's). The control runs
// the probe unconfined.
func TestHelper_RefusesKeystrokeInjection(t *testing.T) {
	sandboxtest.Require(t)
	py, err := exec.LookPath("python3")
	require.NoError(t, err)
	control, err := exec.Command(py, "-c", ioctlProbe).CombinedOutput()
	require.NoError(t, err, "%s", control)
	assert.Contains(t, string(control), "sti ENOTTY")
	assert.Contains(t, string(control), "leader False")
	for _, denyNet := range []bool{false, true} {
		p := testPolicy(t, sandbox.ModeRequired)
		p.DenyNetwork = denyNet
		s := p.NewSession([]string{t.TempDir()})
		plan, err := s.Wrap([]string{py, "-c", ioctlProbe}, 3)
		require.NoError(t, err)
		out, code, status := run(t, t.TempDir(), plan)
		require.Empty(t, status)
		require.Equal(t, 0, code, out)
		lines := strings.Fields(out)
		assert.Equal(t, []string{"sti", "EPERM", "linux", "EPERM", "tcgets", "ENOTTY", "leader", "True"}, lines, "network denied: %v", denyNet)
		require.NoError(t, s.Close())
	}
}
