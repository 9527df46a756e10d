package instructions

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/instructions/gittest"
	"github.com/acpd/acpd/session/tools/sandbox"
	// This test binary is its own sandbox helper (see package helper).
	_ "github.com/acpd/acpd/session/tools/sandbox/helper"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

func gitRepo(t *testing.T) string {
	t.Helper()
	gittest.Require(t)
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q", "-b", "feature/x")
	for i := range 7 {
		write(t, filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), "x")
		gittest.Git(t, dir, "add", "-A")
		gittest.Git(t, dir, "commit", "-q", "-m", fmt.Sprintf("commit number %d", i))
	}
	for i := range 25 {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, fmt.Sprintf("dir%02d", i)), 0o755))
	}
	write(t, filepath.Join(dir, "f0.txt"), "changed")
	return dir
}

func TestGather(t *testing.T) {
	repo, plain := gitRepo(t), t.TempDir()
	write(t, filepath.Join(plain, "README"), "x")
	env := Gather(context.Background(), []string{repo, plain}, 0, nil)
	require.Len(t, env.Roots, 2)
	r := env.Roots[0]
	assert.True(t, r.Git)
	assert.Equal(t, "feature/x", r.Branch)
	assert.Equal(t, " M f0.txt", r.Status)
	assert.Equal(t, []string{"commit number 6", "commit number 5", "commit number 4", "commit number 3", "commit number 2"}, r.Commits)
	assert.Len(t, r.Entries, maxEntries)
	assert.Equal(t, "dir00/", r.Entries[0])
	assert.Equal(t, 25+7-maxEntries, r.More)
	assert.False(t, env.Roots[1].Git)
	assert.Equal(t, []string{"README"}, env.Roots[1].Entries)

	text := env.Text()
	assert.Contains(t, text, "- Date: "+time.Now().Format("Monday, January 2, 2006"))
	assert.Contains(t, text, "- Branch: feature/x")
	assert.Contains(t, text, "  - commit number 6\n")
	assert.Contains(t, text, "… and 12 more")
	assert.Contains(t, text, "## "+plain+"\nNot a git repository.")
	assert.True(t, strings.HasPrefix(text, "# Environment\n"))
}

func TestGather_TimeLimit(t *testing.T) {
	repo := gitRepo(t)
	start := time.Now()
	env := Gather(context.Background(), []string{repo}, time.Nanosecond, nil)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, "git did not answer in time", env.Roots[0].GitErr)
	assert.Contains(t, env.Text(), "(git did not answer in time)")
	assert.Contains(t, env.Text(), "- Branch: feature/x", "read from HEAD without git")
}

func TestGather_GitFails(t *testing.T) {
	dir := t.TempDir()
	// A .git folder that is no repository: git refuses, the block says so.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".git"), 0o755))
	env := Gather(context.Background(), []string{dir}, 0, nil)
	r := env.Roots[0]
	assert.True(t, r.Git)
	assert.Contains(t, r.GitErr, "git status failed: ")
	assert.Contains(t, env.Text(), "(git status failed: ")

	// A .git file naming nothing: not read, and said so.
	dir = t.TempDir()
	write(t, filepath.Join(dir, ".git"), "gitdir: /nonexistent/place\n")
	env = Gather(context.Background(), []string{dir}, 0, nil)
	assert.True(t, env.Roots[0].Git)
	assert.Contains(t, env.Text(), "(not read: not a linked worktree or submodule of this folder")
}

