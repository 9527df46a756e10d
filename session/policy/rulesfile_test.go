package policy

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/rules"
)

func TestRulesFile(t *testing.T) {
	dir := t.TempDir()
	ws := "/home/u/my proj"
	f := WorkspaceFile(dir, ws)
	assert.Equal(t, filepath.Join(dir, "permissions"), filepath.Dir(f))
	assert.NotEqual(t, f, WorkspaceFile(dir, "/other/my proj"))
	added, err := AddRules(f, ws, rules.Allow, []string{"Bash(go test:*)", `Bash(echo "q\x":*)`})
	require.NoError(t, err)
	assert.Len(t, added, 2)
	added, err = AddRules(f, ws, rules.Allow, []string{"Bash(go test:*)"})
	require.NoError(t, err)
	assert.Empty(t, added)
	rs, bad, err := ReadRulesFile(f, rules.ScopeWorkspace)
	require.NoError(t, err)
	assert.Empty(t, bad)
	require.Len(t, rs, 2)
	assert.Equal(t, `Bash(echo "q\x":*)`, rs[1].Text)
	assert.Equal(t, rules.Source{Scope: rules.ScopeWorkspace, File: f}, rs[0].Source)
	ok, err := RemoveRule(f, rules.Allow, "Bash(go test:*)")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = RemoveRule(f, rules.Allow, "Bash(go test:*)")
	require.NoError(t, err)
	assert.False(t, ok)
	rs, _, err = ReadRulesFile(f, rules.ScopeWorkspace)
	require.NoError(t, err)
	assert.Len(t, rs, 1)
	rs, _, err = ReadRulesFile(filepath.Join(dir, "none.toml"), rules.ScopeUser)
	require.NoError(t, err)
	assert.Empty(t, rs)
}
