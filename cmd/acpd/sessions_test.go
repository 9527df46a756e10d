package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionIDs_AcceptedWhereShown walks a new user's path through the
// built binary: on a fresh install acpd stats and acpd sessions say nothing
// is recorded yet (exit 0); after a turn, the short id acpd stats prints
// and the full id acpd sessions lists are both taken by acpd stats
// --session and acpd run --session.
func TestSessionIDs_AcceptedWhereShown(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	o := e.run(t, "", "stats")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "No turns recorded yet")
	o = e.run(t, "", "sessions")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "No sessions recorded yet")
	// A data folder the user names must exist: a typo is not "empty".
	o = e.run(t, "", "stats", "--data-dir", filepath.Join(e.dir, "typo"))
	assert.Equal(t, 1, o.code, o.stdout)
	assert.Contains(t, o.stderr, "session.dataDir")

	script := e.script(t, `{"text":"first answer"}`+"\n"+`{"text":"second answer"}`+"\n")
	o = e.run(t, "", append(e.scripted(script, "--output-format", "json"), "hello")...)
	require.Equal(t, 0, o.code, o.stderr)
	full := decodeResult(t, strings.TrimSpace(o.stdout)).SessionID
	require.Len(t, full, 26)
	short := full[:12]

	o = e.run(t, "", "stats")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, " "+short+" ", "the table shows the short id")
	o = e.run(t, "", "sessions")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, full, "acpd sessions lists the full id")
	assert.Contains(t, o.stdout, e.ws)
	o = e.run(t, "", "sessions", "--output-format", "json")
	require.Equal(t, 0, o.code, o.stderr)
	var listed struct {
		Sessions []struct{ ID, Cwd string }
	}
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &listed))
	require.Len(t, listed.Sessions, 1)
	assert.Equal(t, full, listed.Sessions[0].ID)

	for _, id := range []string{short, full} {
		o = e.run(t, "", "stats", "--session", id, "--output-format", "json")
		require.Equal(t, 0, o.code, "stats --session %s: %s", id, o.stderr)
		var rep struct {
			Turns []statsTurn `json:"turns"`
		}
		require.NoError(t, json.Unmarshal([]byte(o.stdout), &rep))
		require.Len(t, rep.Turns, 1)
		assert.Equal(t, full, rep.Turns[0].Session)
	}
	o = e.run(t, "", append(e.scripted(script, "--output-format", "json", "--session", short), "again")...)
	require.Equal(t, 0, o.code, "run --session %s: %s", short, o.stderr)
	assert.Equal(t, full, decodeResult(t, strings.TrimSpace(o.stdout)).SessionID, "the prefix continued the session")

	o = e.run(t, "", "stats", "--session", "ZZZZ")
	assert.Equal(t, exitUsage, o.code)
	assert.Contains(t, o.stderr, `no session "ZZZZ"`)
}
