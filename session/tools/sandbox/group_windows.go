package sandbox

import (
	"context"
	"os/exec"
	"time"
)

// groupCommand is argv killed when ctx ends, output collected. Windows has
// no process groups to kill at once; nothing is confined there (Probe
// reports the sandbox unavailable), so this only serves RunUnconfined.
func groupCommand(ctx context.Context, dir string, env []string, argv []string) (cmd *exec.Cmd, out, errOut *capBuffer) {
	cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = time.Second
	out, errOut = &capBuffer{max: maxReadOnlyOutput}, &capBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	return cmd, out, errOut
}
