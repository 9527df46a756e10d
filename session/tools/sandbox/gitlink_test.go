package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/instructions/gittest"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return r
}

// TestReadGitLink_Real: the git folders of a real linked worktree and a
// real submodule, made by git, are accepted, from the root and from a
// folder below it.
func TestReadGitLink_Real(t *testing.T) {
	gittest.Require(t)
	base := realPath(t, t.TempDir())
	main := filepath.Join(base, "main")
	writeFile(t, filepath.Join(main, "a.txt"), "a\n")
	gittest.Git(t, main, "init", "-q")
	gittest.Git(t, main, "add", "-A")
	gittest.Git(t, main, "commit", "-qm", "first")
	wt := filepath.Join(base, "wt")
	gittest.Git(t, main, "worktree", "add", "-q", "-b", "feature", wt)
	common := filepath.Join(main, ".git")
	wtGit := filepath.Join(common, "worktrees", "wt")

	link, err := ReadGitLink(wt)
	require.NoError(t, err)
	assert.Equal(t, GitLink{WorkTree: wt, Dir: wtGit, Common: common}, link)
	require.NoError(t, os.MkdirAll(filepath.Join(wt, "sub"), 0o755))
	assert.Equal(t, []string{wtGit, common}, linkedGitDirs(wt))
	assert.Equal(t, []string{wtGit, common}, linkedGitDirs(filepath.Join(wt, "sub")), "found from a folder below")
	assert.Nil(t, linkedGitDirs(main), "an ordinary .git folder")

	// The same worktree named by a relative path.
	writeFile(t, filepath.Join(wt, ".git"), "gitdir: ../main/.git/worktrees/wt\n")
	assert.Equal(t, []string{wtGit, common}, linkedGitDirs(wt), "a relative gitdir")

	// A submodule: its git folder is in the superproject's .git/modules.
	super := filepath.Join(base, "super")
	writeFile(t, filepath.Join(super, "s.txt"), "s\n")
	gittest.Git(t, super, "init", "-q")
	gittest.Git(t, super, "-c", "protocol.file.allow=always", "submodule", "add", "-q", main, "lib")
	lib := filepath.Join(super, "lib")
	link, err = ReadGitLink(lib)
	require.NoError(t, err)
	assert.Equal(t, GitLink{WorkTree: lib, Dir: filepath.Join(super, ".git", "modules", "lib")}, link)
}

// TestReadGitLink_Planted: a .git file planted in the workspace names
// nothing that is granted or read — "/", the home folder, a folder above
// the root, a folder with a forged commondir, another repository, another
// worktree's git folder.
func TestReadGitLink_Planted(t *testing.T) {
	gittest.Require(t)
	base := realPath(t, t.TempDir())
	home := filepath.Join(base, "home")
	require.NoError(t, os.MkdirAll(home, 0o755))
	t.Setenv("HOME", home)
	private := filepath.Join(base, "private")
	writeFile(t, filepath.Join(private, "p.txt"), "p\n")
	gittest.Git(t, private, "init", "-q")
	gittest.Git(t, private, "add", "-A")
	gittest.Git(t, private, "commit", "-qm", "secret subject")
	other := filepath.Join(base, "other")
	gittest.Git(t, private, "worktree", "add", "-q", "-b", "o", other)
	ws := filepath.Join(home, "proj", "ws")
	require.NoError(t, os.MkdirAll(ws, 0o755))

	forged := func() {
		// A git folder inside the workspace with a back-pointer and a
		// commondir naming "/": everything a real worktree has.
		g := filepath.Join(ws, ".gitreal")
		writeFile(t, filepath.Join(g, "commondir"), "/\n")
		writeFile(t, filepath.Join(g, "gitdir"), filepath.Join(ws, ".git")+"\n")
		writeFile(t, filepath.Join(g, "HEAD"), "ref: refs/heads/main\n")
		require.NoError(t, os.MkdirAll(filepath.Join(g, "objects"), 0o755))
		writeFile(t, filepath.Join(ws, ".git"), "gitdir: .gitreal\n")
	}
	for _, tc := range []struct {
		name  string
		plant func()
	}{
		{"forged commondir /", forged},
		{"forged commondir elsewhere", func() {
			forged()
			writeFile(t, filepath.Join(ws, ".gitreal", "commondir"), filepath.Join(private, ".git")+"\n")
		}},
		{"gitdir /", func() { writeFile(t, filepath.Join(ws, ".git"), "gitdir: /\n") }},
		{"gitdir $HOME", func() { writeFile(t, filepath.Join(ws, ".git"), "gitdir: "+home+"\n") }},
		{"gitdir above the root", func() { writeFile(t, filepath.Join(ws, ".git"), "gitdir: ..\n") }},
		{"gitdir the root", func() { writeFile(t, filepath.Join(ws, ".git"), "gitdir: .\n") }},
		{"another repository", func() { writeFile(t, filepath.Join(ws, ".git"), "gitdir: ../../../private/.git\n") }},
		{"another worktree's git folder", func() {
			writeFile(t, filepath.Join(ws, ".git"), "gitdir: "+filepath.Join(private, ".git", "worktrees", "other")+"\n")
		}},
		{"a submodule folder of another work tree", func() {
			g := filepath.Join(base, "sm")
			writeFile(t, filepath.Join(g, "HEAD"), "ref: refs/heads/main\n")
			require.NoError(t, os.MkdirAll(filepath.Join(g, "objects"), 0o755))
			writeFile(t, filepath.Join(g, "config"), "[core]\n\tworktree = ../other\n")
			writeFile(t, filepath.Join(ws, ".git"), "gitdir: "+g+"\n")
		}},
		{"no gitdir line", func() { writeFile(t, filepath.Join(ws, ".git"), "hello\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.RemoveAll(ws))
			require.NoError(t, os.MkdirAll(ws, 0o755))
			tc.plant()
			_, err := ReadGitLink(ws)
			require.ErrorIs(t, err, ErrNotGitLink)
			t.Log(err)
			assert.Nil(t, linkedGitDirs(ws))
			assert.Empty(t, (&Policy{}).NewSession([]string{ws}).gitDirs)
		})
	}

	// A .git symlink is not followed either.
	require.NoError(t, os.RemoveAll(ws))
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.Symlink(filepath.Join(private, ".git"), filepath.Join(ws, ".git")))
	_, err := ReadGitLink(ws)
	assert.ErrorIs(t, err, ErrNotGitLink)
	assert.Nil(t, linkedGitDirs(ws))
}

