package session_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/contextmgr"
	"github.com/acpd/acpd/session/model/gemini/geminitest"
)

// geminiConfig is a config file with one Gemini provider at srv whose
// model thinks at "high" by default.
func geminiConfig(t *testing.T, srv *geminitest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acpd.toml")
	body := fmt.Sprintf(`[model]
name = "gemini-3-pro-preview"

[modelProviders.gemini]
baseUrl = %q
models = [{ id = "gemini-3-pro-preview", contextWindow = 1000000, thinking = { mode = "effort", default = "high" } }]
`, srv.URL)
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	return path
}

func geminiRead(path string) geminitest.Call {
	b, _ := json.Marshal(map[string]string{"file_path": path})
	return geminitest.Call{Name: "read_file", Arguments: string(b)}
}

// firstCallSignatures are the thoughtSignatures on the first functionCall
// of each model turn of r.
func firstCallSignatures(r geminitest.Request) []string {
	var out []string
	for _, c := range r.Contents {
		if c.Role != "model" {
			continue
		}
		for _, p := range c.Parts {
			if p.FunctionCall != nil {
				out = append(out, p.Signature)
				break
			}
		}
	}
	return out
}

// A three-step tool turn with thinking through the built binary against
// the Gemini test server, which refuses a missing or altered
// thoughtSignature: it ends end_turn, the thought summaries reach the
// editor as agent_thought_chunk, every call goes back with the signature
// Gemini gave it, and after session/load in a new process the next turn
// sends the stored signatures again and works.
func TestE2E_GeminiThinkingToolTurn(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	for _, f := range []string{"a.go", "b.go", "c.go"} {
		require.NoError(t, os.WriteFile(filepath.Join(cwd, f), []byte("package x // "+f+"\n"), 0o644))
	}
	srv := geminitest.NewServer(t,
		geminitest.Response{Thought: "Start with a.go.", Calls: []geminitest.Call{geminiRead(filepath.Join(cwd, "a.go"))}},
		geminitest.Response{Thought: "Then b.go.", NoIDs: true, Calls: []geminitest.Call{geminiRead(filepath.Join(cwd, "b.go"))}},
		geminitest.Response{Thought: "Both are tiny.", Text: "Both files declare package x."},
	)
	cfg := geminiConfig(t, srv)
	env := []string{"GEMINI_API_KEY=gm-test"}
	d := launch(t, cwd, t.TempDir(), []string{"--config", cfg}, env, nil, nil)
	dataDir := d.dataDir
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "Read a.go and b.go.")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Equal(t, "Start with a.go.Then b.go.Both are tiny.", thoughts(d, 0))
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		require.Empty(t, r.Rejected, "request %d", i)
		assert.Equal(t, "gm-test", r.Header.Get("x-goog-api-key"))
		require.NotNil(t, r.GenerationConfig, "request %d", i)
		assert.JSONEq(t, `{"includeThoughts":true,"thinkingLevel":"high"}`, string(r.GenerationConfig.ThinkingConfig), "request %d", i)
	}
	for i := 1; i < len(reqs); i++ {
		assertStablePrefix(t, reqs[i-1].Body, reqs[i].Body, "contents", "systemInstruction", "tools", "toolConfig", "generationConfig")
	}
	sigs := firstCallSignatures(reqs[2])
	require.Len(t, sigs, 2)
	for _, s := range sigs {
		assert.NotEmpty(t, s)
		assert.NotEqual(t, geminitest.SkipSignature, s, "the signature Gemini gave, not the stand-in")
	}

	// A new process loads the session from its transcript and goes on: the
	// stored signatures go back with the history, accepted.
	d.stop(t)
	srv.Add(
		geminitest.Response{Thought: "Now c.go.", Calls: []geminitest.Call{geminiRead(filepath.Join(cwd, "c.go"))}},
		geminitest.Response{Thought: "Done.", Text: "c.go too."},
	)
	d2 := launch(t, cwd, t.TempDir(), []string{"--config", cfg, "--data-dir", dataDir}, env, nil, nil)
	d2.load(t.Context(), t, sid)
	assert.Contains(t, thoughts(d2, 0), "Start with a.go.", "the replay shows the thinking")
	seen := len(d2.cc.Updates())
	resp, err = d2.cc.Prompt(t.Context(), sid, "And c.go?")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Equal(t, "Now c.go.Done.", thoughts(d2, seen))
	reqs = srv.Requests()
	require.Len(t, reqs, 5)
	for i, r := range reqs[3:] {
		require.Empty(t, r.Rejected, "request %d after the load", i)
	}
	assert.Equal(t, sigs, firstCallSignatures(reqs[4])[:2], "the first turn's signatures came back from the transcript")
}

