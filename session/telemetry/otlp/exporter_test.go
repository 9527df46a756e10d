package otlp_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	grpccodes "google.golang.org/grpc/codes"

	"github.com/acpd/acpd/session/telemetry/otlp"
	"github.com/acpd/acpd/session/telemetry/telemetrytest"
)

// The exporters are tested end to end: the real SDK produces the spans
// and metrics, the exporter sends them over OTLP/HTTP or OTLP/gRPC, and
// telemetrytest decodes them with the official OTLP packages (grpc-go
// serves the gRPC side).

type transport struct {
	proto      string
	plain, tls func(testing.TB) *telemetrytest.Collector
}

var transports = []transport{
	{otlp.ProtocolHTTP, telemetrytest.NewCollector, telemetrytest.NewTLSCollector},
	{otlp.ProtocolGRPC, telemetrytest.NewGRPCCollector, telemetrytest.NewTLSGRPCCollector},
}

// fastRetry keeps retry tests short; the backoff's shape is the same.
var fastRetry = otlp.Retry{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, MaxElapsed: 3 * time.Second}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func exporters(t *testing.T, o otlp.Options) (*otlp.TraceExporter, *otlp.MetricExporter) {
	t.Helper()
	if o.Retry == (otlp.Retry{}) {
		o.Retry = fastRetry
	}
	if o.Getenv == nil {
		o.Getenv = envOf(nil)
	}
	te, err := otlp.NewTraceExporter(o)
	require.NoError(t, err)
	me, err := otlp.NewMetricExporter(o)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = te.Shutdown(context.Background())
		_ = me.Shutdown(context.Background())
	})
	return te, me
}

// anyOf flattens an OTLP value for comparison.
func anyOf(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, anyOf(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return attrsOf(x.KvlistValue.Values)
	}
	return nil
}

func attrsOf(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		out[kv.Key] = anyOf(kv.Value)
	}
	return out
}

func spanNamed(t *testing.T, c *telemetrytest.Collector, name string) *tracepb.Span {
	t.Helper()
	s := c.SpansNamed(name)
	require.Len(t, s, 1, "span %q", name)
	return s[0]
}

// A turn-like trace and every instrument kind, through the SDK, each
// transport, plaintext and TLS, with and without gzip, headers, and the
// temporality and histogram preferences.
func TestRoundTrip(t *testing.T) {
	for _, tr := range transports {
		for _, tc := range []struct {
			name string
			tls  bool
			env  map[string]string
		}{
			{name: "plain"},
			{name: "gzip and headers", env: map[string]string{
				"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
				"OTEL_EXPORTER_OTLP_HEADERS":     "x-api-key=s%20ecret,x-team=t1",
			}},
			{name: "delta and exponential", env: map[string]string{
				"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE":        "delta",
				"OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": "base2_exponential_bucket_histogram",
			}},
			{name: "tls", tls: true},
		} {
			t.Run(tr.proto+"/"+tc.name, func(t *testing.T) {
				mk := tr.plain
				if tc.tls {
					mk = tr.tls
				}
				c := mk(t)
				env := map[string]string{}
				for k, v := range tc.env {
					env[k] = v
				}
				if tc.tls {
					env["OTEL_EXPORTER_OTLP_CERTIFICATE"] = c.CAFile()
				}
				roundTrip(t, tr.proto, c, env)
			})
		}
	}
}