// TestSession_GitDirsOnce: the linked git folders are decided when the
// session starts; a .git file planted afterwards changes no command's
// writable folders.
func TestSession_GitDirsOnce(t *testing.T) {
	ws := t.TempDir()
	s := (&Policy{Mode: ModeAuto, Helper: "/bin/true", Probe: func() Status { return Status{Backend: "landlock", ABI: 7} }}).NewSession([]string{ws})
	t.Cleanup(func() { s.Close() })
	before, err := s.Wrap([]string{"true"}, 3)
	require.NoError(t, err)
	// Even a link that would pass the checks is ignored until the next session.
	g := filepath.Join(t.TempDir(), "modules", "x")
	writeFile(t, filepath.Join(g, "HEAD"), "ref: refs/heads/main\n")
	require.NoError(t, os.MkdirAll(filepath.Join(g, "objects"), 0o755))
	writeFile(t, filepath.Join(g, "config"), "[core]\n\tworktree = "+realPath(t, ws)+"\n")
	writeFile(t, filepath.Join(ws, ".git"), "gitdir: "+g+"\n")
	after, err := s.Wrap([]string{"true"}, 3)
	require.NoError(t, err)
	assert.Equal(t, before.Writable, after.Writable)
	_, err = ReadGitLink(ws)
	assert.NoError(t, err, "the control: a new session would take it")
}

// TestSession_CacheDir: the tool-cache folder is one per workspace and
// confinement: the same roots (by real path) share one;
// other roots, another writable folder or the network make another.
func TestSession_CacheDir(t *testing.T) {
	base := realPath(t, t.TempDir())
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	require.NoError(t, os.MkdirAll(a, 0o755))
	require.NoError(t, os.MkdirAll(b, 0o755))
	require.NoError(t, os.Symlink(a, filepath.Join(base, "link")))
	p := &Policy{Mode: ModeAuto, CacheDir: filepath.Join(base, "cache")}
	dir := func(p *Policy, roots ...string) string { return p.NewSession(roots).CacheDir() }
	ab := dir(p, a, b)
	assert.Equal(t, ab, dir(p, filepath.Join(base, "link"), b), "by real path")
	assert.Equal(t, filepath.Join(base, "cache"), filepath.Dir(ab))
	for name, other := range map[string]string{
		"another workspace":   dir(p, b),
		"fewer roots":         dir(p, a),
		"another writable":    dir(&Policy{Mode: ModeAuto, CacheDir: p.CacheDir, Writable: []string{base}}, a, b),
		"without the network": dir(&Policy{Mode: ModeAuto, CacheDir: p.CacheDir, DenyNetwork: true}, a, b),
	} {
		assert.NotEqual(t, ab, other, name)
	}
	assert.Empty(t, dir(&Policy{Mode: ModeAuto}, a), "no cache folder, none per session")
	assert.Empty(t, dir(&Policy{Mode: ModeOff, CacheDir: p.CacheDir}, a), "mode off: none")
}
