package instructions

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/instructions/gittest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
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
	gittest.Require(t)
	global, repo := t.TempDir(), t.TempDir()
	ws := filepath.Join(repo, "svc", "api")
	other := t.TempDir() // not in a repository
	write(t, filepath.Join(global, "AGENTS.md"), "global rules")
	write(t, filepath.Join(repo, "AGENTS.md"), "repo rules")
	write(t, filepath.Join(repo, "QWEN.md"), "repo qwen rules")
	write(t, filepath.Join(repo, "svc", "AGENTS.md"), "svc rules")
	write(t, filepath.Join(ws, "AGENTS.md"), "api rules")
	write(t, filepath.Join(ws, "sub", "AGENTS.md"), "below the root: never read")
	write(t, filepath.Join(other, "QWEN.md"), "other root")
	gittest.Seed(t, repo) // the repository tracks the root: it is the root's git root

	l := Load(t.Context(), Options{Roots: []string{ws, other, repo}, GlobalDir: global})
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

	l = Load(t.Context(), Options{Roots: []string{ws}, FileNames: []string{"QWEN.md"}})
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
	l := Load(t.Context(), Options{Roots: []string{ws}})
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
	l := Load(t.Context(), Options{Roots: []string{ws}})
	text := l.Files[0].Text
	assert.Contains(t, text, "level 5")
	assert.NotContains(t, text, "level 6")
	assert.Contains(t, text, "more than 5 levels deep")
}

func TestLoad_BadInput(t *testing.T) {
	ws := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "AGENTS.md"), 0o755))
	write(t, filepath.Join(ws, "QWEN.md"), "bin\x00ary")
	l := Load(t.Context(), Options{Roots: []string{ws}})
	assert.Empty(t, l.Files)
	warn := strings.Join(l.Warnings, "\n")
	assert.Contains(t, warn, filepath.Join(ws, "AGENTS.md")+": instruction file skipped: is a directory")
	assert.Contains(t, warn, filepath.Join(ws, "QWEN.md")+": instruction file skipped: binary")

	ws = t.TempDir()
	write(t, filepath.Join(ws, "AGENTS.md"), strings.Repeat("rule line\n", 1000))
	l = Load(t.Context(), Options{Roots: []string{ws}, Budget: 1000})
	require.Len(t, l.Files, 1)
	assert.True(t, l.Files[0].Truncated)
	assert.LessOrEqual(t, len(l.Files[0].Text), 1300)
	assert.Contains(t, l.Files[0].Text, "was cut")
	assert.Contains(t, strings.Join(l.Warnings, "\n"), "cut to fit the instruction budget of 1000 bytes")

	// Unreadable, for root too.
	ws = t.TempDir()
	write(t, filepath.Join(ws, "AGENTS.md"), "x")
	sandboxtest.Deny(t, sandboxtest.Denial{Read: []string{filepath.Join(ws, "AGENTS.md")}}, func() {
		l = Load(t.Context(), Options{Roots: []string{ws}})
	})
	assert.Empty(t, l.Files)
	require.Len(t, l.Warnings, 1)
	assert.Contains(t, l.Warnings[0], "permission denied")
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

// importBomb writes the fan-out of an AGENTS.md importing b.md 60 times,
// b.md importing c.md 60 times, c.md importing a 10 KB d.md 60 times.
func importBomb(tb testing.TB, ws string) {
	tb.Helper()
	fan := func(name string) string { return strings.Repeat("See @"+name+" now.\n", 60) }
	for name, text := range map[string]string{
		"AGENTS.md": fan("b.md"), "b.md": fan("c.md"), "c.md": fan("d.md"),
		"d.md": strings.Repeat("d is ten kilobytes of rules\n", 10240/28),
	} {
		require.NoError(tb, os.WriteFile(filepath.Join(ws, name), []byte(text), 0o644))
	}
}

// TestLoad_ImportBomb: each file's text enters the prompt once; repeats
// become markers, and each repeated file is named in a warning.
func TestLoad_ImportBomb(t *testing.T) {
	ws := t.TempDir()
	importBomb(t, ws)
	l := Load(t.Context(), Options{Roots: []string{ws}, Budget: BudgetFor(131072)})
	require.Len(t, l.Files, 1)
	f := l.Files[0]
	assert.False(t, f.Truncated)
	assert.Equal(t, []string{filepath.Join(ws, "b.md"), filepath.Join(ws, "c.md"), filepath.Join(ws, "d.md")}, f.Imports)
	assert.Equal(t, 10240/28, strings.Count(f.Text, "d is ten kilobytes of rules"), "d.md's text once")
	assert.Equal(t, 59, strings.Count(f.Text, "<!-- already imported above: "+filepath.Join(ws, "b.md")+" -->"))
	assert.Less(t, len(f.Text), 32<<10, "d.md once, and 177 short markers")
	for _, n := range []string{"b.md", "c.md", "d.md"} {
		assert.Contains(t, l.Warnings, filepath.Join(ws, n)+": imported 59 more times; its text is included once")
	}
}

