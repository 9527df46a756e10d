package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/acpd/acpd/session/model/modeltest"
)

// BenchmarkSpawnToInitialize times what an editor waits for when it starts
// an agent: spawn → initialize answered, for acpd's release build
// (stripped, no cgo) and for the reference, qwen-code 0.24.4 in ACP mode,
// in the same run. One op spawns each once, acpd first, and waits for
// each one's answer; the metrics are per op: acpd-ms, reference-ms and
// x-faster (their ratio; ns/op is the two together and of no interest).
// Targets: acpd ≤ 30 ms, x-faster ≥ 50. The reference needs node and npm
// (the pinned package is installed as the qwen-code guard tests do):
//
//	go test -run '^$' -bench SpawnToInitialize -benchtime 10x -count 6 ./cmd/acpd | tee spawn.txt
//	benchstat spawn.txt
//
// ACPD_STARTUP_BIN times another acpd build in place of this tree's.
func BenchmarkSpawnToInitialize(b *testing.B) {
	acpd := os.Getenv("ACPD_STARTUP_BIN")
	if acpd == "" {
		acpd = startupBinary(b)
	}
	ref := qwenAgent(b, modeltest.NewServer(b))
	acpdEnv := spawnEnv(b, acpd)
	var acpdTime, refTime time.Duration
	n := 0
	for b.Loop() {
		acpdTime += spawnToInitialize(b, exec.Command(acpd), acpdEnv)
		cmd := exec.Command(ref.cmd[0], ref.cmd[1:]...)
		cmd.Dir = ref.ws
		refTime += spawnToInitialize(b, cmd, ref.env)
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	b.ReportMetric(ms(acpdTime), "acpd-ms/op")
	b.ReportMetric(ms(refTime), "reference-ms/op")
	b.ReportMetric(float64(refTime)/float64(acpdTime), "x-faster")
}

// spawnHome is the installation every run of the benchmark starts acpd in.
var spawnHome string

// spawnEnv gives acpd one home for all -count runs, set up by one start
// that is not timed. An editor starts acpd per thread on an installation
// that already has its folders; a home made anew for each run would time
// the first start ever instead (acpd then creates its config, cache and
// state folders before it answers), which happens once a machine.
func spawnEnv(b *testing.B, acpd string) []string {
	if spawnHome == "" {
		dir, err := os.MkdirTemp("", "acpd-spawn-home-")
		if err != nil {
			b.Fatal(err)
		}
		spawnHome = dir
	}
	env := []string{"HOME=" + spawnHome, "XDG_CONFIG_HOME=" + filepath.Join(spawnHome, "config"),
		"XDG_STATE_HOME=" + filepath.Join(spawnHome, "state"), "PATH=" + os.Getenv("PATH")}
	if _, err := os.Stat(filepath.Join(spawnHome, "state", "acpd")); err != nil {
		spawnToInitialize(b, exec.Command(acpd), env)
	}
	return env
}

// spawnToInitialize starts cmd, writes initialize and returns the time
// until the answer's line is read; the shutdown after it is not timed.
// The reference starts itself again as a child (and that one a grandchild)
// to raise node's heap limit: cmd gets a process group of its own, and the
// whole group is killed and waited for, so none of it still runs while the
// next program is timed.
func spawnToInitialize(b *testing.B, cmd *exec.Cmd, env []string) time.Duration {
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`+"\n"); err != nil {
		b.Fatal(err)
	}
	br := bufio.NewReader(stdout)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			b.Fatalf("%s: no initialize answer: %v", cmd.Path, err)
		}
		if bytes.Contains(line, []byte(`"id":1`)) && bytes.Contains(line, []byte(`"protocolVersion"`)) {
			break
		}
	}
	took := time.Since(began)
	stdin.Close()
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // the reference would take its time to exit
	_ = cmd.Wait()
	// The children, orphaned now, are reaped by init; wait until they are.
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(-pgid, 0) == nil; {
		if time.Now().After(deadline) {
			b.Fatalf("%s: its process group outlived SIGKILL by 10 s", cmd.Path)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return took
}
