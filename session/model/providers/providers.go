// Package providers builds a model.Provider from a provider's
// configuration: the one place that knows every wire protocol package.
// A protocol plugs in with one line in the protocols table; it is a
// plain table rather than registration from init functions, so a daemon
// pays no start-up work for protocols it does not use and the linked set
// is visible here.
package providers

import (
	"fmt"
	"slices"
	"strings"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/anthropic"
	"github.com/acpd/acpd/session/model/chat"
	"github.com/acpd/acpd/session/model/gemini"
	"github.com/acpd/acpd/session/model/responses"
)

// Spec is one configured provider, already resolved (the key read from its
// environment variable).
type Spec struct {
	// ID is the provider's configured id ("anthropic", "openrouter", …);
	// errors name it.
	ID string
	// Protocol is "openai", "anthropic" or "gemini"; WireAPI selects the
	// OpenAI flavour: "chat-completions" (the default) or "responses".
	Protocol string
	WireAPI  string
	BaseURL  string
	APIKey   string
	// CacheControl is model.cacheControl ("auto", "on", "off"), for the
	// protocols that mark cache breakpoints.
	CacheControl string
	// HTTP holds the retry, timeout and logging settings; its Name is
	// filled from ID when empty.
	HTTP model.HTTPOptions
	// Models are the provider's models' settings, by the id sent on the
	// wire.
	Models map[string]ModelSpec
}

// ModelSpec is one model's protocol settings.
type ModelSpec struct {
	// MaxTokens is the model's default max_tokens (Anthropic requires one).
	MaxTokens int
	// Thinking is how the model thinks ("budget", "adaptive"; "" none),
	// Levels its thinking levels (budget tokens where the protocol takes
	// them) and DefaultLevel the level used when the editor chose none.
	Thinking     string
	Levels       map[string]int
	DefaultLevel string
}

// Thinking modes of a ModelSpec, as configured: a token budget per level,
// or a named effort level.
const (
	ThinkingBudget = "budget"
	ThinkingEffort = "effort"
)

// Constructor builds a protocol's provider from a Spec.
type Constructor func(Spec) (model.Provider, error)

// Wire API names of the openai protocol.
const (
	WireChatCompletions = "chat-completions"
	WireResponses       = "responses"
)

// protocols maps Key(protocol, wireApi) to the protocol's constructor.
var protocols = map[string]Constructor{
	"openai/" + WireChatCompletions: func(s Spec) (model.Provider, error) {
		return chat.New(chat.Options{HTTPOptions: s.HTTP, BaseURL: s.BaseURL, APIKey: s.APIKey, CacheControl: s.CacheControl}), nil
	},
	"openai/" + WireResponses: func(s Spec) (model.Provider, error) {
		models := make(map[string]responses.Model, len(s.Models))
		for id, m := range s.Models {
			models[id] = responses.Model{MaxTokens: m.MaxTokens, DefaultLevel: m.DefaultLevel}
		}
		return responses.New(responses.Options{HTTPOptions: s.HTTP, BaseURL: s.BaseURL, APIKey: s.APIKey, Models: models}), nil
	},
	"gemini": func(s Spec) (model.Provider, error) {
		models := make(map[string]gemini.Model, len(s.Models))
		for id, m := range s.Models {
			models[id] = gemini.Model{MaxTokens: m.MaxTokens, Thinking: m.Thinking, Levels: m.Levels, DefaultLevel: m.DefaultLevel}
		}
		return gemini.New(gemini.Options{HTTPOptions: s.HTTP, BaseURL: s.BaseURL, APIKey: s.APIKey, Models: models}), nil
	},
	"anthropic": func(s Spec) (model.Provider, error) {
		models := make(map[string]anthropic.Model, len(s.Models))
		for id, m := range s.Models {
			mode := m.Thinking
			if mode == ThinkingEffort {
				mode = anthropic.ThinkingAdaptive // adaptive thinking takes output_config.effort
			}
			models[id] = anthropic.Model{MaxTokens: m.MaxTokens, Thinking: mode, Levels: m.Levels, DefaultLevel: m.DefaultLevel}
		}
		return anthropic.New(anthropic.Options{HTTPOptions: s.HTTP, BaseURL: s.BaseURL, APIKey: s.APIKey,
			CacheControl: s.CacheControl, Models: models}), nil
	},
}

// Key is the protocols table's key: "openai/chat-completions",
// "openai/responses", "anthropic", "gemini". The openai protocol's wire API
// defaults to chat completions.
func Key(protocol, wireAPI string) string {
	if protocol == "openai" {
		if wireAPI == "" {
			wireAPI = WireChatCompletions
		}
		return protocol + "/" + wireAPI
	}
	return protocol
}

// Known lists the protocol keys this build speaks, sorted.
func Known() []string {
	out := make([]string, 0, len(protocols))
	for k := range protocols {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Supported reports whether protocol (with wireAPI) is spoken.
func Supported(protocol, wireAPI string) bool {
	_, ok := protocols[Key(protocol, wireAPI)]
	return ok
}

// New builds the provider s describes.
func New(s Spec) (model.Provider, error) {
	mk, ok := protocols[Key(s.Protocol, s.WireAPI)]
	if !ok {
		return nil, fmt.Errorf("provider %q: unknown protocol %q (known: %s)", s.ID, Key(s.Protocol, s.WireAPI), strings.Join(Known(), ", "))
	}
	if s.HTTP.Name == "" {
		s.HTTP.Name = s.ID
	}
	return mk(s)
}
