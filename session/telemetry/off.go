//go:build notelemetry

package telemetry

import (
	"context"
	"errors"
)

// Built reports whether this binary carries the OpenTelemetry SDK and
// exporters; false under -tags notelemetry.
const Built = false

// ErrNotBuilt is Start's answer to enabled telemetry in a build without it.
var ErrNotBuilt = errors.New("telemetry: this acpd was built with -tags notelemetry and cannot export; " +
	"set [telemetry] enabled = false (or drop --telemetry / ACPD_TELEMETRY), or use a build without that tag")

// Telemetry is never set up in this build; every method is a no-op on the
// nil Start returns.
type Telemetry struct{}

// Start returns nil, nil when telemetry is off and ErrNotBuilt when it is on:
// silently not exporting what the configuration asks for would hide it.
func Start(_ context.Context, cfg Config) (*Telemetry, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	if _, err := protocol(&cfg); err != nil {
		return nil, err
	}
	return nil, ErrNotBuilt
}

// Probe answers ErrNotBuilt: this build cannot export.
func Probe(_ context.Context, cfg Config) (proto, target string, err error) {
	if _, err := protocol(&cfg); err != nil {
		return "", "", err
	}
	return "", "", ErrNotBuilt
}

// Shutdown does nothing: nothing was set up.
func (t *Telemetry) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing: nothing is buffered.
func (t *Telemetry) ForceFlush(context.Context) error { return nil }

// Turn is always nil in this build.
type Turn struct{}

// StartTurn returns ctx unchanged.
func (t *Telemetry) StartTurn(ctx context.Context, _, _, _ string) (context.Context, *Turn) {
	return ctx, nil
}

// StartSubagent returns ctx unchanged.
func (t *Telemetry) StartSubagent(ctx context.Context, _, _, _, _ string) (context.Context, *Turn) {
	return ctx, nil
}

// StartAgentTurn returns ctx unchanged.
func (t *Telemetry) StartAgentTurn(ctx context.Context, _, _, _, _ string) (context.Context, *Turn) {
	return ctx, nil
}

// End does nothing.
func (tu *Turn) End(TurnEnd) {}

// Chat is always nil in this build.
type Chat struct{}

// StartChat returns ctx unchanged.
func (t *Telemetry) StartChat(ctx context.Context, _ string) (context.Context, *Chat) {
	return ctx, nil
}

// End does nothing.
func (c *Chat) End(ChatEnd) {}

// Tool is always nil in this build.
type Tool struct{}

// StartTool returns ctx unchanged.
func (t *Telemetry) StartTool(ctx context.Context, _, _ string, _ []byte) (context.Context, *Tool) {
	return ctx, nil
}

// End does nothing.
func (tl *Tool) End(string) {}
