package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ignoreProbe is one path to classify: isDir says what kind of entry it is.
type ignoreProbe struct {
	path    string
	isDir   bool
	ignored bool
}

// classifyPaths walks from the workspace root down to each probe the way the
// search tools do, entering every ancestor directory first.
func classifyPaths(t *testing.T, w *workspace, probes []ignoreProbe) {
	t.Helper()
	tg, err := w.env.confine("path", w.root)
	require.NoError(t, err)
	dir, err := tg.OpenDir()
	require.NoError(t, err)
	defer dir.Close()
	ign := newGitIgnorer(tg, dir)
	ign.enterDir(".")
	for _, p := range probes {
		elems := strings.Split(p.path, "/")
		for i := 1; i < len(elems); i++ {
			d := strings.Join(elems[:i], "/")
			if _, ok := ign.byDir[d]; !ok {
				ign.enterDir(d)
			}
		}
		assert.Equal(t, p.ignored, ign.ignored(p.path, p.isDir), "%s (dir=%v)", p.path, p.isDir)
	}
}

func TestGitignoreSemantics(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string // ignore files by workspace-relative path
		probes []ignoreProbe
	}{
		{"basename pattern matches at any depth", map[string]string{".gitignore": "*.log\n"}, []ignoreProbe{
			{"a.log", false, true}, {"x/y/b.log", false, true}, {"a.log.txt", false, false}, {"logs", true, false},
		}},
		{"negation re-includes", map[string]string{".gitignore": "*.log\n!keep.log\n"}, []ignoreProbe{
			{"keep.log", false, false}, {"x/keep.log", false, false}, {"other.log", false, true},
		}},
		{"last matching line wins", map[string]string{".gitignore": "!keep.log\n*.log\n"}, []ignoreProbe{
			{"keep.log", false, true},
		}},
		{"trailing slash matches directories only", map[string]string{".gitignore": "build/\n"}, []ignoreProbe{
			{"build", true, true}, {"build", false, false}, {"x/build", true, true},
		}},
		{"leading slash anchors", map[string]string{".gitignore": "/todo\n"}, []ignoreProbe{
			{"todo", false, true}, {"x/todo", false, false},
		}},
		{"middle slash anchors", map[string]string{".gitignore": "doc/frotz\n"}, []ignoreProbe{
			{"doc/frotz", true, true}, {"a/doc/frotz", true, false},
		}},
		{"star does not cross a slash", map[string]string{".gitignore": "a/*.c\n"}, []ignoreProbe{
			{"a/x.c", false, true}, {"a/b/x.c", false, false},
		}},
		{"leading double star", map[string]string{".gitignore": "**/foo\n"}, []ignoreProbe{
			{"foo", false, true}, {"a/b/foo", true, true}, {"a/foobar", false, false},
		}},
		{"middle double star", map[string]string{".gitignore": "a/**/b\n"}, []ignoreProbe{
			{"a/b", false, true}, {"a/x/y/b", false, true}, {"c/a/b", false, false},
		}},
		{"trailing double star matches inside only", map[string]string{".gitignore": "abc/**\n!abc/keep\n"}, []ignoreProbe{
			{"abc", true, false}, {"abc/x", false, true}, {"abc/d/x", false, true}, {"abc/keep", false, false},
		}},
		{"excluded parent directory cannot be re-included into", map[string]string{".gitignore": "foo/*\n!foo/bar\n!foo/baz/quux\n"}, []ignoreProbe{
			{"foo", true, false}, {"foo/bar", false, false}, {"foo/baz", true, true}, {"foo/other", false, true},
		}},
		{"ignore all but directories and one suffix", map[string]string{".gitignore": "*\n!*/\n!*.c\n"}, []ignoreProbe{
			{"foo.dll", false, true}, {"src", true, false}, {"src/bar.dll", false, true}, {"src/foo.c", false, false},
		}},
		{"nested file overrides parent", map[string]string{".gitignore": "*.gen\n", "sub/.gitignore": "!*.gen\n"}, []ignoreProbe{
			{"x.gen", false, true}, {"sub/x.gen", false, false}, {"sub/deeper/y.gen", false, false}, {"other/z.gen", false, true},
		}},
		{"nested patterns are relative to their directory", map[string]string{"sub/.gitignore": "/only\ndeep/x\n"}, []ignoreProbe{
			{"sub/only", false, true}, {"only", false, false}, {"sub/x/only", false, false},
			{"sub/deep/x", false, true}, {"deep/x", false, false},
		}},
		{"comments, blanks and escapes", map[string]string{".gitignore": "#comment\n\n   \n\\#hash\n\\!bang\ntrailing   \nsp\\ \n"}, []ignoreProbe{
			{"#comment", false, false}, {"comment", false, false}, {"#hash", false, true}, {"!bang", false, true},
			{"trailing", false, true}, {"sp ", false, true}, {"sp", false, false},
		}},
		{"braces are literal", map[string]string{".gitignore": "{a,b}\n"}, []ignoreProbe{
			{"{a,b}", false, true}, {"a", false, false},
		}},
		{"character classes", map[string]string{".gitignore": "[!a]bc\n"}, []ignoreProbe{
			{"bbc", false, true}, {"abc", false, false},
		}},
		{"CRLF and BOM", map[string]string{".gitignore": "\xef\xbb\xbf*.o\r\n/out\r\n"}, []ignoreProbe{
			{"x.o", false, true}, {"out", true, true},
		}},
		{"malformed pattern never matches", map[string]string{".gitignore": "[a\nok\n"}, []ignoreProbe{
			{"[a", false, false}, {"a", false, false}, {"ok", false, true},
		}},
		{"info/exclude ranks below .gitignore", map[string]string{".git/info/exclude": "*.tmp\nsecret\n", ".gitignore": "!x.tmp\n"}, []ignoreProbe{
			{"x.tmp", false, false}, {"y.tmp", false, true}, {"d/secret", false, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t)
			for name, content := range tt.files {
				w.write(t, name, content)
			}
			classifyPaths(t, w, tt.probes)
		})
	}
}

