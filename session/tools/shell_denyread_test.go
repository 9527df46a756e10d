package tools

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

// TestRunShellCommand_DeniedReads: through the session's spawn server, a
// denied file cannot be read and the model is told why; a file made later
// in a folder the rules split is readable by the next command (the server
// built for the old folder is replaced), and the denied one still is not.
func TestRunShellCommand_DeniedReads(t *testing.T) {
	sandboxtest.Require(t)
	w := newWorkspace(t)
	p := &sandbox.Policy{Mode: sandbox.ModeRequired, Helper: mustExe(t), TempRoot: t.TempDir(),
		DenyRead: []string{w.sentinel}}
	w.env.Sandbox = p.NewSession(w.env.Roots)
	t.Cleanup(func() { w.env.Sandbox.Close() })

	_, res := run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "cat " + w.sentinel})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "Permission denied")
	assert.NotContains(t, res.LLMContent, sentinelText)
	assert.Contains(t, res.LLMContent, "except the user's credentials and acpd's own folders")
	// (Whether the next command gets the same server depends on /tmp,
	// which the rules split on the way to the test's folders and which
	// other processes change.)
	first := w.env.Sandbox.ServerPid()
	require.NotZero(t, first, "the spawn server ran it")

	later := filepath.Join(w.outside, "later.txt")
	require.NoError(t, os.WriteFile(later, []byte("made-later\n"), 0o644))
	_, res = run(t, t.Context(), w.env, NameRunShellCommand, map[string]any{"command": "cat " + later + "; cat " + w.sentinel})
	require.NoError(t, res.Err)
	assert.Contains(t, res.LLMContent, "made-later")
	assert.NotContains(t, res.LLMContent, sentinelText)
	assert.NotEqual(t, first, w.env.Sandbox.ServerPid(), "a new server for the new folder state")
}