// TestLoad_FanOutOfDistinctFiles: a fan-out that never repeats a file
// stops at the files read, and the text stays within the budget, checked
// while expanding.
func TestLoad_FanOutOfDistinctFiles(t *testing.T) {
	ws := t.TempDir()
	var agents strings.Builder
	for i := range 300 {
		name := fmt.Sprintf("part%03d.md", i)
		write(t, filepath.Join(ws, "parts", name), strings.Repeat(fmt.Sprintf("rule of part %d\n", i), 10))
		fmt.Fprintf(&agents, "@parts/%s\n", name)
	}
	write(t, filepath.Join(ws, "AGENTS.md"), agents.String())

	l := Load(t.Context(), Options{Roots: []string{ws}})
	require.Len(t, l.Files, 1)
	assert.Len(t, l.Files[0].Imports, maxFilesRead-1, "AGENTS.md itself is the first file read")
	assert.Contains(t, l.Files[0].Text, "@parts/part200.md", "past the limit an import is left as text")
	assert.Contains(t, l.Warnings, filepath.Join(ws, "AGENTS.md")+": more than 128 files read for the instructions; the rest of the imports are left as text")

	l = Load(t.Context(), Options{Roots: []string{ws}, Budget: 4000})
	require.Len(t, l.Files, 1)
	f := l.Files[0]
	assert.True(t, f.Truncated)
	assert.LessOrEqual(t, len(f.Text), 4000+200, "the budget and its note")
	assert.Less(t, len(f.Imports), 30, "expansion stopped at the budget, not after reading every part")
	assert.Contains(t, f.Text, "instruction files together are limited to about 1000 tokens (15% of the context window)")
}

// TestLoad_ManyWordsLookedUpOnce: thousands of @words that name no file
// are looked up once each, up to a limit; the text is kept as it is.
func TestLoad_ManyWordsLookedUpOnce(t *testing.T) {
	ws := t.TempDir()
	var text strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&text, "ping @user%d and @user%d\n", i, i)
	}
	write(t, filepath.Join(ws, "AGENTS.md"), text.String())
	l := Load(t.Context(), Options{Roots: []string{ws}})
	require.Len(t, l.Files, 1)
	assert.Equal(t, strings.TrimSpace(text.String()), l.Files[0].Text)
	assert.Equal(t, []string{filepath.Join(ws, "AGENTS.md") + ": more than 2048 @paths looked up for the instructions; the rest are left as text"}, l.Warnings)
}

// TestLoad_TotalBudgetSharedFairly: the files together fit the budget; a
// small file stays whole and the large ones share the rest.
func TestLoad_TotalBudgetSharedFairly(t *testing.T) {
	global, ws := t.TempDir(), t.TempDir()
	write(t, filepath.Join(global, "AGENTS.md"), strings.Repeat("global rule line\n", 1000)) // 17 KB
	write(t, filepath.Join(ws, "AGENTS.md"), "small project rules")
	write(t, filepath.Join(ws, "QWEN.md"), strings.Repeat("project rule line\n", 1000)) // 18 KB
	l := Load(t.Context(), Options{Roots: []string{ws}, GlobalDir: global, Budget: 6000})
	require.Len(t, l.Files, 3)
	assert.Equal(t, "small project rules", l.Files[1].Text)
	total := 0
	for i, f := range l.Files {
		total += len(f.Text)
		if i != 1 {
			assert.True(t, f.Truncated)
			assert.Greater(t, len(f.Text), 2500, "each large file gets about half of what is left")
		}
	}
	assert.LessOrEqual(t, total, 6000+2*200)
	assert.Len(t, l.Warnings, 2)
}

// TestLoad_RepeatsAndSources: a file imported twice is included once, a
// top-level file already imported is not repeated, and Sources name every
// place looked at.
func TestLoad_RepeatsAndSources(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "AGENTS.md"), "Read @QWEN.md and @docs/x.md, then @docs/x.md again.")
	write(t, filepath.Join(ws, "QWEN.md"), "qwen rules")
	write(t, filepath.Join(ws, "docs", "x.md"), "x rules")
	l := Load(t.Context(), Options{Roots: []string{ws}})
	require.Len(t, l.Files, 1, "QWEN.md is in AGENTS.md already")
	text := l.Files[0].Text
	assert.Equal(t, 1, strings.Count(text, "qwen rules"))
	assert.Equal(t, 1, strings.Count(text, "x rules"))
	assert.Contains(t, text, "<!-- already imported above: "+filepath.Join(ws, "docs", "x.md")+" --> again.")
	assert.Subset(t, l.Sources, []string{filepath.Join(ws, "AGENTS.md"), filepath.Join(ws, "QWEN.md"), filepath.Join(ws, "docs", "x.md")})
}

func TestLoad_StopsWhenCancelled(t *testing.T) {
	ws := t.TempDir()
	importBomb(t, ws)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	l := Load(ctx, Options{Roots: []string{ws}})
	assert.Empty(t, l.Files)
}

