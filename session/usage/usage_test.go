package usage

import (
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/acpd/acpd/session/model"
)

func TestPrice_Cost(t *testing.T) {
	p := Price{Input: 3, CachedInput: 0.3, Output: 15, Currency: "USD"}
	// 1,000,000 prompt tokens, 800,000 of them cached, 10,000 output:
	// 200,000 × 3 + 800,000 × 0.3 + 10,000 × 15, per million.
	got := p.Cost(model.Usage{PromptTokens: 1_000_000, CachedTokens: 800_000, CompletionTokens: 10_000, ReasoningTokens: 4_000})
	assert.InDelta(t, 0.6+0.24+0.15, got, 1e-12)
	assert.InDelta(t, 0.0, p.Cost(model.Usage{}), 0)
	// Cached above the prompt count is capped; negatives count as none.
	assert.InDelta(t, 0.3, p.Cost(model.Usage{PromptTokens: 1_000_000, CachedTokens: 2_000_000}), 1e-12)
	assert.InDelta(t, 0.0, p.Cost(model.Usage{PromptTokens: -5, CompletionTokens: -1}), 0)

	ps := Prices{"a": p}
	_, ok := ps.Of("b")
	assert.False(t, ok)
	got2, ok := ps.Of("a")
	assert.True(t, ok)
	assert.Equal(t, p, got2)
	assert.Equal(t, "USD", ps.Currency())
	assert.Empty(t, Prices{}.Currency())
}

func TestMeter(t *testing.T) {
	var m Meter
	m.Add(Turn, model.Usage{PromptTokens: 100, CachedTokens: 60, CompletionTokens: 20, ReasoningTokens: 5}, false, 0.5)
	m.Add(Summary, model.Usage{PromptTokens: 50, CompletionTokens: 10}, true, 0.25)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { m.Add(Subagent, model.Usage{PromptTokens: 10, CompletionTokens: 1}, false, 0.01) })
	}
	wg.Wait()
	assert.Equal(t, Tokens{Requests: 1, Input: 100, Cached: 60, Output: 20, Reasoning: 5}, m.Of(Turn))
	assert.Equal(t, Tokens{Requests: 1, Input: 50, Output: 10, Estimated: 1}, m.Of(Summary))
	assert.Equal(t, Tokens{Requests: 10, Input: 100, Output: 10}, m.Of(Subagent))
	tot := m.Total()
	assert.Equal(t, Tokens{Requests: 12, Input: 250, Cached: 60, Output: 40, Reasoning: 5, Estimated: 1}, tot)
	assert.Equal(t, 290, tot.Total())
	assert.InDelta(t, 0.85, m.Cost(), 1e-12)
}

// TestMeter_CostIsRounded: the float error of a sum never shows
// (0.0012 + 0.00264 adds up to 0.0038399999999999997 unrounded).
func TestMeter_CostIsRounded(t *testing.T) {
	var m Meter
	m.Add(Turn, model.Usage{PromptTokens: 1}, false, 0.0012)
	m.Add(Turn, model.Usage{PromptTokens: 1}, false, 0.00264)
	assert.Equal(t, "0.00384", strconv.FormatFloat(m.Cost(), 'f', -1, 64))
	assert.Equal(t, 0.00384, RoundCost(0.0038399999999999997))
	assert.Equal(t, 0.123456789, RoundCost(0.123456789), "billionths are kept")
}
