package chat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// Every usage shape the README lists: where each provider puts cached and
// reasoning tokens, and where the usage object itself sits.
func TestAssembler_UsageShapes(t *testing.T) {
	const finish = `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	for _, tc := range []struct {
		name   string
		chunks []string
		want   model.Usage
	}{
		{"OpenAI, DashScope, OpenRouter, xAI, vLLM: *_tokens_details", []string{finish,
			`{"choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":300,"total_tokens":2300,"prompt_tokens_details":{"cached_tokens":1536,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":200}}}`},
			model.Usage{PromptTokens: 2000, CompletionTokens: 300, TotalTokens: 2300, CachedTokens: 1536, ReasoningTokens: 200}},
		{"DeepSeek: prompt_cache_hit_tokens on the finish chunk", []string{
			`{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":264,"completion_tokens":50,"total_tokens":314,"prompt_cache_hit_tokens":256,"prompt_cache_miss_tokens":8,"completion_tokens_details":{"reasoning_tokens":30}}}`},
			model.Usage{PromptTokens: 264, CompletionTokens: 50, TotalTokens: 314, CachedTokens: 256, ReasoningTokens: 30}},
		{"Moonshot/Kimi and some Qwen models: cached_tokens at the top", []string{finish,
			`{"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":10,"total_tokens":1010,"cached_tokens":900}}`},
			model.Usage{PromptTokens: 1000, CompletionTokens: 10, TotalTokens: 1010, CachedTokens: 900}},
		{"Kimi: usage inside the final choice", []string{
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":700,"completion_tokens":7,"total_tokens":707,"cached_tokens":512}}]}`},
			model.Usage{PromptTokens: 700, CompletionTokens: 7, TotalTokens: 707, CachedTokens: 512}},
		{"Anthropic-compatible gateways: cache_read_input_tokens", []string{finish,
			`{"choices":[],"usage":{"prompt_tokens":5000,"completion_tokens":40,"total_tokens":5040,"cache_read_input_tokens":4800,"cache_creation_input_tokens":100}}`},
			model.Usage{PromptTokens: 5000, CompletionTokens: 40, TotalTokens: 5040, CachedTokens: 4800}},
		{"Responses-API names: input/output tokens and their details", []string{finish,
			`{"choices":[],"usage":{"input_tokens":3000,"output_tokens":90,"total_tokens":3090,"input_tokens_details":{"cached_tokens":2048},"output_tokens_details":{"reasoning_tokens":64}}}`},
			model.Usage{PromptTokens: 3000, CompletionTokens: 90, TotalTokens: 3090, CachedTokens: 2048, ReasoningTokens: 64}},
		{"reasoning_tokens at the top of usage", []string{finish,
			`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":90,"total_tokens":100,"reasoning_tokens":80}}`},
			model.Usage{PromptTokens: 10, CompletionTokens: 90, TotalTokens: 100, ReasoningTokens: 80}},
		{"llama.cpp: timings.cache_n", []string{
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":400,"completion_tokens":20,"total_tokens":420},"timings":{"cache_n":380,"prompt_n":20}}`},
			model.Usage{PromptTokens: 400, CompletionTokens: 20, TotalTokens: 420, CachedTokens: 380}},
		{"vLLM continuous usage: the last one wins, never summed", []string{
			`{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":50,"completion_tokens":1,"total_tokens":51,"prompt_tokens_details":{"cached_tokens":32}}}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":2,"total_tokens":52,"prompt_tokens_details":{"cached_tokens":32}}}`},
			model.Usage{PromptTokens: 50, CompletionTokens: 2, TotalTokens: 52, CachedTokens: 32}},
		{"Ollama: no cache or reasoning detail", []string{finish,
			`{"choices":[],"usage":{"prompt_tokens":30,"completion_tokens":5,"total_tokens":35}}`},
			model.Usage{PromptTokens: 30, CompletionTokens: 5, TotalTokens: 35}},
		{"null details", []string{finish,
			`{"choices":[],"usage":{"prompt_tokens":30,"completion_tokens":5,"total_tokens":35,"prompt_tokens_details":null,"completion_tokens_details":null}}`},
			model.Usage{PromptTokens: 30, CompletionTokens: 5, TotalTokens: 35}},
		{"parts never exceed their whole", []string{finish,
			`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105,"cache_read_input_tokens":900,"completion_tokens_details":{"reasoning_tokens":50}}}`},
			model.Usage{PromptTokens: 900, CompletionTokens: 5, TotalTokens: 105, CachedTokens: 900, ReasoningTokens: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, fresh := range []bool{false, true} {
				a := NewAssembler(nil)
				a.fresh = fresh
				for _, c := range tc.chunks {
					_, err := a.Feed([]byte(c))
					require.NoError(t, err)
				}
				evs, err := a.Finish()
				require.NoError(t, err)
				var got *model.Usage
				for _, ev := range evs {
					if ev.Kind == model.EventUsage {
						u := ev.Usage
						got = &u
					}
				}
				require.NotNil(t, got)
				assert.Equal(t, tc.want, *got)
			}
		})
	}
}
