package shellline

import (
	"strings"
	"testing"
)

func FuzzClassifyShell(f *testing.F) {
	for _, s := range []string{"ls -la", "git status && rm x", "echo 'a' > b", "cat <<EOF\nx\nEOF\n", "a $(b) `c`", "x 2>&1 | y", "ls <<E\"O\"F", "cat <<-'X'\n\tX", "ls >&2 # c", `"unterminated`, "\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := Classify(s)
		if c != ReadOnly && c != Write && c != Unknown {
			t.Fatalf("class %d", c)
		}
		// Appending a write can never make a line read-only.
		if Classify(s+"\nrm -rf x") == ReadOnly {
			t.Fatalf("%q plus rm classified read-only", s)
		}
		// Nothing appended on a line of its own hides from the label.
		if strings.HasSuffix(s, "\\") {
			return // a continuation joins the next line to this one
		}
		if label, ok := AlwaysLabel(s + "\ntouch zz"); ok && !strings.Contains(label, "touch") {
			t.Fatalf("%q plus touch labelled %q", s, label)
		}
	})
}
