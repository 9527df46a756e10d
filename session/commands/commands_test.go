package commands

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, name, args string
		ok             bool
	}{
		{"/review src/x.go", "review", "src/x.go", true},
		{"/help", "help", "", true},
		{"/git:commit  fix the bug \n", "git:commit", "fix the bug", true},
		{"/compress\nfocus on tests", "compress", "focus on tests", true},
		{"//comment", "", "", false},
		{"/* c */", "", "", false},
		{"/usr/bin/env is a path", "", "", false},
		{`/a\b`, "", "", false},
		{" /help", "", "", false},
		{"/", "", "", false},
		{"/ help", "", "", false},
		{"hello", "", "", false},
	} {
		name, args, ok := Parse(tc.in)
		assert.Equal(t, tc.ok, ok, tc.in)
		assert.Equal(t, tc.name, name, tc.in)
		assert.Equal(t, tc.args, args, tc.in)
	}
}

func TestExpand(t *testing.T) {
	assert.Equal(t, "Review a.go now; a.go", Expand("Review {{args}} now; $ARGUMENTS", "a.go"))
	assert.Equal(t, "Review.\n\na.go b.go", Expand("Review.\n", "a.go b.go"))
	assert.Equal(t, "Review.\n", Expand("Review.\n", ""))
	assert.Equal(t, "x  y", Expand("x {{args}} y", ""))
}

func write(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

func TestLoad(t *testing.T) {
	root, other, global := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(global, "review.md"), "global review")
	write(t, filepath.Join(global, "only-global.toml"), `prompt = "g"`)
	write(t, filepath.Join(root, ".claude/commands/review.md"), "---\ndescription: Review a file\nargument-hint: [file]\nallowed-tools: Bash(git diff:*)\n---\nReview $ARGUMENTS carefully.\n")
	write(t, filepath.Join(root, ".claude/commands/ignored.toml"), `prompt = "claude has no toml"`)
	write(t, filepath.Join(root, ".qwen/commands/git/commit.toml"), "description = \"Commit\"\nprompt = \"\"\"\nCommit {{args}}\n\"\"\"\n")
	write(t, filepath.Join(root, ".qwen/commands/bad.toml"), "description = \"x\"\nprompt = \n")
	write(t, filepath.Join(root, ".qwen/commands/noprompt.toml"), "description = \"x\"\n")
	write(t, filepath.Join(root, ".acpd/commands/open.md"), "---\ndescription: never closed\nbody\n")
	write(t, filepath.Join(root, ".acpd/commands/badline.md"), "---\ndescription: ok\nthis is not a key\n---\nbody\n")
	write(t, filepath.Join(root, ".acpd/commands/a:b.md"), "colon")
	write(t, filepath.Join(root, ".acpd/commands/help.md"), "shadowing a built-in")
	write(t, filepath.Join(root, ".acpd/commands/bin.md"), "a\x00b")
	write(t, filepath.Join(other, ".acpd/commands/review.md"), "other root's review")
	write(t, filepath.Join(other, ".acpd/commands/extra.md"), "extra")

	dirs := Dirs([]string{root, other}, global)
	l := Load(dirs)
	set := NewSet(Builtins(), l)
	names := map[string]*Command{}
	for _, c := range set.Commands() {
		names[c.Name] = c
	}
	for _, n := range []string{"compress", "init", "context", "tools", "mcp", "help", "review", "only-global", "git:commit", "a_b", "extra"} {
		assert.Contains(t, names, n)
	}
	for _, n := range []string{"bad", "noprompt", "open", "badline", "ignored", "bin"} {
		assert.NotContains(t, names, n)
	}
	rv := names["review"]
	assert.Equal(t, SourceProject, rv.Source)
	assert.Equal(t, "Review a file", rv.Description)
	assert.Equal(t, "[file]", rv.Hint)
	assert.Equal(t, filepath.Join(root, ".claude/commands/review.md"), rv.Path, "the cwd root's command wins")
	res, err := rv.Invoke(context.Background(), nil, "src/x.go")
	require.NoError(t, err)
	assert.Equal(t, "Review src/x.go carefully.", res.Prompt)
	assert.Equal(t, "Custom command from only-global.toml", names["only-global"].Description)
	assert.Equal(t, SourceGlobal, names["only-global"].Source)
	res, _ = names["git:commit"].Invoke(context.Background(), nil, "it")
	assert.Equal(t, "Commit it\n", res.Prompt)
	_, isBuiltin := names["help"]
	assert.True(t, isBuiltin)
	assert.NotNil(t, names["help"].Run, "built-in /help is not replaced by a file")

	warn := strings.Join(set.Warnings, "\n")
	assert.Contains(t, warn, filepath.Join(root, ".qwen/commands/bad.toml")+":2:")
	assert.Contains(t, warn, filepath.Join(root, ".qwen/commands/noprompt.toml")+":1:")
	assert.Contains(t, warn, filepath.Join(root, ".acpd/commands/open.md")+":1:")
	assert.Contains(t, warn, filepath.Join(root, ".acpd/commands/badline.md")+":3:")
	assert.Contains(t, warn, filepath.Join(root, ".acpd/commands/bin.md")+":1:")
	assert.Contains(t, warn, "help has the name of a built-in")

	// The advertised list: file commands carry an input, reporting
	// built-ins without arguments do not.
	for _, ac := range set.Available() {
		switch ac.Name {
		case "review":
			require.NotNil(t, ac.Input)
			assert.Equal(t, "[file]", ac.Input.Hint)
		case "help":
			assert.Nil(t, ac.Input)
		case "compress":
			require.NotNil(t, ac.Input)
		}
	}

	// The stamp changes when a file does.
	assert.Equal(t, l.Stamp, Stamp(dirs))
	write(t, filepath.Join(root, ".acpd/commands/new.md"), "new")
	assert.NotEqual(t, l.Stamp, Stamp(dirs))
}

func TestLoad_MissingFoldersAndUnreadable(t *testing.T) {
	l := Load(Dirs([]string{filepath.Join(t.TempDir(), "missing")}, ""))
	assert.Empty(t, l.Commands)
	assert.Empty(t, l.Warnings)
	// Unreadable, for root too.
	root := t.TempDir()
	p := filepath.Join(root, ".acpd/commands/secret.md")
	write(t, p, "x")
	sandboxtest.Deny(t, sandboxtest.Denial{Read: []string{p}}, func() {
		l = Load(Dirs([]string{root}, ""))
	})
	assert.Empty(t, l.Commands)
	require.Len(t, l.Warnings, 1)
	assert.Contains(t, l.Warnings[0], p+":1:")
}
