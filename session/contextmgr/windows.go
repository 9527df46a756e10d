// Package contextmgr keeps a session's model history inside the model's
// context window: token accounting (provider-reported counts plus estimates
// of what was appended since), the window of each model, and the planning of
// compactions (stubbing old tool results, summarising the older part of the
// history, dropping the oldest whole turns as a last resort).
//
// The package is pure planning and bookkeeping over []model.Message; the
// session package runs the summary request, shows the compaction to the
// editor and records it.
package contextmgr

import (
	"regexp"
	"strings"
	"sync"
)

// DefaultWindow is the window of a model nothing is known about. qwen-code
// falls back to 200,000; acpd keeps the smaller 131,072 it always reported,
// so an unknown model is compacted early rather than overflowed.
const DefaultWindow = 131072

// windowPatterns is the known-model table of agent-features.md §1.2 (input
// windows), first match wins, matched against NormalizeModelID's result.
var windowPatterns = sync.OnceValue(func() []windowPattern {
	return []windowPattern{
		{regexp.MustCompile(`^gemini-`), 1_000_000},
		{regexp.MustCompile(`^gpt-5`), 272_000},
		{regexp.MustCompile(`^gpt-`), 131_072},
		{regexp.MustCompile(`^o\d`), 200_000},
		{regexp.MustCompile(`^claude-opus-(4-(6|7|8)|5)`), 1_000_000},
		{regexp.MustCompile(`^claude-`), 200_000},
		{regexp.MustCompile(`^(qwen3-coder-plus|qwen3-coder-flash|qwen3\.\d|qwen-plus-latest$|qwen-flash-latest$|coder-model$)`), 1_000_000},
		{regexp.MustCompile(`^(qwen3-max|qwen3-coder-|qwen)`), 262_144},
		{regexp.MustCompile(`^deepseek-(v4|flash)`), 1_000_000},
		{regexp.MustCompile(`^deepseek`), 131_072},
		{regexp.MustCompile(`^glm-5(\.[01])?(-|$)`), 202_752},
		{regexp.MustCompile(`^glm-([5-9]|\d{2,})`), 1_000_000},
		{regexp.MustCompile(`^glm-`), 202_752},
		{regexp.MustCompile(`^minimax-m3`), 1_000_000},
		{regexp.MustCompile(`^minimax-m2\.5`), 196_608},
		{regexp.MustCompile(`^minimax-`), 200_000},
		{regexp.MustCompile(`^kimi-k3`), 1_000_000},
		{regexp.MustCompile(`^kimi-`), 262_144},
		{regexp.MustCompile(`^seed-oss`), 524_288},
	}
})

type windowPattern struct {
	re     *regexp.Regexp
	window int
}

var (
	// ":free", ":beta", ":latest", ":7b", ":7b-instruct-q4_K_M" (Ollama tags).
	colonSuffix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`:(free|beta|latest|\d+(\.\d+)?b.*|[a-z0-9._-]*)$`) })
	// Quantisation suffixes: -int4, -int8, -fp16, -bf16, -fp8, -awq, -gptq, -q4_k_m, -gguf.
	quantSuffix = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`-(int[48]|fp(8|16|32)|bf16|awq|gptq|gguf|q\d(_[a-z0-9]+)*)$`)
	})
	// Date and version suffixes: -20250219, -2024-08-06, -0125, -v1.2, -latest, -exp, -preview.
	dateSuffix = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2}|\d{4}|v\d+(\.\d+)+|latest|exp|preview)$`)
	})
)

// NormalizeModelID is §1.2's normalisation: lower case, no provider prefix
// ("openrouter/anthropic/claude-…", "accounts/x|qwen…"), no ":tag" suffix,
// and no trailing date, version, preview or quantisation suffixes.
func NormalizeModelID(id string) string {
	s := strings.ToLower(strings.TrimSpace(id))
	if i := strings.LastIndexByte(s, '|'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	s = colonSuffix().ReplaceAllString(s, "")
	for {
		t := quantSuffix().ReplaceAllString(s, "")
		t = dateSuffix().ReplaceAllString(t, "")
		if t == s {
			return s
		}
		s = t
	}
}

// KnownWindow is the input window of a known model family, or false.
func KnownWindow(id string) (int, bool) {
	n := NormalizeModelID(id)
	for _, p := range windowPatterns() {
		if p.re.MatchString(n) {
			return p.window, true
		}
	}
	return 0, false
}

// Windows resolves the window of each model a session may use.
type Windows struct {
	// Configured maps a model id (as configured) to its window; it wins.
	Configured map[string]int
}

// Of is the window of model: the configured one, else the known family's,
// else DefaultWindow.
func (w Windows) Of(model string) int {
	if n := w.Configured[model]; n > 0 {
		return n
	}
	if n, ok := KnownWindow(model); ok {
		return n
	}
	return DefaultWindow
}
