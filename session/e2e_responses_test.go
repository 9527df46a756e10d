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
	"github.com/acpd/acpd/session/model/responses/responsestest"
)

// responsesConfig is a config file with one OpenAI provider speaking the
// Responses API at srv, whose model reasons at "medium" by default.
func responsesConfig(t *testing.T, srv *responsestest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acpd.toml")
	body := fmt.Sprintf(`[model]
name = "gpt-5-codex"

[modelProviders.openai]
wireApi = "responses"
baseUrl = %q
apiKeyEnv = "OPENAI_API_KEY"
models = [{ id = "gpt-5-codex", contextWindow = 400000, thinking = { mode = "effort", default = "medium" } }]
`, srv.BaseURL())
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	return path
}

func responsesRead(path string) responsestest.Call {
	b, _ := json.Marshal(map[string]string{"file_path": path})
	return responsestest.Call{Name: "read_file", Arguments: string(b)}
}

// reasoningItems are the ids of the reasoning items in r's input, in order.
func reasoningItems(r responsestest.Request) []string {
	var out []string
	for _, it := range r.Input {
		if it.Type == "reasoning" {
			out = append(out, it.ID)
		}
	}
	return out
}

// A three-step tool turn with reasoning through the built binary against
// the Responses test server, which refuses a call sent back without its
// reasoning item or with an altered ciphertext: it ends end_turn, the
// reasoning summaries reach the editor as agent_thought_chunk, every
// request is stateless (store false, the ciphertext included) under one
// prompt_cache_key, and after session/load in a new process the next turn
// sends the stored reasoning items again and works.
func TestE2E_ResponsesReasoningToolTurn(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	for _, f := range []string{"a.go", "b.go", "c.go"} {
		require.NoError(t, os.WriteFile(filepath.Join(cwd, f), []byte("package x // "+f+"\n"), 0o644))
	}
	srv := responsestest.NewServer(t,
		responsestest.Response{Reasoning: "Start with a.go.", Calls: []responsestest.Call{responsesRead(filepath.Join(cwd, "a.go"))}},
		responsestest.Response{Reasoning: "Then b.go.", Calls: []responsestest.Call{responsesRead(filepath.Join(cwd, "b.go"))}},
		responsestest.Response{Reasoning: "Both are tiny.", Text: "Both files declare package x."},
	)
	cfg := responsesConfig(t, srv)
	env := []string{"OPENAI_API_KEY=sk-test"}
	d := launch(t, cwd, t.TempDir(), []string{"--config", cfg}, env, nil, nil)
	dataDir := d.dataDir
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "Read a.go and b.go.")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Equal(t, "Start with a.go.Then b.go.Both are tiny.", thoughts(d, 0))
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	key := reqs[0].PromptCacheKey
	assert.NotEmpty(t, key)
	for i, r := range reqs {
		require.Empty(t, r.Rejected, "request %d", i)
		assert.Equal(t, "Bearer sk-test", r.Header.Get("Authorization"))
		require.NotNil(t, r.Store)
		assert.False(t, *r.Store)
		assert.Equal(t, []string{"reasoning.encrypted_content"}, r.Include)
		assert.JSONEq(t, `{"effort":"medium","summary":"auto"}`, string(r.Reasoning), "request %d", i)
		assert.Equal(t, key, r.PromptCacheKey, "one cache key for the session")
	}
	for i := 1; i < len(reqs); i++ {
		assertStablePrefix(t, reqs[i-1].Body, reqs[i].Body, "input", "instructions", "tools", "prompt_cache_key", "reasoning", "include", "store")
	}
	first := reasoningItems(reqs[2])
	assert.Len(t, first, 2, "both reasoning items went back with their calls")

	d.stop(t)
	srv.Add(
		responsestest.Response{Reasoning: "Now c.go.", Calls: []responsestest.Call{responsesRead(filepath.Join(cwd, "c.go"))}},
		responsestest.Response{Reasoning: "Done.", Text: "c.go too."},
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
		assert.Equal(t, key, r.PromptCacheKey, "the loaded session keeps its cache key")
	}
	assert.Equal(t, first, reasoningItems(reqs[4])[:2], "the first turn's reasoning came back from the transcript")
}

func isResponsesSummary(r responsestest.Request) bool {
	prefix := contextmgr.SummaryPrompt[:80]
	if strings.HasPrefix(r.Instructions, prefix) {
		return true
	}
	for i := len(r.Input) - 1; i >= 0; i-- {
		if it := r.Input[i]; it.Type == "message" {
			return it.Role == "user" && strings.HasPrefix(it.Text(), prefix)
		}
	}
	return false
}

// The Responses API's context_length_exceeded compacts and retries, as the
// chat-completions one does: the prompt ends end_turn.
func TestE2E_ResponsesOverflowCompactsAndRetries(t *testing.T) {
	t.Parallel()
	srv := responsestest.NewServer(t)
	srv.SetTokenLimit(20000)
	srv.SetResponder(func(r responsestest.Request) (responsestest.Response, bool) {
		if !isResponsesSummary(r) {
			return responsestest.Response{}, false
		}
		return responsestest.Response{Text: "<state_snapshot><overall_goal>remember the facts</overall_goal></state_snapshot>"}, true
	})
	for i := range 4 {
		srv.Add(responsestest.Response{Text: fmt.Sprintf("noted %d", i)})
	}
	d := launch(t, t.TempDir(), t.TempDir(), []string{"--config", responsesConfig(t, srv)}, []string{"OPENAI_API_KEY=k"}, nil, nil)
	sid := d.session(t)
	for i := range 4 {
		resp, err := d.cc.Prompt(t.Context(), sid, bigPrompt(i, 24<<10))
		require.NoError(t, err, "prompt %d", i)
		assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	}
	refused := 0
	for _, r := range srv.Requests() {
		if strings.Contains(r.Rejected, "exceeds the context window") {
			refused++
		}
	}
	assert.Equal(t, 1, refused, "one refusal, then compaction kept the requests inside")
	assert.Equal(t, 4, srv.Served())
}
