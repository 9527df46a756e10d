package deffiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFolders_Precedence(t *testing.T) {
	got := Folders([]string{"/cwd", "/extra"}, "/home/u/.config/acpd/agents", "agents")
	assert.Equal(t, []Folder{
		{Path: "/home/u/.config/acpd/agents", Global: true},
		{Path: "/extra/.claude/agents", Claude: true}, {Path: "/extra/.qwen/agents"}, {Path: "/extra/.acpd/agents"},
		{Path: "/cwd/.claude/agents", Claude: true}, {Path: "/cwd/.qwen/agents"}, {Path: "/cwd/.acpd/agents"},
	}, got)
	assert.Len(t, Folders([]string{"/cwd"}, "", "commands"), 3, "no global folder")
}

func TestFile_StampAndCause(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.md")
	require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
	info, err := os.Stat(p)
	require.NoError(t, err)
	var a, b strings.Builder
	Of(p, info).AppendStamp(&a)
	require.NoError(t, os.WriteFile(p, []byte("xy"), 0o644))
	info, err = os.Stat(p)
	require.NoError(t, err)
	Of(p, info).AppendStamp(&b)
	assert.NotEqual(t, a.String(), b.String(), "a changed size changes the stamp")
	assert.True(t, strings.HasPrefix(a.String(), p+"\x00"))

	_, err = os.ReadFile(filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, "no such file or directory", Cause(err).Error())
}
