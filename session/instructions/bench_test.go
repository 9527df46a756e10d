package instructions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/instructions/gittest"
	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// benchRepo makes a committed git repository of n files in 100 folders,
// with AGENTS.md at its root and in the folder returned as the workspace.
func benchRepo(b *testing.B, n int) (repo, ws string) {
	gittest.Require(b)
	repo = b.TempDir()
	for i := range n {
		sub := filepath.Join(repo, fmt.Sprintf("pkg%02d", i%100))
		require.NoError(b, os.MkdirAll(sub, 0o755))
		require.NoError(b, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.go", i)), []byte("package p\n"), 0o644))
	}
	ws = filepath.Join(repo, "pkg07")
	require.NoError(b, os.WriteFile(filepath.Join(repo, "AGENTS.md"), []byte("Run the tests. @docs.md\n"), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(repo, "docs.md"), []byte("Docs.\n"), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("Package rules.\n"), 0o644))
	gittest.Seed(b, repo)
	return repo, ws
}

// BenchmarkGather_GitRepo10k is the background work a session starts after
// its session/new answer, in a git repository of 10,000 files: the
// environment block (git status and log, the listing) — what the first
// model request may wait for.
func BenchmarkGather_GitRepo10k(b *testing.B) {
	_, ws := benchRepo(b, 10000)
	for b.Loop() {
		env := Gather(context.Background(), []string{ws}, 0, nil)
		if env.Roots[0].Branch != "main" {
			b.Fatalf("branch %q, git error %q", env.Roots[0].Branch, env.Roots[0].GitErr)
		}
	}
}

// BenchmarkGather_GitRepo10k_Confined is the same with git run through the
// sandbox helper as well (this test binary as the helper; acpd's own binary
// starts it the same way): three confined runs (git config to list the
// filter drivers, then status and log together).
func BenchmarkGather_GitRepo10k_Confined(b *testing.B) {
	sandboxtest.Require(b)
	_, ws := benchRepo(b, 10000)
	exe, err := os.Executable()
	require.NoError(b, err)
	sb := &sandbox.Policy{Mode: sandbox.ModeAuto, Helper: exe}
	for b.Loop() {
		env := Gather(context.Background(), []string{ws}, 0, sb)
		if env.Roots[0].Branch != "main" || env.Roots[0].GitErr != "" {
			b.Fatalf("branch %q, git error %q", env.Roots[0].Branch, env.Roots[0].GitErr)
		}
	}
}

// BenchmarkLoad_GitRepo10k finds and reads the instruction files (walking
// up from the workspace, never down the 10,000 files).
func BenchmarkLoad_GitRepo10k(b *testing.B) {
	_, ws := benchRepo(b, 10000)
	global := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		l := Load(b.Context(), Options{Roots: []string{ws}, GlobalDir: global, Budget: 52428})
		if len(l.Files) != 2 {
			b.Fatalf("%d files", len(l.Files))
		}
	}
}

// BenchmarkLoad_ImportBomb loads the 60×60×60 import fan-out (AGENTS.md
// imports b.md 60 times, b.md c.md, c.md a 10 KB d.md): before imports
// were included once and budgeted while expanding, it took 55 s and 6 GB.
func BenchmarkLoad_ImportBomb(b *testing.B) {
	ws := b.TempDir()
	importBomb(b, ws)
	b.ReportAllocs()
	for b.Loop() {
		l := Load(b.Context(), Options{Roots: []string{ws}, Budget: BudgetFor(131072)})
		if len(l.Files) != 1 || len(l.Warnings) != 3 {
			b.Fatalf("%d files, warnings %q", len(l.Files), l.Warnings)
		}
	}
}
