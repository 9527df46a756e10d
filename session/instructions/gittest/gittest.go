// Package gittest makes git repositories for tests, among them one whose
// configuration tries every way git knows to run a program of the
// repository's choosing.
package gittest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Git runs git in dir and fails t on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cleanEnv is the environment without GIT_* (a test run from a git hook
// would otherwise aim every command at the outer repository).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// Seed makes dir a repository on branch main with everything in it
// committed, as "seed".
func Seed(t testing.TB, dir string) {
	t.Helper()
	Git(t, dir, "init", "-q", "-b", "main")
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", "seed")
}

// Require skips t when git is not installed.
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
}

// Hostile is a repository downloaded from somewhere: on branch "main", last
// commit "signed commit" (with a signature header), a tracked file made
// stat-dirty so a status must compare its content, and a configuration
// (its own .git/config plus an included file from the work tree) that
// names a program of the repository for each of: core.fsmonitor, a clean,
// smudge and process filter selected by .gitattributes (two drivers, one
// defined in the included file), core.pager, diff.external, a textconv and
// a diff command, hooks (core.hooksPath), core.sshCommand, a credential
// helper, gpg.program with log.showSignature and aliases shadowing status
// and log. Every program, when run, creates a file in Markers.
type Hostile struct {
	Repo, Markers string
}

// NewHostile makes a Hostile repository in a new temporary folder.
func NewHostile(t testing.TB) Hostile {
	t.Helper()
	Require(t)
	base := t.TempDir()
	h := Hostile{Repo: filepath.Join(base, "repo"), Markers: filepath.Join(base, "markers")}
	for _, d := range []string{h.Repo, h.Markers} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, text string, mode os.FileMode) {
		p := filepath.Join(h.Repo, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, h.Repo, "init", "-q", "-b", "main")
	write("a.txt", "a\n", 0o644)
	write("b.txt", "b\n", 0o644)
	write("c.txt", "c\n", 0o644)
	write(".gitattributes", "a.txt filter=evil diff=evil\nb.txt filter=included\n", 0o644)
	Git(t, h.Repo, "add", "-A")
	Git(t, h.Repo, "commit", "-q", "-m", "first commit")
	// A commit carrying a (fake) signature: showing it verified runs
	// gpg.program.
	tree := strings.TrimSpace(Git(t, h.Repo, "rev-parse", "HEAD^{tree}"))
	parent := strings.TrimSpace(Git(t, h.Repo, "rev-parse", "HEAD"))
	obj := filepath.Join(base, "commit")
	if err := os.WriteFile(obj, fmt.Appendf(nil, "tree %s\nparent %s\nauthor t <t@example.com> 1700000000 +0000\ncommitter t <t@example.com> 1700000000 +0000\n"+
		"gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned commit\n", tree, parent), 0o644); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(Git(t, h.Repo, "hash-object", "-t", "commit", "-w", obj))
	Git(t, h.Repo, "update-ref", "refs/heads/main", id)

	// One program per trick; it leaves its name in Markers and passes
	// its input through (as a filter would).
	prog := func(name string) string {
		p := filepath.Join(h.Repo, "tools", name)
		write(filepath.Join("tools", name), "#!/bin/sh\ntouch '"+filepath.Join(h.Markers, name)+"'\ncat 2>/dev/null\nexit 0\n", 0o755)
		return p
	}
	cfg := [][2]string{
		{"core.fsmonitor", prog("fsmonitor")},
		{"filter.evil.clean", prog("clean")},
		{"filter.evil.smudge", prog("smudge")},
		{"filter.evil.required", "true"},
		{"core.pager", prog("pager")},
		{"pager.status", "true"},
		{"diff.external", prog("external-diff")},
		{"diff.evil.textconv", prog("textconv")},
		{"diff.evil.command", prog("diff-command")},
		{"core.hooksPath", filepath.Join(h.Repo, "hooks")},
		{"core.sshCommand", prog("ssh")},
		{"credential.helper", "!" + prog("credential")},
		{"gpg.program", prog("gpg")},
		{"log.showSignature", "true"},
		{"alias.status", "!" + prog("alias")},
		{"alias.log", "!" + prog("alias")},
		{"include.path", "../included.config"},
	}
	for _, kv := range cfg {
		Git(t, h.Repo, "config", kv[0], kv[1])
	}
	write("included.config", "[filter \"included\"]\n\tprocess = "+prog("process")+"\n\tclean = "+prog("included-clean")+"\n", 0o644)
	for _, hook := range []string{"post-index-change", "pre-commit", "post-checkout", "reference-transaction", "pre-auto-gc", "fsmonitor-watchman"} {
		write(filepath.Join("hooks", hook), "#!/bin/sh\ntouch '"+filepath.Join(h.Markers, "hook-"+hook)+"'\n", 0o755)
	}
	// Stat-dirty, content changed but not its size: a status must read
	// them through the clean filters to tell.
	write("a.txt", "A\n", 0o644)
	write("b.txt", "B\n", 0o644)
	// c.txt is only stat-dirty: a status refreshes the index for it, and
	// writing the index runs the post-index-change hook.
	old := time.Now().Add(-48 * time.Hour)
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		if err := os.Chtimes(filepath.Join(h.Repo, f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// Ran lists the markers left: the programs that ran and the files git
// wrote where the configuration said.
func (h Hostile) Ran(t testing.TB) []string {
	t.Helper()
	es, err := os.ReadDir(h.Markers)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// PlainGit runs git as a naive tool would (status, then log), for a test's
// control: on this repository it runs the repository's programs.
func (h Hostile) PlainGit(t testing.TB) {
	t.Helper()
	for _, args := range [][]string{{"status", "--short", "--branch"}, {"log", "-5", "--format=%s"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = h.Repo
		cmd.Env = cleanEnv()
		_ = cmd.Run()
	}
}
