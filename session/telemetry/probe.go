//go:build !notelemetry

package telemetry

import (
	"context"

	"github.com/acpd/acpd/session/telemetry/otlp"
)

// Probe sends the collector an empty trace export, as the trace exporter
// would send a batch: over OTLP/HTTP a POST of an empty
// ExportTraceServiceRequest to the traces URL, over gRPC the
// TraceService/Export call, with the exporter's OTEL_EXPORTER_OTLP_[TRACES_]
// headers, certificates and timeout. It answers the protocol and where the
// spans go, and an error saying why the collector did not accept them
// (`acpd doctor`). An empty request is valid OTLP, and a collector accepts
// it without recording anything. ctx bounds the attempt.
func Probe(ctx context.Context, cfg Config) (proto, target string, err error) {
	proto, err = protocol(&cfg)
	if err != nil {
		return "", "", err
	}
	target, err = otlp.Probe(ctx, exporterOptions(cfg, proto))
	return proto, target, err
}
