package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sbx "github.com/acpd/acpd/session/tools/sandbox"
)

// TestRunCmd_KillNineLeavesNoCommand: acpd run killed with SIGKILL in the
// middle of a shell call leaves none of the command's processes running:
// the spawn server, told by its death signal, kills the groups it started.
// (Commands acpd runs itself, without the sandbox, are not covered yet.)
func TestRunCmd_KillNineLeavesNoCommand(t *testing.T) {
	t.Parallel()
	if !sbx.Probe().Usable() {
		t.Skip("no usable Landlock: commands do not go through the spawn server here")
	}
	for i, mode := range []string{"auto"} {
		t.Run("sandbox "+mode, func(t *testing.T) {
			t.Parallel()
			e := newRunEnv(t)
			// A unique sleep to find; the shell forks it (a second command
			// follows), so killing the shell alone would leave it.
			secs := strconv.Itoa(3100 + i*7 + os.Getpid()%1000*10)
			script := e.script(t, `{"toolCalls":[{"name":"run_shell_command","arguments":{"command":"sleep `+secs+`; echo never"}}]}
{"text":"never reached"}`)
			bin := acpdBinary(t)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, e.scripted(script, "--yolo", "--sandbox", mode, "go")...)
			cmd.Env, cmd.Dir = e.env, e.dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { killMatching(secs) })
			for len(processesMatching(secs)) == 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("the command never started; stderr:\n%s", stderr.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			// Whatever acpd left behind is killed by its own watchers
			// (the kernel's death signal, the spawn server's EOF), which
			// run at once; 30 s only allows for a loaded machine.
			deadline := time.Now().Add(30 * time.Second)
			for len(processesMatching(secs)) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("after kill -9 of acpd, still running: pids %v", processesMatching(secs))
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// processesMatching lists the live processes running `sleep secs`.
func processesMatching(secs string) []int {
	want := []byte("sleep\x00" + secs + "\x00")
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Equal(b, want) {
			continue
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // exited, not yet reaped
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

func killMatching(secs string) {
	for _, pid := range processesMatching(secs) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
