package instructions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

func paths(l Loaded) []string {
	var out []string
	for _, f := range l.Files {
		out = append(out, f.Path)
	}
	return out
}

func TestLoad_Order(t *testing.T) {
	global, repo := t.TempDir(), t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	ws := filepath.Join(repo, "svc", "api")
	other := t.TempDir() // not in a repository
	write(t, filepath.Join(global, "AGENTS.md"), "global rules")
	write(t, filepath.Join(repo, "AGENTS.md"), "repo rules")
	write(t, filepath.Join(repo, "QWEN.md"), "repo qwen rules")
	write(t, filepath.Join(repo, "svc", "AGENTS.md"), "svc rules")
	write(t, filepath.Join(ws, "AGENTS.md"), "api rules")
	write(t, filepath.Join(ws, "sub", "AGENTS.md"), "below the root: never read")
	write(t, filepath.Join(other, "QWEN.md"), "other root")

	l := Load(Options{Roots: []string{ws, other, repo}, GlobalDir: global})
	assert.Equal(t, []string{
		filepath.Join(global, "AGENTS.md"),
		filepath.Join(repo, "AGENTS.md"), filepath.Join(repo, "QWEN.md"),
		filepath.Join(repo, "svc", "AGENTS.md"), filepath.Join(ws, "AGENTS.md"),
		filepath.Join(other, "QWEN.md"),
	}, paths(l), "repo root's loaded once though a root too")
	assert.Empty(t, l.Warnings)
	text := l.Text()
	assert.Less(t, strings.Index(text, "global rules"), strings.Index(text, "repo rules"))
	assert.Less(t, strings.Index(text, "svc rules"), strings.Index(text, "api rules"))
	assert.Contains(t, text, "--- Context from: "+filepath.Join(ws, "AGENTS.md")+" ---")
	assert.NotContains(t, text, "never read")

	l = Load(Options{Roots: []string{ws}, FileNames: []string{"QWEN.md"}})
	assert.Equal(t, []string{filepath.Join(repo, "QWEN.md")}, paths(l), "fileNames replaces the list")
}

func TestLoad_Imports(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	write(t, filepath.Join(outside, "secret.md"), "SECRET")
	write(t, filepath.Join(ws, "docs", "style.md"), "Style: tabs. See @./deeper.md")
	write(t, filepath.Join(ws, "docs", "deeper.md"), "Deeper text.")
	write(t, filepath.Join(ws, "docs", "a.md"), "A then @b.md")
	write(t, filepath.Join(ws, "docs", "b.md"), "B then @a.md")
	write(t, filepath.Join(ws, "AGENTS.md"), strings.Join([]string{
		"Follow @docs/style.md.",
		"Cycle: @docs/a.md",
		"Escape: @" + filepath.Join(outside, "secret.md"),
		"Mail me at me@example.com or ping @alice.",
		"In code: `@docs/style.md`",
		"```",
		"@docs/style.md",
		"```",
	}, "\n"))
	l := Load(Options{Roots: []string{ws}})
	require.Len(t, l.Files, 1)
	text := l.Files[0].Text
	assert.Contains(t, text, "<!-- Imported from: "+filepath.Join(ws, "docs", "style.md")+" -->\nStyle: tabs.")
	assert.Contains(t, text, "Deeper text.", "imports nest")
	assert.Equal(t, 1, strings.Count(text, "A then"))
	assert.Equal(t, 1, strings.Count(text, "B then"))
	assert.Contains(t, text, "<!-- import cycle stopped: "+filepath.Join(ws, "docs", "a.md")+" -->")
	assert.NotContains(t, text, "SECRET")
	assert.Contains(t, text, "is outside the workspace")
	assert.Contains(t, text, "me@example.com or ping @alice.")
	assert.Contains(t, text, "`@docs/style.md`")
	assert.Contains(t, text, "```\n@docs/style.md\n```")
	warn := strings.Join(l.Warnings, "\n")
	assert.Contains(t, warn, "import cycle")
	assert.Contains(t, warn, "outside the workspace")
}

func TestLoad_ImportDepth(t *testing.T) {
	ws := t.TempDir()
	for i := 1; i <= 7; i++ {
		write(t, filepath.Join(ws, "d", "f"+string(rune('0'+i))+".md"), "level "+string(rune('0'+i))+" @f"+string(rune('1'+i))+".md")
	}
	write(t, filepath.Join(ws, "AGENTS.md"), "top @d/f1.md")
	l := Load(Options{Roots: []string{ws}})
	text := l.Files[0].Text
	assert.Contains(t, text, "level 5")
	assert.NotContains(t, text, "level 6")
	assert.Contains(t, text, "more than 5 levels deep")
}

func TestLoad_BadInput(t *testing.T) {
	ws := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "AGENTS.md"), 0o755))
	write(t, filepath.Join(ws, "QWEN.md"), "bin\x00ary")
	l := Load(Options{Roots: []string{ws}})
	assert.Empty(t, l.Files)
	warn := strings.Join(l.Warnings, "\n")
	assert.Contains(t, warn, filepath.Join(ws, "AGENTS.md")+": instruction file skipped: is a directory")
	assert.Contains(t, warn, filepath.Join(ws, "QWEN.md")+": instruction file skipped: binary")

	ws = t.TempDir()
	write(t, filepath.Join(ws, "AGENTS.md"), strings.Repeat("rule line\n", 1000))
	l = Load(Options{Roots: []string{ws}, Budget: 1000})
	require.Len(t, l.Files, 1)
	assert.True(t, l.Files[0].Truncated)
	assert.LessOrEqual(t, len(l.Files[0].Text), 1300)
	assert.Contains(t, l.Files[0].Text, "was cut")
	assert.Contains(t, strings.Join(l.Warnings, "\n"), "cut to the size budget")

	if os.Getuid() != 0 {
		ws = t.TempDir()
		write(t, filepath.Join(ws, "AGENTS.md"), "x")
		require.NoError(t, os.Chmod(filepath.Join(ws, "AGENTS.md"), 0))
		l = Load(Options{Roots: []string{ws}})
		assert.Empty(t, l.Files)
		assert.Len(t, l.Warnings, 1)
	}
}

func TestParseStatus(t *testing.T) {
	b, s := parseStatus("## main...origin/main [ahead 1]\n M a.go\n?? b.go\n")
	assert.Equal(t, "main", b)
	assert.Equal(t, " M a.go\n?? b.go", s)
	b, s = parseStatus("## No commits yet on trunk\n")
	assert.Equal(t, "trunk", b)
	assert.Empty(t, s)
	b, _ = parseStatus("## HEAD (no branch)\n")
	assert.Equal(t, "(detached HEAD)", b)
	long := "## main\n" + strings.Repeat("?? some/long/file/name.go\n", 200)
	_, s = parseStatus(long)
	assert.LessOrEqual(t, len(s), maxStatusChars+40)
	assert.Contains(t, s, "more lines)")
}

func TestSystemPrompt(t *testing.T) {
	p := SystemPrompt(Parts{Tools: []string{"read_file", "grep_search"}, Instructions: "INSTR", Environment: "ENV"})
	assert.Contains(t, p, "read_file: give an absolute path")
	assert.Contains(t, p, "grep_search")
	assert.NotContains(t, p, "write_file:")
	assert.Less(t, strings.Index(p, "# How to work"), strings.Index(p, "INSTR"))
	assert.Less(t, strings.Index(p, "INSTR"), strings.Index(p, "ENV"))
	p = SystemPrompt(Parts{Custom: "Be a pirate.", Environment: "ENV"})
	assert.Equal(t, "Be a pirate.\n\nENV", p)
}
