package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A headless turn that rewrites a file and creates one through a shell
// command; acpd checkpoints lists the session and shows the turn's diff;
// acpd run --session ID --rewind 1 puts the workspace back; --prune with a
// tiny bound removes the session's checkpoints.
func TestCheckpointsCmd_ListShowRewindPrune(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"name":"write_file","arguments":{"file_path":"%s/x.txt","content":"HELLO\n"}},{"name":"run_shell_command","arguments":{"command":"echo made > made.txt"}}]}
{"text":"ok"}`)
	o := e.run(t, "", e.scripted(script, "--yolo", "--output-format", "json", "change things")...)
	require.Equal(t, 0, o.code, o.stderr)
	var r jsonResult
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(o.stdout)), &r))
	sid := r.SessionID
	require.NotEmpty(t, sid)

	o = e.run(t, "", "checkpoints")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, sid)
	o = e.run(t, "", "checkpoints", "--session", sid, "--show", "1")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "1. ")
	assert.Contains(t, o.stdout, filepath.Join(e.ws, "x.txt")+"  +1 −1")
	assert.Contains(t, o.stdout, filepath.Join(e.ws, "made.txt")+"  +1 −0 (created)")
	assert.Contains(t, o.stdout, "-hello\n+HELLO\n")

	o = e.run(t, "", "checkpoints", "--show", "1")
	assert.Equal(t, exitUsage, o.code)
	o = e.run(t, "", e.scripted(script, "--session", sid, "--rewind", "1", "more")...)
	assert.Equal(t, exitUsage, o.code, "--rewind takes no prompt")
	assert.Contains(t, o.stderr, "--rewind takes no prompt")

	o = e.run(t, "", e.scripted(script, "--session", sid, "--rewind", "1")...)
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "Restored the workspace to before turn 1")
	b, err := os.ReadFile(filepath.Join(e.ws, "x.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(b))
	_, err = os.Stat(filepath.Join(e.ws, "made.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	e.env = append(e.env, "ACPD_CHECKPOINT_MAX_BYTES=1")
	o = e.run(t, "", "checkpoints", "--prune")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "Removed the checkpoints of 1 session(s)")
	o = e.run(t, "", "checkpoints")
	assert.NotContains(t, o.stdout, sid)
}

// A turn that writes a file whose name carries a carriage return, ESC [2K
// and a bidi override, and whose text carries an escape sequence: acpd
// checkpoints shows the name, the prompt and the diff with those
// characters escaped, so a terminal cannot be made to show another file.
func TestCheckpointsCmd_ControlCharactersShownEscaped(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"name":"write_file","arguments":{"file_path":"%s/a\r\u001b[2Kb\u202etxt.md","content":"x \u001b]0;title\u0007\n"}}]}
{"text":"ok"}`)
	o := e.run(t, "", e.scripted(script, "--yolo", "--output-format", "json", "write it \u001b[2K")...)
	require.Equal(t, 0, o.code, o.stderr)
	var r jsonResult
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(o.stdout)), &r))
	require.NotEmpty(t, r.SessionID)

	o = e.run(t, "", "checkpoints", "--session", r.SessionID, "--show", "1")
	require.Equal(t, 0, o.code, o.stderr)
	assert.False(t, strings.ContainsAny(o.stdout, "\r\x1b\u202e\a"), "shown raw: %q", o.stdout)
	assert.Contains(t, o.stdout, `write it \x1b[2K`)
	assert.Contains(t, o.stdout, filepath.Join(e.ws, `a\r\x1b[2Kb\u202etxt.md`)+"  +1 −0 (created)")
	assert.Contains(t, o.stdout, `+x \x1b]0;title\x07`)
}
