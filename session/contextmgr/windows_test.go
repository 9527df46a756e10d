package contextmgr

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNormalizeModelID(t *testing.T) {
	for in, want := range map[string]string{
		"Qwen3-Coder-Plus":                       "qwen3-coder-plus",
		"openrouter/anthropic/claude-3.5-sonnet": "claude-3.5-sonnet",
		"accounts/fireworks|qwen3-max":           "qwen3-max",
		"claude-3-7-sonnet-20250219":             "claude-3-7-sonnet",
		"gpt-4o-2024-08-06":                      "gpt-4o",
		"gpt-4-1106-preview":                     "gpt-4",
		"deepseek-r1:free":                       "deepseek-r1",
		"qwen2.5-coder:7b-instruct-q4_K_M":       "qwen2.5-coder",
		"qwen3-32b-int4":                         "qwen3-32b",
		"llama-3-70b-fp16":                       "llama-3-70b",
		"gemini-2.0-flash-exp":                   "gemini-2.0-flash",
		"model-v1.2":                             "model",
		"deepseek-v4":                            "deepseek-v4",
		"kimi-latest":                            "kimi",
	} {
		assert.Equal(t, want, NormalizeModelID(in), in)
	}
}

// The table of agent-features.md §1.2, through normalisation.
func TestKnownWindow(t *testing.T) {
	for id, want := range map[string]int{
		"gemini-2.5-pro":                 1_000_000,
		"gpt-5-mini":                     272_000,
		"openai/gpt-4o-2024-08-06":       131_072,
		"o3-mini":                        200_000,
		"claude-opus-4-6":                1_000_000,
		"claude-sonnet-4-20250514":       200_000,
		"qwen3-coder-plus":               1_000_000,
		"qwen3.5-plus":                   1_000_000,
		"coder-model":                    1_000_000,
		"qwen3-max-preview":              262_144,
		"qwen3-coder-480b-a35b-instruct": 262_144,
		"qwen2.5-72b-instruct":           262_144,
		"deepseek-v4":                    1_000_000,
		"deepseek-chat":                  131_072,
		"glm-5":                          202_752,
		"glm-4.6":                        202_752,
		"glm-6":                          1_000_000,
		"minimax-m2.5":                   196_608,
		"MiniMax-M1":                     200_000,
		"kimi-k2-0905-preview":           262_144,
		"seed-oss-36b":                   524_288,
	} {
		got, ok := KnownWindow(id)
		assert.True(t, ok, id)
		assert.Equal(t, want, got, id)
	}
	_, ok := KnownWindow("scripted")
	assert.False(t, ok)
	w := Windows{Configured: map[string]int{"scripted": 48000, "gpt-4o": 128000}}
	assert.Equal(t, 48000, w.Of("scripted"))
	assert.Equal(t, 128000, w.Of("gpt-4o"), "configured wins over the table")
	assert.Equal(t, 200_000, w.Of("claude-sonnet-4"))
	assert.Equal(t, DefaultWindow, w.Of("llama-3-70b"))
}

// §1.4's evaluated table.
func TestComputeThresholds(t *testing.T) {
	for window, auto := range map[int]int{
		32_768: 27_853, 65_536: 32_536, 131_072: 98_072, 200_000: 167_000, 262_144: 222_822, 1_000_000: 850_000,
	} {
		th := ComputeThresholds(window, 0)
		assert.Equal(t, auto, th.Auto, window)
		assert.Equal(t, auto/2, th.Target, window)
		assert.Equal(t, window, th.Window)
	}
	assert.Equal(t, 15_000, ComputeThresholds(48_000, 0.85).Auto)
	assert.Equal(t, 6_554, ComputeThresholds(32_768, 0.2).Auto)
	assert.Equal(t, ComputeThresholds(65_536, 0.85), ComputeThresholds(65_536, 1.5), "out of range: default")
}
