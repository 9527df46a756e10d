package config

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// Wire protocols a provider entry may name, and the wire APIs of openai.
var (
	Protocols = []string{"openai", "anthropic", "gemini"}
	WireAPIs  = []string{"chat-completions", "responses"}
)

// defaultBaseURL and defaultKeyEnv are the default endpoint and key
// variable of the protocols with one home ("" for the others). Switches,
// not package-level maps, which package initialization would build on
// every start of acpd.
func defaultBaseURL(protocol string) string {
	switch protocol {
	case "anthropic":
		return "https://api.anthropic.com"
	case "gemini":
		return "https://generativelanguage.googleapis.com"
	}
	return ""
}

func defaultKeyEnv(protocol string) string {
	switch protocol {
	case "openai":
		return "OPENAI_API_KEY"
	case "anthropic":
		return "ANTHROPIC_API_KEY"
	case "gemini":
		return "GEMINI_API_KEY"
	}
	return ""
}

// ProviderConfig is one [modelProviders.<id>] entry, as qwen-code's
// modelProviders: a provider id with its wire protocol, endpoint, key
// variable and models.
type ProviderConfig struct {
	ID string
	// Protocol is openai, anthropic or gemini; an entry whose id is a
	// protocol's name may leave it out.
	Protocol string
	// WireAPI is the openai protocol's flavour: chat-completions (the
	// default) or responses.
	WireAPI string
	BaseURL string
	// APIKeyEnv names the variable holding the key; APIKey is read from
	// it, never from a file.
	APIKeyEnv string
	APIKey    string
	// CacheControl overrides model.cacheControl for this provider ("").
	CacheControl string
	Models       []ProviderModel
	// Source is where the entry was set.
	Source Source
}

// ProviderModel is one model of a provider.
type ProviderModel struct {
	ID string
	// ContextWindow is the model's window in tokens (0: the known-model
	// table); MaxTokens its default answer size (0: the protocol's).
	ContextWindow int
	MaxTokens     int
	Price         *Price
	Thinking      *Thinking
	// Line is the line of the model's entry in the file (0: unknown).
	Line int
}

// Thinking is a model's thinking settings.
type Thinking struct {
	// Mode is how the provider is asked to think: "budget" (a budget of
	// tokens per level, Anthropic's budget_tokens, Gemini 2.5's
	// thinkingBudget) or "effort" (a named level: Anthropic's adaptive
	// effort, Gemini 3's thinkingLevel, OpenAI's reasoning effort).
	Mode string
	// Levels maps each level the model offers to its budget in tokens
	// (ignored in effort mode). nil: low, medium and high with the
	// protocol's budgets.
	Levels map[string]int
	// Default is the level used until the editor chooses one; "" or "off"
	// means no thinking until asked.
	Default string
}

// Thinking modes.
const (
	ThinkingBudget = "budget"
	ThinkingEffort = "effort"
)