func roundTrip(t *testing.T, proto string, c *telemetrytest.Collector, env map[string]string) {
	te, me := exporters(t, otlp.Options{Protocol: proto, Endpoint: c.URL(), Getenv: envOf(env)})
	res := resource.NewSchemaless(attribute.String("service.name", "acpd"), attribute.String("service.version", "test"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(te))
	reader := sdkmetric.NewManualReader(sdkmetric.WithTemporalitySelector(me.Temporality),
		sdkmetric.WithAggregationSelector(me.Aggregation))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))
	ctx := t.Context()

	tracer := tp.Tracer("acpd-test", trace.WithInstrumentationVersion("0.1"))
	_, other := tp.Tracer("other").Start(ctx, "linked")
	other.End()
	tctx, turn := tracer.Start(ctx, "invoke_agent acpd", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("gen_ai.conversation.id", "sess1"),
			attribute.Int("acpd.turn.tool_calls", 101),
			attribute.Bool("flag", false),
			attribute.Float64("ratio", 0.25),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop", "length"}),
			attribute.Int64Slice("ints", []int64{-1, 2}),
		),
		trace.WithLinks(trace.Link{SpanContext: other.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("why", "retry")}}))
	cctx, chat := tracer.Start(tctx, "chat qwen3", trace.WithSpanKind(trace.SpanKindClient))
	chat.AddEvent("first token", trace.WithAttributes(attribute.Int("offset", 3)))
	chat.RecordError(errors.New("stream cut"))
	chat.SetStatus(codes.Error, "stream cut")

	m := mp.Meter("acpd-test")
	calls, err := m.Int64Counter("acpd.loop.stops")
	require.NoError(t, err)
	tokens, err := m.Float64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithExplicitBucketBoundaries(1, 100, 10000))
	require.NoError(t, err)
	open, err := m.Int64UpDownCounter("acpd.sessions.open")
	require.NoError(t, err)
	gauge, err := m.Float64Gauge("acpd.queue.fill")
	require.NoError(t, err)
	_, err = m.Int64ObservableGauge("acpd.goroutines", metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(12, metric.WithAttributes(attribute.String("kind", "all")))
		return nil
	}))
	require.NoError(t, err)
	stopAttrs := metric.WithAttributes(attribute.String("loop_type", "turn_tool_call_cap"), attribute.String("cap_reason", "stuck"))
	calls.Add(cctx, 1, stopAttrs)
	calls.Add(cctx, 2, stopAttrs)
	tokens.Record(cctx, 1200, metric.WithAttributes(attribute.String("gen_ai.token.type", "input")))
	tokens.Record(cctx, 30, metric.WithAttributes(attribute.String("gen_ai.token.type", "output")))
	open.Add(ctx, 3)
	open.Add(ctx, -1)
	gauge.Record(ctx, 0.75)
	chat.End()
	turn.End()

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	require.NoError(t, me.Export(ctx, &rm))
	require.NoError(t, tp.Shutdown(ctx))
	assert.Empty(t, c.Errors())

	// Traces.
	reqs := c.TraceRequests()
	require.NotEmpty(t, reqs)
	rs := reqs[0].ResourceSpans[0]
	assert.Equal(t, map[string]any{"service.name": "acpd", "service.version": "test"}, attrsOf(rs.Resource.Attributes))
	ts := spanNamed(t, c, "invoke_agent acpd")
	cs := spanNamed(t, c, "chat qwen3")
	ls := spanNamed(t, c, "linked")
	sc := turn.SpanContext()
	assert.Equal(t, sc.TraceID().String(), trace.TraceID(ts.TraceId).String())
	assert.Equal(t, sc.SpanID().String(), trace.SpanID(ts.SpanId).String())
	assert.Empty(t, ts.ParentSpanId)
	assert.Equal(t, ts.SpanId, cs.ParentSpanId)
	assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, ts.Kind)
	assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, cs.Kind)
	assert.Equal(t, uint32(0x101), ts.Flags, "sampled, parent known not remote")
	assert.Equal(t, map[string]any{
		"gen_ai.conversation.id": "sess1", "acpd.turn.tool_calls": int64(101), "flag": false, "ratio": 0.25,
		"gen_ai.response.finish_reasons": []any{"stop", "length"}, "ints": []any{int64(-1), int64(2)},
	}, attrsOf(ts.Attributes))
	assert.LessOrEqual(t, ts.StartTimeUnixNano, cs.StartTimeUnixNano)
	assert.GreaterOrEqual(t, ts.EndTimeUnixNano, cs.EndTimeUnixNano)
	assert.NotZero(t, ts.StartTimeUnixNano)
	require.Len(t, ts.Links, 1)
	assert.Equal(t, ls.SpanId, ts.Links[0].SpanId)
	assert.Equal(t, ls.TraceId, ts.Links[0].TraceId)
	assert.Equal(t, map[string]any{"why": "retry"}, attrsOf(ts.Links[0].Attributes))
	require.Len(t, cs.Events, 2)
	assert.Equal(t, "first token", cs.Events[0].Name)
	assert.Equal(t, map[string]any{"offset": int64(3)}, attrsOf(cs.Events[0].Attributes))
	assert.Equal(t, "exception", cs.Events[1].Name)
	assert.Equal(t, "stream cut", attrsOf(cs.Events[1].Attributes)["exception.message"])
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, cs.Status.Code)
	assert.Equal(t, "stream cut", cs.Status.Message)
	var scopes []string
	for _, r := range reqs {
		for _, s := range r.ResourceSpans[0].ScopeSpans {
			scopes = append(scopes, s.Scope.Name+"@"+s.Scope.Version)
		}
	}
	assert.ElementsMatch(t, []string{"other@", "acpd-test@0.1", "acpd-test@0.1"}, scopes)

	// Metrics.
	mreqs := c.MetricRequests()
	require.Len(t, mreqs, 1)
	sms := mreqs[0].ResourceMetrics[0].ScopeMetrics
	require.Len(t, sms, 1)
	assert.Equal(t, "acpd-test", sms[0].Scope.Name)
	delta := env["OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"] == "delta"
	wantTemp := metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
	if delta {
		wantTemp = metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	}
	stops := c.Metric("acpd.loop.stops").GetSum()
	require.NotNil(t, stops)
	assert.True(t, stops.IsMonotonic)
	assert.Equal(t, wantTemp, stops.AggregationTemporality)
	assert.Equal(t, map[string]int64{"cap_reason=stuck,loop_type=turn_tool_call_cap": 3}, c.Counts("acpd.loop.stops"))
	require.NotEmpty(t, stops.DataPoints[0].Exemplars, "recorded in a sampled span: exemplars")
	for _, ex := range stops.DataPoints[0].Exemplars {
		assert.Equal(t, cs.SpanId, ex.SpanId)
		assert.Equal(t, cs.TraceId, ex.TraceId)
		assert.Contains(t, []int64{1, 2}, ex.GetAsInt())
		assert.NotZero(t, ex.TimeUnixNano)
	}

	openSum := c.Metric("acpd.sessions.open").GetSum()
	require.NotNil(t, openSum)
	assert.False(t, openSum.IsMonotonic)
	assert.Equal(t, metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, openSum.AggregationTemporality,
		"up-down counters stay cumulative")
	assert.Equal(t, int64(2), openSum.DataPoints[0].GetAsInt())

	assert.Equal(t, 0.75, c.Metric("acpd.queue.fill").GetGauge().DataPoints[0].GetAsDouble())
	g := c.Metric("acpd.goroutines").GetGauge().DataPoints[0]
	assert.Equal(t, int64(12), g.GetAsInt())
	assert.Equal(t, map[string]any{"kind": "all"}, attrsOf(g.Attributes))

	tok := c.Metric("gen_ai.client.token.usage")
	require.NotNil(t, tok)
	assert.Equal(t, "{token}", tok.Unit)
	byType := map[any]float64{}
	if env["OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"] != "" {
		eh := tok.GetExponentialHistogram()
		require.NotNil(t, eh, "exponential histograms asked for")
		assert.Equal(t, wantTemp, eh.AggregationTemporality)
		for _, dp := range eh.DataPoints {
			byType[attrsOf(dp.Attributes)["gen_ai.token.type"]] = dp.GetSum()
			assert.Equal(t, uint64(1), dp.Count)
			assert.Equal(t, dp.GetSum(), dp.GetMin())
			assert.Equal(t, dp.GetSum(), dp.GetMax())
			var n uint64
			for _, b := range dp.Positive.BucketCounts {
				n += b
			}
			assert.Equal(t, uint64(1), n, "one value in one positive bucket")
			require.Len(t, dp.Exemplars, 1)
			assert.Equal(t, cs.SpanId, dp.Exemplars[0].SpanId)
		}
	} else {
		h := tok.GetHistogram()
		require.NotNil(t, h)
		assert.Equal(t, wantTemp, h.AggregationTemporality)
		for _, dp := range h.DataPoints {
			byType[attrsOf(dp.Attributes)["gen_ai.token.type"]] = dp.GetSum()
			assert.Equal(t, []float64{1, 100, 10000}, dp.ExplicitBounds)
			assert.Len(t, dp.BucketCounts, 4)
			assert.Equal(t, uint64(1), dp.Count)
			require.Len(t, dp.Exemplars, 1)
			assert.Equal(t, cs.SpanId, dp.Exemplars[0].SpanId)
			assert.Equal(t, dp.GetSum(), dp.Exemplars[0].GetAsDouble())
		}
	}
	assert.Equal(t, map[any]float64{"input": 1200, "output": 30}, byType)

	// Headers and compression as configured.
	for _, h := range c.Headers() {
		if env["OTEL_EXPORTER_OTLP_HEADERS"] != "" {
			assert.Equal(t, "s ecret", h.Get("x-api-key"))
			assert.Equal(t, "t1", h.Get("x-team"))
		}
		enc := h.Get("Content-Encoding")
		if proto == otlp.ProtocolGRPC {
			enc = h.Get("grpc-encoding")
			assert.Equal(t, "application/grpc", h.Get("content-type"))
		}
		if env["OTEL_EXPORTER_OTLP_COMPRESSION"] == "gzip" {
			assert.Equal(t, "gzip", enc)
		} else {
			assert.Empty(t, enc)
		}
	}
}

