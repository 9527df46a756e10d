// Package telemetry exports acpd's traces and metrics over OTLP with the
// official OpenTelemetry Go SDK, when [telemetry] enabled is set. Spans
// follow the GenAI semantic conventions: invoke_agent per prompt turn, chat
// per model request, execute_tool per tool call (names.go). Metrics: tool
// calls per turn, loop stops by loop_type and cap_reason, token usage and
// model request duration.
//
// Off (the default) Start returns a nil *Telemetry: no SDK is set up, no
// goroutine starts, and every method is a no-op on nil. On, spans go through
// a batch processor and metrics through a periodic reader, both exporting
// from their own goroutines with a bounded queue and timeout, so a slow or
// unreachable collector never slows or fails a turn: spans beyond the queue
// are dropped.
package telemetry

import (
	"fmt"
	"os"
	"time"
)

// Protocols.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http"
)

// Config selects the exporters. The standard OTEL_EXPORTER_OTLP_* variables
// (endpoint, per-signal endpoints, headers, timeout, certificates,
// compression) apply as the exporters read them; Endpoint, when set, takes
// precedence over the endpoint variables.
type Config struct {
	Enabled bool
	// Endpoint is the collector: a URL (http://host:4318 for http, the
	// signal paths /v1/traces and /v1/metrics are added; http://host:4317
	// for grpc). "" uses OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]ENDPOINT, else
	// http://localhost:4317 or http://localhost:4318.
	Endpoint string
	// Protocol is grpc or http; "" takes OTEL_EXPORTER_OTLP_PROTOCOL
	// (grpc, http/protobuf), else grpc.
	Protocol string
	// LogPrompts adds the prompt text and tool arguments to spans.
	LogPrompts bool
	// ProviderName is gen_ai.provider.name (e.g. openai).
	ProviderName   string
	ServiceVersion string
	// MetricInterval is how often metrics are exported (0: 10 s).
	MetricInterval time.Duration
	// OnError receives export failures (an unreachable collector); they
	// never reach a turn. nil: the SDK's default, the standard log.
	OnError func(error)
}

// protocol resolves the export protocol: the configured one, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else grpc (as qwen-code and gemini-cli
// default; the exporters do not read the variable, each speaks one).
func protocol(cfg *Config) (string, error) {
	p := cfg.Protocol
	if p == "" {
		switch env := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); env {
		case "", "grpc":
			p = ProtocolGRPC
		case "http/protobuf":
			p = ProtocolHTTP
		default:
			return "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported; use grpc or http/protobuf", env)
		}
	}
	if p != ProtocolGRPC && p != ProtocolHTTP {
		return "", fmt.Errorf("telemetry.protocol: must be grpc or http, got %q", p)
	}
	return p, nil
}

// TurnEnd is how a turn ended.
type TurnEnd struct {
	StopReason string // end_turn, cancelled, …; "" for an error
	ToolCalls  int    // the calls the loop guard counted
	LoopType   string // set for a loop stop
	CapReason  string // set for a turn_tool_call_cap stop
	Err        error  // the prompt's error, if any
}

func errorType(e TurnEnd) string {
	if e.LoopType != "" {
		return "loop_detected"
	}
	return "_OTHER"
}

// ChatEnd is how a model request ended.
type ChatEnd struct {
	InputTokens, OutputTokens int
	// CacheReadTokens is the part of InputTokens the provider served from
	// its prompt cache.
	CacheReadTokens int
	// CacheWriteTokens is the part of InputTokens written to the cache.
	CacheWriteTokens int
	HaveUsage        bool
	FinishReason     string
	Err              error
}