// LevelNames are t's levels, "off" first, then by budget (by name in
// effort mode, low < medium < high first).
func (t *Thinking) LevelNames() []string {
	if t == nil {
		return nil
	}
	levels := t.Levels
	if levels == nil {
		levels = map[string]int{"low": 1, "medium": 2, "high": 3}
	}
	rank := func(k string) int {
		if t.Mode == ThinkingBudget && t.Levels != nil {
			return levels[k]
		}
		return slices.Index([]string{"minimal", "low", "medium", "high", "xhigh", "max"}, k)
	}
	names := slices.Collect(maps.Keys(levels))
	slices.SortFunc(names, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return append([]string{"off"}, names...)
}

// modelProvidersTable is the top-level table of provider entries.
const modelProvidersTable = "modelProviders"

// providerField is the field of one [modelProviders.<id>] entry.
func providerField(id string) *field {
	return &field{
		table: modelProvidersTable, name: id,
		decode: func(c *Config, raw any, _ bool, _ resolver) error {
			p, err := decodeProvider(id, raw)
			if err != nil {
				return err
			}
			c.Providers = slices.DeleteFunc(c.Providers, func(q ProviderConfig) bool { return q.ID == id })
			c.Providers = append(c.Providers, p)
			slices.SortFunc(c.Providers, func(a, b ProviderConfig) int { return strings.Compare(a.ID, b.ID) })
			return nil
		},
		encode: func(c *Config) (string, bool) {
			for _, p := range c.Providers {
				if p.ID == id {
					return encodeProvider(p), true
				}
			}
			return "", false
		},
	}
}

func decodeProvider(id string, raw any) (ProviderConfig, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return ProviderConfig{}, typeErr("a table with protocol, baseUrl, apiKeyEnv and models", raw)
	}
	p := ProviderConfig{ID: id}
	str := func(k string) (string, error) {
		v, ok := m[k]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s: %w", k, typeErr("a string", v))
		}
		return strings.TrimSpace(s), nil
	}
	var err error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case "protocol", "wireApi", "baseUrl", "apiKeyEnv", "cacheControl", "models":
		case "apiKey":
			return ProviderConfig{}, errors.New("apiKey cannot be set in a config file; put the key in the environment variable named by apiKeyEnv")
		default:
			return ProviderConfig{}, fmt.Errorf("unknown key %s: want protocol, wireApi, baseUrl, apiKeyEnv, cacheControl or models", quote(k))
		}
	}
	if p.Protocol, err = str("protocol"); err != nil {
		return p, err
	}
	if p.Protocol == "" && slices.Contains(Protocols, id) {
		p.Protocol = id
	}
	switch {
	case p.Protocol == "":
		return p, fmt.Errorf("protocol is required: one of %s", strings.Join(Protocols, ", "))
	case !slices.Contains(Protocols, p.Protocol):
		msg := fmt.Sprintf("unknown protocol %s: want one of %s", quote(p.Protocol), strings.Join(Protocols, ", "))
		if s := suggest(p.Protocol, Protocols); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return p, errors.New(msg)
	}
	if p.WireAPI, err = str("wireApi"); err != nil {
		return p, err
	}
	if p.WireAPI != "" && p.Protocol != "openai" {
		return p, fmt.Errorf("wireApi: only the openai protocol has wire APIs, this entry's protocol is %s", p.Protocol)
	}
	if p.WireAPI != "" && !slices.Contains(WireAPIs, p.WireAPI) {
		return p, fmt.Errorf("wireApi: unknown wire API %s: want %s", quote(p.WireAPI), strings.Join(WireAPIs, " or "))
	}
	if p.BaseURL, err = str("baseUrl"); err != nil {
		return p, err
	}
	if p.BaseURL == "" {
		p.BaseURL = defaultBaseURL(p.Protocol)
	}
	if p.BaseURL == "" {
		return p, fmt.Errorf("baseUrl is required for the %s protocol", p.Protocol)
	}
	if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return p, fmt.Errorf("baseUrl: %s is not an http(s) URL", quote(p.BaseURL))
	}
	if p.APIKeyEnv, err = str("apiKeyEnv"); err != nil {
		return p, err
	}
	if _, set := m["apiKeyEnv"]; !set {
		p.APIKeyEnv = defaultKeyEnv(p.Protocol)
		if p.Protocol == "openai" && isLoopback(p.BaseURL) {
			p.APIKeyEnv = "" // a local server (Ollama, vLLM) needs none
		}
	}
	if p.APIKeyEnv == "" && !isLoopback(p.BaseURL) {
		return p, fmt.Errorf("apiKeyEnv: missing key variable: name the environment variable that holds %s's key (only a server on this machine may go without one)", id)
	}
	if p.CacheControl, err = str("cacheControl"); err != nil {
		return p, err
	}
	if p.CacheControl != "" && !slices.Contains([]string{"auto", "on", "off"}, p.CacheControl) {
		return p, fmt.Errorf("cacheControl: want auto, on or off, got %s", quote(p.CacheControl))
	}
	models, ok := m["models"].([]any)
	if !ok {
		if _, set := m["models"]; set {
			return p, fmt.Errorf("models: %w", typeErr("an array of model tables or ids", m["models"]))
		}
		return p, errors.New("models is required: the models this provider serves, e.g. models = [{ id = \"…\" }]")
	}
	if len(models) == 0 {
		return p, errors.New("models: list at least one model")
	}
	for i, v := range models {
		pm, err := decodeProviderModel(v)
		if err != nil {
			return p, fmt.Errorf("models[%d]: %w", i, err)
		}
		p.Models = append(p.Models, pm)
	}
	return p, nil
}