func oneSpan(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	return tracetest.SpanStubs{{Name: "s", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})}}.Snapshots()
}

// What a collector's refusal does: retried when OTLP says it may be
// (honouring Retry-After and RetryInfo), reported with the collector's
// reason when not, and a partial success reported as an error.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		proto    string
		refuse   []telemetrytest.Refusal
		attempts int
		err      string        // "" for success
		atLeast  time.Duration // the wait the collector asked for
	}{
		{name: "400 not retried", proto: otlp.ProtocolHTTP, refuse: []telemetrytest.Refusal{{Status: 400, Body: "bad payload"}},
			attempts: 1, err: "400 Bad Request: bad payload"},
		{name: "401 not retried", proto: otlp.ProtocolHTTP, refuse: []telemetrytest.Refusal{{Status: 401, Body: "bad api key"}},
			attempts: 1, err: "401 Unauthorized: bad api key"},
		{name: "503 Retry-After honoured", proto: otlp.ProtocolHTTP,
			refuse: []telemetrytest.Refusal{{Status: 503, RetryAfter: "1"}}, attempts: 2, atLeast: time.Second},
		{name: "429 retried with backoff", proto: otlp.ProtocolHTTP,
			refuse: []telemetrytest.Refusal{{Status: 429}, {Status: 429}}, attempts: 3},
		{name: "502 and 504 retried", proto: otlp.ProtocolHTTP,
			refuse: []telemetrytest.Refusal{{Status: 502}, {Status: 504}}, attempts: 3},
		{name: "http partial success", proto: otlp.ProtocolHTTP,
			refuse: []telemetrytest.Refusal{{Rejected: 1, PartialMessage: "too old"}}, attempts: 1,
			err: "the collector rejected 1 spans: too old"},
		{name: "InvalidArgument not retried", proto: otlp.ProtocolGRPC,
			refuse:   []telemetrytest.Refusal{{Code: grpccodes.InvalidArgument, Message: "bad: 100% wrong"}},
			attempts: 1, err: "gRPC InvalidArgument: bad: 100% wrong"},
		{name: "Unauthenticated not retried", proto: otlp.ProtocolGRPC,
			refuse: []telemetrytest.Refusal{{Code: grpccodes.Unauthenticated, Message: "no key"}}, attempts: 1,
			err: "gRPC Unauthenticated: no key"},
		{name: "Unavailable retried", proto: otlp.ProtocolGRPC,
			refuse: []telemetrytest.Refusal{{Code: grpccodes.Unavailable}, {Code: grpccodes.Aborted}}, attempts: 3},
		{name: "ResourceExhausted without RetryInfo not retried", proto: otlp.ProtocolGRPC,
			refuse: []telemetrytest.Refusal{{Code: grpccodes.ResourceExhausted, Message: "full"}}, attempts: 1,
			err: "gRPC ResourceExhausted: full"},
		{name: "ResourceExhausted with RetryInfo retried after its delay", proto: otlp.ProtocolGRPC,
			refuse:   []telemetrytest.Refusal{{Code: grpccodes.ResourceExhausted, RetryDelay: 700 * time.Millisecond}},
			attempts: 2, atLeast: 700 * time.Millisecond},
		{name: "grpc partial success", proto: otlp.ProtocolGRPC,
			refuse: []telemetrytest.Refusal{{Rejected: 2}}, attempts: 1,
			err: "the collector rejected 2 spans: no reason given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *telemetrytest.Collector
			if tc.proto == otlp.ProtocolHTTP {
				c = telemetrytest.NewCollector(t)
			} else {
				c = telemetrytest.NewGRPCCollector(t)
			}
			c.Refuse(tc.refuse...)
			te, _ := exporters(t, otlp.Options{Protocol: tc.proto, Endpoint: c.URL()})
			start := time.Now()
			err := te.ExportSpans(t.Context(), oneSpan(t))
			if tc.err == "" {
				require.NoError(t, err)
				assert.Len(t, c.Spans(), 1)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.Contains(t, err.Error(), "otlp traces export to "+c.URL())
			}
			assert.Equal(t, tc.attempts, c.Attempts())
			assert.GreaterOrEqual(t, time.Since(start), tc.atLeast)
		})
	}
}

