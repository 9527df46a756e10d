package htmlconv

import (
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden Markdown files")

func normalise(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(lines, "\n")
}

// The golden corpus: each page's Markdown, compared after trailing white
// space is dropped from every line.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.html")
	if err != nil || len(files) < 15 {
		t.Fatalf("golden corpus: %d files, %v", len(files), err)
	}
	base, _ := url.Parse("https://example.com/")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".html")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(t.Context(), src, "text/html", base, Limits{MaxText: 1 << 30, MaxInput: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			mdFile := strings.TrimSuffix(f, ".html") + ".md"
			if *update {
				if err := os.WriteFile(mdFile, []byte(res.Markdown), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(mdFile)
			if err != nil {
				t.Fatal(err)
			}
			if got, w := normalise(res.Markdown), normalise(string(want)); got != w {
				t.Errorf("got:\n%s\n\nwant:\n%s", got, w)
			}
		})
	}
}
