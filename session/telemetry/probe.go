//go:build !notelemetry

package telemetry

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Probe sends the collector an empty trace export, as the trace exporter
// would send a batch: over OTLP/HTTP a POST of an empty
// ExportTraceServiceRequest to the traces URL, over gRPC the
// TraceService/Export call, with the OTEL_EXPORTER_OTLP_[TRACES_]HEADERS.
// It answers the protocol and where the spans go, and an error saying why
// the collector did not accept them (`acpd doctor`). An empty request is valid OTLP, and a
// collector accepts it without recording anything. ctx bounds the attempt.
func Probe(ctx context.Context, cfg Config) (proto, target string, err error) {
	proto, err = protocol(&cfg)
	if err != nil {
		return "", "", err
	}
	target, err = tracesTarget(cfg, proto)
	if err != nil {
		return proto, target, err
	}
	headers := otlpHeaders(cfg.Getenv)
	if proto == ProtocolHTTP {
		return proto, target, probeHTTP(ctx, target, headers)
	}
	return proto, target, probeGRPC(ctx, target, headers, cfg.Getenv)
}

// tracesTarget is the traces URL (http) or collector URL (grpc) the trace
// exporter uses: the configured endpoint, else the OTEL_ variables as the
// official exporters read them (the per-signal one as is, the general one
// with /v1/traces added for http), else the local default.
func tracesTarget(cfg Config, proto string) (string, error) {
	if u := endpointURL(cfg, proto, "traces"); u != "" {
		return u, nil
	}
	u := cfg.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if u == "" {
		u = cfg.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		if proto == ProtocolHTTP {
			u = strings.TrimRight(u, "/") + "/v1/traces"
		}
	}
	if _, err := url.Parse(u); err != nil {
		return u, fmt.Errorf("OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT: %w", err)
	}
	return u, nil
}

// otlpHeaders parses OTEL_EXPORTER_OTLP_TRACES_HEADERS, else
// OTEL_EXPORTER_OTLP_HEADERS: "key=value,key2=value2", values
// percent-decoded; malformed pairs are skipped, as the exporters skip them.
func otlpHeaders(getenv func(string) string) map[string]string {
	raw := getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
	if raw == "" {
		raw = getenv("OTEL_EXPORTER_OTLP_HEADERS")
	}
	h := map[string]string{}
	for pair := range strings.SplitSeq(raw, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		if dv, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			h[k] = dv
		}
	}
	return h
}

func probeHTTP(ctx context.Context, target string, headers map[string]string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, http.NoBody)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		if msg := strings.TrimSpace(string(body)); msg != "" && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/") {
			return fmt.Errorf("%s: %s", resp.Status, msg)
		}
		return fmt.Errorf("%s", resp.Status)
	}
	return nil
}

func probeGRPC(ctx context.Context, target string, headers map[string]string, getenv func(string) string) error {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("not a URL with a host: %q", target)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":4317"
	}
	creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	if u.Scheme == "http" || strings.EqualFold(getenv("OTEL_EXPORTER_OTLP_INSECURE"), "true") ||
		strings.EqualFold(getenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE"), "true") {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(host, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx = metadata.NewOutgoingContext(ctx, metadata.New(headers))
	if _, err := coltracepb.NewTraceServiceClient(conn).Export(ctx, &coltracepb.ExportTraceServiceRequest{}); err != nil {
		s := status.Convert(err)
		return fmt.Errorf("gRPC %s: %s", s.Code(), s.Message())
	}
	return nil
}
