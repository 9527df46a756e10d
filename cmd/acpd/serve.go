package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/providers"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
	sessionusage "github.com/acpd/acpd/session/usage"
)

// serve speaks ACP on stdin/stdout until ctx is cancelled or the client
// disconnects.
func serve(ctx context.Context, cfg config.Config, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
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
	st, err := store.Open(cfg.Session.DataDir, store.Options{Logger: logger, IndexInBackground: true})
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
	conn := acp.NewConn(stdin, stdout, acp.Options{Logger: logger, Trace: cfg.Log.Trace})
	agent := session.NewManager(conn, opts)
	defer agent.Close()
	logger.Info("serving ACP on stdio", "model", cfg.Model.Name, "provider", string(cfg.Model.Provider))
	return conn.Serve(ctx, agent)
}

// newProvider builds the model client the configuration names.
func newProvider(cfg config.Config, logger *slog.Logger) (model.Provider, error) {
	switch cfg.Model.Provider {
	case config.ProviderScript:
		p, err := model.NewScript(cfg.Model.Script)
		if err != nil {
			return nil, fmt.Errorf("model script: %w", err)
		}
		return p, nil
	case config.ProviderOpenAI:
		return providers.New(providers.Spec{
			ID:           "model",
			Protocol:     "openai",
			BaseURL:      cfg.Model.BaseURL,
			APIKey:       cfg.Model.APIKey,
			CacheControl: cfg.Model.CacheControl,
			HTTP: model.HTTPOptions{
				MaxRetries:     cfg.Model.MaxRetries,
				RequestTimeout: cfg.Model.RequestTimeout,
				Logger:         logger,
			},
		})
	}
	return nil, fmt.Errorf("unknown model provider %q", cfg.Model.Provider)
}

// sessionOptions maps the resolved configuration onto the session host.
func sessionOptions(cfg config.Config, logger *slog.Logger) (session.Options, error) {
	prov, err := newProvider(cfg, logger)
	if err != nil {
		return session.Options{}, err
	}
	exclude := cfg.Tools.Exclude
	return session.Options{
		Provider:          prov,
		Model:             cfg.Model.Name,
		Models:            cfg.Model.Models,
		ContextWindow:     cfg.Model.ContextWindow,
		ContextWindows:    cfg.Model.ContextWindows,
		CompactThreshold:  cfg.Model.CompactThreshold,
		CompactionModel:   cfg.Model.CompactionModel,
		Prices:            prices(cfg.Model),
		MaxTokensPerTurn:  cfg.Model.MaxTokensPerTurn,
		SessionTokenLimit: cfg.Model.SessionTokenLimit,
		SystemPrompt:      cfg.Model.SystemPrompt,
		MaxTokens:         cfg.Model.MaxTokens,
		Temperature:       cfg.Model.Temperature,
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
		WebFetchAllowPrivate: cfg.Tools.WebFetchAllowPrivate,
		NoAgentTool:          slices.Contains(exclude, agents.ToolName),
		AgentConcurrency:     cfg.Tools.SubagentConcurrency,
		Version:              versionString(),
		Logger:               logger,
	}, nil
}

// prices are model.price (for model.name) and model.prices by model id.
func prices(m config.ModelConfig) sessionusage.Prices {
	out := sessionusage.Prices{}
	for id, p := range m.Prices {
		out[id] = sessionusage.Price(p)
	}
	if p := m.Price; p != nil && m.Name != "" {
		out[m.Name] = sessionusage.Price(*p)
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
