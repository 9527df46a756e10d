package loopdetect

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
)

// args200 is a typical ~200-byte tool call.
const args200 = `{"file_path":"/home/user/project/internal/server/handler.go","offset":120,"limit":80,` +
	`"options":{"follow_symlinks":true,"encoding":"utf-8"},"reason":"inspect the request handler <again> & check"}`

func writeFileArgs(size int) []byte {
	line := "\tfmt.Println(\"hello, world\") // a typical line of Go source\n"
	content := strings.Repeat(line, size/len(line)+1)[:size]
	b, err := json.Marshal(map[string]string{"file_path": "/repo/main.go", "content": content})
	if err != nil {
		panic(err)
	}
	return b
}

func BenchmarkToolCallRepeatKeyJSON_200B(b *testing.B) {
	args := []byte(args200)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ToolCallRepeatKeyJSON("read_file", args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToolCallRepeatKey_200B(b *testing.B) {
	var v any
	if err := json.Unmarshal([]byte(args200), &v); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ToolCallRepeatKey("read_file", v)
	}
}

func benchWriteFile(b *testing.B, size int) {
	args := writeFileArgs(size)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ToolCallRepeatKeyJSON("write_file", args); err != nil {
			b.Fatal(err)
		}
	}
}

func benchSHA256(b *testing.B, size int) {
	args := writeFileArgs(size)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		sha256.Sum256(args)
	}
}

func BenchmarkToolCallRepeatKeyJSON_WriteFile64KiB(b *testing.B) { benchWriteFile(b, 64<<10) }
func BenchmarkToolCallRepeatKeyJSON_WriteFile1MiB(b *testing.B)  { benchWriteFile(b, 1<<20) }
func BenchmarkSHA256Baseline_64KiB(b *testing.B)                 { benchSHA256(b, 64<<10) }
func BenchmarkSHA256Baseline_1MiB(b *testing.B)                  { benchSHA256(b, 1<<20) }

func BenchmarkToolCallRepeatKey_WriteFile1MiB(b *testing.B) {
	var v any
	if err := json.Unmarshal(writeFileArgs(1<<20), &v); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		ToolCallRepeatKey("write_file", v)
	}
}

// BenchmarkCapTracker_ObserveKey is one observation of an already-seen key
// (the key itself is computed beforehand).
func BenchmarkCapTracker_ObserveKey(b *testing.B) {
	tr := NewCapTracker(DefaultCap())
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = ToolCallRepeatKey("read_file", map[string]any{"i": float64(i)})
		tr.ObserveKey(keys[i])
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tr.ObserveKey(keys[i&63])
		i++
	}
}

func BenchmarkDetector_AddAndCheckToolCall(b *testing.B) {
	d := New(Config{Cap: Cap{Max: 0}})
	ev := Event{Kind: EventToolCallRequest, ToolName: "read_file", ArgsJSON: []byte(args200)}
	b.ReportAllocs()
	for b.Loop() {
		d.AddAndCheck(ev)
		d.Reset()
	}
}

// goTestOutput is a 1.3 KB failing `go test` run: timings, a tmp path, a
// pid, colour — what the result signal normalises.
var goTestOutput = strings.Repeat("\x1b[31m--- FAIL: TestServer_Start (0.52s)\x1b[0m\n    server_test.go:31: listen on /tmp/go-build123456/b001: address in use (pid 4242)\n", 8) +
	"FAIL\tgithub.com/acme/w/server\t1.234s\n"

// BenchmarkResultHash_GoTest1KB digests one test run's output (normalised,
// then SHA-256): the result signal's cost per call.
func BenchmarkResultHash_GoTest1KB(b *testing.B) {
	b.SetBytes(int64(len(goTestOutput)))
	b.ReportAllocs()
	for b.Loop() {
		ResultHash(true, goTestOutput)
	}
}

// BenchmarkResultHash_ReadFile260B digests one read_file result of the
// 1,000-call turn (20 lines of plain text, no digits: the fast path).
func BenchmarkResultHash_ReadFile260B(b *testing.B) {
	text := strings.Repeat("line of text\n", 20)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		ResultHash(false, text)
	}
}

// BenchmarkCapTracker_ObserveResult is one result of an already-seen key
// and result under the result signal.
func BenchmarkCapTracker_ObserveResult(b *testing.B) {
	tr := NewCapTracker(Cap{Max: 100, Signal: SignalResults})
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = ToolCallRepeatKey("read_file", map[string]any{"i": float64(i)})
		tr.ObserveKey(keys[i])
		tr.ObserveResult(keys[i], uint64(i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tr.ObserveResult(keys[i&63], uint64(i&63))
		i++
	}
}
