package tools

import (
	"path/filepath"
	"strings"
	"testing"
)

func FuzzClassifyShell(f *testing.F) {
	for _, s := range []string{"ls -la", "git status && rm x", "echo 'a' > b", "cat <<EOF\nx\nEOF\n", "a $(b) `c`", "x 2>&1 | y", "ls <<E\"O\"F", "cat <<-'X'\n\tX", "ls >&2 # c", `"unterminated`, "\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := classifyShell(s)
		if c != ShellReadOnly && c != ShellWrite && c != ShellUnknown {
			t.Fatalf("class %d", c)
		}
		// Appending a write can never make a line read-only.
		if classifyShell(s+"\nrm -rf x") == ShellReadOnly {
			t.Fatalf("%q plus rm classified read-only", s)
		}
		// Nothing appended on a line of its own hides from the label.
		if strings.HasSuffix(s, "\\") {
			return // a continuation joins the next line to this one
		}
		if label, ok := alwaysLabel(s + "\ntouch zz"); ok && !strings.Contains(label, "touch") {
			t.Fatalf("%q plus touch labelled %q", s, label)
		}
	})
}

// FuzzConfine: whatever the path, confine either refuses it or returns a
// real path inside the root.
func FuzzConfine(f *testing.F) {
	w := newWorkspace(f)
	w.write(f, "a/b.txt", "x")
	for _, s := range []string{w.root + "/a/b.txt", w.root + "/../outside", "/proc/self", "rel", w.root + "/a/./b.txt", w.root + "//a", "C:\\x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tg, err := confine(w.env, "file_path", p)
		if err != nil {
			return
		}
		if _, ok := within(w.root, tg.real); !ok {
			t.Fatalf("%q accepted as %q, outside %q", p, tg.real, w.root)
		}
		if strings.Contains(tg.rel, "..") && filepath.Clean(tg.rel) != tg.rel {
			t.Fatalf("%q gave rel %q", p, tg.rel)
		}
	})
}
