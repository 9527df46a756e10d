// Package usage adds up what model requests cost: the tokens of each turn
// (input, the part of it served from the provider's prompt cache, output,
// and the part of that spent reasoning), by origin — the turn's own
// requests, a compaction's summary, a subagent's run — and, when prices are
// configured, their cost.
//
// A turn's Meter is what every part of acpd that sends model requests on
// the turn's behalf adds to, so the turn's figures (for `acpd stats`,
// `acpd run`, the token budget and the session's cost in usage_update)
// cover all of them.
package usage

import (
	"math"
	"sync"

	"github.com/acpd/acpd/session/model"
)

// Origin says on whose behalf a request was sent.
type Origin string

// Origins. The zero Origin is the turn's own request.
const (
	Turn     Origin = ""
	Summary  Origin = "summary"  // a compaction's summary request
	Subagent Origin = "subagent" // a request of a subagent's run
)

// Tokens is token usage summed over requests.
type Tokens struct {
	Requests int `json:"requests"`
	// Input is the prompt tokens, cached ones included.
	Input int `json:"inputTokens"`
	// Cached is the part of Input served from the provider's prompt cache.
	Cached int `json:"cachedInputTokens"`
	// CacheWrite is the part of Input written to the provider's cache.
	CacheWrite int `json:"cacheWriteInputTokens,omitempty"`
	// Output is the completion tokens, reasoning included.
	Output int `json:"outputTokens"`
	// Reasoning is the part of Output spent reasoning.
	Reasoning int `json:"reasoningTokens"`
	// Estimated counts the requests whose figures acpd estimated because
	// the provider reported none.
	Estimated int `json:"estimatedRequests,omitempty"`
}

// Add adds one request's usage.
func (t *Tokens) Add(u model.Usage, estimated bool) {
	t.Requests++
	t.Input += max(u.PromptTokens, 0)
	t.Cached += max(u.CachedTokens, 0)
	t.CacheWrite += max(u.CacheWriteTokens, 0)
	t.Output += max(u.CompletionTokens, 0)
	t.Reasoning += max(u.ReasoningTokens, 0)
	if estimated {
		t.Estimated++
	}
}

// Plus is the sum of t and o.
func (t Tokens) Plus(o Tokens) Tokens {
	return Tokens{
		Requests: t.Requests + o.Requests, Input: t.Input + o.Input, Cached: t.Cached + o.Cached, CacheWrite: t.CacheWrite + o.CacheWrite,
		Output: t.Output + o.Output, Reasoning: t.Reasoning + o.Reasoning, Estimated: t.Estimated + o.Estimated,
	}
}

// Total is input plus output: what a token budget counts.
func (t Tokens) Total() int { return t.Input + t.Output }

// Meter accumulates one turn's usage by origin, and its cost. Safe for
// concurrent use: subagents may run side by side. The zero value is
// ready.
type Meter struct {
	mu   sync.Mutex
	by   map[Origin]Tokens
	cost float64
}

// Add adds one request's usage on behalf of origin, and its cost.
func (m *Meter) Add(o Origin, u model.Usage, estimated bool, cost float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[Origin]Tokens{}
	}
	t := m.by[o]
	t.Add(u, estimated)
	m.by[o] = t
	m.cost += cost
}

// Of is the usage on behalf of origin.
func (m *Meter) Of(o Origin) Tokens {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.by[o]
}

// Total is the usage of every origin.
func (m *Meter) Total() Tokens {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t Tokens
	for _, x := range m.by {
		t = t.Plus(x)
	}
	return t
}

// Cost is the cost of the usage added, in the prices' currency.
func (m *Meter) Cost() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return RoundCost(m.cost)
}

// RoundCost rounds a sum of costs to a billionth of the currency unit,
// so the float error of adding many small amounts (0.00384 printed as
// 0.0038399999999999997) never reaches the user; no price is that fine.
func RoundCost(x float64) float64 { return math.Round(x*1e9) / 1e9 }

// Price is what a model's tokens cost, per million tokens.
type Price struct {
	Input, CachedInput, Output float64
	// CacheWrite is the price of input written to the cache.
	CacheWrite float64
	Currency   string
}

// Cost is what one request's usage costs at p: uncached input at the input
// price, cached input at the cached-input price, input written to the
// cache at the cache-write price, output (reasoning included) at the output
// price.
func (p Price) Cost(u model.Usage) float64 {
	prompt := max(u.PromptTokens, 0)
	cached := min(max(u.CachedTokens, 0), prompt)
	written := min(max(u.CacheWriteTokens, 0), prompt-cached)
	uncached := prompt - cached - written
	return (float64(uncached)*p.Input + float64(cached)*p.CachedInput + float64(written)*p.CacheWrite +
		float64(max(u.CompletionTokens, 0))*p.Output) / 1e6
}

// Prices are the configured prices by model id.
type Prices map[string]Price

// Of is mdl's price; false when none is configured.
func (ps Prices) Of(mdl string) (Price, bool) {
	p, ok := ps[mdl]
	return p, ok
}

// Currency is the prices' currency ("" without prices); configuration
// keeps them to one.
func (ps Prices) Currency() string {
	for _, p := range ps {
		return p.Currency
	}
	return ""
}