// A collector that keeps refusing is given up on when the retry budget
// is spent, with its last answer.
func TestRetriesGiveUp(t *testing.T) {
	c := telemetrytest.NewCollector(t)
	for range 100 {
		c.Refuse(telemetrytest.Refusal{Status: 503, Body: "overloaded"})
	}
	te, err := otlp.NewTraceExporter(otlp.Options{Protocol: otlp.ProtocolHTTP, Endpoint: c.URL(), Getenv: envOf(nil),
		Retry: otlp.Retry{Initial: 20 * time.Millisecond, Max: 20 * time.Millisecond, MaxElapsed: 300 * time.Millisecond}})
	require.NoError(t, err)
	start := time.Now()
	err = te.ExportSpans(t.Context(), oneSpan(t))
	require.ErrorContains(t, err, "503 Service Unavailable: overloaded")
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Greater(t, c.Attempts(), 2)
}

// No collector: the connection error, after the retry budget.
func TestCollectorDown(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.proto, func(t *testing.T) {
			te, me := exporters(t, otlp.Options{Protocol: tr.proto, Endpoint: "http://127.0.0.1:1",
				Retry: otlp.Retry{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond, MaxElapsed: 100 * time.Millisecond}})
			err := te.ExportSpans(t.Context(), oneSpan(t))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "connection refused")
			err = me.Export(t.Context(), &metricdata.ResourceMetrics{ScopeMetrics: []metricdata.ScopeMetrics{{
				Metrics: []metricdata.Metrics{{Name: "m", Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Value: 1}}}}}}}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "otlp metrics export to http://127.0.0.1:1")
		})
	}
}