// TestGather_HostileRepository: a repository whose configuration names a
// program for every hook git has runs none of them when the environment
// block is gathered — with the settings overridden alone (no sandbox),
// and confined as well — while the block still names the branch, the
// status and the commits. The control: plain git runs them.
func TestGather_HostileRepository(t *testing.T) {
	control := gittest.NewHostile(t)
	control.PlainGit(t)
	ran := control.Ran(t)
	t.Logf("plain git ran: %v", ran)
	for _, m := range []string{"fsmonitor", "clean", "process", "hook-post-index-change", "gpg"} {
		assert.Contains(t, ran, m, "the control repository is as hostile as intended")
	}

	exe, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		sb   *sandbox.Policy
	}{
		{"settings only", nil},
		{"confined too", &sandbox.Policy{Mode: sandbox.ModeAuto, Helper: exe}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sb != nil {
				sandboxtest.Require(t)
			}
			h := gittest.NewHostile(t)
			env := Gather(t.Context(), []string{h.Repo}, 10*time.Second, tc.sb)
			r := env.Roots[0]
			assert.Empty(t, h.Ran(t), "nothing of the repository's ran")
			assert.Empty(t, r.GitErr)
			assert.Equal(t, "main", r.Branch)
			assert.Contains(t, r.Status, " M a.txt")
			assert.Contains(t, r.Status, " M b.txt")
			assert.Equal(t, []string{"signed commit", "first commit"}, r.Commits)
		})
	}

	// The confinement holds on its own: plain git, none of the settings,
	// still starts nothing (and fails where a required filter cannot run).
	t.Run("confinement alone", func(t *testing.T) {
		sandboxtest.Require(t)
		h := gittest.NewHostile(t)
		git, err := exec.LookPath("git")
		require.NoError(t, err)
		sb := &sandbox.Policy{Mode: sandbox.ModeOff, Helper: exe}
		for _, args := range [][]string{{"status", "--short"}, {"log", "-5", "--format=%s"}} {
			_, _ = sb.RunReadOnly(t.Context(), h.Repo, os.Environ(), append([]string{git}, args...))
		}
		assert.Empty(t, h.Ran(t))
	})
}

// TestGather_WorktreeElsewhere: core.worktree cannot point the status at
// another folder (its file names would reach the model).
func TestGather_WorktreeElsewhere(t *testing.T) {
	gittest.Require(t)
	repo, decoy := t.TempDir(), t.TempDir()
	write(t, filepath.Join(decoy, "DECOY-NAME"), "x")
	gittest.Git(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, "mine.txt"), "x")
	gittest.Git(t, repo, "config", "core.worktree", decoy)
	r := Gather(t.Context(), []string{repo}, 10*time.Second, nil).Roots[0]
	assert.Contains(t, r.Status, "mine.txt")
	assert.NotContains(t, r.Status, "DECOY-NAME")
}

// TestHeadBranch: the branch is read from HEAD, in a linked worktree from
// the git folder its .git file names; junk is not believed.
func TestHeadBranch(t *testing.T) {
	top := t.TempDir()
	write(t, filepath.Join(top, ".git", "HEAD"), "ref: refs/heads/topic/x\n")
	g, err := gitFolder(top)
	require.NoError(t, err)
	assert.Equal(t, "topic/x", headBranch(g))
	write(t, filepath.Join(top, ".git", "HEAD"), strings.Repeat("ab", 20)+"\n")
	assert.Equal(t, "(detached HEAD)", headBranch(g))
	write(t, filepath.Join(top, ".git", "HEAD"), "ref: refs/heads/.invalid\n")
	assert.Equal(t, "", headBranch(g), "reftable: git knows")
	write(t, filepath.Join(top, ".git", "HEAD"), "ref: refs/heads/a\x1b[2Jb\n")
	assert.Equal(t, "", headBranch(g))

	// A linked worktree's HEAD is in the git folder its .git file names,
	// once that folder vouches for the worktree.
	wt, common := t.TempDir(), t.TempDir()
	gitdir := filepath.Join(common, "worktrees", "wt")
	write(t, filepath.Join(common, "HEAD"), "ref: refs/heads/main\n")
	require.NoError(t, os.MkdirAll(filepath.Join(common, "objects"), 0o755))
	write(t, filepath.Join(gitdir, "HEAD"), "ref: refs/heads/wt-branch\n")
	write(t, filepath.Join(gitdir, "commondir"), "../..\n")
	write(t, filepath.Join(wt, ".git"), "gitdir: "+gitdir+"\n")
	_, err = gitFolder(wt)
	assert.ErrorIs(t, err, sandbox.ErrNotGitLink, "no back-pointer yet")
	write(t, filepath.Join(gitdir, "gitdir"), filepath.Join(wt, ".git")+"\n")
	g, err = gitFolder(wt)
	require.NoError(t, err)
	assert.Equal(t, "wt-branch", headBranch(g))
	assert.Equal(t, "", headBranch(filepath.Join(t.TempDir(), ".git")))
}
