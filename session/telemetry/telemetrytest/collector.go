// Package telemetrytest is an OTLP/HTTP receiver for tests: an httptest
// server that decodes the protobuf bodies the official exporters POST to
// /v1/traces and /v1/metrics, so tests see exactly what a collector would.
package telemetrytest

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector receives OTLP/HTTP exports.
type Collector struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics []*metricpb.Metric
	errs    []string
}

// NewCollector starts a receiver, closed when the test ends.
func NewCollector(t testing.TB) *Collector {
	c := &Collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

// URL is the receiver's base URL (the exporters add /v1/traces, /v1/metrics).
func (c *Collector) URL() string { return c.srv.URL }

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
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		resp = &coltracepb.ExportTraceServiceResponse{}
	case "/v1/metrics":
		req := &colmetricpb.ExportMetricsServiceRequest{}
		if err := proto.Unmarshal(raw, req); err != nil {
			c.fail(w, err.Error())
			return
		}
		c.mu.Lock()
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				c.metrics = append(c.metrics, sm.Metrics...)
			}
		}
		c.mu.Unlock()
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
