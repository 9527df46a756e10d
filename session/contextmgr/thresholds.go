package contextmgr

import "math"

// Constants of agent-features.md §1.4.
const (
	// SummaryReserve is kept free for the answer (and a summary's output).
	SummaryReserve = 20_000
	// AutoCompactBuffer lowers the automatic threshold below the reserve.
	AutoCompactBuffer = 13_000
	// DefaultThreshold is model.compactThreshold's default.
	DefaultThreshold = 0.85
	// MaxConsecutiveFailures pauses automatic summaries (§1.5 circuit breaker).
	MaxConsecutiveFailures = 3
	// MaxSummaryTokens bounds a summary's output.
	MaxSummaryTokens = 20_000
)

// Thresholds are the token counts compaction is decided on.
type Thresholds struct {
	Window int // the model's input window
	// Auto: a request estimated at or above it is compacted first (§1.4's
	// `auto`: min(pct × window, window − 20,000 − 13,000) when that is
	// positive, else pct × window).
	Auto int
	// Target is what a compaction aims for: half of Auto, so the session
	// does not compact again at the next request.
	Target int
}

// ComputeThresholds is §1.4's computeThresholds, with pct outside (0, 1]
// replaced by the default.
func ComputeThresholds(window int, pct float64) Thresholds {
	if !(pct > 0 && pct <= 1) {
		pct = DefaultThreshold
	}
	if window <= 0 {
		window = DefaultWindow
	}
	proportional := int(math.Round(pct * float64(window)))
	auto := proportional
	if ceiling := max(0, window-SummaryReserve) - AutoCompactBuffer; ceiling > 0 {
		auto = min(proportional, ceiling)
	}
	auto = max(auto, 1)
	return Thresholds{Window: window, Auto: auto, Target: max(auto/2, 1)}
}