func decodeProviderModel(raw any) (ProviderModel, error) {
	if s, ok := raw.(string); ok {
		if strings.TrimSpace(s) == "" {
			return ProviderModel{}, errors.New("a model id must not be empty")
		}
		return ProviderModel{ID: strings.TrimSpace(s)}, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return ProviderModel{}, typeErr("a model table or a model id", raw)
	}
	var pm ProviderModel
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "id":
			s, ok := v.(string)
			if !ok || strings.TrimSpace(s) == "" {
				return pm, fmt.Errorf("id: must be a non-empty string, got %s", rawText(v))
			}
			pm.ID = strings.TrimSpace(s)
		case "contextWindow", "maxTokens":
			n, ok := integral(v, false)
			if !ok || n < 1 {
				return pm, fmt.Errorf("%s: must be a whole number of tokens of at least 1, got %s", k, rawText(v))
			}
			if k == "contextWindow" {
				pm.ContextWindow = n
			} else {
				pm.MaxTokens = n
			}
		case "price":
			p, err := decodePrice(v)
			if err != nil {
				return pm, fmt.Errorf("price: %w", err)
			}
			pm.Price = &p
		case "thinking":
			t, err := decodeThinking(v)
			if err != nil {
				return pm, fmt.Errorf("thinking: %w", err)
			}
			pm.Thinking = t
		default:
			return pm, fmt.Errorf("unknown key %s: want id, contextWindow, maxTokens, price or thinking", quote(k))
		}
	}
	if pm.ID == "" {
		return pm, errors.New("id is required")
	}
	return pm, nil
}

// decodeThinking reads { mode, levels, default }.
func decodeThinking(raw any) (*Thinking, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, typeErr("a table with mode, levels and default", raw)
	}
	t := &Thinking{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "mode":
			s, _ := v.(string)
			if s != ThinkingBudget && s != ThinkingEffort {
				return nil, fmt.Errorf("mode: want %q or %q, got %s", ThinkingBudget, ThinkingEffort, rawText(v))
			}
			t.Mode = s
		case "default":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("default: %w", typeErr("a level name", v))
			}
			t.Default = strings.TrimSpace(s)
		case "levels":
			switch lv := v.(type) {
			case map[string]any:
				t.Levels = map[string]int{}
				for name, b := range lv {
					n, ok := integral(b, false)
					if !ok || n < 0 {
						return nil, fmt.Errorf("levels.%s: must be a whole number of tokens, got %s", name, rawText(b))
					}
					t.Levels[name] = n
				}
			case []any:
				t.Levels = map[string]int{}
				for i, b := range lv {
					s, ok := b.(string)
					if !ok || s == "" {
						return nil, fmt.Errorf("levels[%d]: must be a level name, got %s", i, rawText(b))
					}
					t.Levels[s] = i + 1
				}
			default:
				return nil, fmt.Errorf("levels: %w", typeErr("a table of level names to budgets, or a list of level names", v))
			}
			if _, off := t.Levels["off"]; off {
				return nil, errors.New(`levels: "off" is always offered and cannot be a level`)
			}
		default:
			return nil, fmt.Errorf("unknown key %s: want mode, levels or default", quote(k))
		}
	}
	if t.Mode == "" {
		t.Mode = ThinkingBudget
	}
	if t.Default != "" && t.Default != "off" && !slices.Contains(t.LevelNames(), t.Default) {
		return nil, fmt.Errorf("default: %s is not one of the levels (%s)", quote(t.Default), strings.Join(t.LevelNames(), ", "))
	}
	return t, nil
}

func isLoopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || h == "127.0.0.1" || h == "::1" || strings.HasPrefix(h, "127.")
}

