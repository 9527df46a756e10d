package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/lifeline"
	sbx "github.com/acpd/acpd/session/tools/sandbox"
)

// TestRunCmd_KillNineLeavesNoCommand: acpd run killed with SIGKILL in the
// middle of a shell call leaves none of the command's processes running:
// through the spawn server (sandbox auto on a kernel with Landlock), which
// its death signal tells to kill the groups it started, and without it
// (sandbox off, and auto on a kernel without Landlock), where acpd's
// command watcher sees its pipe close and kills them — and then exits too.
func TestRunCmd_KillNineLeavesNoCommand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, mode string
		env        []string
		watcher    bool // acpd runs the command itself, under its watcher
	}{
		{name: "sandbox auto", mode: "auto"},
		{name: "sandbox off", mode: "off", watcher: true},
		{name: "no Landlock", mode: "auto", env: []string{sbx.ABIEnv + "=0"}, watcher: true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !tc.watcher && !sbx.Probe().Usable() {
				t.Skip("no usable Landlock: commands do not go through the spawn server here")
			}
			e := newRunEnv(t)
			// A unique sleep to find; the shell forks it (a second command
			// follows), so killing the shell alone would leave it.
			secs := strconv.Itoa(3100 + i*7 + os.Getpid()%1000*10)
			script := e.script(t, `{"toolCalls":[{"name":"run_shell_command","arguments":{"command":"sleep `+secs+`; echo never"}}]}
{"text":"never reached"}`)
			bin := acpdBinary(t)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, e.scripted(script, "--yolo", "--sandbox", tc.mode, "go")...)
			cmd.Env, cmd.Dir = append(e.env, tc.env...), e.dir
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
			watchers := watchersOf(cmd.Process.Pid)
			// The command can show before its watcher has exec'd (on a
			// loaded machine the two starts interleave): wait for it.
			for tc.watcher && len(watchers) == 0 && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				watchers = watchersOf(cmd.Process.Pid)
			}
			if tc.watcher {
				require.Len(t, watchers, 1, "acpd runs the command itself: one watcher")
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			// Whatever acpd left behind is killed by its own watchers
			// (the kernel's death signal, the spawn server's EOF, the
			// command watcher's EOF), which run at once; 30 s only allows
			// for a loaded machine.
			deadline := time.Now().Add(30 * time.Second)
			for len(processesMatching(secs)) > 0 || anyAlive(watchers) {
				if time.Now().After(deadline) {
					t.Fatalf("after kill -9 of acpd, still running: commands %v, watcher %v; stderr:\n%s",
						processesMatching(secs), watchers, stderr.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// watchersOf lists the command watchers (acpd __lifeline) that pid started.
func watchersOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
		if err != nil || !bytes.HasSuffix(argv, []byte("\x00"+lifeline.Subcommand+"\x00")) {
			continue
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 {
				if f := strings.Fields(string(st[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(pid) {
					out = append(out, child)
				}
			}
		}
	}
	return out
}

// anyAlive reports whether one of pids still runs (a zombie does not).
func anyAlive(pids []int) bool {
	for _, pid := range pids {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] != 'Z' {
			return true
		}
	}
	return false
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
