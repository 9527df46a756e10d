package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// floorProgram is the least an ACP agent can do before it answers: start the
// Go runtime, read the initialize line, write an answer.
const floorProgram = `package main

import (
	"bufio"
	"os"
)

func main() {
	_, _ = bufio.NewReader(os.Stdin).ReadBytes('\n')
	_, _ = os.Stdout.WriteString("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":1}}\n")
}
`

// BenchmarkInitializeFloor times spawn → initialize answered for acpd's
// default build (telemetry linked, stripped as a release is) beside the floor:
// a trivial Go program that reads the request line and answers it, built the
// same way. One op is one process: start, write initialize, read the answer,
// close stdin, wait. Run each program 20 times, interleaved, and compare the
// medians:
//
//	go test -run '^$' -bench InitializeFloor -benchtime 1x -count 20 ./cmd/acpd | tee floor.txt
//	benchstat -col /program floor.txt
//
// ACPD_FLOOR_TAGS=TAGS adds acpd built with those tags as a third program,
// interleaved with the others: noprefault, for one, shows what mapping the
// start-up's memory in bulk saves (internal/prefault), and startupfloor
// runs the floor's main in acpd's binary (startupfloor.go), which splits
// acpd's time over the floor into what linking its packages costs and what
// acpd does before it answers.
func BenchmarkInitializeFloor(b *testing.B) {
	acpd := startupBinary(b, "")
	floor, ok := startupBinaries["floor"]
	if !ok {
		dir, err := os.MkdirTemp("", "acpd-floor-")
		if err != nil {
			b.Fatal(err)
		}
		src := filepath.Join(dir, "main.go")
		if err := os.WriteFile(src, []byte(floorProgram), 0o644); err != nil {
			b.Fatal(err)
		}
		floor = filepath.Join(dir, "floor")
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", floor, src)
		build.Dir = dir
		build.Env = append(os.Environ(), "GO111MODULE=off", "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("building the floor program: %v\n%s", err, out)
		}
		startupBinaries["floor"] = floor
	}
	env := floorEnv(b, acpd)
	programs := []struct{ name, bin string }{{"acpd", acpd}, {"floor", floor}}
	if tags := os.Getenv("ACPD_FLOOR_TAGS"); tags != "" {
		programs = append(programs, struct{ name, bin string }{"acpd-" + strings.ReplaceAll(tags, ",", "-"), startupBinary(b, tags)})
	}
	for _, p := range programs {
		b.Run("program="+p.name, func(b *testing.B) {
			for b.Loop() {
				spawnToInitialize(b, p.bin, env)
			}
		})
	}
}

// floorHome is the installation every run of the benchmark starts acpd in.
var floorHome string

// floorEnv gives acpd one home for all -count runs, set up by one start that
// is not timed. An editor starts acpd per thread on an installation that
// already has its folders; a home made anew for each run would time the
// first start ever instead (acpd then creates its config, cache and state
// folders before it answers, about 0.9 ms more here), which happens once a
// machine. The parent benchmark's time is not reported, so this start needs
// no timer of its own.
func floorEnv(b *testing.B, acpd string) []string {
	if floorHome == "" {
		dir, err := os.MkdirTemp("", "acpd-floor-home-")
		if err != nil {
			b.Fatal(err)
		}
		floorHome = dir
	}
	env := []string{"HOME=" + floorHome, "XDG_CONFIG_HOME=" + filepath.Join(floorHome, "config"),
		"XDG_STATE_HOME=" + filepath.Join(floorHome, "state"), "PATH=" + os.Getenv("PATH")}
	if _, err := os.Stat(filepath.Join(floorHome, "state", "acpd")); err != nil {
		spawnToInitialize(b, acpd, env)
		if _, err := os.Stat(filepath.Join(floorHome, "state", "acpd")); err != nil {
			b.Fatalf("the untimed first start made no state folder: %v", err)
		}
	}
	return env
}

func spawnToInitialize(b *testing.B, bin string, env []string) {
	cmd := exec.Command(bin)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n"); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil || len(line) == 0 {
		b.Fatalf("%s: no initialize answer: %v", bin, err)
	}
	b.StopTimer() // the answer is in: shutting down is not start-up
	stdin.Close()
	_ = cmd.Wait()
	b.StartTimer()
}
