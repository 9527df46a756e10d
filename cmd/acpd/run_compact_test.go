package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/contextmgr/contextmgrtest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestRunCmd_LongSessionAcrossRuns: a pipeline continues one session over
// many `acpd run --session` steps, each adding a large prompt, against a
// 48,000-token model. Every step ends end_turn, no request crosses the
// limit, each reload restores the compacted history, and text mode reports
// the compactions on stderr.
func TestRunCmd_LongSessionAcrossRuns(t *testing.T) {
	t.Parallel()
	const window, steps = 48000, 12
	srv := modeltest.NewServer(t)
	srv.SetTokenLimit(window)
	srv.SetResponder(contextmgrtest.Summariser)
	e := newRunEnv(t)
	e.env = append(e.env, "OPENAI_API_KEY=test-key")
	args := []string{"run", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "m1", "--cwd", e.ws,
		"--context-window", fmt.Sprint(window)}
	prompt := func(i int) string {
		return fmt.Sprintf("Step %d. Keep these facts: %s", i, strings.Repeat(fmt.Sprintf("fact %d; ", i), 24<<10/9))
	}

	srv.Add(modeltest.Response{Text: "noted 0"})
	o := e.run(t, "", append(args, "--output-format", "json", prompt(0))...)
	require.Equal(t, 0, o.code, o.stderr)
	sid := decodeResult(t, strings.TrimSpace(o.stdout)).SessionID
	require.NotEmpty(t, sid)
	reported := false
	for i := 1; i < steps; i++ {
		srv.Add(modeltest.Response{Text: fmt.Sprint("noted ", i)})
		o = e.run(t, "", append(args, "--session", sid, prompt(i))...)
		require.Equal(t, 0, o.code, "step %d: %s", i, o.stderr)
		assert.Equal(t, fmt.Sprint("noted ", i), strings.TrimSpace(o.stdout))
		if strings.Contains(o.stderr, "[tool] Compacting conversation (") && strings.Contains(o.stderr, " tokens) … completed") {
			reported = true
		}
	}
	assert.True(t, reported, "text mode reports a compaction on stderr")
	reqs := srv.Requests()
	for i, r := range reqs {
		assert.False(t, r.Refused, "request %d refused (%d tokens)", i, r.Tokens)
	}
	last := reqs[len(reqs)-1]
	assert.Contains(t, last.Messages[len(last.Messages)-1].Text(), fmt.Sprintf("Step %d.", steps-1))
	assert.Less(t, len(last.Messages), 2*steps, "the reloaded history is the compacted one")
}
