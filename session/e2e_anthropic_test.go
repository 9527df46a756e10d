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
	"github.com/acpd/acpd/session/model/anthropic/anthropictest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// anthropicConfig is a config file with one Anthropic provider at srv,
// whose model thinks at "medium" by default, and a chat-completions
// provider for switching.
func anthropicConfig(t *testing.T, srv *anthropictest.Server, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acpd.toml")
	body := fmt.Sprintf(`[model]
name = "claude-sonnet-4-5"

[modelProviders.anthropic]
baseUrl = %q
models = [{ id = "claude-sonnet-4-5", contextWindow = 200000, thinking = { mode = "budget", default = "medium" } }]
%s`, srv.URL, extra)
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	return path
}

func startAnthropic(t *testing.T, cwd, config string, env ...string) *daemon {
	t.Helper()
	return launch(t, cwd, t.TempDir(), []string{"--config", config}, append([]string{"ANTHROPIC_API_KEY=sk-ant-test"}, env...), nil, nil)
}

func anthropicRead(path string) anthropictest.ToolCall {
	b, _ := json.Marshal(map[string]string{"file_path": path})
	return anthropictest.ToolCall{Name: "read_file", Arguments: string(b)}
}

func thoughts(d *daemon, from int) string {
	var b strings.Builder
	for _, n := range d.cc.Updates()[from:] {
		if n.Update.Kind == acp.UpdateAgentThoughtChunk && n.Update.Content != nil {
			b.WriteString(n.Update.Content.Text)
		}
	}
	return b.String()
}

// A three-step tool turn with thinking, through the built binary against
// the Anthropic test server (which rejects a missing or altered signature,
// a tool loop without its thinking, and unpaired tool results): it ends
// end_turn, the thinking reaches the editor as agent_thought_chunk, every
// signed block goes back as received, and after session/load in a new
// process the next turn sends the stored blocks again and works.
func TestE2E_AnthropicThinkingToolTurn(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	for _, f := range []string{"a.go", "b.go", "c.go"} {
		require.NoError(t, os.WriteFile(filepath.Join(cwd, f), []byte("package x // "+f+"\n"), 0o644))
	}
	srv := anthropictest.NewServer(t,
		anthropictest.Response{Thinking: "Start with a.go.", ToolCalls: []anthropictest.ToolCall{anthropicRead(filepath.Join(cwd, "a.go"))}},
		anthropictest.Response{Thinking: "Then b.go.", Redacted: true, ToolCalls: []anthropictest.ToolCall{anthropicRead(filepath.Join(cwd, "b.go"))}},
		anthropictest.Response{Thinking: "Both are tiny.", Text: "Both files declare package x."},
	)
	srv.SetAPIKey("sk-ant-test")
	cfg := anthropicConfig(t, srv, "")
	d := startAnthropic(t, cwd, cfg)
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
		assert.True(t, r.ThinkingOn(), "request %d", i)
	}
	last := reqs[2].Messages
	require.Len(t, last, 5)
	assert.Equal(t, []string{"thinking", "tool_use"}, blockTypesOf(last[1]))
	assert.Equal(t, []string{"thinking", "redacted_thinking", "tool_use"}, blockTypesOf(last[3]))

	// A new process loads the session from its transcript and goes on:
	// the stored thinking goes back with the history, accepted.
	d.stop(t)
	srv.Add(
		anthropictest.Response{Thinking: "Now c.go.", ToolCalls: []anthropictest.ToolCall{anthropicRead(filepath.Join(cwd, "c.go"))}},
		anthropictest.Response{Thinking: "Done.", Text: "c.go too."},
	)
	d2 := launch(t, cwd, t.TempDir(), []string{"--config", cfg, "--data-dir", dataDir}, []string{"ANTHROPIC_API_KEY=sk-ant-test"}, nil, nil)
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
	after := reqs[4].Messages
	assert.Equal(t, []string{"thinking", "redacted_thinking", "tool_use"}, blockTypesOf(after[3]),
		"the first turn's blocks came back from the transcript")
	assert.Equal(t, []string{"thinking", "tool_use"}, blockTypesOf(after[7]))
}

func blockTypesOf(m anthropictest.Message) []string {
	var out []string
	for _, b := range m.Content {
		out = append(out, b.Type)
	}
	return out
}

