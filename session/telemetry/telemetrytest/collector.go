// Package telemetrytest is an OTLP receiver for tests: an httptest server
// that decodes the protobuf bodies POSTed to /v1/traces and /v1/metrics, or
// a gRPC server (grpc-go) with the OTLP trace and metrics services, both
// decoding with the official generated OTLP packages, so tests see exactly
// what a collector would of what acpd's hand-written encoder sends. Either
// can serve TLS, and either can be told to refuse exports (Refuse) to test
// retries and errors.
package telemetrytest

import (
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // a collector takes gzipped gRPC exports
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Collector receives OTLP exports.
type Collector struct {
	url    string
	caFile string

	mu        sync.Mutex
	requests  int
	attempts  int
	spans     []*tracepb.Span
	metrics   []*metricpb.Metric
	traceReqs []*coltracepb.ExportTraceServiceRequest
	metricReq []*colmetricpb.ExportMetricsServiceRequest
	headers   []http.Header
	refusals  []Refusal
	errs      []string
}

// Refusal is how the collector answers one export instead of accepting
// it (Refuse). For OTLP/HTTP Status (with Retry-After and a text Body);
// for gRPC Code and Message, with RetryDelay as a google.rpc.RetryInfo
// detail when set. Rejected or PartialMessage accept the export and answer
// a partial success.
type Refusal struct {
	Status     int
	RetryAfter string
	Body       string

	Code       codes.Code
	Message    string
	RetryDelay time.Duration

	Rejected       int64
	PartialMessage string
}

// NewCollector starts an OTLP/HTTP receiver, closed when the test ends.
func NewCollector(t testing.TB) *Collector {
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// NewTLSCollector starts an OTLP/HTTP receiver over TLS (HTTP/1.1 and
// h2) with a certificate for 127.0.0.1 signed by CAFile.
func NewTLSCollector(t testing.TB) *Collector {
	c := &Collector{}
	cert, caFile := selfSigned(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(c.serve))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests test
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c.url, c.caFile = srv.URL, caFile
	return c
}

// NewGRPCCollector starts an OTLP/gRPC receiver (plaintext, as an
// http:// endpoint asks), stopped when the test ends.
func NewGRPCCollector(t testing.TB) *Collector {
	return newGRPCCollector(t, false)
}

// NewTLSGRPCCollector starts an OTLP/gRPC receiver over TLS with a
// certificate for 127.0.0.1 signed by CAFile.
func NewTLSGRPCCollector(t testing.TB) *Collector {
	return newGRPCCollector(t, true)
}

func newGRPCCollector(t testing.TB, secure bool) *Collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Collector{url: "http://" + ln.Addr().String()}
	var opts []grpc.ServerOption
	if secure {
		cert, caFile := selfSigned(t)
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
		c.url, c.caFile = "https://"+ln.Addr().String(), caFile
	}
	opts = append(opts, grpc.StatsHandler(compressionRecorder{}))
	srv := grpc.NewServer(opts...)
	coltracepb.RegisterTraceServiceServer(srv, grpcTraces{c: c})
	colmetricpb.RegisterMetricsServiceServer(srv, grpcMetrics{c: c})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return c
}

// selfSigned makes a CA-flagged certificate for 127.0.0.1 and writes it
// to a PEM file, the file OTEL_EXPORTER_OTLP_CERTIFICATE names.
func selfSigned(t testing.TB) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "telemetrytest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, file
}

// CAFile is the PEM file of the TLS collectors' certificate ("" for a
// plaintext one).
func (c *Collector) CAFile() string { return c.caFile }

// Refuse queues answers for the next exports, one each, before the
// collector accepts again.
func (c *Collector) Refuse(r ...Refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refusals = append(c.refusals, r...)
}

// attempt records an export's headers and takes the next refusal, if any.
func (c *Collector) attempt(h http.Header) (Refusal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts++
	c.headers = append(c.headers, h)
	if len(c.refusals) == 0 {
		return Refusal{}, false
	}
	r := c.refusals[0]
	c.refusals = c.refusals[1:]
	return r, true
}

// Attempts counts every export request that reached the collector,
// refused ones included.
func (c *Collector) Attempts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts
}

// Headers are the headers (gRPC metadata for gRPC) of every export
// request, in order.
func (c *Collector) Headers() []http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]http.Header(nil), c.headers...)
}

// TraceRequests are the trace export requests accepted, as decoded.
func (c *Collector) TraceRequests() []*coltracepb.ExportTraceServiceRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*coltracepb.ExportTraceServiceRequest(nil), c.traceReqs...)
}

// MetricRequests are the metric export requests accepted, as decoded.
func (c *Collector) MetricRequests() []*colmetricpb.ExportMetricsServiceRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*colmetricpb.ExportMetricsServiceRequest(nil), c.metricReq...)
}

// compressionRecorder notes each call's grpc-encoding, which grpc-go
// keeps out of the metadata, so that Headers shows it.
type compressionRecorder struct{}

type compressionKey struct{}

func (compressionRecorder) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, compressionKey{}, new(string))
}

func (compressionRecorder) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InHeader); ok {
		if p, ok := ctx.Value(compressionKey{}).(*string); ok {
			*p = in.Compression
		}
	}
}

func (compressionRecorder) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (compressionRecorder) HandleConn(context.Context, stats.ConnStats) {}