func TestGitignoreConfinement(t *testing.T) {
	w := newWorkspace(t)
	// Outside the workspace root: never read.
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(w.root), ".gitignore"), []byte("*.go\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.outside, "ignore"), []byte("*.txt\n"), 0o644))
	// A symlinked .gitignore is not followed, as in git, wherever it points.
	require.NoError(t, os.Symlink(filepath.Join(w.outside, "ignore"), w.path(".gitignore")))
	w.write(t, "sub/real", "*.md\n")
	require.NoError(t, os.Symlink("real", w.path("sub/.gitignore")))
	// .git/info/exclude is read only at the workspace root, not in a subdirectory.
	w.write(t, "sub/.git/info/exclude", "*.c\n")
	classifyPaths(t, w, []ignoreProbe{
		{"a.go", false, false}, {"a.txt", false, false}, {"sub/a.md", false, false}, {"sub/a.c", false, false},
	})
}

func TestParseIgnoreLine(t *testing.T) {
	tests := []struct {
		line string
		want ignoreRule
		ok   bool
	}{
		{"", ignoreRule{}, false},
		{"# c", ignoreRule{}, false},
		{"!", ignoreRule{}, false},
		{"/", ignoreRule{}, false},
		{"*.log", ignoreRule{pattern: "*.log", basename: true}, true},
		{"!/a/b/", ignoreRule{pattern: "a/b", negate: true, dirOnly: true}, true},
		{"x/**", ignoreRule{pattern: "x/**/*"}, true},
		{`a\\ `, ignoreRule{pattern: `a\\`, basename: true}, true},
		{"a{b}", ignoreRule{pattern: `a\{b\}`, basename: true}, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.line), func(t *testing.T) {
			got, ok := parseIgnoreLine(tt.line)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}
