package tools

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gitignoreWorkspace has ignored files and directories at several levels:
// kept are the files the search tools must still see.
func gitignoreWorkspace(t *testing.T) (w *workspace, kept []string) {
	w = newWorkspace(t)
	w.write(t, ".gitignore", "*.log\nbuild/\n!keep.log\n/secret.go\n")
	w.write(t, ".git/info/exclude", "*.swp\n")
	w.write(t, "main.go", "package main // NEEDLE\n")
	w.write(t, "keep.log", "NEEDLE kept log\n")
	w.write(t, "debug.log", "NEEDLE ignored log\n")
	w.write(t, "secret.go", "NEEDLE anchored\n")
	w.write(t, "main.go.swp", "NEEDLE swap\n")
	w.write(t, "build/out.go", "NEEDLE build output\n")
	// A parent directory that is excluded cannot be re-included from inside.
	w.write(t, "build/.gitignore", "!*\n")
	w.write(t, "src/secret.go", "NEEDLE not anchored here\n")
	w.write(t, "src/.gitignore", "gen/\n!debug.log\n")
	w.write(t, "src/debug.log", "NEEDLE re-included\n")
	w.write(t, "src/gen/g.go", "NEEDLE generated\n")
	w.write(t, "src/sub/build/deep.go", "NEEDLE nested build\n")
	w.write(t, "src/sub/ok.go", "NEEDLE ok\n")
	return w, []string{".gitignore", "keep.log", "main.go", "src/.gitignore", "src/debug.log", "src/secret.go", "src/sub/ok.go"}
}

func TestGlob_Gitignore(t *testing.T) {
	w, kept := gitignoreWorkspace(t)
	_, res := run(t, t.Context(), w.env, NameGlob, map[string]any{"pattern": "**/*"})
	require.NoError(t, res.Err)
	var want []string
	for _, k := range kept {
		want = append(want, w.path(k))
	}
	got := strings.Split(strings.TrimSpace(res.LLMContent), "\n")[1:]
	sort.Strings(got)
	assert.Equal(t, want, got)

	// Rules from above the search path still apply below it.
	_, res = run(t, t.Context(), w.env, NameGlob, map[string]any{"pattern": "**/*.go", "path": w.path("src")})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "Found 2 file(s)")
	assert.Contains(t, res.LLMContent, w.path("src/secret.go"))
	assert.Contains(t, res.LLMContent, w.path("src/sub/ok.go"))

	// A directory named explicitly is searched even though it is ignored.
	_, res = run(t, t.Context(), w.env, NameGlob, map[string]any{"pattern": "*.go", "path": w.path("build")})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, w.path("build/out.go"))
}

func TestGrepSearch_Gitignore(t *testing.T) {
	w, kept := gitignoreWorkspace(t)
	_, res := run(t, t.Context(), w.env, NameGrepSearch, map[string]any{"pattern": "NEEDLE"})
	require.NoError(t, res.Err)
	var got []string
	for _, l := range strings.Split(res.LLMContent, "\n") {
		if f, ok := strings.CutPrefix(l, "File: "); ok {
			got = append(got, f)
		}
	}
	var want []string
	for _, k := range kept {
		if path.Base(k) != ".gitignore" {
			want = append(want, k)
		}
	}
	assert.Equal(t, want, got)
	assert.Contains(t, res.LLMContent, fmt.Sprintf("Found %d matches", len(want)))

	_, res = run(t, t.Context(), w.env, NameGrepSearch, map[string]any{"pattern": "NEEDLE", "path": w.path("src/sub")})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "Found 1 match ")
	assert.Contains(t, res.LLMContent, "File: ok.go\n")
}

func TestListDirectory_Gitignore(t *testing.T) {
	w, _ := gitignoreWorkspace(t)
	_, res := run(t, t.Context(), w.env, NameListDirectory, map[string]any{"path": w.root})
	require.NoError(t, res.Err)
	assert.Equal(t, fmt.Sprintf("Directory listing for %s:\n[DIR] .git\n[DIR] src\n.gitignore\nkeep.log\nmain.go\n\n(4 git-ignored entries hidden)", w.root), res.LLMContent)

	_, res = run(t, t.Context(), w.env, NameListDirectory, map[string]any{"path": w.root, "ignore": []string{"*.go"}})
	require.NoError(t, res.Err)
	assert.Equal(t, fmt.Sprintf("Directory listing for %s:\n[DIR] .git\n[DIR] src\n.gitignore\nkeep.log\n\n(2 ignored)\n(3 git-ignored entries hidden)", w.root), res.LLMContent)

	_, res = run(t, t.Context(), w.env, NameListDirectory, map[string]any{"path": w.path("src/sub")})
	require.NoError(t, res.Err)
	assert.Equal(t, fmt.Sprintf("Directory listing for %s:\nok.go\n\n(1 git-ignored entry hidden)", w.path("src/sub")), res.LLMContent)

	w.write(t, "logs/a.log", "")
	_, res = run(t, t.Context(), w.env, NameListDirectory, map[string]any{"path": w.path("logs")})
	require.NoError(t, res.Err)
	assert.Equal(t, fmt.Sprintf("Directory %s is empty.\n\n(1 git-ignored entry hidden)", w.path("logs")), res.LLMContent)
}
