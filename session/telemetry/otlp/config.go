// Package otlp is acpd's own OTLP exporter: it implements the OpenTelemetry
// SDK's span and metric exporter interfaces, writes the OTLP protobuf
// messages by hand (wire.go, traces.go, metrics.go) and sends them over
// OTLP/HTTP (POST /v1/traces, /v1/metrics) or OTLP/gRPC (a unary call over
// HTTP/2, h2c for an insecure endpoint), both on net/http.
//
// The official exporters link gRPC, the protobuf runtime, the generated
// OTLP packages and grpc-gateway, whose package initialisation and binary
// size every acpd process paid at start-up, telemetry on or off; this
// package needs nothing beyond the SDK and the standard library.
//
// It reads the standard OTEL_EXPORTER_OTLP_* variables as the official
// exporters do (Options).
package otlp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// Protocols.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http"
)

// Signals.
const (
	signalTraces  = "traces"
	signalMetrics = "metrics"
)

// Options configure an exporter. Beside them the standard variables apply,
// each OTEL_EXPORTER_OTLP_X overridden for one signal by
// OTEL_EXPORTER_OTLP_TRACES_X or OTEL_EXPORTER_OTLP_METRICS_X:
//
//   - ENDPOINT (when Endpoint is ""): for http the base URL the signal's
//     path /v1/traces or /v1/metrics is added to (the per-signal variable
//     is the whole URL, used as is); for grpc the collector's URL, of which
//     the scheme and host count. http:// is plaintext (h2c for grpc),
//     https:// or no scheme is TLS.
//   - INSECURE: true makes an endpoint from the variables plaintext, false
//     TLS, whatever its scheme.
//   - HEADERS: key=value pairs separated by commas, values percent-decoded.
//   - TIMEOUT: milliseconds one export waits (default 10000).
//   - COMPRESSION: gzip or none.
//   - CERTIFICATE, CLIENT_CERTIFICATE, CLIENT_KEY: PEM files for the TLS
//     roots and a client certificate.
//   - METRICS_TEMPORALITY_PREFERENCE: cumulative (default), delta or
//     lowmemory; METRICS_DEFAULT_HISTOGRAM_AGGREGATION:
//     explicit_bucket_histogram (default) or
//     base2_exponential_bucket_histogram.
type Options struct {
	// Protocol is ProtocolGRPC or ProtocolHTTP.
	Protocol string
	// Endpoint, when set, is the collector's URL and takes precedence over
	// the endpoint variables: for http the base the signal paths are added
	// to, for grpc its scheme and host. Without a scheme it is http://.
	Endpoint string
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
	// ReadFile reads the certificate files (nil: os.ReadFile).
	ReadFile func(string) ([]byte, error)
	// Retry is the backoff for retryable failures; zero is DefaultRetry.
	Retry Retry
}

// Retry is how a retryable failure (a 429 or 503, gRPC UNAVAILABLE, a
// lost connection) is retried: waits grow from Initial by half each time
// up to Max, with jitter, until MaxElapsed has passed since the first
// attempt. A collector's Retry-After (or gRPC RetryInfo) replaces the
// computed wait.
type Retry struct {
	Initial, Max, MaxElapsed time.Duration
}

// DefaultRetry is the official exporters' backoff.
var DefaultRetry = Retry{Initial: 5 * time.Second, Max: 30 * time.Second, MaxElapsed: time.Minute}

// defaultTimeout bounds one export when OTEL_EXPORTER_OTLP_TIMEOUT does not.
const defaultTimeout = 10 * time.Second

// settings are one signal's resolved settings.
type settings struct {
	proto    string
	url      string // http: the signal's URL; grpc: scheme://host:port
	insecure bool
	headers  map[string]string
	gzip     bool
	timeout  time.Duration
	tls      *tls.Config // nil when insecure
	retry    Retry
}

type env struct {
	getenv func(string) string
	signal string
}

// get is the per-signal variable, else the general one; name is the
// variable's name it was read from, for errors.
func (e env) get(suffix string) (value, name string) {
	name = "OTEL_EXPORTER_OTLP_" + strings.ToUpper(e.signal) + "_" + suffix
	if v := strings.TrimSpace(e.getenv(name)); v != "" {
		return v, name
	}
	name = "OTEL_EXPORTER_OTLP_" + suffix
	return strings.TrimSpace(e.getenv(name)), name
}