func grpcHeaders(ctx context.Context) http.Header {
	h := http.Header{}
	if p, ok := ctx.Value(compressionKey{}).(*string); ok && *p != "" {
		h.Set("grpc-encoding", *p)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return h
}

// grpcRefusal is r as a gRPC status error, nil for a partial success.
func grpcRefusal(r Refusal) error {
	if r.Code == codes.OK {
		return nil
	}
	st := status.New(r.Code, r.Message)
	if r.RetryDelay > 0 {
		if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.RetryDelay)}); err == nil {
			st = d
		}
	}
	return st.Err()
}

type grpcTraces struct {
	coltracepb.UnimplementedTraceServiceServer
	c *Collector
}

func (g grpcTraces) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r, refused := g.c.attempt(grpcHeaders(ctx))
	if err := grpcRefusal(r); refused && err != nil {
		return nil, err
	}
	g.c.addSpans(req)
	resp := &coltracepb.ExportTraceServiceResponse{}
	if refused {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: r.Rejected, ErrorMessage: r.PartialMessage}
	}
	return resp, nil
}

type grpcMetrics struct {
	colmetricpb.UnimplementedMetricsServiceServer
	c *Collector
}

func (g grpcMetrics) Export(ctx context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	r, refused := g.c.attempt(grpcHeaders(ctx))
	if err := grpcRefusal(r); refused && err != nil {
		return nil, err
	}
	g.c.addMetrics(req)
	resp := &colmetricpb.ExportMetricsServiceResponse{}
	if refused {
		resp.PartialSuccess = &colmetricpb.ExportMetricsPartialSuccess{RejectedDataPoints: r.Rejected, ErrorMessage: r.PartialMessage}
	}
	return resp, nil
}

// URL is the receiver's base URL (the HTTP exporters add /v1/traces,
// /v1/metrics).
func (c *Collector) URL() string { return c.url }

// Requests counts the export requests received, empty ones included.
func (c *Collector) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

func (c *Collector) addSpans(req *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	c.traceReqs = append(c.traceReqs, req)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
}

func (c *Collector) addMetrics(req *colmetricpb.ExportMetricsServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	c.metricReq = append(c.metricReq, req)
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			c.metrics = append(c.metrics, sm.Metrics...)
		}
	}
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	refusal, refused := c.attempt(r.Header.Clone())
	if refused && refusal.Status != 0 {
		if refusal.RetryAfter != "" {
			w.Header().Set("Retry-After", refusal.RetryAfter)
		}
		http.Error(w, refusal.Body, refusal.Status)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			c.fail(w, err.Error())
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		c.fail(w, err.Error())
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		c.fail(w, "content type "+ct)
		return
	}
	var resp proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(raw, req); err != nil {
			c.fail(w, err.Error())
			return
		}
		c.addSpans(req)
		tr := &coltracepb.ExportTraceServiceResponse{}
		if refused {
			tr.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: refusal.Rejected, ErrorMessage: refusal.PartialMessage}
		}
		resp = tr
	case "/v1/metrics":
		req := &colmetricpb.ExportMetricsServiceRequest{}
		if err := proto.Unmarshal(raw, req); err != nil {
			c.fail(w, err.Error())
			return
		}
		c.addMetrics(req)
		mr := &colmetricpb.ExportMetricsServiceResponse{}
		if refused {
			mr.PartialSuccess = &colmetricpb.ExportMetricsPartialSuccess{RejectedDataPoints: refusal.Rejected, ErrorMessage: refusal.PartialMessage}
		}
		resp = mr
	default:
		c.fail(w, "unexpected path "+r.URL.Path)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *Collector) fail(w http.ResponseWriter, msg string) {
	c.mu.Lock()
	c.errs = append(c.errs, msg)
	c.mu.Unlock()
	http.Error(w, msg, http.StatusBadRequest)
}

// Errors are the requests the receiver could not decode.
func (c *Collector) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// Spans are the spans received so far.
func (c *Collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

// SpansNamed are the received spans with this name.
func (c *Collector) SpansNamed(name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range c.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Metric is the last export of the metric with this name (nil if none);
// with cumulative temporality the last export holds the totals.
func (c *Collector) Metric(name string) *metricpb.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.metrics) - 1; i >= 0; i-- {
		if c.metrics[i].Name == name {
			return c.metrics[i]
		}
	}
	return nil
}

// Counts flattens the last export of a counter (a sum of ints) to one entry
// per data point: its attributes as sorted "key=value" pairs joined by ","
// mapped to its value. nil when the metric never arrived.
func (c *Collector) Counts(name string) map[string]int64 {
	m := c.Metric(name)
	if m == nil {
		return nil
	}
	out := map[string]int64{}
	for _, dp := range m.GetSum().GetDataPoints() {
		var kv []string
		for k, v := range Attrs(dp.Attributes) {
			kv = append(kv, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(kv)
		out[strings.Join(kv, ",")] += dp.GetAsInt()
	}
	return out
}

// Attrs flattens OTLP attributes to strings, ints, bools and string lists.
func Attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			out[kv.Key] = v.BoolValue
		case *commonpb.AnyValue_DoubleValue:
			out[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_ArrayValue:
			var l []string
			for _, e := range v.ArrayValue.Values {
				l = append(l, e.GetStringValue())
			}
			out[kv.Key] = l
		}
	}
	return out
}
