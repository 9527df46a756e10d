package session_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// A ten-file turn under model.maxTokensPerTurn = 40000 against a provider
// that reports usage: the turn ends max_tokens after a few requests, with a
// final message naming the budget and how to raise it, having spent no
// more than the budget as the provider counted it; the next prompt answers.
func TestE2E_TurnTokenBudget(t *testing.T) {
	const budget = 40000
	d := startDaemon(t, nil, nil, "--max-tokens-per-turn", fmt.Sprint(budget))
	d.model.SetReportUsage(true)
	files := make([]string, 10)
	for i := range files {
		files[i] = filepath.Join(d.cwd, fmt.Sprintf("src_%02d.go", i))
		require.NoError(t, os.WriteFile(files[i], []byte(sourceFile(i)), 0o644))
	}
	// The first prompt's requests read the files one by one; later prompts
	// get the script.
	var reads atomic.Int32
	d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		for _, m := range r.Messages[1:] {
			if m.Role == "user" && m.Text() != "Read every source file." {
				return modeltest.Response{}, false
			}
		}
		i := int(reads.Add(1)) - 1
		if i >= len(files) {
			return modeltest.Response{Text: "all read"}, true
		}
		return modeltest.Response{ToolCalls: []modeltest.ToolCall{readCall(files[i])}}, true
	})
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "Read every source file.")
	require.NoError(t, err)
	assert.Equal(t, acp.StopMaxTokens, resp.StopReason)
	n := len(d.model.Requests())
	assert.GreaterOrEqual(t, n, 2)
	assert.Less(t, n, len(files), "stopped after a few requests")
	inputs := 0
	for i, r := range d.model.Requests() {
		// The answers' tokens only make the room smaller.
		assert.LessOrEqual(t, inputs+r.Tokens+r.MaxTokens, budget, "request %d: its input and answer room fit the budget", i)
		inputs += r.Tokens
	}
	text := acptest.AgentText(d.cc.Updates(), sid)
	assert.Contains(t, text, "Token budget reached")
	assert.Contains(t, text, "model.maxTokensPerTurn")
	assert.Contains(t, text, "--max-tokens-per-turn")
	ours := resp.Meta["acpd"].(map[string]any)
	assert.Equal(t, "maxTokensPerTurn", ours["budget"])
	u := ours["usage"].(map[string]any)
	assert.Equal(t, float64(n), u["requests"])
	assert.Equal(t, float64(inputs), u["inputTokens"], "the turn's input as the provider reported it")
	assert.LessOrEqual(t, u["inputTokens"].(float64)+u["outputTokens"].(float64), float64(budget))

	d.model.Add(modeltest.Response{Text: "Here is what I found."})
	resp, err = d.cc.Prompt(t.Context(), sid, "What did you find?")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason, "the session goes on")
	last := d.model.Requests()[len(d.model.Requests())-1]
	var sawStop bool
	for _, m := range last.Messages {
		sawStop = sawStop || (m.Role == "assistant" && strings.Contains(m.Text(), "Token budget reached"))
	}
	assert.True(t, sawStop, "the model sees why the previous turn stopped")
}

// model.sessionTokenLimit: a request still larger than the limit after
// compaction is not sent; the prompt ends max_tokens with the reference's
// message (§1.11), naming acpd's setting.
func TestE2E_SessionTokenLimit(t *testing.T) {
	d := startDaemon(t, nil, nil, "--session-token-limit", "5000")
	d.model.SetReportUsage(true)
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, bigPrompt(0, 24<<10))
	require.NoError(t, err)
	assert.Equal(t, acp.StopMaxTokens, resp.StopReason)
	assert.Zero(t, d.model.Served(), "the request was not sent")
	assert.Contains(t, acptest.AgentText(d.cc.Updates(), sid), "Session token limit exceeded: ")
	assert.Contains(t, acptest.AgentText(d.cc.Updates(), sid), "model.sessionTokenLimit")
	assert.Equal(t, "sessionTokenLimit", resp.Meta["acpd"].(map[string]any)["budget"])
}

