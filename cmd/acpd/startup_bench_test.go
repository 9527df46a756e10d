package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStartup runs the built binary to completion (`acpd --version`,
// which loads every package and runs every package init, telemetry's
// included, then exits) and reports the process's CPU time besides the wall
// time, which on a shared machine also counts other processes, and the
// binary's size.
//
// It builds acpd stripped, as a release is:
//
//	go test -run '^$' -bench Startup -benchtime 100x -count 8 ./cmd/acpd | tee startup.txt
//
// ACPD_STARTUP_BIN runs another build instead, to compare two commits
// (benchstat over the two runs):
//
//	ACPD_STARTUP_BIN=/tmp/acpd-before go test -run '^$' -bench Startup -count 10 ./cmd/acpd
func BenchmarkStartup(b *testing.B) {
	bin := os.Getenv("ACPD_STARTUP_BIN")
	if bin == "" {
		bin = startupBinary(b)
	}
	benchStartup(b, bin)
}

// releaseTags are the build tags of the release build (.goreleaser.yaml).
const releaseTags = "grpcnotrace"

// startupBin is the stripped build, made once for the whole process:
// -count reruns the benchmarks and must not rebuild each round.
var startupBin string

func startupBinary(b *testing.B) string {
	b.Helper()
	if startupBin != "" {
		return startupBin
	}
	dir, err := os.MkdirTemp("", "acpd-startup-")
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "acpd")
	// As the release builds it (.goreleaser.yaml): no cgo, so a static
	// binary that the dynamic loader and libc take no part in starting.
	build := exec.Command("go", "build", "-tags", releaseTags, "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	startupBin = bin
	return bin
}

func benchStartup(b *testing.B, bin string) {
	st, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	n := 0
	for b.Loop() {
		cmd := exec.Command(bin, "--version")
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		n++
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "cpu-ms/op")
	b.ReportMetric(float64(st.Size())/1e6, "binary-MB")
}
