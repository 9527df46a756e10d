package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const providersFile = `[model]
name = "claude-sonnet-4-5"

[modelProviders.anthropic]
models = [
  { id = "claude-sonnet-4-5", contextWindow = 200000, maxTokens = 32000,
    price = { input = 3, cachedInput = 0.3, cacheWrite = 3.75, output = 15 },
    thinking = { mode = "budget", levels = { low = 2048, medium = 8192, high = 24576 }, default = "medium" } },
]

[modelProviders.openrouter]
protocol = "openai"
baseUrl = "https://openrouter.ai/api/v1"
apiKeyEnv = "OPENROUTER_API_KEY"
models = ["deepseek/deepseek-chat", { id = "openai/gpt-5", thinking = { mode = "effort", levels = ["low", "medium", "high"] } }]

[modelProviders.local]
protocol = "openai"
wireApi = "responses"
baseUrl = "http://localhost:11434/v1"
models = ["qwen3:8b"]
`

func TestLoad_ModelProviders(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	fx.env["ANTHROPIC_API_KEY"] = "sk-ant"
	path := fx.write(t, "p.toml", providersFile)
	cfg, src, err := fx.load(LoadOptions{ConfigPath: path})
	require.NoError(t, err)
	require.Len(t, cfg.Providers, 3)
	a, local, or := cfg.Providers[0], cfg.Providers[1], cfg.Providers[2]
	assert.Equal(t, "anthropic", a.ID)
	assert.Equal(t, "anthropic", a.Protocol, "an entry named after a protocol speaks it")
	assert.Equal(t, "https://api.anthropic.com", a.BaseURL)
	assert.Equal(t, "ANTHROPIC_API_KEY", a.APIKeyEnv)
	assert.Equal(t, "sk-ant", a.APIKey)
	m := a.Models[0]
	assert.Equal(t, 200000, m.ContextWindow)
	assert.Equal(t, 32000, m.MaxTokens)
	assert.Equal(t, 3.75, m.Price.CacheWrite)
	assert.Equal(t, []string{"off", "low", "medium", "high"}, m.Thinking.LevelNames())
	assert.Equal(t, "medium", m.Thinking.Default)
	assert.Equal(t, 6, m.Line, "the line of the model's own entry")

	assert.Equal(t, "responses", local.WireAPI)
	assert.Empty(t, local.APIKeyEnv, "a server on this machine needs no key")
	assert.Equal(t, "OPENROUTER_API_KEY", or.APIKeyEnv)
	assert.Empty(t, or.APIKey)
	assert.Equal(t, ThinkingEffort, or.Models[1].Thinking.Mode)
	assert.Equal(t, []string{"off", "low", "medium", "high"}, or.Models[1].Thinking.LevelNames())

	p, pm := cfg.ProviderOf("openai/gpt-5")
	require.NotNil(t, p)
	assert.Equal(t, "openrouter", p.ID)
	assert.Equal(t, "openai/gpt-5", pm.ID)
	assert.Empty(t, cfg.LegacyModels(), "model.name is a provider's model")

	assert.Equal(t, SourceFile, src.Of("modelProviders.anthropic").Kind)
	assert.Equal(t, 4, src.Of("modelProviders.anthropic").Line)
	out := FormatTOML(cfg, src)
	assert.Contains(t, out, "[modelProviders]\nanthropic = {protocol = \"anthropic\"")
	assert.Contains(t, out, "# "+path+":4\n")
	assert.Contains(t, out, `# anthropic apiKey = "<redacted>"  # env ANTHROPIC_API_KEY`)
	assert.Contains(t, out, "# openrouter apiKey is unset  # env OPENROUTER_API_KEY is empty")
	assert.NotContains(t, out, "sk-ant")
	// What acpd config prints is a configuration acpd reads back.
	again := fx.write(t, "again.toml", strings.ReplaceAll(out, "# anthropic apiKey", "# x"))
	cfg2, _, err := fx.load(LoadOptions{ConfigPath: again})
	require.NoError(t, err)
	assert.Equal(t, cfg.Providers[0].Models, withLines(cfg2.Providers[0].Models, cfg.Providers[0].Models))
}

// withLines copies the file lines of want into got (the files differ).
func withLines(got, want []ProviderModel) []ProviderModel {
	for i := range got {
		if i < len(want) {
			got[i].Line = want[i].Line
		}
	}
	return got
}