// With [model.price], every usage_update carries the session's cumulative
// cost (ACP's Cost, checked against the schema by the test client), equal
// to the provider's counts at the prices; `acpd stats` reports the turns'
// cached tokens exactly as the provider reported them, and the cost.
func TestE2E_CostAndCachedTokens(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "acpd.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[model.price]\ninput = 2.0\ncachedInput = 0.5\noutput = 8.0\ncurrency = \"EUR\"\n"), 0o644))
	d := startDaemon(t, nil, nil, "--config", cfg)
	d.model.SetPrefixCache(true)
	sid := d.session(t)
	for i := range 3 {
		f := filepath.Join(d.cwd, fmt.Sprintf("f%d.go", i))
		require.NoError(t, os.WriteFile(f, []byte(sourceFile(i)[:8<<10]), 0o644))
		d.model.Add(modeltest.Response{ToolCalls: []modeltest.ToolCall{readCall(f)}}, modeltest.Response{Text: fmt.Sprint("read ", i)})
		_, err := d.cc.Prompt(t.Context(), sid, fmt.Sprintf("Read f%d.go.", i))
		require.NoError(t, err)
	}
	reqs := d.model.Requests()
	require.Len(t, reqs, 6)
	var cached, input int
	for i, r := range reqs {
		require.Positive(t, r.Tokens, "request %d", i)
		input += r.Tokens
		cached += r.Cached
	}
	require.Positive(t, cached)
	var costs []*acp.Cost
	for _, n := range d.cc.Updates() {
		if n.Update.Kind == acp.UpdateUsage {
			costs = append(costs, n.Update.Cost)
		}
	}
	require.Len(t, costs, 6)
	v, err := acptest.DefaultValidator()
	require.NoError(t, err)
	for i, c := range costs {
		require.NotNil(t, c, "usage_update %d has the cost", i)
		assert.Equal(t, "EUR", c.Currency)
		b, err := json.Marshal(c)
		require.NoError(t, err)
		require.NoError(t, v.ValidateDef("Cost", b), "ACP's Cost (the test client also checks every usage_update whole)")
		if i > 0 {
			assert.Greater(t, c.Amount, costs[i-1].Amount, "cumulative")
		}
	}

	var rep struct {
		Turns []struct {
			Usage struct {
				Requests     int `json:"requests"`
				Input        int `json:"inputTokens"`
				Cached       int `json:"cachedInputTokens"`
				Output       int `json:"outputTokens"`
				EstimatedReq int `json:"estimatedRequests"`
			} `json:"usage"`
			Cost *acp.Cost `json:"cost"`
		} `json:"turns"`
		Summary struct {
			Usage struct {
				Input  int `json:"inputTokens"`
				Cached int `json:"cachedInputTokens"`
				Output int `json:"outputTokens"`
			} `json:"usage"`
			Costs map[string]float64 `json:"costs"`
		} `json:"summary"`
	}
	statsJSON(t, d.dataDir, &rep)
	require.Len(t, rep.Turns, 3)
	assert.Equal(t, cached, rep.Summary.Usage.Cached, "cached tokens as the provider reported them")
	assert.Equal(t, input, rep.Summary.Usage.Input)
	for i, tr := range rep.Turns {
		assert.Equal(t, 2, tr.Usage.Requests, "turn %d", i)
		assert.Zero(t, tr.Usage.EstimatedReq)
		assert.Equal(t, reqs[2*i].Cached+reqs[2*i+1].Cached, tr.Usage.Cached, "turn %d", i)
	}
	// The cost: uncached input at 2, cached at 0.5, output at 8 per million.
	want := (float64(input-cached)*2 + float64(cached)*0.5 + float64(rep.Summary.Usage.Output)*8) / 1e6
	assert.InDelta(t, want, rep.Summary.Costs["EUR"], 1e-12)
	assert.InDelta(t, want, costs[len(costs)-1].Amount, 1e-12, "the last usage_update's cumulative cost")
}

// A subagent run's requests count for the prompt turn that started it, as
// its subagents': the response's usage has them apart and in the totals,
// and `acpd stats` shows the run's usage on its own row and in its prompt
// turn's subagent part, counted once in the summary.
func TestE2E_SubagentUsageIsTheTurns(t *testing.T) {
	cwd := t.TempDir()
	f := filepath.Join(cwd, "a.go")
	require.NoError(t, os.WriteFile(f, []byte("package a\n"), 0o644))
	const key = "SUB-TASK-3"
	d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{
		{ToolCalls: []modeltest.ToolCall{agentTC("call_agent", "Look", key+": read a.go", "Explore")}},
		{Text: "done"},
	})
	d.model.Add(
		modeltest.Response{Match: key, ToolCalls: []modeltest.ToolCall{readCall(f)}},
		modeltest.Response{Match: key, Text: "a.go is a package clause."},
	)
	d.model.SetPrefixCache(true)
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "Use a subagent.")
	require.NoError(t, err)
	require.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs := d.model.Requests()
	require.Len(t, reqs, 4)
	var all, sub int
	for _, r := range reqs {
		all += r.Tokens
	}
	for _, r := range subRequests(d.model, key) {
		sub += r.Tokens
	}
	u := resp.Meta["acpd"].(map[string]any)["usage"].(map[string]any)
	assert.Equal(t, 4.0, u["requests"])
	assert.Equal(t, float64(all), u["inputTokens"])
	subs := u["subagents"].(map[string]any)
	assert.Equal(t, 2.0, subs["requests"])
	assert.Equal(t, float64(sub), subs["inputTokens"])

	var rep struct {
		Turns []struct {
			Run   int `json:"run"`
			Usage struct {
				Requests int `json:"requests"`
				Input    int `json:"inputTokens"`
			} `json:"usage"`
			Subagents *struct {
				Input int `json:"inputTokens"`
			} `json:"subagentUsage"`
		} `json:"turns"`
		Summary struct {
			Usage struct {
				Requests int `json:"requests"`
				Input    int `json:"inputTokens"`
			} `json:"usage"`
		} `json:"summary"`
	}
	statsJSON(t, d.dataDir, &rep)
	require.Len(t, rep.Turns, 2, "the prompt turn and its run")
	for _, tr := range rep.Turns {
		if tr.Run == 0 {
			assert.Equal(t, all, tr.Usage.Input)
			require.NotNil(t, tr.Subagents)
			assert.Equal(t, sub, tr.Subagents.Input)
		} else {
			assert.Equal(t, 2, tr.Usage.Requests)
			assert.Equal(t, sub, tr.Usage.Input)
		}
	}
	assert.Equal(t, all, rep.Summary.Usage.Input, "counted once")
	assert.Equal(t, 4, rep.Summary.Usage.Requests)
}

// statsJSON runs the built `acpd stats --format json` over dataDir into v.
func statsJSON(t *testing.T, dataDir string, v any) {
	t.Helper()
	out, err := exec.Command(acpdBin, "stats", "--config", os.DevNull, "--data-dir", dataDir, "--format", "json").Output()
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, v))
}
