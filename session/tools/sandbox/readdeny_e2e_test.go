package sandbox_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// TestHelper_DeniesReads: a command run by the helper with a deny list
// cannot read a denied file by any path — directly, through a symlink in
// its workspace, through /proc/self/root, by copying or hard-linking it
// into the workspace — while the files beside it, the workspace, its temp
// folder, the system and the devices stay readable; the names in a denied
// folder may be listed.
func TestHelper_DeniesReads(t *testing.T) {
	sandboxtest.Require(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	home, ws := filepath.Join(base, "home"), filepath.Join(base, "home", "proj")
	for _, d := range []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".config", "acpd"), ws} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	write := func(p, s string) {
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
	}
	write(filepath.Join(home, ".ssh", "id_rsa"), "PRIVATE-KEY-secret\n")
	write(filepath.Join(home, ".netrc"), "machine x password netrc-secret\n")
	write(filepath.Join(home, ".config", "acpd", "config.toml"), "# config-secret\n")
	write(filepath.Join(home, ".bashrc"), "bashrc-ok\n")
	write(filepath.Join(ws, "main.go"), "workspace-ok\n")
	require.NoError(t, os.Symlink(filepath.Join(home, ".ssh", "id_rsa"), filepath.Join(ws, "key-link")))
	p := testPolicy(t, sandbox.ModeRequired)
	p.DenyRead = []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".netrc"), filepath.Join(home, ".config", "acpd"), filepath.Join(home, ".aws")}
	s := p.NewSession([]string{ws})
	defer s.Close()
	plan, err := s.Wrap([]string{"/bin/sh", "-c", `
H=` + home + `
cat $H/.ssh/id_rsa || echo key-denied
cat $H/.netrc || echo netrc-denied
cat $H/.config/acpd/config.toml || echo config-denied
cat key-link || echo link-denied
cat /proc/self/root$H/.ssh/id_rsa || echo proc-root-denied
cp $H/.ssh/id_rsa copied || echo copy-denied
ln $H/.ssh/id_rsa hardlink || echo hardlink-denied
ls $H/.ssh
cat $H/.bashrc main.go
echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && echo tmp-ok
head -c1 /etc/passwd >/dev/null && echo etc-ok
head -c1 /dev/zero | wc -c
`}, 3)
	require.NoError(t, err)
	out, code, status := run(t, ws, plan)
	assert.Empty(t, status)
	assert.Equal(t, 0, code, out)
	for _, want := range []string{"key-denied", "netrc-denied", "config-denied", "link-denied", "proc-root-denied", "copy-denied", "hardlink-denied",
		"id_rsa", "bashrc-ok", "workspace-ok", "tmp-ok", "etc-ok", "Permission denied"} {
		assert.Contains(t, out, want)
	}
	for _, secret := range []string{"PRIVATE-KEY-secret", "netrc-secret", "config-secret"} {
		assert.NotContains(t, out, secret)
	}
	assert.NoFileExists(t, filepath.Join(ws, "copied"))
	assert.NoFileExists(t, filepath.Join(ws, "hardlink"))
	assert.Contains(t, plan.Explain(), "read everywhere except the user's credentials and acpd's own folders ("+filepath.Join(home, ".ssh"))

	// A file made in a split folder after the ruleset was built is not
	// readable by it; a new plan (the next command) reads it.
	write(filepath.Join(home, ".profile-new"), "new-ok\n")
	plan, err = s.Wrap([]string{"/bin/sh", "-c", "cat " + filepath.Join(home, ".profile-new")}, 3)
	require.NoError(t, err)
	out, code, _ = run(t, ws, plan)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "new-ok")

	// The workspace being the home folder: the denied paths in it stay
	// unreadable, and the plan says they are within reach of a rename.
	s2 := p.NewSession([]string{home})
	defer s2.Close()
	plan, err = s2.Wrap([]string{"/bin/sh", "-c", "cat .ssh/id_rsa || echo key-denied; cat .bashrc"}, 3)
	require.NoError(t, err)
	out, _, _ = run(t, home, plan)
	assert.Contains(t, out, "key-denied")
	assert.Contains(t, out, "bashrc-ok")
	assert.NotContains(t, out, "PRIVATE-KEY-secret")
	assert.ElementsMatch(t, []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".netrc"), filepath.Join(home, ".config", "acpd"), filepath.Join(home, ".aws")}, plan.DenyGaps)
}