// blackHole accepts connections and never answers.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return "http://" + ln.Addr().String()
}

// OTEL_EXPORTER_OTLP_TIMEOUT bounds an export to a collector that never
// answers.
func TestTimeout(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.proto, func(t *testing.T) {
			te, _ := exporters(t, otlp.Options{Protocol: tr.proto, Endpoint: blackHole(t),
				Getenv: envOf(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "200"}),
				Retry:  otlp.Retry{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond, MaxElapsed: 500 * time.Millisecond}})
			start := time.Now()
			err := te.ExportSpans(t.Context(), oneSpan(t))
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, time.Since(start), 3*time.Second)
		})
	}
}

// Shutdown ends an export in flight; exports after it fail at once.
func TestShutdown(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.proto, func(t *testing.T) {
			te, err := otlp.NewTraceExporter(otlp.Options{Protocol: tr.proto, Endpoint: blackHole(t), Getenv: envOf(nil)})
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- te.ExportSpans(context.Background(), oneSpan(t)) }()
			time.Sleep(100 * time.Millisecond)
			require.NoError(t, te.Shutdown(t.Context()))
			select {
			case err := <-done:
				require.Error(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("the export in flight outlived Shutdown")
			}
			assert.ErrorIs(t, te.ExportSpans(t.Context(), oneSpan(t)), otlp.ErrShutdown)
		})
	}
}

