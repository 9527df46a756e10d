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