// isGeminiSummary tells a compaction's summary request.
func isGeminiSummary(r geminitest.Request) bool {
	prefix := contextmgr.SummaryPrompt[:80]
	if si := r.SystemInstruction; si != nil && len(si.Parts) > 0 && si.Parts[0].Text != nil && strings.HasPrefix(*si.Parts[0].Text, prefix) {
		return true
	}
	if n := len(r.Contents); n > 0 {
		for _, p := range r.Contents[n-1].Parts {
			if p.Text != nil && strings.HasPrefix(*p.Text, prefix) {
				return true
			}
		}
	}
	return false
}

// Gemini's own "input token count exceeds" refusal compacts and retries, as
// OpenAI's does: the prompt ends end_turn.
func TestE2E_GeminiOverflowCompactsAndRetries(t *testing.T) {
	t.Parallel()
	srv := geminitest.NewServer(t)
	const limit = 20000
	srv.SetTokenLimit(limit)
	srv.SetResponder(func(r geminitest.Request) (geminitest.Response, bool) {
		if !isGeminiSummary(r) {
			return geminitest.Response{}, false
		}
		return geminitest.Response{Text: "<state_snapshot><overall_goal>remember the facts</overall_goal></state_snapshot>"}, true
	})
	for i := range 4 {
		srv.Add(geminitest.Response{Text: fmt.Sprintf("noted %d", i)})
	}
	d := launch(t, t.TempDir(), t.TempDir(), []string{"--config", geminiConfig(t, srv)}, []string{"GEMINI_API_KEY=k"}, nil, nil)
	sid := d.session(t)
	for i := range 4 {
		resp, err := d.cc.Prompt(t.Context(), sid, bigPrompt(i, 24<<10))
		require.NoError(t, err, "prompt %d", i)
		assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	}
	refused := 0
	for _, r := range srv.Requests() {
		if strings.Contains(r.Rejected, "exceeds the maximum number of tokens allowed") {
			refused++
		}
	}
	assert.Equal(t, 1, refused, "one refusal, then compaction kept the requests inside")
	assert.Equal(t, 4, srv.Served())
}

// assertStablePrefix checks that next repeats prev's request byte for byte
// where a prefix cache reads it: every field in fixed, and each element of
// prev's list (contents, input) at the same place in next's. A provider's
// implicit cache matches the prompt from its start, so one re-encoded
// earlier turn (a reordered key, a changed number) would miss it all.
func assertStablePrefix(t *testing.T, prev, next []byte, list string, fixed ...string) {
	t.Helper()
	var a, b map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(prev, &a))
	require.NoError(t, json.Unmarshal(next, &b))
	for _, f := range fixed {
		assert.Equal(t, string(a[f]), string(b[f]), "field %s changed between requests", f)
	}
	var la, lb []json.RawMessage
	require.NoError(t, json.Unmarshal(a[list], &la))
	require.NoError(t, json.Unmarshal(b[list], &lb))
	require.Greater(t, len(lb), len(la), "the conversation grew")
	for i := range la {
		assert.Equal(t, string(la[i]), string(lb[i]), "%s[%d] re-encoded differently", list, i)
	}
}
