package lifeline

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// daemonEnv makes the test binary play acpd: start the shell commands
// named in it, each in a group of its own, watch them, print their pids
// and wait to be killed. "release:" before a command releases its group
// after the shell exits, as acpd does once a command is over.
const daemonEnv = "LIFELINE_TEST_DAEMON"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Subcommand {
		os.Exit(Main(os.Args[2:]))
	}
	if cmds := os.Getenv(daemonEnv); cmds != "" {
		os.Exit(daemon(strings.Split(cmds, "\n")))
	}
	os.Exit(m.Run())
}

func daemon(cmds []string) int {
	Enable()
	for _, c := range cmds {
		c, release := strings.CutPrefix(c, "release:")
		cmd := exec.Command("/bin/sh", "-c", c)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		done := Watch(cmd.Process.Pid)
		if release {
			_ = cmd.Wait()
			done()
		}
		fmt.Println(cmd.Process.Pid)
	}
	fmt.Println("ready")
	select {}
}

// startDaemon runs the test binary as a daemon starting cmds and returns it
// once it printed the pids of the commands' groups.
func startDaemon(t *testing.T, cmds ...string) (*exec.Cmd, []int) {
	t.Helper()
	d := exec.Command(os.Args[0])
	d.Env = append(os.Environ(), daemonEnv+"="+strings.Join(cmds, "\n"))
	d.Stderr = os.Stderr
	out, err := d.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, d.Start())
	t.Cleanup(func() { _ = d.Process.Kill(); _ = d.Wait() })
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		pid, err := strconv.Atoi(sc.Text())
		require.NoError(t, err, "daemon said %q", sc.Text())
		pids = append(pids, pid)
	}
	return d, pids
}

// sleeper is a command whose shell forks a sleep that a test can find: the
// sleep is a grandchild of the daemon, in the shell's group.
func sleeper(t *testing.T, n int) (cmd, secs string) {
	secs = strconv.Itoa(4000 + n + os.Getpid()%1000*10)
	t.Cleanup(func() {
		for _, pid := range sleeps(secs) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return "sleep " + secs + "; echo never", secs
}

// sleeps lists the live processes running `sleep secs`.
func sleeps(secs string) []int {
	want := []byte("sleep\x00" + secs + "\x00")
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err != nil || !bytes.Equal(b, want) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitFor polls cond; the watcher acts at once, the 30 s are for a loaded
// machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A daemon killed with SIGKILL takes its watched commands along, the
// processes their shells forked included, but not a command it released.
func TestKillNineKillsWatchedGroups(t *testing.T) {
	t.Parallel()
	watched, secs := sleeper(t, 1)
	released, relSecs := sleeper(t, 2)
	// The released command leaves a sleep behind in its group; the daemon
	// released it, so the watcher must not kill it.
	d, _ := startDaemon(t, watched, "release:("+released+") &")
	waitFor(t, "the commands never started", func() bool { return len(sleeps(secs)) == 1 && len(sleeps(relSecs)) == 1 })
	require.NoError(t, d.Process.Signal(syscall.SIGKILL))
	_ = d.Wait()
	waitFor(t, "the watched command outlived the daemon", func() bool { return len(sleeps(secs)) == 0 })
	require.Len(t, sleeps(relSecs), 1, "a released group is not the watcher's to kill")
}

// A watcher killed while a command runs is replaced at once, and the new
// one knows the running command.
func TestWatcherReplaced(t *testing.T) {
	t.Parallel()
	watched, secs := sleeper(t, 3)
	d, _ := startDaemon(t, watched)
	waitFor(t, "the command never started", func() bool { return len(sleeps(secs)) == 1 })
	first := watcherOf(t, d.Process.Pid, 0)
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	watcherOf(t, d.Process.Pid, first)
	require.Len(t, sleeps(secs), 1, "killing the watcher alone kills no command")
	require.NoError(t, d.Process.Signal(syscall.SIGKILL))
	_ = d.Wait()
	waitFor(t, "the command outlived the daemon under the second watcher", func() bool { return len(sleeps(secs)) == 0 })
}

// watcherOf waits for the live watcher child of pid other than not.
func watcherOf(t *testing.T, pid, not int) int {
	t.Helper()
	var found int
	waitFor(t, "no watcher", func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			child, err := strconv.Atoi(e.Name())
			if err != nil || child == not {
				continue
			}
			argv, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			i := bytes.LastIndexByte(st, ')')
			if !bytes.HasSuffix(argv, []byte("\x00"+Subcommand+"\x00")) || i < 0 {
				continue
			}
			if f := strings.Fields(string(st[i+1:])); len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(pid) {
				found = child
				return true
			}
		}
		return false
	})
	return found
}
