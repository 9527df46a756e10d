package tools

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call's confirmation carries what a permission rule matches: the real
// paths it touches (through a symlink inside the workspace, the target)
// and, for a command, its line as parsed.
func TestConfirmation_PathsAndCommand(t *testing.T) {
	w := newWorkspace(t)
	w.write(t, "real/sub/f.txt", "x\n")
	require.NoError(t, os.Symlink(w.path("real/sub"), w.path("link")))
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{NameReadFile, map[string]any{"file_path": w.path("link/f.txt")}, w.path("real/sub/f.txt")},
		{NameWriteFile, map[string]any{"file_path": w.path("link/new.txt"), "content": "y"}, w.path("real/sub/new.txt")},
		{NameEdit, map[string]any{"file_path": w.path("link/f.txt"), "old_string": "x", "new_string": "y"}, w.path("real/sub/f.txt")},
		{NameListDirectory, map[string]any{"path": w.path("link")}, w.path("real/sub")},
		{NameGlob, map[string]any{"pattern": "*.txt", "path": w.path("link")}, w.path("real/sub")},
		{NameGrepSearch, map[string]any{"pattern": "x"}, w.root},
		{NameRunShellCommand, map[string]any{"command": "ls", "directory": w.path("link")}, w.path("real/sub")},
	} {
		c, err := tool(t, tc.tool).Build(w.env, args(t, tc.args))
		require.NoError(t, err, tc.tool)
		assert.Equal(t, []string{tc.want}, c.Confirmation().Paths, tc.tool)
	}
	c, err := tool(t, NameRunShellCommand).Build(w.env, args(t, map[string]any{"command": "go test ./... && rm -rf x"}))
	require.NoError(t, err)
	line := c.Confirmation().Command
	require.NotNil(t, line)
	require.Len(t, line.Segments, 2)
	assert.Equal(t, []string{"rm", "-rf", "x"}, line.Segments[1].Words)
}
