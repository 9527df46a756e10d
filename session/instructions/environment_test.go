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
)

func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	run("init", "-q", "-b", "feature/x")
	for i := range 7 {
		write(t, filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), "x")
		run("add", "-A")
		run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", fmt.Sprintf("commit number %d", i))
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
	env := Gather(context.Background(), []string{repo, plain}, 0)
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
	env := Gather(context.Background(), []string{repo}, time.Nanosecond)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, "git did not answer in time", env.Roots[0].GitErr)
	assert.Contains(t, env.Text(), "(git did not answer in time)")
}

func TestGather_GitFails(t *testing.T) {
	dir := t.TempDir()
	// A .git that is no repository: git refuses, the block says so.
	write(t, filepath.Join(dir, ".git"), "gitdir: /nonexistent/place\n")
	env := Gather(context.Background(), []string{dir}, 0)
	r := env.Roots[0]
	assert.True(t, r.Git)
	assert.Contains(t, r.GitErr, "git status failed: ")
	assert.Contains(t, env.Text(), "(git status failed: ")
}
