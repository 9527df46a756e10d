package tools

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpd/acpd/session/tools/confine"
)

// FuzzConfine: whatever the path, confine either refuses it or returns a
// real path inside the root.
func FuzzConfine(f *testing.F) {
	w := newWorkspace(f)
	w.write(f, "a/b.txt", "x")
	for _, s := range []string{w.root + "/a/b.txt", w.root + "/../outside", "/proc/self", "rel", w.root + "/a/./b.txt", w.root + "//a", "C:\\x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tg, err := w.env.confine("file_path", p)
		if err != nil {
			return
		}
		if _, ok := confine.Within(w.root, tg.Real()); !ok {
			t.Fatalf("%q accepted as %q, outside %q", p, tg.Real(), w.root)
		}
		if strings.Contains(tg.Rel(), "..") && filepath.Clean(tg.Rel()) != tg.Rel() {
			t.Fatalf("%q gave rel %q", p, tg.Rel())
		}
	})
}
