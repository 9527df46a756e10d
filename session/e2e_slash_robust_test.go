package session_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model/modeltest"
)

// TestE2E_SlashOddInput sends the prompts an editor's user can type that
// look like slash commands but are odd, through the built daemon: each
// gets an answer (no hang, no crash), the ones that are not commands reach
// the model unchanged, and a huge argument is either handled or refused
// with a clear error; the session keeps working after every one.
func TestE2E_SlashOddInput(t *testing.T) {
	cwd := t.TempDir()
	writeFile(t, filepath.Join(cwd, ".acpd", "commands", "review.md"), "---\ndescription: Review\n---\nReview $ARGUMENTS.\n")
	writeFile(t, filepath.Join(cwd, ".acpd", "commands", "we ird.md"), "odd name")
	writeFile(t, filepath.Join(cwd, ".acpd", "commands", "ünï.md"), "Unicode name.")
	writeFile(t, filepath.Join(cwd, ".qwen", "commands", "torn.toml"), "prompt = '''never closed\n")
	writeFile(t, filepath.Join(cwd, ".claude", "commands", "fm.md"), "---\ndescription: [unclosed\n")
	d := startDaemonIn(t, cwd, t.TempDir(), nil, nil)
	d.model.SetResponder(summariser)
	d.model.SetTokenLimit(131072)
	sid := d.session(t)
	names := commandNames(waitCommands(t, d, sid, 1))
	assert.Contains(t, names, "review")
	assert.Contains(t, names, "ünï")
	for _, n := range []string{"we ird", "torn", "fm"} {
		assert.NotContains(t, names, n)
	}

	huge := strings.Repeat("x", 1<<20)
	passedOn := func(prompt string) {
		t.Helper()
		d.model.Add(modeltest.Response{Text: "ok"})
		resp, err := d.cc.Prompt(ctxFor(t), sid, prompt)
		require.NoError(t, err)
		assert.Equal(t, acp.StopEndTurn, resp.StopReason)
		reqs := d.model.Requests()
		last := reqs[len(reqs)-1].Messages
		assert.Equal(t, prompt, last[len(last)-1].Text(), "passed to the model unchanged")
	}
	passedOn("/")
	passedOn("/ ")
	passedOn("/\t\n")
	passedOn("/no-such-command with args")
	passedOn("/a\u0000b")
	passedOn("/" + strings.Repeat("n", 64<<10))

	served := d.model.Served()
	resp, err := d.cc.Prompt(ctxFor(t), sid, "/help "+huge)
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Equal(t, served, d.model.Served(), "/help asks the model nothing")

	d.model.Add(modeltest.Response{Text: "unicode ok"})
	_, err = d.cc.Prompt(ctxFor(t), sid, "/ünï")
	require.NoError(t, err)
	reqs := d.model.Requests()
	last := reqs[len(reqs)-1].Messages
	assert.Equal(t, "Unicode name.", last[len(last)-1].Text())

	// A file command with a 1 MiB argument: about 260,000 tokens, twice the
	// default window, is refused before any request with a clear error.
	served = d.model.Served()
	_, err = d.cc.Prompt(ctxFor(t), sid, "/review "+huge)
	var e *acp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, acp.CodeInternalError, e.Code)
	assert.Contains(t, e.Message, "context window")
	assert.Equal(t, served, d.model.Served(), "a request known too large is never sent")

	// /compress with a 1 MiB focus: the focus is cut, and the conversation
	// (which still holds the refused prompt) is summarised within the window.
	before := len(d.cc.Updates())
	_, err = d.cc.Prompt(ctxFor(t), sid, "/compress "+huge)
	require.NoError(t, err)
	assert.Contains(t, turnText(d, sid, before), "Context compressed")

	d.model.Add(modeltest.Response{Text: "still here"})
	resp, err = d.cc.Prompt(ctxFor(t), sid, "hello")

	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	checkNoneRefused(t, d.model, 131072)
}
