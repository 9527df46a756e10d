package doctor

import (
	"context"
	"fmt"

	"github.com/acpd/acpd/session/telemetry"
)

// checkTelemetry sends the configured collector an empty trace export, the
// way acpd's exporter would send a batch, so a wrong endpoint, protocol or
// OTEL_EXPORTER_OTLP_HEADERS key shows here rather than as a warning in a
// daemon's log. Off, it does not apply.
func checkTelemetry(ctx context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	tc := env.Config.Telemetry
	if !tc.Enabled {
		return Result{Status: Skip, Detail: "off ([telemetry] enabled = false)"}
	}
	ctx, cancel := context.WithTimeout(ctx, env.timeout())
	defer cancel()
	cfg := telemetry.Config{Enabled: true, Endpoint: tc.Endpoint, Protocol: tc.Protocol}
	proto, target, err := telemetry.Probe(ctx, cfg)
	switch {
	case err != nil && target == "":
		return Result{Status: Fail, Detail: err.Error()}
	case err != nil && ctx.Err() != nil:
		return Result{Status: Fail, Detail: fmt.Sprintf("%s %s: no answer within %v", proto, target, env.timeout())}
	case err != nil:
		return Result{Status: Fail, Detail: fmt.Sprintf("%s %s: %v", proto, target, unwrapURLError(err))}
	}
	return Result{Status: OK, Detail: fmt.Sprintf("%s %s accepted an empty export", proto, target)}
}
