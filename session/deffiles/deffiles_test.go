package deffiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFolders_Precedence(t *testing.T) {
	got := Folders([]string{"/cwd", "/extra"}, "/home/u/.config/acpd/agents", "agents")
	assert.Equal(t, []Folder{
		{Path: "/home/u/.config/acpd/agents", Global: true},
		{Path: "/extra/.claude/agents", Root: "/extra", Claude: true}, {Path: "/extra/.qwen/agents", Root: "/extra"}, {Path: "/extra/.acpd/agents", Root: "/extra"},
		{Path: "/cwd/.claude/agents", Root: "/cwd", Claude: true}, {Path: "/cwd/.qwen/agents", Root: "/cwd"}, {Path: "/cwd/.acpd/agents", Root: "/cwd"},
	}, got)
	assert.Len(t, Folders([]string{"/cwd"}, "", "commands"), 3, "no global folder")
}

func TestResolve_StaysInTheRoot(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "id_rsa"), []byte("KEY"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".acpd", "commands"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "real.md"), []byte("x"), 0o644))
	link := filepath.Join(root, ".acpd", "commands", "review.md")
	require.NoError(t, os.Symlink(filepath.Join(outside, "id_rsa"), link))
	_, err := Resolve(link, root)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "outside the workspace")
	real, err := Resolve(link, "")
	require.NoError(t, err, "the user's own folder may link anywhere")
	assert.Equal(t, filepath.Join(outside, "id_rsa"), real)

	inside := filepath.Join(root, ".acpd", "commands", "ok.md")
	require.NoError(t, os.Symlink("../../real.md", inside))
	real, err = Resolve(inside, root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "real.md"), real)

	// A folder on the way that links out is refused the same way.
	require.NoError(t, os.Symlink(outside, filepath.Join(root, ".qwen")))
	_, err = Resolve(filepath.Join(root, ".qwen", "id_rsa"), root)
	require.Error(t, err)
}

func TestFile_StampAndCause(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.md")
	require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
	info, err := os.Stat(p)
	require.NoError(t, err)
	var a, b strings.Builder
	Of(p, info).AppendStamp(&a)
	require.NoError(t, os.WriteFile(p, []byte("xy"), 0o644))
	info, err = os.Stat(p)
	require.NoError(t, err)
	Of(p, info).AppendStamp(&b)
	assert.NotEqual(t, a.String(), b.String(), "a changed size changes the stamp")
	assert.True(t, strings.HasPrefix(a.String(), p+"\x00"))

	_, err = os.ReadFile(filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, "no such file or directory", Cause(err).Error())
}

func TestReadText(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) File {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		info, err := os.Stat(p)
		require.NoError(t, err)
		return Of(p, info)
	}
	ok := file("ok.md", "héllo")
	data, err := ReadText(ok, 6)
	require.NoError(t, err)
	assert.Equal(t, "héllo", string(data))

	_, err = ReadText(ok, 5)
	assert.EqualError(t, err, "file is larger than 5 bytes", "as listed")
	grown := file("grown.md", "abc")
	require.NoError(t, os.WriteFile(grown.Path, []byte("abcdefgh"), 0o644))
	_, err = ReadText(grown, 5)
	assert.EqualError(t, err, "file is larger than 5 bytes", "grown since it was listed")

	_, err = ReadText(file("nul.md", "a\x00b"), 100)
	assert.EqualError(t, err, "not a UTF-8 text file")
	_, err = ReadText(file("latin1.md", "caf\xe9"), 100)
	assert.EqualError(t, err, "not a UTF-8 text file")
	_, err = ReadText(File{Path: filepath.Join(dir, "missing.md")}, 100)
	assert.EqualError(t, err, "cannot read: no such file or directory")
}

func TestSplit(t *testing.T) {
	p, err := Split([]byte("\ufeff---\r\nname: a\r\n\r\ndescription: b\r\n--- \t\r\n\r\n  the body\r\nline 2\r\n"))
	require.NoError(t, err)
	assert.Equal(t, Parts{Front: []string{"name: a", "", "description: b"}, FrontEnd: 5, Body: "the body\nline 2"}, p)

	p, err = Split([]byte("  just text\n---\nnot front matter\n"))
	require.NoError(t, err)
	assert.Equal(t, Parts{Body: "just text\n---\nnot front matter"}, p)

	p, err = Split([]byte("---\n---\n"))
	require.NoError(t, err)
	assert.Equal(t, 2, p.FrontEnd)
	assert.Empty(t, p.Front)
	assert.Empty(t, p.Body)

	_, err = Split([]byte("---\nname: a\nbody\n"))
	assert.ErrorIs(t, err, ErrFrontMatterOpen)
}

func TestUnquote(t *testing.T) {
	for in, want := range map[string]string{`"a b"`: "a b", `'a'`: "a", `"a'`: `"a'`, `"`: `"`, `""`: "", "x": "x"} {
		assert.Equal(t, want, Unquote(in), in)
	}
}
