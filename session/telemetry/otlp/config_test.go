package otlp

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Where each signal goes, from acpd's endpoint or the standard variables,
// and whether it is plaintext.
func TestResolveEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		proto    string
		endpoint string
		env      map[string]string
		traces   string
		metrics  string
	}{
		{name: "http default", proto: ProtocolHTTP, traces: "http://localhost:4318/v1/traces",
			metrics: "http://localhost:4318/v1/metrics"},
		{name: "grpc default", proto: ProtocolGRPC, traces: "http://localhost:4317", metrics: "http://localhost:4317"},
		{name: "acpd endpoint, base path kept", proto: ProtocolHTTP, endpoint: "http://c:4318/otlp/",
			traces: "http://c:4318/otlp/v1/traces", metrics: "http://c:4318/otlp/v1/metrics"},
		{name: "acpd endpoint without scheme is http", proto: ProtocolHTTP, endpoint: "c:4318",
			traces: "http://c:4318/v1/traces", metrics: "http://c:4318/v1/metrics"},
		{name: "acpd endpoint wins over the variables", proto: ProtocolHTTP, endpoint: "https://mine",
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://theirs", "OTEL_EXPORTER_OTLP_INSECURE": "true"},
			traces: "https://mine/v1/traces", metrics: "https://mine/v1/metrics"},
		{name: "general variable gets the signal paths", proto: ProtocolHTTP,
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c.example.com/base"},
			traces: "https://c.example.com/base/v1/traces", metrics: "https://c.example.com/base/v1/metrics"},
		{name: "per-signal variable is used as is", proto: ProtocolHTTP,
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9/custom/path", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:9"},
			traces: "http://t:9/custom/path", metrics: "http://m:9/"},
		{name: "insecure variable makes an https endpoint plaintext", proto: ProtocolHTTP,
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318", "OTEL_EXPORTER_OTLP_INSECURE": "true"},
			traces: "http://c:4318/v1/traces", metrics: "http://c:4318/v1/metrics"},
		{name: "grpc: host and port only, 4317 when no port", proto: ProtocolGRPC,
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c.example.com/ignored"},
			traces: "https://c.example.com:4317", metrics: "https://c.example.com:4317"},
		{name: "grpc: bare host:port from the variables is TLS unless insecure", proto: ProtocolGRPC,
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4317", "OTEL_EXPORTER_OTLP_METRICS_INSECURE": "true"},
			traces: "https://c:4317", metrics: "http://c:4317"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Protocol: tc.proto, Endpoint: tc.endpoint, Getenv: func(k string) string { return tc.env[k] }}
			tr, err := resolve(o, signalTraces)
			require.NoError(t, err)
			m, err := resolve(o, signalMetrics)
			require.NoError(t, err)
			assert.Equal(t, tc.traces, tr.url)
			assert.Equal(t, tc.metrics, m.url)
			for _, s := range []settings{tr, m} {
				assert.Equal(t, strings.HasPrefix(s.url, "http://"), s.insecure, s.url)
				assert.Equal(t, s.insecure, s.tls == nil, "TLS set up exactly when not plaintext")
			}
		})
	}
}

// Headers, timeout and compression: the per-signal variable over the
// general one.
func TestResolveSignalVariables(t *testing.T) {
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":             "a=1,b=x%2Cy",
		"OTEL_EXPORTER_OTLP_METRICS_HEADERS":     "c=3",
		"OTEL_EXPORTER_OTLP_TIMEOUT":             "2500",
		"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT":      "100",
		"OTEL_EXPORTER_OTLP_COMPRESSION":         "gzip",
		"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "none",
	}
	o := Options{Protocol: ProtocolHTTP, Getenv: func(k string) string { return env[k] }}
	tr, err := resolve(o, signalTraces)
	require.NoError(t, err)
	m, err := resolve(o, signalMetrics)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "1", "b": "x,y"}, tr.headers)
	assert.Equal(t, map[string]string{"c": "3"}, m.headers)
	assert.Equal(t, 100*time.Millisecond, tr.timeout)
	assert.Equal(t, 2500*time.Millisecond, m.timeout)
	assert.True(t, tr.gzip)
	assert.False(t, m.gzip)

	d, err := resolve(Options{Protocol: ProtocolGRPC, Getenv: func(string) string { return "" }}, signalTraces)
	require.NoError(t, err)
	assert.Equal(t, defaultTimeout, d.timeout)
	assert.Equal(t, DefaultRetry, d.retry)
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	assert.Equal(t, 7*time.Second, retryAfter("7", now))
	assert.Equal(t, 30*time.Second, retryAfter(now.Add(30*time.Second).Format(http.TimeFormat), now))
	assert.Zero(t, retryAfter(now.Add(-time.Minute).Format(http.TimeFormat), now), "a date passed")
	assert.Zero(t, retryAfter("", now))
	assert.Zero(t, retryAfter("soon", now))
	assert.Zero(t, retryAfter("-3", now))
}

func TestGRPCTimeout(t *testing.T) {
	assert.Equal(t, "250m", grpcTimeout(250*time.Millisecond))
	assert.Equal(t, "1m", grpcTimeout(time.Microsecond))
	assert.Equal(t, "1n", grpcTimeout(-time.Second))
	assert.Equal(t, "100000S", grpcTimeout(100000*time.Second))
}
