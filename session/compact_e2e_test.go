package session_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/contextmgr/contextmgrtest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// sourceFile is a distinct ~24 KB Go-like source file.
func sourceFile(i int) string { return contextmgrtest.SourceFile(i) }

// isSummaryRequest tells a compaction's summary request from a turn's.
func isSummaryRequest(r modeltest.Request) bool { return contextmgrtest.IsSummaryRequest(r) }

// summariser answers summary requests with a state snapshot.
func summariser(r modeltest.Request) (modeltest.Response, bool) { return contextmgrtest.Summariser(r) }

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
	d.model.SetPrefixCache(true)
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
	// The system prompt and the tools are the same bytes in every request
	// of the session, summaries re-using the conversation included: the
	// provider's cache holds them ahead of everything else.
	head := func(r modeltest.Request) (system, tools []byte) {
		var raw struct {
			Messages []json.RawMessage `json:"messages"`
			Tools    json.RawMessage   `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &raw))
		return raw.Messages[0], raw.Tools
	}
	sys0, tools0 := head(reqs[0])
	for i, r := range reqs {
		if isSummaryRequest(r) && !contextmgrtest.IsInline(r) {
			continue
		}
		sys, tools := head(r)
		assert.Equal(t, string(sys0), string(sys), "request %d: system message bytes", i)
		assert.Equal(t, string(tools0), string(tools), "request %d: tool bytes", i)
	}
	b := contextmgrtest.BillOf(reqs)
	if os.Getenv("ACPD_BILL_DETAIL") != "" {
		for i, r := range reqs {
			t.Logf("req %3d summary=%v msgs=%3d tokens=%6d cached=%6d uncached=%6d", i, isSummaryRequest(r), len(r.Messages), r.Tokens, r.Cached, r.Tokens-r.Cached)
		}
	}
	t.Logf("%d requests, %d summaries, largest %d tokens; %d prompt tokens sent, %.1f%% from the prefix cache; bill %d full-price-equivalent tokens",
		len(reqs), summaries, maxTok, b.Sent, 100*b.CachedShare(), b.Bill)
	// What a provider that caches prefixes bills, in full-price-equivalent
	// tokens (cached input at a tenth): 551,020 before compaction weighed it.
	assert.LessOrEqual(t, b.Bill, 500_000, "the session's bill")
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
	replayedIDs := map[string]bool{}
	for _, n := range d2.cc.Updates() {
		if tc := n.Update.ToolCall; tc != nil && strings.HasPrefix(tc.Title, "Compacting conversation (") {
			assert.Equal(t, acp.StatusCompleted, tc.Status, "a replayed compaction is finished")
			replayedIDs[tc.ToolCallID] = true
		}
	}
	assert.Len(t, replayedIDs, compactions, "the replay shows every compaction")
	seen := len(d2.cc.Updates())
	resp, err := d2.cc.Prompt(t.Context(), sid, fmt.Sprintf("Read src_%03d.go and summarise it.", prompts))
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	for _, n := range d2.cc.Updates()[seen:] {
		if tc := n.Update.ToolCall; tc != nil {
			assert.False(t, replayedIDs[tc.ToolCallID], "tool call id %s reused after the reload", tc.ToolCallID)
		}
	}
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

// startSmall starts the built daemon against a model whose limit is limit
// tokens (the scripted server refuses larger requests with OpenAI's 400),
// configured with window, and summaries answered by the summariser.
func startSmall(t *testing.T, window, limit int, flags ...string) *daemon {
	t.Helper()
	d := startDaemon(t, nil, nil, append([]string{"--context-window", fmt.Sprint(window)}, flags...)...)
	d.model.SetTokenLimit(limit)
	d.model.SetResponder(summariser)
	return d
}

// writeFiles writes n distinct files of size bytes into dir.
func writeFiles(t *testing.T, dir string, n, size int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for j := 0; b.Len() < size; j++ {
			fmt.Fprintf(&b, "entry %d of file %d: value %d\n", j, i, i*j)
		}
		out[i] = filepath.Join(dir, fmt.Sprintf("data_%03d.txt", i))
		require.NoError(t, os.WriteFile(out[i], []byte(b.String()), 0o644))
	}
	return out
}

func completedCalls(d *daemon) (n int) {
	for _, u := range d.cc.Updates() {
		if tu := u.Update.ToolCallUpdate; tu != nil && tu.Status == acp.StatusCompleted && !strings.HasPrefix(tu.ToolCallID, "compact") {
			n++
		}
	}
	return n
}

func checkNoneRefused(t *testing.T, s *modeltest.Server, limit int) {
	t.Helper()
	for i, r := range s.Requests() {
		assert.False(t, r.Refused, "request %d was refused (%d tokens)", i, r.Tokens)
		assert.LessOrEqual(t, r.Tokens, limit, "request %d", i)
	}
}

// One productive turn of 200 calls whose results add up to about 4× the
// window compacts mid-turn, again and again, and ends end_turn: compaction
// keeps the turn going and never touches its loop state.
func TestE2E_LongTurnOverflowsMidTurn(t *testing.T) {
	const window, calls = 48000, 200
	d := startSmall(t, window, window)
	files := writeFiles(t, d.cwd, calls, 4<<10)
	for _, f := range files {
		d.model.Add(modeltest.Response{ToolCalls: []modeltest.ToolCall{readCall(f)}})
	}
	d.model.Add(modeltest.Response{Text: "All files read."})
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "Read every data file.")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Equal(t, calls, completedCalls(d))
	checkNoneRefused(t, d.model, window)
	total := 0
	var compactions int
	for _, r := range d.model.Requests() {
		if isSummaryRequest(r) {
			compactions++
			continue
		}
		if m := r.Messages[len(r.Messages)-1]; m.Role == "tool" {
			total += modeltest.CountTokens(modeltest.Request{Messages: []modeltest.Message{m}})
		}
	}
	assert.Greater(t, total, 4*window, "the results add up to more than 4× the window")
	assert.Positive(t, compactions, "the turn was summarised")
	last := d.model.Requests()[len(d.model.Requests())-1]
	assert.Equal(t, "user", last.Messages[1].Role)
	var prompt bool
	for _, m := range last.Messages {
		prompt = prompt || (m.Role == "user" && m.Text() == "Read every data file.")
	}
	assert.True(t, prompt, "the current prompt is kept")
}

// A stuck turn (the same call again and again) stops at exactly the same
// call with and without compaction.
func TestE2E_StuckTurnStopsAtTheSameCallWithCompaction(t *testing.T) {
	run := func(window int) (int, error) {
		d := startSmall(t, window, window)
		f := writeFiles(t, d.cwd, 1, 6<<10)[0]
		for i := range 150 {
			c := readCall(f)
			c.ID = fmt.Sprint("call_", i)
			d.model.Add(modeltest.Response{ToolCalls: []modeltest.ToolCall{c}})
		}
		sid := d.session(t)
		_, err := d.cc.Prompt(t.Context(), sid, "Read the file.")
		compacted := false
		for _, u := range d.cc.Updates() {
			compacted = compacted || (u.Update.ToolCall != nil && strings.HasPrefix(u.Update.ToolCall.Title, "Compacting"))
		}
		assert.Equal(t, window < 100_000, compacted, "window %d", window)
		return completedCalls(d), err
	}
	without, err1 := run(1_000_000)
	with, err2 := run(48_000)
	var e1, e2 *acp.Error
	require.ErrorAs(t, err1, &e1)
	require.ErrorAs(t, err2, &e2)
	assert.Equal(t, e1.Data, e2.Data)
	assert.Equal(t, "loop_detected", e2.Data.(map[string]any)["errorKind"])
	t.Logf("stopped after %d calls: %v", with, err2)
	assert.Equal(t, without, with, "the turn stops at the same call")
	assert.Positive(t, with)
}

// bigPrompt is a prompt of about n bytes of text.
func bigPrompt(i, n int) string {
	return fmt.Sprintf("Prompt %d. Remember this:\n%s", i, strings.Repeat(fmt.Sprintf("fact %d; ", i), n/9))
}

// A provider that refuses a request as too long (OpenAI's 400) although
// the configured window is larger: acpd learns the window, compacts and
// retries once; the prompt ends end_turn. A prompt that alone is larger
// than the model's window fails with errorKind context_overflow, and the
// session keeps working.
func TestE2E_ProviderOverflowCompactsAndRetries(t *testing.T) {
	const limit = 20000
	d := startSmall(t, 1_000_000, limit)
	for i := range 4 {
		d.model.Add(modeltest.Response{Text: fmt.Sprintf("noted %d", i)})
	}
	sid := d.session(t)
	for i := range 4 {
		resp, err := d.cc.Prompt(t.Context(), sid, bigPrompt(i, 24<<10))
		require.NoError(t, err, "prompt %d", i)
		assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	}
	refused := 0
	for _, r := range d.model.Requests() {
		if r.Refused {
			refused++
		}
	}
	assert.Equal(t, 1, refused, "one refusal; afterwards the learned window keeps requests inside")
	var trigger bool
	for _, u := range d.cc.Updates() {
		if tc := u.Update.ToolCall; tc != nil && strings.HasPrefix(tc.Title, "Compacting") {
			trigger = trigger || fmt.Sprint(tc.Meta) == "map[acpd:map[compaction:overflow]]"
		}
	}
	assert.True(t, trigger, "the overflow forced a compaction")

	_, err := d.cc.Prompt(t.Context(), sid, bigPrompt(9, 100<<10))
	for _, r := range d.model.Requests() {
		if !isSummaryRequest(r) {
			assert.NotContains(t, r.Messages[len(r.Messages)-1].Text(), "Prompt 9.", "a request known to be too large was sent")
		}
	}
	var ae *acp.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, acp.CodeInternalError, ae.Code)
	assert.Equal(t, "context_overflow", ae.Data.(map[string]any)["errorKind"])
	assert.Contains(t, ae.Message, "context window")

	d.model.Add(modeltest.Response{Text: "still here"})
	resp, err := d.cc.Prompt(t.Context(), sid, "short one")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
}

// twoThenLarge sends two prompts that leave room for a third as large
// (no compaction, not even one ahead of need); the caller's third, of 32 KB,
// then needs a summary.
func twoThenLarge(t *testing.T, d *daemon, sid string) {
	t.Helper()
	for i := range 2 {
		d.model.Add(modeltest.Response{Text: fmt.Sprint("noted ", i)})
		_, err := d.cc.Prompt(t.Context(), sid, bigPrompt(i, 12<<10))
		require.NoError(t, err)
	}
}

// session/cancel during a summary request cancels it: the prompt answers
// cancelled, the compaction's tool call ends failed, nothing is recorded
// and the history is as before; the next prompt compacts normally.
func TestE2E_CancelDuringSummary(t *testing.T) {
	const window = 48000
	dataDir := t.TempDir()
	d := startSmall(t, window, window, "--data-dir", dataDir)
	var hang sync.Once
	hung := make(chan struct{})
	d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		if !isSummaryRequest(r) {
			return modeltest.Response{}, false
		}
		first := false
		hang.Do(func() { first = true; close(hung) })
		if first {
			return modeltest.Response{Hang: true}, true
		}
		return summariser(r)
	})
	sid := d.session(t)
	twoThenLarge(t, d, sid)
	done := make(chan *acp.PromptResponse, 1)
	go func() {
		resp, err := d.cc.Prompt(t.Context(), sid, bigPrompt(2, 32<<10))
		assert.NoError(t, err)
		done <- resp
	}()
	select {
	case <-hung:
	case <-time.After(20 * time.Second):
		t.Fatal("no summary request")
	}
	require.NoError(t, d.cc.Cancel(sid))
	select {
	case resp := <-done:
		require.NotNil(t, resp)
		assert.Equal(t, acp.StopCancelled, resp.StopReason)
	case <-time.After(20 * time.Second):
		t.Fatal("the prompt did not answer after the cancel")
	}
	var failed bool
	for _, u := range d.cc.Updates() {
		if tu := u.Update.ToolCallUpdate; tu != nil && strings.HasPrefix(tu.ToolCallID, "compact") {
			failed = tu.Status == acp.StatusFailed
		}
	}
	assert.True(t, failed, "the compaction's tool call ended failed")
	transcript, err := os.ReadFile(filepath.Join(dataDir, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	assert.NotContains(t, string(transcript), `"kind":"compaction"`)

	d.model.Add(modeltest.Response{Text: "noted 3"})
	resp, err := d.cc.Prompt(t.Context(), sid, "and now?")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	var summaries []modeltest.Request
	for _, r := range d.model.Requests() {
		if isSummaryRequest(r) {
			summaries = append(summaries, r)
		}
	}
	require.Len(t, summaries, 2)
	assert.Contains(t, contextmgrtest.Input(summaries[1]), "Prompt 0.", "the history was whole after the cancel")
	transcript, err = os.ReadFile(filepath.Join(dataDir, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(transcript), `"kind":"compaction"`)
	checkNoneRefused(t, d.model, window)
}

// Summaries that come back empty fall back to dropping the oldest turns,
// with a note to the model; after three failures in a row automatic
// summaries pause, and every prompt still ends end_turn inside the window.
func TestE2E_FailedSummariesFallBackToDropping(t *testing.T) {
	const window = 48000
	d := startSmall(t, window, window)
	d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		if isSummaryRequest(r) {
			return modeltest.Response{Text: "<analysis>nothing useful</analysis>"}, true
		}
		return modeltest.Response{}, false
	})
	sid := d.session(t)
	for i := range 10 {
		d.model.Add(modeltest.Response{Text: fmt.Sprint("noted ", i)})
		resp, err := d.cc.Prompt(t.Context(), sid, bigPrompt(i, 24<<10))
		require.NoError(t, err, "prompt %d", i)
		assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	}
	checkNoneRefused(t, d.model, window)
	var summaries int
	var note bool
	for _, r := range d.model.Requests() {
		if isSummaryRequest(r) {
			summaries++
			continue
		}
		for _, m := range r.Messages {
			note = note || (m.Role == "user" && strings.Contains(m.Text(), "dropped to keep it inside the model's context window"))
		}
	}
	assert.Equal(t, 3, summaries, "automatic summaries pause after three failures")
	assert.True(t, note, "the model is told that turns were dropped")
	details := compactionDetails(d)
	require.NotEmpty(t, details)
	assert.Contains(t, details[0], "The summary failed (the summary was empty).")
	assert.Contains(t, details[0], "Dropped the oldest part of the conversation.")
}

// compactionDetails are the texts the completed compaction tool calls
// showed the editor, in order.
func compactionDetails(d *daemon) []string {
	var details []string
	for _, u := range d.cc.Updates() {
		if tu := u.Update.ToolCallUpdate; tu != nil && strings.HasPrefix(tu.ToolCallID, "compact") && tu.Status == acp.StatusCompleted {
			for _, c := range tu.Content {
				details = append(details, c.Content.Text)
			}
		}
	}
	return details
}

// A daemon killed during a summary request leaves the session loadable
// with the history it had before: nothing of the compaction was recorded.
func TestE2E_CrashDuringSummaryKeepsTheHistory(t *testing.T) {
	const window = 48000
	dataDir := t.TempDir()
	d := startSmall(t, window, window, "--data-dir", dataDir)
	hung := make(chan struct{})
	var once sync.Once
	d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		if !isSummaryRequest(r) {
			return modeltest.Response{}, false
		}
		once.Do(func() { close(hung) })
		return modeltest.Response{Hang: true}, true
	})
	sid := d.session(t)
	twoThenLarge(t, d, sid)
	go func() { _, _ = d.cc.Prompt(t.Context(), sid, bigPrompt(2, 32<<10)) }()
	select {
	case <-hung:
	case <-time.After(20 * time.Second):
		t.Fatal("no summary request")
	}
	require.NoError(t, d.cmd.Process.Kill())
	_ = d.cmd.Wait()
	d.waited = true

	d2 := startSmall(t, window, window, "--data-dir", dataDir)
	_, err := d2.cc.Initialize(t.Context())
	require.NoError(t, err)
	var lr acp.LoadSessionResponse
	require.NoError(t, d2.cc.Call(t.Context(), acp.MethodSessionLoad,
		acp.LoadSessionRequest{SessionID: sid, Cwd: d.cwd, MCPServers: []acp.MCPServer{}}, &lr))
	d2.model.Add(modeltest.Response{Text: "back"})
	resp, err := d2.cc.Prompt(t.Context(), sid, "continue")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs := d2.model.Requests()
	require.NotEmpty(t, reqs)
	require.True(t, isSummaryRequest(reqs[0]), "the reloaded history is compacted before it is sent")
	in := contextmgrtest.Input(reqs[0])
	for i := range 3 {
		assert.Contains(t, in, fmt.Sprintf("Prompt %d.", i), "the whole history survived the crash")
	}
	checkNoneRefused(t, d2.model, window)
}

// Each model of the selector has its own window: model.contextWindow for
// model.name, model.contextWindows for the others, the known-model table
// otherwise; usage_update reports the current model's.
func TestE2E_EachModelHasItsWindow(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "acpd.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(`[model]
models = ["small-model", "claude-sonnet-4-20250514"]
contextWindows = { "small-model" = 40000 }
`), 0o644))
	d := startDaemon(t, nil, nil, "--config", cfg, "--context-window", "64000")
	d.model.SetReportUsage(true)
	sid := d.session(t)
	sizes := func() (out []uint64) {
		for _, u := range d.cc.Updates() {
			if u.Update.Kind == acp.UpdateUsage {
				out = append(out, u.Update.Size)
			}
		}
		return out
	}
	for _, mdl := range []string{"", "small-model", "claude-sonnet-4-20250514"} {
		if mdl != "" {
			var r acp.SetSessionConfigOptionResponse
			require.NoError(t, d.cc.Call(t.Context(), acp.MethodSessionSetConfigOption,
				map[string]any{"sessionId": sid, "configId": "model", "value": mdl}, &r))
		}
		d.model.Add(modeltest.Response{Text: "ok"})
		_, err := d.cc.Prompt(t.Context(), sid, "hi")
		require.NoError(t, err)
	}
	assert.Equal(t, []uint64{64000, 40000, 200000}, sizes())
}

// model.compactionModel answers the summary requests; the session's model
// answers the prompts. The summary request and its answer's room fit the
// summariser's own window; one too small to hold a useful input leaves
// the summary to the session's model.
func TestE2E_CompactionModel(t *testing.T) {
	for _, tc := range []struct {
		window     int
		summariser string
	}{{48000, "cheap-model"}, {5000, "cheap-model"}, {3000, "scripted"}} {
		t.Run(fmt.Sprint(tc.window), func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "acpd.toml")
			require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil,
				"[model]\ncompactionModel = \"cheap-model\"\ncontextWindows = { \"cheap-model\" = %d }\n", tc.window), 0o644))
			d := startSmall(t, 48000, 48000, "--config", cfg)
			sid := d.session(t)
			for i := range 5 {
				d.model.Add(modeltest.Response{Text: fmt.Sprint("noted ", i)})
				_, err := d.cc.Prompt(t.Context(), sid, bigPrompt(i, 24<<10))
				require.NoError(t, err)
			}
			var summaries int
			for _, r := range d.model.Requests() {
				if !isSummaryRequest(r) {
					assert.Equal(t, "scripted", r.Model)
					continue
				}
				summaries++
				assert.Equal(t, tc.summariser, r.Model)
				if r.Model == "cheap-model" {
					assert.LessOrEqual(t, r.Tokens+r.MaxTokens, tc.window, "the summary request and its answer fit the summariser's window")
				}
			}
			assert.Positive(t, summaries)
			checkNoneRefused(t, d.model, 48000)
		})
	}
}
