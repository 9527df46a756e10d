package confine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// workspace is a root folder and a folder beside it, outside.
type workspace struct{ root, outside string }

func newWorkspace(t *testing.T) *workspace {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	w := &workspace{root: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	require.NoError(t, os.Mkdir(w.root, 0o755))
	require.NoError(t, os.Mkdir(w.outside, 0o755))
	return w
}

func (w *workspace) path(rel string) string { return filepath.Join(w.root, rel) }

func (w *workspace) write(t *testing.T, rel, content string) {
	t.Helper()
	p := w.path(rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// The fast path (a path below a root resolved once) and the full resolution
// agree on every path, with and without the root cache, including paths
// through symlinks inside the workspace and paths that do not exist yet.
func TestConfinement_FastPathAgrees(t *testing.T) {
	w := newWorkspace(t)
	w.write(t, "a/b/c.txt", "x")
	require.NoError(t, os.Symlink(w.path("a/b"), w.path("link-in")))
	require.NoError(t, os.Symlink(w.outside, w.path("link-out")))
	require.NoError(t, os.Symlink(filepath.Join(w.root, "nowhere"), w.path("dangling")))
	paths := []string{
		w.root, w.path("a"), w.path("a/b/c.txt"), w.path("a/b/new.txt"), w.path("a/new/deeper/x.txt"),
		w.path("link-in/c.txt"), w.path("link-in/new.txt"), w.path("link-out/secret.txt"), w.path("link-out/new.txt"),
		w.path("dangling"), w.path("dangling/x"), w.path("a/b/c.txt/x"), w.root + "//a///b/c.txt", w.path("a/./b/c.txt"),
	}
	for _, env := range []Roots{{Dirs: []string{w.root}}, {Dirs: []string{w.root}, Cache: &RootCache{}}, {Dirs: []string{w.root + "/"}, Cache: &RootCache{}}} {
		for _, p := range paths {
			clean := filepath.Clean(p)
			want, wantErr := resolveExisting(clean)
			if got, ok := env.resolveBelowRoot(clean); ok {
				require.NoError(t, wantErr, p)
				require.Equal(t, want, got, p)
			}
			// And confine gives the same verdict with and without the cache.
			tg, err := env.Path("file_path", p)
			ref, refErr := Roots{Dirs: env.Dirs}.Path("file_path", p)
			require.Equal(t, refErr == nil, err == nil, "%s: %v / %v", p, err, refErr)
			tg.roots = nil
			require.Equal(t, ref, tg, p)
		}
	}
}
