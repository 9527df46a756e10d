package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkStartup runs the built binary to completion (`acpd --version`,
// which loads every package and runs every package init, telemetry's
// included, then exits) and reports the process's CPU time besides the wall
// time, which on a shared machine also counts other processes.
// ACPD_STARTUP_BIN runs another build in its place, to compare two builds:
//
//	ACPD_STARTUP_BIN=/tmp/acpd-before go test -run '^$' -bench Startup -count 10 ./cmd/acpd
func BenchmarkStartup(b *testing.B) {
	bin := os.Getenv("ACPD_STARTUP_BIN")
	if bin == "" {
		bin = b.TempDir() + "/acpd"
		if out, err := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".").CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
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
}
