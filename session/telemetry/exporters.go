package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/acpd/acpd/session/credhttp"
)

// The exporters are OpenTelemetry's own. They read the standard
// OTEL_EXPORTER_OTLP_* variables themselves (endpoint and per-signal
// endpoints, headers, timeout, compression, insecure, certificates,
// temporality and histogram preferences), as the specification says; acpd
// adds three things:
//
//   - the configured endpoint (telemetry.endpoint), which takes precedence
//     over the endpoint variables: for http the base URL the signal's path
//     is joined to, for grpc the collector's address;
//   - with neither, the specification's default endpoint,
//     http://localhost:4318 or http://localhost:4317 (plaintext), where the
//     Go exporters would try TLS;
//   - the OTLP/HTTP exporters follow a redirect only within the collector's
//     origin (credhttp, through their proxy function: passing a client of
//     ours would drop the certificate and timeout variables they read),
//     so OTEL_EXPORTER_OTLP_HEADERS never reach another host. gRPC has no
//     redirects.

// signalPaths are the OTLP/HTTP paths joined to a base endpoint.
const (
	tracesPath  = "/v1/traces"
	metricsPath = "/v1/metrics"
)

// endpointURL is the URL an exporter of signal ("TRACES" or "METRICS")
// is given, or "" to leave the choice to the endpoint variables.
func endpointURL(cfg Config, proto, signal string) string {
	e := cfg.Endpoint
	if e == "" {
		if os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
			return ""
		}
		e = "http://localhost:4317"
		if proto == ProtocolHTTP {
			e = "http://localhost:4318"
		}
	}
	if !strings.Contains(e, "://") {
		e = "http://" + e // as telemetry.endpoint's check reads a bare host:port
	}
	if proto == ProtocolHTTP {
		path := tracesPath
		if signal == "METRICS" {
			path = metricsPath
		}
		return joinPath(e, path)
	}
	return e
}

// joinPath appends p to u's path (a base endpoint may have one).
func joinPath(u, p string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u + p
	}
	parsed.Path = strings.TrimRight(parsed.Path, "/") + p
	return parsed.String()
}

// target is where the traces go, for messages: the URL given to the
// exporter, else the one the variables name.
func target(cfg Config, proto string) string {
	if u := endpointURL(cfg, proto, "TRACES"); u != "" {
		return u
	}
	if e := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		return e
	}
	e := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if proto == ProtocolHTTP {
		return joinPath(e, tracesPath)
	}
	return e
}

// redirectPolicy is the proxy function of the OTLP/HTTP exporters.
func redirectPolicy() func(*http.Request) (*url.URL, error) {
	return credhttp.Proxy(http.ProxyFromEnvironment)
}

func traceClient(cfg Config, proto string, noRetry bool) otlptrace.Client {
	u := endpointURL(cfg, proto, "TRACES")
	if proto == ProtocolHTTP {
		opts := []otlptracehttp.Option{otlptracehttp.WithProxy(redirectPolicy())}
		if u != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(u))
		}
		if noRetry {
			opts = append(opts, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
		}
		return otlptracehttp.NewClient(opts...)
	}
	var opts []otlptracegrpc.Option
	if u != "" {
		opts = append(opts, otlptracegrpc.WithEndpointURL(u))
	}
	if noRetry {
		opts = append(opts, otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	}
	return otlptracegrpc.NewClient(opts...)
}

func metricExporter(ctx context.Context, cfg Config, proto string) (sdkmetric.Exporter, error) {
	u := endpointURL(cfg, proto, "METRICS")
	if proto == ProtocolHTTP {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithProxy(redirectPolicy())}
		if u != "" {
			opts = append(opts, otlpmetrichttp.WithEndpointURL(u))
		}
		return otlpmetrichttp.New(ctx, opts...)
	}
	var opts []otlpmetricgrpc.Option
	if u != "" {
		opts = append(opts, otlpmetricgrpc.WithEndpointURL(u))
	}
	return otlpmetricgrpc.New(ctx, opts...)
}

func exporters(ctx context.Context, cfg Config, proto string) (sdktrace.SpanExporter, sdkmetric.Exporter, error) {
	se, err := otlptrace.New(ctx, traceClient(cfg, proto, false))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry trace exporter: %w", err)
	}
	me, err := metricExporter(ctx, cfg, proto)
	if err != nil {
		_ = se.Shutdown(ctx)
		return nil, nil, fmt.Errorf("telemetry metric exporter: %w", err)
	}
	return se, me, nil
}

// Probe sends the collector an empty trace export through the trace
// exporter's own client, as it sends a batch (with the standard headers,
// certificates and timeout), without retrying. It answers the protocol and
// where the spans go, and an error saying why the collector did not accept
// them (`acpd doctor`). An empty request is valid OTLP, and a collector
// accepts it without recording anything. ctx bounds the attempt.
func Probe(ctx context.Context, cfg Config) (proto, where string, err error) {
	proto, err = protocol(&cfg)
	if err != nil {
		return "", "", err
	}
	where = target(cfg, proto)
	c := traceClient(cfg, proto, true)
	if err := c.Start(ctx); err != nil {
		return proto, where, err
	}
	defer func() { _ = c.Stop(context.WithoutCancel(ctx)) }()
	return proto, where, c.UploadTraces(ctx, nil)
}