// The editor chooses: the model option lists every configured model across
// providers, switching sends the next request to the other provider with
// the history (the Anthropic thinking left out there, and accepted again
// back at Anthropic), and thought_level offers the current model's levels,
// changes what the next request asks for, and is restored by session/load.
func TestE2E_SwitchProviderAndThoughtLevel(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "a.go"), []byte("package a\n"), 0o644))
	srv := anthropictest.NewServer(t,
		anthropictest.Response{Thinking: "Look at a.go.", ToolCalls: []anthropictest.ToolCall{anthropicRead(filepath.Join(cwd, "a.go"))}},
		anthropictest.Response{Thinking: "It is small.", Text: "a.go declares package a."},
	)
	chat := modeltest.NewServer(t, modeltest.Response{Text: "From the other provider: still package a."})
	cfg := anthropicConfig(t, srv, fmt.Sprintf(`
[modelProviders.local]
protocol = "openai"
baseUrl = %q
models = ["local-coder"]
`, chat.BaseURL()))
	d := startAnthropic(t, cwd, cfg)
	ctx := t.Context()
	_, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	var ns acp.NewSessionResponse
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: cwd, MCPServers: []acp.MCPServer{}}, &ns))
	sid := ns.SessionID
	option := func(opts []acp.SessionConfigOption, id string) *acp.SessionConfigOption {
		for i := range opts {
			if opts[i].ID == id {
				return &opts[i]
			}
		}
		return nil
	}
	values := func(o *acp.SessionConfigOption) []string {
		var out []string
		for _, v := range o.Options {
			out = append(out, v.Value)
		}
		return out
	}
	mdl := option(ns.ConfigOptions, "model")
	require.NotNil(t, mdl)
	assert.Equal(t, []string{"claude-sonnet-4-5", "local-coder"}, values(mdl), "every model of every provider")
	tl := option(ns.ConfigOptions, "thought_level")
	require.NotNil(t, tl)
	assert.Equal(t, "thought_level", tl.Category)
	assert.Equal(t, []string{"off", "low", "medium", "high"}, values(tl))
	assert.Equal(t, "medium", tl.CurrentValue)

	set := func(id, value string) []acp.SessionConfigOption {
		var r acp.SetSessionConfigOptionResponse
		require.NoError(t, d.cc.Call(ctx, acp.MethodSessionSetConfigOption, map[string]any{"sessionId": sid, "configId": id, "value": value}, &r))
		return r.ConfigOptions
	}
	assert.Equal(t, "high", option(set("thought_level", "high"), "thought_level").CurrentValue)
	var bad acp.SetSessionConfigOptionResponse
	err = d.cc.Call(ctx, acp.MethodSessionSetConfigOption, map[string]any{"sessionId": sid, "configId": "thought_level", "value": "extreme"}, &bad)
	var ae *acp.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, acp.CodeInvalidParams, ae.Code)

	resp, err := d.cc.Prompt(ctx, sid, "What is in a.go?")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, 24576, reqs[0].Thinking.BudgetTokens, "thought_level high is what the request asks for")

	// To the other provider: the history goes along, the turn works.
	other := option(set("model", "local-coder"), "thought_level")
	require.NotNil(t, other, "the option stays, as ACP's lists keep their options")
	assert.Equal(t, []string{"off"}, values(other), "a model that does not think offers only off")
	resp, err = d.cc.Prompt(ctx, sid, "And now?")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	creqs := chat.Requests()
	require.Len(t, creqs, 1)
	assert.Equal(t, "local-coder", creqs[0].Model)
	var sawFile bool
	for _, m := range creqs[0].Messages {
		sawFile = sawFile || (m.Role == "tool" && strings.Contains(m.Text(), "package a"))
	}
	assert.True(t, sawFile, "the history went to the other provider")
	assert.Len(t, srv.Requests(), 2, "nothing went to Anthropic")

	// Back to Anthropic: the level is the model's default again, and the
	// first turn's signed thinking is accepted after the other provider's
	// messages.
	opts := set("model", "claude-sonnet-4-5")
	assert.Equal(t, "medium", option(opts, "thought_level").CurrentValue)
	set("thought_level", "low")
	srv.Add(anthropictest.Response{Thinking: "Quick.", Text: "Yes."})
	resp, err = d.cc.Prompt(ctx, sid, "Sure?")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs = srv.Requests()
	require.Len(t, reqs, 3)
	require.Empty(t, reqs[2].Rejected)
	assert.Equal(t, 2048, reqs[2].Thinking.BudgetTokens)

	// The level is saved with the session and restored by session/load.
	dataDir := d.dataDir
	d.stop(t)
	d2 := launch(t, cwd, t.TempDir(), []string{"--config", cfg, "--data-dir", dataDir}, []string{"ANTHROPIC_API_KEY=sk-ant-test"}, nil, nil)
	lr := d2.load(ctx, t, sid)
	assert.Equal(t, "claude-sonnet-4-5", option(lr.ConfigOptions, "model").CurrentValue)
	assert.Equal(t, "low", option(lr.ConfigOptions, "thought_level").CurrentValue)
}

// Anthropic's own "prompt is too long" 400 (its error body, both counts)
// compacts and retries, as OpenAI's does: every prompt ends end_turn, the
// refusal comes once, and the requests after the compaction, signed
// thinking and all, are accepted.
func TestE2E_AnthropicOverflowCompactsAndRetries(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "a.go"), []byte("package a\n"), 0o644))
	srv := anthropictest.NewServer(t)
	srv.SetAPIKey("sk-ant-test")
	srv.SetTokenLimit(20000)
	srv.SetResponder(anthropicSummariser)
	srv.Add(anthropictest.Response{Thinking: "Read it first.", ToolCalls: []anthropictest.ToolCall{anthropicRead(filepath.Join(cwd, "a.go"))}},
		anthropictest.Response{Thinking: "Small file.", Text: "noted 0"})
	for i := 1; i < 4; i++ {
		srv.Add(anthropictest.Response{Thinking: fmt.Sprintf("Fact %d.", i), Text: fmt.Sprintf("noted %d", i)})
	}
	d := startAnthropic(t, cwd, anthropicConfig(t, srv, ""))
	sid := d.session(t)
	for i := range 4 {
		resp, err := d.cc.Prompt(t.Context(), sid, bigPrompt(i, 24<<10))
		require.NoError(t, err, "prompt %d", i)
		assert.Equal(t, acp.StopEndTurn, resp.StopReason, "prompt %d", i)
	}
	refused := 0
	for i, r := range srv.Requests() {
		if r.Refused {
			refused++
			continue
		}
		assert.Empty(t, r.Rejected, "request %d", i)
	}
	assert.Equal(t, 1, refused, "one refusal, then compaction kept the requests inside")
	assert.Zero(t, srv.Remaining(), "every scripted answer was asked for")
}
