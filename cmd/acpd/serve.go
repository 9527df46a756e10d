package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/mcp/imported"
	"github.com/acpd/acpd/session/mcp/oauth"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/providers"
	"github.com/acpd/acpd/session/policy"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
	sessionusage "github.com/acpd/acpd/session/usage"
)

// serve speaks ACP on stdin/stdout until ctx is cancelled or the client
// disconnects. onReady (if not nil) runs once the first answer is written.
func serve(ctx context.Context, cfg config.Config, stdin io.Reader, stdout io.Writer, logger *slog.Logger, onReady func()) error {
	opts, err := sessionOptions(cfg, logger)
	if err != nil {
		return err
	}
	if path := os.Getenv("ACPD_CPUPROFILE"); path != "" {
		// A diagnostic for performance work: profile the whole serve.
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("ACPD_CPUPROFILE: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("ACPD_CPUPROFILE: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv("ACPD_MEMPROFILE"); path != "" {
		// The allocation profile of the whole serve, written at exit.
		defer func() {
			if err := writeHeapProfile(path); err != nil {
				logger.Error("ACPD_MEMPROFILE", "err", err)
			}
		}()
	}
	// Sessions served over ACP are durable: recorded under the data
	// directory and reopened by session/load after a restart or a crash.
	// The index is not read yet: the session host starts that once its
	// initialize answer is written (or a session method needs it first),
	// so the editor's wait for that answer does not share the CPU with it.
	st, err := store.Open(cfg.Session.DataDir, store.Options{Logger: logger, DeferIndexLoad: true})
	if err != nil {
		return err
	}
	opts.Store = st
	tel, stopTel, err := startTelemetry(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopTel()
	opts.Telemetry = tel
	conn := acp.NewConn(stdin, stdout, acp.Options{Logger: logger, Trace: cfg.Log.Trace, OnFirstReply: onReady})
	agent := session.NewManager(conn, opts)
	defer agent.Close()
	logInfo(logger, "serving ACP on stdio", "model", cfg.Model.Name, "provider", string(cfg.Model.Provider))
	return conn.Serve(ctx, agent)
}

// newProvider builds the model client the configuration names: [model]'s
// own provider (model.provider) for its models, and one per
// [modelProviders] entry, behind a router that sends each request to the
// provider of its model.
func newProvider(cfg config.Config, logger *slog.Logger) (model.Provider, error) {
	httpOpts := model.HTTPOptions{MaxRetries: cfg.Model.MaxRetries, RequestTimeout: cfg.Model.RequestTimeout, Logger: logger}
	var fallback model.Route
	switch cfg.Model.Provider {
	case config.ProviderScript:
		p, err := model.NewScript(cfg.Model.Script)
		if err != nil {
			return nil, fmt.Errorf("model script: %w", err)
		}
		fallback = model.Route{Provider: p, ProviderID: "script"}
	default:
		// Errors name [model]'s provider by its protocol; the
		// chat-completions client's keep their old "model request" wording.
		id := string(cfg.Model.Provider)
		if cfg.Model.Provider == config.ProviderOpenAI {
			id = "model"
		}
		spec := providers.Spec{
			ID:           id,
			Protocol:     string(cfg.Model.Provider),
			WireAPI:      cfg.Model.WireAPI,
			BaseURL:      cfg.Model.BaseURL,
			APIKey:       cfg.Model.APIKey,
			CacheControl: cfg.Model.CacheControl,
			HTTP:         httpOpts,
		}
		if cfg.Model.Name != "" {
			spec.Models = map[string]providers.ModelSpec{cfg.Model.Name: modelSpec(cfg.Model.MaxTokens, cfg.Model.Thinking)}
		}
		p, err := providers.New(spec)
		if err != nil {
			return nil, err
		}
		fallback = model.Route{Provider: p, ProviderID: id}
	}
	if len(cfg.Providers) == 0 {
		return fallback.Provider, nil
	}
	routes := map[string]model.Route{}
	for _, pc := range cfg.Providers {
		spec := providers.Spec{
			ID: pc.ID, Protocol: pc.Protocol, WireAPI: pc.WireAPI, BaseURL: pc.BaseURL, APIKey: pc.APIKey,
			CacheControl: cmp.Or(pc.CacheControl, cfg.Model.CacheControl), HTTP: httpOpts,
			Models: map[string]providers.ModelSpec{},
		}
		for _, m := range pc.Models {
			spec.Models[m.ID] = modelSpec(m.MaxTokens, m.Thinking)
		}
		p, err := providers.New(spec)
		if err != nil {
			return nil, err
		}
		for _, m := range pc.Models {
			routes[m.ID] = model.Route{Provider: p, ProviderID: pc.ID, Model: m.ID}
		}
	}
	return model.NewRouter(routes, fallback), nil
}

// modelSpec is a model's protocol settings from its configuration.
func modelSpec(maxTokens int, t *config.Thinking) providers.ModelSpec {
	ms := providers.ModelSpec{MaxTokens: maxTokens}
	if t != nil {
		ms.Thinking, ms.Levels, ms.DefaultLevel = t.Mode, t.Levels, t.Default
	}
	return ms
}

// sessionOptions maps the resolved configuration onto the session host.
func sessionOptions(cfg config.Config, logger *slog.Logger) (session.Options, error) {
	prov, err := newProvider(cfg, logger)
	if err != nil {
		return session.Options{}, err
	}
	exclude := cfg.Tools.Exclude
	return session.Options{
		CheckpointMaxBytes:   int64(cfg.Session.CheckpointMaxBytes),
		Provider:             prov,
		Model:                cfg.Model.Name,
		Models:               selectorModels(cfg),
		ThoughtLevels:        thoughtLevels(cfg),
		DefaultThoughtLevels: defaultThoughtLevels(cfg),
		ContextWindow:        contextWindow(cfg),
		ContextWindows:       contextWindows(cfg),
		CompactThreshold:     cfg.Model.CompactThreshold,
		CompactionModel:      cfg.Model.CompactionModel,
		Prices:               prices(cfg),
		MaxTokensPerTurn:     cfg.Model.MaxTokensPerTurn,
		SessionTokenLimit:    cfg.Model.SessionTokenLimit,
		SystemPrompt:         cfg.Model.SystemPrompt,
		MaxTokens:            cfg.Model.MaxTokens,
		Temperature:          cfg.Model.Temperature,
		Cap: loopdetect.Cap{Max: cfg.Model.MaxToolCallsPerTurn, Explicit: cfg.Model.MaxToolCallsPerTurnExplicit,
			StuckWindow: cfg.Model.StuckWindow, Signal: loopdetect.StuckSignal(cfg.Model.StuckSignal),
			Recovery: loopdetect.LoopRecovery(cfg.Model.LoopRecovery)},
		SkipLoopDetection:    cfg.Model.SkipLoopDetection,
		FailureGuard:         loopdetect.FailureMode(cfg.Tools.RepeatedToolFailureGuard),
		ApprovalMode:         string(cfg.Tools.ApprovalMode),
		APIKeyEnv:            apiKeyEnv(cfg),
		APIKeyEmpty:          cfg.Model.APIKey == "",
		Tools:                func() *tools.Registry { return tools.NewBuiltinRegistry(exclude) },
		ContextFileNames:     cfg.Context.FileNames,
		NoEnvironment:        !cfg.Context.Environment,
		NoInstructions:       !cfg.Context.Instructions,
		ShellTimeout:         cfg.Tools.ShellTimeout,
		MaxOutputBytes:       cfg.Tools.MaxOutputBytes,
		Sandbox:              sandboxPolicy(cfg, logger),
		AutoAllowConfined:    cfg.Tools.AutoAllowConfined,
		WebFetchAllowPrivate: cfg.Tools.WebFetchAllowPrivate,
		NoAgentTool:          slices.Contains(exclude, agents.ToolName),
		AgentConcurrency:     cfg.Tools.SubagentConcurrency,
		Policy:               newPolicy(cfg, logger),
		Version:              versionString(),
		Logger:               logger,
		MCPTokens:            oauth.NewStore(filepath.Join(cfg.Session.DataDir, "mcp-oauth")),
		MCPImport:            mcpImport(cfg),
	}, nil
}

// prices are model.price (for model.name), model.prices by model id, and
// the prices of the [modelProviders] models.
func prices(cfg config.Config) sessionusage.Prices {
	m := cfg.Model
	out := sessionusage.Prices{}
	for id, p := range m.Prices {
		out[id] = sessionusage.Price(p)
	}
	for _, pc := range cfg.Providers {
		for _, pm := range pc.Models {
			if pm.Price != nil {
				out[pm.ID] = sessionusage.Price(*pm.Price)
			}
		}
	}
	if p := m.Price; p != nil && m.Name != "" {
		out[m.Name] = sessionusage.Price(*p)
	}
	return out
}

// selectorModels are the models the editor may choose besides model.name:
// model.models, then every [modelProviders] model, in file order.
func selectorModels(cfg config.Config) []string {
	out := []string{}
	add := func(id string) {
		if id != cfg.Model.Name && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	for _, id := range cfg.Model.Models {
		add(id)
	}
	for _, pc := range cfg.Providers {
		for _, m := range pc.Models {
			add(m.ID)
		}
	}
	return out
}

// thinkingOf is each model's thinking settings, by model id.
func thinkingOf(cfg config.Config) map[string]*config.Thinking {
	out := map[string]*config.Thinking{}
	for _, pc := range cfg.Providers {
		for _, m := range pc.Models {
			if m.Thinking != nil {
				out[m.ID] = m.Thinking
			}
		}
	}
	if t := cfg.Model.Thinking; t != nil && cfg.Model.Name != "" {
		if _, listed := out[cfg.Model.Name]; !listed {
			out[cfg.Model.Name] = t
		}
	}
	return out
}

// thoughtLevels are the levels of the thought_level option, by model.
func thoughtLevels(cfg config.Config) map[string][]string {
	out := map[string][]string{}
	for id, t := range thinkingOf(cfg) {
		out[id] = t.LevelNames()
	}
	return out
}

func defaultThoughtLevels(cfg config.Config) map[string]string {
	out := map[string]string{}
	for id, t := range thinkingOf(cfg) {
		out[id] = t.Default
	}
	return out
}

// contextWindow is model.name's window: model.contextWindow, or its
// provider entry's.
func contextWindow(cfg config.Config) int {
	if cfg.Model.ContextWindow > 0 {
		return cfg.Model.ContextWindow
	}
	if _, pm := cfg.ProviderOf(cfg.Model.Name); pm != nil {
		return pm.ContextWindow
	}
	return 0
}

// contextWindows are model.contextWindows and the [modelProviders]
// models' windows.
func contextWindows(cfg config.Config) map[string]int {
	out := maps.Clone(cfg.Model.ContextWindows)
	if out == nil {
		out = map[string]int{}
	}
	for _, pc := range cfg.Providers {
		for _, m := range pc.Models {
			if _, set := out[m.ID]; !set && m.ContextWindow > 0 {
				out[m.ID] = m.ContextWindow
			}
		}
	}
	return out
}

// apiKeyEnv is the variable the OpenAI provider read its key from; "" for
// providers without a key.
func apiKeyEnv(cfg config.Config) string {
	if cfg.Model.Provider != config.ProviderOpenAI {
		return ""
	}
	return cfg.Model.APIKeyEnv
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// newPolicy is the permission rules, hooks and workspace trust of the
// configuration: its rules and hooks, the "always" answers and the trust
// store in the state folder, and Claude Code's user settings when opted in.
func newPolicy(cfg config.Config, logger *slog.Logger) *policy.Engine {
	home, _ := os.UserHomeDir()
	claudeDir := os.Getenv("CLAUDE_CONFIG_DIR")
	if claudeDir == "" && home != "" {
		claudeDir = filepath.Join(home, ".claude")
	}
	return policy.New(policy.Options{
		StateDir: cfg.Session.DataDir, Rules: cfg.Permissions.Rules, Hooks: cfg.Hooks,
		ClaudeUser: cfg.Permissions.ClaudeUserSettings, ClaudeDir: claudeDir, Home: home, Logger: logger,
		MCPImport: mcpImport(cfg).Agents,
	})
}

// mcpImport is mcp.import: whose MCP configurations sessions read, and
// where the user's files are.
func mcpImport(cfg config.Config) imported.Options {
	home, _ := os.UserHomeDir()
	o := imported.Options{Home: home, ClaudeConfigDir: os.Getenv("CLAUDE_CONFIG_DIR"), CodexHome: os.Getenv("CODEX_HOME")}
	for _, a := range cfg.MCP.Import {
		o.Agents = append(o.Agents, imported.Agent(a))
	}
	return o
}
