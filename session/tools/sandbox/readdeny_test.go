package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanReads: the entries of every folder on the way to a denied path
// are granted but the next step; symlinks never; nothing below a denied
// path; a denied path that does not exist yet denies nothing else.
func TestPlanReads(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
		return p
	}
	mk("home/.ssh/id_rsa")
	mk("home/.bashrc")
	mk("home/proj/main.go")
	mk("home/.config/gh/hosts.yml")
	mk("home/.config/git/config")
	mk("home/.netrc")
	require.NoError(t, os.Symlink(filepath.Join(root, "home/.ssh"), filepath.Join(root, "home/keys")))
	require.NoError(t, os.Symlink(filepath.Join(root, "home/.ssh"), filepath.Join(root, "sshlink")))
	home := filepath.Join(root, "home")
	denied := []string{
		filepath.Join(home, ".ssh"), filepath.Join(home, ".config/gh"), filepath.Join(home, ".netrc"),
		filepath.Join(home, ".aws"),                 // missing
		filepath.Join(root, "sshlink", "id_rsa"),    // through a symlink: the real path
		filepath.Join(home, ".ssh", "inside", "no"), // below a denied one
	}
	p := planReads(newDenyTree(denied, nil))
	rel := func(list []string) []string {
		var out []string
		for _, g := range list {
			if r, err := filepath.Rel(root, g); err == nil && !slices.Contains([]string{".."}, r[:min(2, len(r))]) {
				out = append(out, r)
			}
		}
		slices.Sort(out)
		return out
	}
	assert.Equal(t, []string{"home/.bashrc", "home/.config/git", "home/proj"}, rel(p.grants))
	assert.Contains(t, p.split, "/")
	assert.Contains(t, p.split, home)
	assert.Contains(t, p.split, filepath.Join(home, ".config"))
	assert.NotContains(t, p.split, filepath.Join(home, ".ssh"))
	for _, g := range p.grants {
		assert.NotEqual(t, root, g, "a folder above a denied path is never granted whole")
	}

	assert.Empty(t, planReads(newDenyTree(nil, nil)).split, "nothing denied: no reading rule at all")
	assert.Empty(t, planReads(newDenyTree([]string{"/", "relative/path"}, nil)).split, "never everything, never a relative path")

	// The stamp changes when an entry is made in a split folder, not
	// when a file below a granted entry changes.
	before := readStamp(denied)
	assert.Equal(t, before, readStamp(denied))
	mk("home/proj/new.go")
	assert.Equal(t, before, readStamp(denied), "below a granted entry")
	mk("home/newfile")
	assert.NotEqual(t, before, readStamp(denied), "a new entry in the home folder")
	assert.Empty(t, readStamp(nil))

	assert.Equal(t, []string{filepath.Join(home, ".ssh")}, deniedWithin(denied[:1], []string{home}))
	assert.Empty(t, deniedWithin(denied[:1], []string{filepath.Join(home, "proj")}))
}

// TestMountAliases: a denied path is also denied where a bind mount shows
// it again, whether the mount is of the folder itself or one above it.
func TestMountAliases(t *testing.T) {
	mounts := []mount{
		{dev: "8:1", root: "/", point: "/"},
		{dev: "0:5", root: "/", point: "/proc"},
		{dev: "8:2", root: "/", point: "/home"},
		{dev: "8:2", root: "/u", point: "/workspaces/u"},  // the user's folder again
		{dev: "8:2", root: "/", point: "/mnt/all homes"},  // all of /home again
		{dev: "8:2", root: "/u/proj", point: "/srv/proj"}, // a folder beside the denied one
		{dev: "8:1", root: "/home", point: "/old-home"},   // the root fs's hidden /home
	}
	got := mountAliases(mounts)("/home/u/.ssh")
	slices.Sort(got)
	assert.Equal(t, []string{"/mnt/all homes/u/.ssh", "/workspaces/u/.ssh"}, got)
	assert.Equal(t, []string{"/home/u/.ssh"}, mountAliases(mounts)("/workspaces/u/.ssh")[:1])
	assert.Empty(t, mountAliases(mounts)("/etc/passwd"))
	assert.Equal(t, "a b", unescapeMount(`a\040b`))
}