// Providers alone: model.name defaults to the first entry's first model.
func TestLoad_ModelProvidersDefaultModel(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	path := fx.write(t, "p.toml", "[modelProviders.gemini]\nmodels = [\"gemini-2.5-pro\"]\n")
	cfg, _, err := fx.load(LoadOptions{ConfigPath: path})
	require.NoError(t, err)
	assert.Equal(t, "gemini-2.5-pro", cfg.Model.Name)
	assert.Equal(t, "GEMINI_API_KEY", cfg.Providers[0].APIKeyEnv)
}

// The one-model case: model.provider = "anthropic" takes Anthropic's
// endpoint and key variable unless set.
func TestLoad_OneModelAnthropic(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	fx.env["ANTHROPIC_API_KEY"] = "sk-ant"
	path := fx.write(t, "p.toml", "[model]\nprovider = \"anthropic\"\nname = \"claude-opus-4-6\"\nthinking = { mode = \"effort\", default = \"high\" }\n")
	cfg, src, err := fx.load(LoadOptions{ConfigPath: path})
	require.NoError(t, err)
	assert.Equal(t, "https://api.anthropic.com", cfg.Model.BaseURL)
	assert.Equal(t, "ANTHROPIC_API_KEY", cfg.Model.APIKeyEnv)
	assert.Equal(t, "sk-ant", cfg.Model.APIKey)
	assert.Equal(t, "high", cfg.Model.Thinking.Default)
	assert.Contains(t, FormatTOML(cfg, src), `thinking = {mode = "effort", default = "high"}`)

	cfg, _, err = fx.load(LoadOptions{ConfigPath: path, Flags: map[string]string{"base-url": "http://127.0.0.1:9/x"}})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9/x", cfg.Model.BaseURL, "a layer's base URL stands")
}

// Mistakes exit 2 naming the file and line: an unknown protocol, a
// provider without a key variable, a model listed twice (at its second
// listing), and the rest of an entry's shape.
func TestLoad_ModelProvidersErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		line       int
		want       string
	}{
		{"unknown protocol", "[modelProviders.x]\nprotocol = \"antropic\"\nbaseUrl = \"https://x.example\"\nmodels = [\"m\"]\n", 1,
			`modelProviders.x: unknown protocol "antropic": want one of openai, anthropic, gemini (did you mean "anthropic"?)`},
		{"missing key variable", "\n[modelProviders.corp]\nprotocol = \"openai\"\nbaseUrl = \"https://llm.corp.example/v1\"\napiKeyEnv = \"\"\nmodels = [\"m\"]\n", 2,
			"modelProviders.corp: apiKeyEnv: missing key variable"},
		{"model listed twice", "[modelProviders.anthropic]\nmodels = [\"claude-x\"]\n\n[modelProviders.openrouter]\nprotocol = \"openai\"\nbaseUrl = \"https://openrouter.ai/api/v1\"\napiKeyEnv = \"K\"\nmodels = [\n  \"other\",\n  \"claude-x\",\n]\n", 10,
			`model "claude-x" is listed twice: by modelProviders.openrouter and by modelProviders.anthropic`},
		{"twice in one entry", "[modelProviders.anthropic]\nmodels = [\"a\", \"b\",\n  \"a\"]\n", 2,
			`model "a" is listed twice`},
		{"wireApi off openai", "[modelProviders.anthropic]\nwireApi = \"responses\"\nmodels = [\"a\"]\n", 1, "wireApi: only the openai protocol has wire APIs"},
		{"no models", "[modelProviders.anthropic]\n", 1, "models is required"},
		{"key in file", "[modelProviders.anthropic]\napiKey = \"sk\"\nmodels = [\"a\"]\n", 1, "apiKey cannot be set in a config file"},
		{"bad thinking default", "[modelProviders.anthropic]\nmodels = [{ id = \"a\", thinking = { default = \"max\" } }]\n", 1,
			`models[0]: thinking: default: "max" is not one of the levels (off, low, medium, high)`},
		{"unknown model key", "[modelProviders.anthropic]\nmodels = [{ id = \"a\", window = 5 }]\n", 1, `models[0]: unknown key "window"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			path := fx.write(t, "p.toml", tt.file)
			_, _, err := fx.load(LoadOptions{ConfigPath: path})
			require.Error(t, err)
			var ce *Error
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Equal(t, path, ce.File)
			assert.Equal(t, tt.line, ce.Line, "%v", err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
