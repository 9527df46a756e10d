package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/telemetry"
)

// telemetryShutdownTimeout bounds the final export at exit: a black-holed
// collector must not keep acpd from exiting.
const telemetryShutdownTimeout = 2 * time.Second

// startTelemetry starts OpenTelemetry export when [telemetry] enabled is
// set. Off, it returns nil and a no-op stop, having touched nothing.
func startTelemetry(ctx context.Context, cfg config.Config, logger *slog.Logger) (*telemetry.Telemetry, func(), error) {
	if !cfg.Telemetry.Enabled {
		return nil, func() {}, nil
	}
	tc := telemetry.Config{
		Enabled:        true,
		Endpoint:       cfg.Telemetry.Endpoint,
		LogPrompts:     cfg.Telemetry.LogPrompts,
		Protocol:       cfg.Telemetry.Protocol,
		ProviderName:   string(cfg.Model.Provider),
		ServiceVersion: versionString(),
		// Export failures (an unreachable collector) go to the log, never
		// to stdout, and never fail a turn.
		OnError: func(err error) { logger.Warn("telemetry", "err", err) },
	}
	tel, err := telemetry.Start(ctx, tc)
	if err != nil {
		return nil, nil, err
	}
	logger.Info("telemetry on", "endpoint", cfg.Telemetry.Endpoint, "protocol", tc.Protocol)
	return tel, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryShutdownTimeout)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			logger.Warn("telemetry: final export failed", "err", err)
		}
	}, nil
}
