package stats

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/loopdetect"
)

// Benchmark data: 10,000 sessions of 10 turns, each turn 10 tool calls in
// responses of 1, 2, 3 and 4 calls (1,000,000 calls), recorded as the
// daemon records them: per response a usage, a text and a tool_calls
// record, per call a tool_call frame and a tool_result with ~250 bytes of
// output shown and fed back. About 1 GB of transcripts.
const (
	benchSessions = 10_000
	benchTurns    = 10
	benchPerTurn  = 10
)

var benchOutput = func() string {
	b := make([]byte, 0, 256)
	for len(b) < 240 {
		b = append(b, "package main // a line of the file that was read\\n"...)
	}
	return string(b)
}()

// writeBenchSession writes one session's transcript.
func writeBenchSession(dir string, s int, buf []byte) ([]byte, error) {
	id := fmt.Sprintf("BENCH%07d", s)
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(s) * time.Minute)
	ts := func() string {
		t = t.Add(37 * time.Millisecond)
		return t.Format(time.RFC3339Nano)
	}
	cwd := fmt.Sprintf("/home/dev/project%d", s%50)
	b := buf[:0]
	b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"meta","meta":{"id":%q,"cwd":%q,"createdAt":%q}}`+"\n", ts(), id, cwd, ts())
	b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"mode","modeId":"default"}`+"\n", ts())
	n := 0
	for turn := range benchTurns {
		b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"user","prompt":[{"type":"text","text":"fix the failing test in package %d and run the tests again"}]}`+"\n", ts(), turn)
		for size := 1; size <= 4; size++ {
			b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"usage","usage":{"promptTokens":%d,"completionTokens":120,"used":%d,"size":131072}}`+"\n", ts(), 20000+n, 20120+n)
			b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"text","text":"Let me look at the next file before changing anything."}`+"\n", ts())
			b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"tool_calls","toolCalls":[`, ts())
			first := n
			for c := range size {
				if c > 0 {
					b = append(b, ',')
				}
				b = appendBenchCall(b, s, turn, first+c)
			}
			b = append(b, "]}\n"...)
			for c := range size {
				id := "call_" + strconv.Itoa(first+c)
				b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"tool_call","tool":{"toolCallId":%q,"name":"read_file","title":"Read main.go","kind":"read","status":"in_progress","locations":[{"path":"%s/main.go"}],"rawInput":{"file_path":"%s/main.go"}}}`+"\n", ts(), id, cwd, cwd)
				b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"tool_result","tool":{"toolCallId":%q,"name":"read_file","status":"completed","content":[{"type":"content","content":{"type":"text","text":"%s"}}],"modelText":"%s"}}`+"\n", ts(), id, benchOutput, benchOutput)
			}
			n += size
		}
		b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"text","text":"The tests pass now."}`+"\n", ts())
		b = fmt.Appendf(b, `{"v":1,"t":%q,"kind":"turn_end","stopReason":"end_turn"}`+"\n", ts())
	}
	return b, os.WriteFile(filepath.Join(dir, "sessions", id+".jsonl"), b, 0o600)
}

// appendBenchCall writes call i of a session: reads of distinct files, a
// grep, and the same test command twice a turn.
func appendBenchCall(b []byte, s, turn, i int) []byte {
	id := "call_" + strconv.Itoa(i)
	switch i % 5 {
	case 0, 3:
		return fmt.Appendf(b, `{"id":%q,"name":"run_shell_command","arguments":{"command":"go test ./pkg%d/...","description":"run the tests"}}`, id, turn)
	case 4:
		return fmt.Appendf(b, `{"id":%q,"name":"grep_search","arguments":{"pattern":"func Test%d","path":"/home/dev/project%d"}}`, id, i, s%50)
	default:
		return fmt.Appendf(b, `{"id":%q,"name":"read_file","arguments":{"file_path":"/home/dev/project%d/pkg%d/file%d.go"}}`, id, s%50, turn, i)
	}
}

// benchDataDir generates the data set in a temporary folder.
func benchDataDir(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			var buf []byte
			var err error
			for s := w; s < benchSessions; s += 2 {
				if buf, err = writeBenchSession(dir, s, buf); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkCollect_10kSessions is Collect plus the table, in process, over
// 10,000 sessions and 1,000,000 tool calls, with a what-if replay.
func BenchmarkCollect_10kSessions(b *testing.B) {
	dir := benchDataDir(b)
	whatIf := &Settings{Cap: loopdetect.Cap{Max: 100, StuckWindow: 50}, SkipLoopDetection: false}
	for b.Loop() {
		rep, err := Collect(Options{DataDir: dir, WhatIf: whatIf})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Summary.ToolCalls != benchSessions*benchTurns*benchPerTurn {
			b.Fatalf("counted %d tool calls", rep.Summary.ToolCalls)
		}
		if err := rep.Write(io.Discard, FormatTable); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatsBinary_10kSessions runs the built `acpd stats` (table
// output, with a what-if replay) over the same data and reports the
// process's peak RSS.
func BenchmarkStatsBinary_10kSessions(b *testing.B) {
	bin := acptest.Acpd(b)
	dir := benchDataDir(b)
	var peak int64
	var cpu time.Duration
	runs := 0
	for b.Loop() {
		cmd := exec.Command(bin, "stats", "--config", os.DevNull, "--data-dir", dir, "--stuck-window", "50")
		cmd.Env = []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + dir}
		cmd.Stdout = io.Discard
		out, err := os.CreateTemp(b.TempDir(), "stderr")
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = out
		if err := cmd.Run(); err != nil {
			msg, _ := os.ReadFile(out.Name())
			b.Fatalf("acpd stats: %v\n%s", err, msg)
		}
		out.Close()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = max(peak, ru.Maxrss) // KiB on Linux
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		runs++
	}
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MB")
	// CPU time (user + system) per run: on a shared machine the wall time
	// also counts other processes; with both cores free the run takes
	// about half of it.
	b.ReportMetric(cpu.Seconds()/float64(runs), "cpu-s/op")
}

// TestGenerateBenchData writes the benchmark's data set to
// $ACPD_STATS_BENCH_DIR, to profile `acpd stats` on it by hand.
func TestGenerateBenchData(t *testing.T) {
	dir := os.Getenv("ACPD_STATS_BENCH_DIR")
	if dir == "" {
		t.Skip("set ACPD_STATS_BENCH_DIR to write the benchmark data there")
	}
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	var err error
	for s := range benchSessions {
		if buf, err = writeBenchSession(dir, s, buf); err != nil {
			t.Fatal(err)
		}
	}
}
