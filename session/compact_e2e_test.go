package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/contextmgr"
	"github.com/acpd/acpd/session/model/modeltest"
)

// sourceFile is a distinct ~24 KB Go-like source file.
func sourceFile(i int) string {
	var b strings.Builder
	for j := 0; b.Len() < 24<<10; j++ {
		fmt.Fprintf(&b, "func file%03dStep%04d(x int) int { return x*%d + %d } // marker-%03d-%04d\n", i, j, i+j, j*7, i, j)
	}
	return b.String()
}

// isSummaryRequest tells a compaction's summary request from a turn's.
func isSummaryRequest(r modeltest.Request) bool {
	return len(r.Messages) > 0 && r.Messages[0].Role == "system" &&
		strings.HasPrefix(r.Messages[0].Text(), contextmgr.SummaryPrompt[:80])
}

// summariser answers summary requests with a state snapshot.
func summariser(r modeltest.Request) (modeltest.Response, bool) {
	if !isSummaryRequest(r) {
		return modeltest.Response{}, false
	}
	return modeltest.Response{Text: "<analysis>reading the conversation</analysis>\n<state_snapshot>\n" +
		"<primary_request_and_intent>The user asks for a summary of one source file per prompt.</primary_request_and_intent>\n" +
		"<files_and_code_sections>Every file read so far was summarised; each holds generated step functions.</files_and_code_sections>\n" +
		"<pending_tasks>none</pending_tasks>\n<current_work>summarising files</current_work>\n<next_step>answer the next prompt</next_step>\n" +
		"</state_snapshot>"}, true
}

// The scenario: an editor session against a 48,000-token model,
// each prompt reading a different 24 KB file and summarising it. Without
// compaction the 6th prompt overflows. With it, 60 prompts end end_turn, no
// request crosses the model's limit, the last request still holds the last
// prompt and its file, and the session loads in a new process and goes on.
func TestE2E_LongSessionStaysInsideTheWindow(t *testing.T) {
	const window, prompts = 48000, 60
	dataDir := t.TempDir()
	d := startDaemon(t, nil, nil, "--context-window", fmt.Sprint(window), "--data-dir", dataDir)
	d.model.SetTokenLimit(window)
	d.model.SetResponder(summariser)
	files := make([]string, prompts+1)
	for i := range files {
		files[i] = filepath.Join(d.cwd, fmt.Sprintf("src_%03d.go", i))
		require.NoError(t, os.WriteFile(files[i], []byte(sourceFile(i)), 0o644))
		d.model.Add(modeltest.Response{ToolCalls: []modeltest.ToolCall{readCall(files[i])}},
			modeltest.Response{Text: fmt.Sprintf("File %d defines generated step functions; nothing unusual.", i)})
	}
	sid := d.session(t)
	for i := range prompts {
		resp, err := d.cc.Prompt(t.Context(), sid, fmt.Sprintf("Read src_%03d.go and summarise it.", i))
		require.NoError(t, err, "prompt %d", i)
		require.Equal(t, acp.StopEndTurn, resp.StopReason, "prompt %d", i)
	}

	reqs := d.model.Requests()
	summaries := 0
	var last modeltest.Request
	for i, r := range reqs {
		assert.False(t, r.Refused, "request %d was refused as too long (%d tokens)", i, r.Tokens)
		assert.LessOrEqual(t, r.Tokens, window, "request %d", i)
		if isSummaryRequest(r) {
			summaries++
		} else {
			last = r
		}
	}
	maxTok := 0
	for _, r := range reqs {
		maxTok = max(maxTok, r.Tokens)
	}
	t.Logf("%d requests, %d summaries, largest %d tokens", len(reqs), summaries, maxTok)
	assert.Positive(t, summaries, "the history was summarised at least once")
	var lastPrompt, lastFile bool
	for _, m := range last.Messages {
		lastPrompt = lastPrompt || (m.Role == "user" && strings.Contains(m.Text(), fmt.Sprintf("Read src_%03d.go", prompts-1)))
		lastFile = lastFile || (m.Role == "tool" && strings.Contains(m.Text(), fmt.Sprintf("marker-%03d-0300", prompts-1)))
	}
	assert.True(t, lastPrompt, "the last request holds the last prompt")
	assert.True(t, lastFile, "the last request holds the last file")

	// The editor saw the compactions as think tool calls, and usage.
	var compactions, done int
	for _, n := range d.cc.Updates() {
		if tc := n.Update.ToolCall; tc != nil && strings.HasPrefix(tc.Title, "Compacting conversation") {
			compactions++
			assert.Equal(t, acp.KindThink, tc.Kind)
		}
		if u := n.Update.ToolCallUpdate; u != nil && u.Title != nil && strings.Contains(*u.Title, " → ") && u.Status == acp.StatusCompleted {
			done++
		}
	}
	assert.Positive(t, compactions)
	assert.Equal(t, compactions, done, "every compaction completed")

	// A new process loads the session and continues inside the window.
	require.NoError(t, d.stdin.Close())
	require.NoError(t, d.cmd.Wait())
	d.waited = true
	d2 := startDaemon(t, nil, nil, "--context-window", fmt.Sprint(window), "--data-dir", dataDir)
	d2.model.SetTokenLimit(window)
	d2.model.SetResponder(summariser)
	d2.model.Add(modeltest.Response{ToolCalls: []modeltest.ToolCall{readCall(files[prompts])}},
		modeltest.Response{Text: "The last file is like the others."})
	_, err := d2.cc.Initialize(t.Context())
	require.NoError(t, err)
	var lr acp.LoadSessionResponse
	require.NoError(t, d2.cc.Call(t.Context(), acp.MethodSessionLoad,
		acp.LoadSessionRequest{SessionID: sid, Cwd: d.cwd, MCPServers: []acp.MCPServer{}}, &lr))
	// The replay shows the whole conversation: every prompt.
	var replayed int
	for _, n := range d2.cc.Updates() {
		if n.Update.Kind == acp.UpdateUserMessageChunk {
			replayed++
		}
	}
	assert.Equal(t, prompts, replayed)
	resp, err := d2.cc.Prompt(t.Context(), sid, fmt.Sprintf("Read src_%03d.go and summarise it.", prompts))
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs2 := d2.model.Requests()
	require.NotEmpty(t, reqs2)
	for i, r := range reqs2 {
		assert.False(t, r.Refused, "request %d after load was refused (%d tokens)", i, r.Tokens)
	}
	first := reqs2[0]
	if isSummaryRequest(first) && len(reqs2) > 1 {
		first = reqs2[1]
	}
	assert.Less(t, len(first.Messages), 4*prompts, "the reloaded history is the compacted one")
}