// TLS: a collector whose certificate is not trusted is refused, naming
// the certificate; a client certificate is sent when configured.
func TestTLS(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.proto, func(t *testing.T) {
			c := tr.tls(t)
			te, _ := exporters(t, otlp.Options{Protocol: tr.proto, Endpoint: c.URL(),
				Retry: otlp.Retry{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond, MaxElapsed: 50 * time.Millisecond}})
			err := te.ExportSpans(t.Context(), oneSpan(t))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "certificate")
			assert.Empty(t, c.Spans())

			// The endpoint from the variables, trusted through them.
			te, _ = exporters(t, otlp.Options{Protocol: tr.proto, Getenv: envOf(map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT":    c.URL(),
				"OTEL_EXPORTER_OTLP_CERTIFICATE": c.CAFile(),
			})})
			require.NoError(t, te.ExportSpans(t.Context(), oneSpan(t)))
			assert.Len(t, c.Spans(), 1)
		})
	}
}

// Bad settings are errors naming the variable, at start rather than at
// the first export.
func TestBadSettings(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))
	for _, tc := range []struct {
		env  map[string]string
		o    otlp.Options
		want string
	}{
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, want: "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "zstd"}, want: "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://h:4317", "OTEL_EXPORTER_OTLP_CERTIFICATE": missing},
			want: "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://h:4317", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": notPEM},
			want: "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: " + notPEM + " holds no PEM certificate"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://h:4317", "OTEL_EXPORTER_OTLP_CLIENT_KEY": notPEM},
			want: "must be set together"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://h"}, want: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{o: otlp.Options{Endpoint: "unix:///tmp/s"}, want: "telemetry.endpoint"},
		{o: otlp.Options{Protocol: "udp"}, want: "protocol must be grpc or http"},
	} {
		o := tc.o
		if o.Protocol == "" {
			o.Protocol = otlp.ProtocolHTTP
		}
		o.Getenv = envOf(tc.env)
		_, err := otlp.NewTraceExporter(o)
		require.Error(t, err, "%v", tc)
		assert.Contains(t, err.Error(), tc.want)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"} {
		_, err := otlp.NewMetricExporter(otlp.Options{Protocol: otlp.ProtocolHTTP, Getenv: envOf(map[string]string{v: "sometimes"})})
		require.ErrorContains(t, err, v)
	}
}

// Probe answers the collector's refusal over gRPC with its code, once.
func TestProbe_GRPCRefusal(t *testing.T) {
	c := telemetrytest.NewGRPCCollector(t)
	c.Refuse(telemetrytest.Refusal{Code: grpccodes.Unavailable, Message: "draining"})
	target, err := otlp.Probe(t.Context(), otlp.Options{Protocol: otlp.ProtocolGRPC, Endpoint: c.URL(), Getenv: envOf(nil)})
	assert.Equal(t, c.URL(), target)
	require.EqualError(t, err, "gRPC Unavailable: draining")
	assert.Equal(t, 1, c.Attempts(), "a probe does not retry")
}
