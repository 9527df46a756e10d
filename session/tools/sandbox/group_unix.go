//go:build unix

package sandbox

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// groupCommand is argv in its own session and process group (no
// controlling terminal to type into), the whole group killed when ctx
// ends, output collected.
func groupCommand(ctx context.Context, dir string, env []string, argv []string) (cmd *exec.Cmd, out, errOut *capBuffer) {
	cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	out, errOut = &capBuffer{max: maxReadOnlyOutput}, &capBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	return cmd, out, errOut
}
