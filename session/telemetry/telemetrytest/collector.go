// Package telemetrytest is an OTLP receiver for tests: an httptest server
// that decodes the protobuf bodies the official exporters POST to /v1/traces
// and /v1/metrics, or a gRPC server with the OTLP trace and metrics
// services, so tests see exactly what a collector would.
package telemetrytest

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Collector receives OTLP exports.
type Collector struct {
	url string

	mu       sync.Mutex
	requests int
	spans    []*tracepb.Span
	metrics  []*metricpb.Metric
	errs     []string
}

// NewCollector starts an OTLP/HTTP receiver, closed when the test ends.
func NewCollector(t testing.TB) *Collector {
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// NewGRPCCollector starts an OTLP/gRPC receiver (plaintext, as an
// http:// endpoint asks), stopped when the test ends.
func NewGRPCCollector(t testing.TB) *Collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Collector{url: "http://" + ln.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcTraces{c: c})
	colmetricpb.RegisterMetricsServiceServer(srv, grpcMetrics{c: c})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return c
}

type grpcTraces struct {
	coltracepb.UnimplementedTraceServiceServer
	c *Collector
}

func (g grpcTraces) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.c.addSpans(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type grpcMetrics struct {
	colmetricpb.UnimplementedMetricsServiceServer
	c *Collector
}

func (g grpcMetrics) Export(_ context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	g.c.addMetrics(req)
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
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
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			c.metrics = append(c.metrics, sm.Metrics...)
		}
	}
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
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
		resp = &coltracepb.ExportTraceServiceResponse{}
	case "/v1/metrics":
		req := &colmetricpb.ExportMetricsServiceRequest{}
		if err := proto.Unmarshal(raw, req); err != nil {
			c.fail(w, err.Error())
			return
		}
		c.addMetrics(req)
		resp = &colmetricpb.ExportMetricsServiceResponse{}
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