func resolve(o Options, signal string) (settings, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.ReadFile == nil {
		o.ReadFile = os.ReadFile
	}
	if o.Retry == (Retry{}) {
		o.Retry = DefaultRetry
	}
	if o.Protocol != ProtocolGRPC && o.Protocol != ProtocolHTTP {
		return settings{}, fmt.Errorf("otlp: protocol must be grpc or http, got %q", o.Protocol)
	}
	ev := env{getenv: o.Getenv, signal: signal}
	s := settings{proto: o.Protocol, retry: o.Retry, timeout: defaultTimeout}
	if err := s.endpoint(o, ev); err != nil {
		return settings{}, err
	}
	s.headers = Headers(o.Getenv, signal)
	if v, name := ev.get("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return settings{}, fmt.Errorf("%s: %q is not a number of milliseconds", name, v)
		}
		if ms > 0 {
			s.timeout = time.Duration(ms) * time.Millisecond
		}
	}
	switch v, name := ev.get("COMPRESSION"); strings.ToLower(v) {
	case "", "none":
	case "gzip":
		s.gzip = true
	default:
		return settings{}, fmt.Errorf("%s: %q is not supported; use gzip or none", name, v)
	}
	if !s.insecure {
		cfg, err := tlsConfig(ev, o.ReadFile)
		if err != nil {
			return settings{}, err
		}
		s.tls = cfg
	}
	return s, nil
}

// endpoint sets the URL and whether it is plaintext.
func (s *settings) endpoint(o Options, ev env) error {
	raw, name, fromEnv := o.Endpoint, "telemetry.endpoint", false
	perSignal := false
	if raw == "" {
		if v := strings.TrimSpace(o.Getenv("OTEL_EXPORTER_OTLP_" + strings.ToUpper(ev.signal) + "_ENDPOINT")); v != "" {
			raw, name, fromEnv, perSignal = v, "OTEL_EXPORTER_OTLP_"+strings.ToUpper(ev.signal)+"_ENDPOINT", true, true
		} else if v := strings.TrimSpace(o.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
			raw, name, fromEnv = v, "OTEL_EXPORTER_OTLP_ENDPOINT", true
		}
	}
	if raw == "" {
		raw = "http://localhost:4317"
		if s.proto == ProtocolHTTP {
			raw = "http://localhost:4318"
		}
	}
	secure := true
	if !strings.Contains(raw, "://") {
		// acpd's own setting has always meant http:// without a scheme;
		// the variables follow the official exporters, which take a bare
		// host:port as a TLS endpoint.
		if fromEnv {
			raw = "https://" + raw
		} else {
			raw = "http://" + raw
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		secure = false
	case "https":
	default:
		return fmt.Errorf("%s: %q: the scheme must be http or https", name, raw)
	}
	if u.Host == "" {
		return fmt.Errorf("%s: %q has no host", name, raw)
	}
	if fromEnv {
		if v, _ := ev.get("INSECURE"); v != "" {
			secure = !strings.EqualFold(v, "true")
		}
	}
	s.insecure = !secure
	scheme := "https"
	if s.insecure {
		scheme = "http"
	}
	host := u.Host
	if s.proto == ProtocolGRPC {
		if u.Port() == "" {
			// The OTLP/gRPC port, as for the default endpoint.
			host = net.JoinHostPort(u.Hostname(), "4317")
		}
		s.url = scheme + "://" + host
		return nil
	}
	p := u.Path
	switch {
	case !fromEnv:
		p = strings.TrimRight(p, "/") + "/v1/" + ev.signal
	case perSignal:
		if p == "" {
			p = "/"
		}
	default:
		p = path.Join("/", p, "v1", ev.signal)
	}
	s.url = (&url.URL{Scheme: scheme, Host: host, Path: p, RawQuery: u.RawQuery}).String()
	return nil
}

// Headers are the OTLP headers for a signal: OTEL_EXPORTER_OTLP_{SIGNAL}_HEADERS
// when set, else OTEL_EXPORTER_OTLP_HEADERS, "key=value,key2=value2" with
// values percent-decoded; malformed pairs are skipped, as the official
// exporters skip them.
func Headers(getenv func(string) string, signal string) map[string]string {
	raw := getenv("OTEL_EXPORTER_OTLP_" + strings.ToUpper(signal) + "_HEADERS")
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

// tlsConfig is the TLS set-up from the certificate variables; a file that
// cannot be read or parsed is an error naming its variable.
func tlsConfig(ev env, readFile func(string) ([]byte, error)) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if file, name := ev.get("CERTIFICATE"); file != "" {
		pem, err := readFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", name, file)
		}
		cfg.RootCAs = pool
	}
	certFile, certName := ev.get("CLIENT_CERTIFICATE")
	keyFile, keyName := ev.get("CLIENT_KEY")
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, fmt.Errorf("%s and %s must be set together", certName, keyName)
		}
		certPEM, err := readFile(certFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", certName, err)
		}
		keyPEM, err := readFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyName, err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", certName, keyName, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
