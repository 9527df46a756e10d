package checkpoint

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchWorkspace makes 10,000 text files of about 3 KB in 100 folders.
func benchWorkspace(b *testing.B) string {
	b.Helper()
	ws := b.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	line := make([]byte, 60)
	old := time.Now().Add(-time.Hour)
	for d := range 100 {
		dir := filepath.Join(ws, fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			var buf bytes.Buffer
			for buf.Len() < 3000 {
				for i := range line {
					line[i] = 'a' + byte(rng.IntN(26))
				}
				buf.Write(line)
				buf.WriteByte('\n')
			}
			p := filepath.Join(dir, fmt.Sprintf("f%03d.go", f))
			if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
				b.Fatal(err)
			}
			// A workspace's files were mostly written long before a
			// turn; a file modified within the last 2 s is hashed again
			// at every snapshot (its stat data cannot prove it unchanged).
			if err := os.Chtimes(p, old, old); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The change times cannot be set back: wait until they are older than
	// the racy window too.
	time.Sleep(racyWindow + 100*time.Millisecond)
	return ws
}

// The checkpoint before a turn's first shell command in a 10,000-file
// workspace: the first of a session's process (every file read, hashed,
// compressed and stored) and the next ones (stat walk; one file changed
// between turns).
func BenchmarkCheckpointTree10k(b *testing.B) {
	ws := benchWorkspace(b)
	b.Run("first", func(b *testing.B) {
		cpu := cpuTime()
		for b.Loop() {
			b.StopTimer()
			st, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := st.Begin("bench", 1, "p", []string{ws}).Tree(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	})
	// next: with the folders watched (Linux, a local file system); next-stat:
	// without a watcher, every entry lstat'ed (other systems, network file
	// systems, past the watch limit).
	for _, watch := range []bool{true, false} {
		name := "next"
		if !watch {
			name = "next-stat"
		}
		b.Run(name, func(b *testing.B) {
			st, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			if !watch {
				st.watchOnce.Do(func() {})
			}
			if err := st.Begin("bench", 1, "p", []string{ws}).Tree(); err != nil {
				b.Fatal(err)
			}
			turn := 1
			victim := filepath.Join(ws, "pkg050", "f050.go")
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				turn++
				if err := os.WriteFile(victim, fmt.Appendf(nil, "turn %d\n", turn), 0o644); err != nil {
					b.Fatal(err)
				}
				c0 := cpuTime()
				b.StartTimer()
				if err := st.Begin("bench", turn, "p", []string{ws}).Tree(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cpuTime() - c0
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// The store's growth over 100 turns that each edit one line of a 1 MB
// file through the file tools (before-image, then the state after).
func BenchmarkStoreGrowth100Edits(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		ws := b.TempDir()
		dataDir := b.TempDir()
		st, err := Open(dataDir)
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		var lines [][]byte
		size := 0
		for size < 1<<20 {
			l := make([]byte, 40+rng.IntN(60))
			for i := range l {
				l[i] = 'a' + byte(rng.IntN(26))
			}
			l = append(l, '\n')
			lines = append(lines, l)
			size += len(l)
		}
		p := filepath.Join(ws, "big.txt")
		if err := os.WriteFile(p, bytes.Join(lines, nil), 0o644); err != nil {
			b.Fatal(err)
		}
		base := storeBytes(b, st.Dir())
		b.StartTimer()
		for turn := 1; turn <= 100; turn++ {
			r := st.Begin("growth", turn, "edit", []string{ws})
			if err := r.Files([]string{p}); err != nil {
				b.Fatal(err)
			}
			lines[rng.IntN(len(lines))] = fmt.Appendf(nil, "edited in turn %d\n", turn)
			if err := os.WriteFile(p, bytes.Join(lines, nil), 0o644); err != nil {
				b.Fatal(err)
			}
			if err := r.End(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(storeBytes(b, st.Dir())-base)/(1<<20), "MiB-store")
		b.ReportMetric(float64(diskBytes(b, st.Dir()))/(1<<20), "MiB-disk")
		b.StartTimer()
	}
}

func storeBytes(b *testing.B, dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func diskBytes(b *testing.B, dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += allocated(fi)
			}
		}
		return nil
	})
	return n
}
