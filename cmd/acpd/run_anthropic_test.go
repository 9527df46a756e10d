package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model/anthropic/anthropictest"
	"github.com/acpd/acpd/session/telemetry/telemetrytest"
)

// acpd run spoken natively to the Anthropic test server: the turn's usage
// in the json result splits the input as the server billed it (cache
// writes, cache reads), the cost prices each part, the chat spans carry
// the cache writes and reads, and a second run with --session sends the
// first run's signed thinking back from the transcript, accepted.
func TestRunCmd_AnthropicUsageAndThinking(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	read, _ := json.Marshal(map[string]string{"file_path": filepath.Join(e.ws, "x.txt")})
	srv := anthropictest.NewServer(t,
		anthropictest.Response{Thinking: "Read it first.", ToolCalls: []anthropictest.ToolCall{{Name: "read_file", Arguments: string(read)}}},
		anthropictest.Response{Thinking: "It greets.", Text: "The file says hello."},
	)
	srv.SetAPIKey("sk-ant-test")
	cfg := filepath.Join(e.dir, "acpd.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`[model]
name = "claude-sonnet-4-5"

[modelProviders.anthropic]
baseUrl = %q
models = [{ id = "claude-sonnet-4-5", contextWindow = 200000, thinking = { mode = "budget", default = "low" }, price = { input = 3, cachedInput = 0.3, cacheWrite = 3.75, output = 15 } }]
`, srv.URL)), 0o644))
	e.env = append(e.env, "ANTHROPIC_API_KEY=sk-ant-test")
	c := telemetrytest.NewCollector(t)
	args := []string{"run", "--config", cfg, "--cwd", e.ws, "--yolo", "--output-format", "json",
		"--telemetry", "--telemetry-protocol", "http", "--telemetry-endpoint", c.URL()}

	o := e.run(t, "", append(args, "What does x.txt say?")...)
	require.Equal(t, 0, o.code, o.stderr)
	first := decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Equal(t, "end_turn", first.StopReason)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	var in, write, read0, out int
	for i, r := range reqs {
		require.Empty(t, r.Rejected, "request %d", i)
		in, write, read0, out = in+r.Tokens, write+r.CacheWrite, read0+r.CacheRead, out+r.Output
	}
	require.Positive(t, write, "the stable prefix was written to the cache")
	require.Positive(t, read0, "the second request read it")
	tu := first.TurnUsage
	require.NotNil(t, tu)
	assert.Equal(t, 2, tu.Requests)
	assert.Equal(t, in, tu.Input)
	assert.Equal(t, write, tu.CacheWrite)
	assert.Equal(t, read0, tu.Cached)
	assert.Equal(t, out, tu.Output)
	require.NotNil(t, tu.Cost)
	want := (float64(in-write-read0)*3 + float64(read0)*0.3 + float64(write)*3.75 + float64(out)*15) / 1e6
	assert.InDelta(t, want, tu.Cost.Amount, 1e-9)

	var spanWrite, spanRead int64
	for _, s := range c.SpansNamed("chat claude-sonnet-4-5") {
		a := telemetrytest.Attrs(s.Attributes)
		spanWrite += a["gen_ai.usage.cache_creation.input_tokens"].(int64)
		spanRead += a["gen_ai.usage.cache_read.input_tokens"].(int64)
	}
	assert.Equal(t, int64(write), spanWrite)
	assert.Equal(t, int64(read0), spanRead)

	// The next run continues the session: the first turn's thinking goes
	// back as received (the server refuses a missing or altered one).
	srv.Add(anthropictest.Response{Thinking: "Same file.", Text: "Still hello."})
	o = e.run(t, "", append(args, "--session", first.SessionID, "And now?")...)
	require.Equal(t, 0, o.code, o.stderr)
	second := decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Equal(t, "end_turn", second.StopReason)
	reqs = srv.Requests()
	require.Len(t, reqs, 3)
	require.Empty(t, reqs[2].Rejected)
	var kinds []string
	for _, b := range reqs[2].Messages[1].Content {
		kinds = append(kinds, b.Type)
	}
	assert.Equal(t, []string{"thinking", "tool_use"}, kinds, "the stored thinking went back with the history")
}