// TestLoad_StaysInTheWorkspace: a symlinked instruction file that resolves
// outside the workspace is skipped, whatever its name; from the global
// folder only Markdown files are imported; a repository above a root that
// tracks nothing under it (a dotfiles repository in the home folder) is not
// the root's git root, while one that tracks the root is, in every index
// format.
func TestLoad_StaysInTheWorkspace(t *testing.T) {
	gittest.Require(t)
	home, global, secrets := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(secrets, "id_rsa"), "PRIVATE KEY")
	write(t, filepath.Join(global, "config.toml"), "apiKey = 'GLOBAL SECRET'")
	write(t, filepath.Join(global, "style.md"), "global style")
	write(t, filepath.Join(global, "AGENTS.md"), "global rules @./config.toml @./style.md")
	write(t, filepath.Join(home, ".aws", "credentials"), "AWS SECRET")
	write(t, filepath.Join(home, "AGENTS.md"), "HOME RULES")
	write(t, filepath.Join(home, ".bashrc"), "tracked dotfile")
	gittest.Seed(t, home) // a dotfiles repository: tracks .bashrc, AGENTS.md, .aws
	ws := filepath.Join(home, "proj")
	write(t, filepath.Join(ws, "QWEN.md"), "project rules @"+filepath.Join(home, ".aws", "credentials")+" @"+filepath.Join(global, "config.toml")+" @"+filepath.Join(global, "style.md"))
	require.NoError(t, os.Symlink(filepath.Join(secrets, "id_rsa"), filepath.Join(ws, "AGENTS.md")))

	l := Load(t.Context(), Options{Roots: []string{ws}, GlobalDir: global})
	text := l.Text()
	assert.Equal(t, []string{filepath.Join(global, "AGENTS.md"), filepath.Join(ws, "QWEN.md")}, paths(l))
	for _, secret := range []string{"PRIVATE KEY", "GLOBAL SECRET", "AWS SECRET", "HOME RULES"} {
		assert.NotContains(t, text, secret)
	}
	assert.Contains(t, text, "global style", "a Markdown file of the global folder may be imported")
	assert.Contains(t, strings.Join(l.Warnings, "\n"), filepath.Join(ws, "AGENTS.md")+": instruction file skipped: it resolves to "+filepath.Join(secrets, "id_rsa")+", outside the workspace")
	assert.Equal(t, ws, gitRoot(ws), "the dotfiles repository tracks nothing under proj")

	// Once the repository tracks the root, it is the root's repository,
	// whatever the index format (v2, the extended flags of v3, the
	// prefix-compressed paths of v4).
	write(t, filepath.Join(ws, "main.go"), "package main")
	gittest.Git(t, home, "add", "proj/main.go")
	for _, v := range []string{"2", "3", "4"} {
		if v == "3" {
			gittest.Git(t, home, "add", "--intent-to-add", "proj/QWEN.md") // an extended entry: git writes version 3
		} else {
			gittest.Git(t, home, "update-index", "--index-version", v)
		}
		idx, err := os.ReadFile(filepath.Join(home, ".git", "index"))
		require.NoError(t, err)
		require.Equal(t, v[0], idx[7]+'0', "index version")
		assert.Equal(t, home, gitRoot(ws), "index version %s", v)
		assert.Equal(t, filepath.Join(home, "zz"), gitRoot(filepath.Join(home, "zz")), "a folder sorted after every entry, version %s", v)
	}
	l = Load(t.Context(), Options{Roots: []string{ws}})
	assert.Contains(t, l.Text(), "HOME RULES", "the git root's instruction file")
	assert.Contains(t, l.Text(), "AWS SECRET", "imports reach the whole repository the root belongs to")
}

func TestTracksUnder_SHA256(t *testing.T) {
	gittest.Require(t)
	repo := t.TempDir()
	cmd := exec.Command("git", "init", "-q", "--object-format=sha256", repo)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("git without SHA-256 repositories: %v %s", err, out)
	}
	write(t, filepath.Join(repo, "a", "b", "c.txt"), "x")
	write(t, filepath.Join(repo, "z.txt"), "x")
	gittest.Git(t, repo, "add", "-A")
	assert.True(t, tracksUnder(repo, "a/b"))
	assert.True(t, tracksUnder(repo, "a"))
	assert.False(t, tracksUnder(repo, "a/bb"))
	assert.False(t, tracksUnder(repo, "y"))
}

// countingReader counts what was read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// An index whose entry name never ends (no NUL) is refused once the name
// passes git's 64 KiB path bound, without reading the rest of the file.
func TestIndexHasPrefix_NameWithoutEnd(t *testing.T) {
	var idx bytes.Buffer
	idx.WriteString("DIRC")
	_ = binary.Write(&idx, binary.BigEndian, uint32(2))
	_ = binary.Write(&idx, binary.BigEndian, uint32(1))
	idx.Write(make([]byte, 40+20+2)) // stat data, object id, flags
	idx.Write(bytes.Repeat([]byte("a"), 8<<20))
	cr := &countingReader{r: &idx}
	found, err := indexHasPrefix(bufio.NewReaderSize(cr, 64<<10), "a/", 20)
	require.ErrorIs(t, err, errIndexFormat)
	assert.False(t, found)
	assert.Less(t, cr.n, 256<<10, "read past the name's bound")
}