func encodeProvider(p ProviderConfig) string {
	parts := []string{"protocol = " + quote(p.Protocol)}
	if p.WireAPI != "" {
		parts = append(parts, "wireApi = "+quote(p.WireAPI))
	}
	parts = append(parts, "baseUrl = "+quote(p.BaseURL))
	if p.APIKeyEnv != "" {
		parts = append(parts, "apiKeyEnv = "+quote(p.APIKeyEnv))
	}
	if p.CacheControl != "" {
		parts = append(parts, "cacheControl = "+quote(p.CacheControl))
	}
	ms := make([]string, len(p.Models))
	for i, m := range p.Models {
		f := []string{"id = " + quote(m.ID)}
		if m.ContextWindow > 0 {
			f = append(f, fmt.Sprintf("contextWindow = %d", m.ContextWindow))
		}
		if m.MaxTokens > 0 {
			f = append(f, fmt.Sprintf("maxTokens = %d", m.MaxTokens))
		}
		if m.Price != nil {
			f = append(f, "price = "+encodePrice(*m.Price))
		}
		if t := m.Thinking; t != nil {
			tf := []string{"mode = " + quote(t.Mode)}
			if t.Levels != nil {
				var ls []string
				for _, k := range t.LevelNames()[1:] {
					ls = append(ls, fmt.Sprintf("%s = %d", quote(k), t.Levels[k]))
				}
				tf = append(tf, "levels = {"+strings.Join(ls, ", ")+"}")
			}
			if t.Default != "" {
				tf = append(tf, "default = "+quote(t.Default))
			}
			f = append(f, "thinking = {"+strings.Join(tf, ", ")+"}")
		}
		ms[i] = "{" + strings.Join(f, ", ") + "}"
	}
	parts = append(parts, "models = ["+strings.Join(ms, ", ")+"]")
	return "{" + strings.Join(parts, ", ") + "}"
}

// finishProviders reads each provider's key from its variable and checks
// what spans entries: a model listed twice (its second listing is named),
// and a model.name none serves when the entries are all there is.
func finishProviders(cfg *Config, src Sources, getenv func(string) string) error {
	seen := map[string]string{}
	var errs []error
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		if p.APIKeyEnv != "" {
			p.APIKey = getenv(p.APIKeyEnv)
		}
		for _, m := range p.Models {
			if prev, dup := seen[m.ID]; dup {
				e := errAt(p.Source, modelProvidersTable+"."+p.ID+".models", fmt.Sprintf(
					"model %q is listed twice: by modelProviders.%s and by %s; a model id names one provider's model (the editor's model list is keyed by it)", m.ID, p.ID, prev))
				if m.Line > 0 && e.File != "" {
					e.Line, e.Col = m.Line, 1
				}
				errs = append(errs, e)
				continue
			}
			seen[m.ID] = "modelProviders." + p.ID
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if cfg.Model.Name == "" && len(cfg.Providers) > 0 && src.Of("model.name").Kind == SourceDefault {
		// Providers alone: the first one's first model is the default.
		cfg.Model.Name = cfg.Providers[0].Models[0].ID
	}
	return nil
}

// legacyModels are the models [model] itself serves (through
// model.provider): model.name and model.models, less those a provider
// entry lists.
func legacyModels(cfg Config) []string {
	listed := map[string]bool{}
	for _, p := range cfg.Providers {
		for _, m := range p.Models {
			listed[m.ID] = true
		}
	}
	var out []string
	for _, id := range append([]string{cfg.Model.Name}, cfg.Model.Models...) {
		if id != "" && !listed[id] && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// LegacyModels are the models [model] serves through model.provider:
// model.name and model.models, less those a [modelProviders] entry lists.
func (c Config) LegacyModels() []string { return legacyModels(c) }

// ProviderOf is the entry that lists model id (nil: [model]'s own).
func (c Config) ProviderOf(id string) (*ProviderConfig, *ProviderModel) {
	for i := range c.Providers {
		for j := range c.Providers[i].Models {
			if c.Providers[i].Models[j].ID == id {
				return &c.Providers[i], &c.Providers[i].Models[j]
			}
		}
	}
	return nil, nil
}

// locateProviderModels sets the file line of each model of entry id: the
// first line at or after the entry's own that holds the model's quoted
// id, for errors that name one model.
func locateProviderModels(cfg *Config, id string, t text, from int) {
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		if p.ID != id {
			continue
		}
		line := from
		for j := range p.Models {
			q := quote(p.Models[j].ID)
			for l := line; l <= len(t.lineStarts); l++ {
				if strings.Contains(t.line(l), q) {
					p.Models[j].Line, line = l, l
					break
				}
			}
		}
	}
}

func setProviderSource(cfg *Config, id string, s Source) {
	for i := range cfg.Providers {
		if cfg.Providers[i].ID == id {
			cfg.Providers[i].Source = s
		}
	}
}
