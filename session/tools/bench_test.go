package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkGrepSearch_10kFiles greps a generated tree of 10,000 small source
// files (100 directories × 100 files, ~1 KiB each); 1% of them match.
func BenchmarkGrepSearch_10kFiles(b *testing.B) {
	benchGrep(b, grepBenchTree(b), 100)
}

// BenchmarkGrepSearch_10kFiles_Gitignore is the same tree under a typical
// 16-line .gitignore that prunes 10 of the 100 directories.
func BenchmarkGrepSearch_10kFiles_Gitignore(b *testing.B) {
	w := grepBenchTree(b)
	w.write(b, ".gitignore", "# build output\n/bin/\n/dist/\n*.o\n*.so\n*.test\n*.out\ncoverage.*\n.idea/\n.vscode/\n"+
		"*.swp\n*~\n.DS_Store\nvendor/\n/pkg09*/\n!keep.go\n")
	benchGrep(b, w, 90)
}

func grepBenchTree(b *testing.B) *workspace {
	w := newWorkspace(b)
	body := strings.Repeat("func helper(x int) int { return x * 2 } // filler line\n", 18)
	for d := range 100 {
		dir := w.path(fmt.Sprintf("pkg%03d", d))
		require.NoError(b, os.MkdirAll(dir, 0o755))
		for f := range 100 {
			content := body
			if f == 42 {
				content += "// NeedleMarker: found it\n"
			}
			require.NoError(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%03d.go", f)), []byte(content), 0o644))
		}
	}
	return w
}

func benchGrep(b *testing.B, w *workspace, matches int) {
	c, err := tool(b, NameGrepSearch).Build(w.env, args(b, map[string]any{"pattern": `NeedleMarker:\s+\w+`, "glob": "*.go"}))
	require.NoError(b, err)
	want := fmt.Sprintf("Found %d matches", matches)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res := c.Execute(b.Context(), w.env)
		if res.Err != nil || !strings.Contains(res.LLMContent, want) {
			b.Fatalf("unexpected result: %v %.200s", res.Err, res.LLMContent)
		}
	}
}

// BenchmarkReadFile_1MiB reads a 1 MiB text file (13,108 lines of 80 bytes);
// the tool returns the first 2,000 lines with a truncation note.
func BenchmarkReadFile_1MiB(b *testing.B) {
	w := newWorkspace(b)
	line := strings.Repeat("abcdefghij", 7) + "012345678\n"
	p := w.write(b, "big.txt", strings.Repeat(line, (1<<20)/len(line)+1)[:1<<20])
	c, err := tool(b, NameReadFile).Build(w.env, args(b, map[string]any{"file_path": p}))
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for b.Loop() {
		res := c.Execute(b.Context(), w.env)
		if res.Err != nil || !strings.Contains(res.LLMContent, "Showing lines 1-2000") {
			b.Fatalf("unexpected result: %v %.200s", res.Err, res.LLMContent)
		}
	}
}

// BenchmarkConfine measures the Build-time path check of a nested file.
func BenchmarkConfine(b *testing.B) {
	w := newWorkspace(b)
	p := w.write(b, "a/b/c/d.go", "x")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.env.confine("file_path", p); err != nil {
			b.Fatal(err)
		}
	}
}
