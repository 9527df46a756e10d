package otlp

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// The encoder is checked against the official generated OTLP packages:
// what it writes is decoded by them and compared, field by field, with the
// message built by hand from the OTLP definitions.

var (
	t0  = time.Unix(1_700_000_000, 123)
	t1  = t0.Add(1500 * time.Millisecond)
	tid = trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sid = trace.SpanID{0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x10, 0x11}
	pid = trace.SpanID{0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28}
	lid = trace.SpanID{0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38}
)

func nanos(t time.Time) uint64 { return uint64(t.UnixNano()) }

func sv(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func iv(i int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
}
func bv(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}
func dv(d float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: d}}
}
func av(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}
func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}

// Long values make messages whose lengths need two and three varint bytes,
// which the encoder writes by moving the body it has already written.
var (
	long200   = strings.Repeat("x", 200)
	long20000 = strings.Repeat("y", 20000)
)

// Every attribute value type the API has, with the zero values a proto3
// encoder must still write inside a oneof.
var allAttrs = []attribute.KeyValue{
	attribute.String("s", "text"),
	attribute.String("s.empty", ""),
	attribute.String("s.long", long200),
	attribute.String("s.longer", long20000),
	attribute.Bool("b.true", true),
	attribute.Bool("b.false", false),
	attribute.Int64("i", -42),
	attribute.Int64("i.zero", 0),
	attribute.Int64("i.big", 1<<62),
	attribute.Float64("f", 2.5),
	attribute.Float64("f.zero", 0),
	attribute.StringSlice("ss", []string{"a", "", "c"}),
	attribute.BoolSlice("bs", []bool{true, false}),
	attribute.Int64Slice("is", []int64{1, -1, 0}),
	attribute.Float64Slice("fs", []float64{0.5, -3}),
	attribute.ByteSlice("bytes", []byte{0, 1, 0xff}),
	attribute.Slice("mixed", attribute.StringValue("m"), attribute.IntValue(7), attribute.BoolValue(false)),
	attribute.Map("map", attribute.String("k", "v"), attribute.Map("inner", attribute.Float64("pi", 3.14))),
	{Key: "empty"},
}

var allAttrsPB = []*commonpb.KeyValue{
	kv("s", sv("text")),
	kv("s.empty", sv("")),
	kv("s.long", sv(long200)),
	kv("s.longer", sv(long20000)),
	kv("b.true", bv(true)),
	kv("b.false", bv(false)),
	kv("i", iv(-42)),
	kv("i.zero", iv(0)),
	kv("i.big", iv(1<<62)),
	kv("f", dv(2.5)),
	kv("f.zero", dv(0)),
	kv("ss", av(sv("a"), sv(""), sv("c"))),
	kv("bs", av(bv(true), bv(false))),
	kv("is", av(iv(1), iv(-1), iv(0))),
	kv("fs", av(dv(0.5), dv(-3))),
	kv("bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1, 0xff}}}),
	kv("mixed", av(sv("m"), iv(7), bv(false))),
	kv("map", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{
		// The API keeps a map's entries sorted by key.
		kv("inner", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{kv("pi", dv(3.14))}}}}),
		kv("k", sv("v")),
	}}}}),
	kv("empty", &commonpb.AnyValue{}),
}

func assertProtoEqual(t *testing.T, want, got proto.Message) {
	t.Helper()
	if !proto.Equal(want, got) {
		assert.Equal(t, prototext.Format(want), prototext.Format(got))
	}
}

func TestEncodeTraces(t *testing.T) {
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "acpd"), attribute.Int("pid", 7))
	res2 := resource.NewSchemaless(attribute.String("service.name", "other"))
	scope := instrumentation.Scope{Name: "acpd", Version: "1.2", SchemaURL: "https://example.com/s",
		Attributes: attribute.NewSet(attribute.Bool("scoped", true))}
	scope2 := instrumentation.Scope{Name: "second"}
	ts, err := trace.ParseTraceState("vendor=value,other=x")
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	remoteParent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: pid, Remote: true})
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: lid, TraceFlags: trace.FlagsSampled, Remote: true,
		TraceState: ts})

	stubs := tracetest.SpanStubs{
		{
			Name: "full", SpanContext: sc, Parent: remoteParent, SpanKind: trace.SpanKindClient,
			StartTime: t0, EndTime: t1, Attributes: allAttrs, DroppedAttributes: 3,
			Events: []sdktrace.Event{
				{Name: "exception", Time: t0.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.String("exception.message", "boom")}, DroppedAttributeCount: 1},
				{Name: "bare", Time: t1},
			},
			DroppedEvents:        2,
			Links:                []sdktrace.Link{{SpanContext: link, Attributes: []attribute.KeyValue{attribute.Int("n", 1)}, DroppedAttributeCount: 4}},
			DroppedLinks:         5,
			Status:               sdktrace.Status{Code: codes.Error, Description: "it failed"},
			Resource:             res,
			InstrumentationScope: scope,
		},
		{
			Name: "root ok", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: pid}),
			SpanKind: trace.SpanKindServer, StartTime: t0, EndTime: t1,
			Status: sdktrace.Status{Code: codes.Ok}, Resource: res, InstrumentationScope: scope,
		},
		{
			Name: "other scope", SpanContext: sc, Parent: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: pid}),
			SpanKind: trace.SpanKindInternal, StartTime: t0, EndTime: t1, Resource: res, InstrumentationScope: scope2,
		},
		{
			Name: "other resource", SpanContext: sc, SpanKind: trace.SpanKindProducer, StartTime: t0, EndTime: t1,
			Resource: res2, InstrumentationScope: scope2,
		},
		{
			Name: "consumer", SpanContext: sc, SpanKind: trace.SpanKindConsumer, StartTime: t0, EndTime: t1,
			Resource: res, InstrumentationScope: scope,
		},
	}
	raw := encodeTraces(nil, stubs.Snapshots())
	got := &coltracepb.ExportTraceServiceRequest{}
	require.NoError(t, proto.Unmarshal(raw, got))

	scopePB := &commonpb.InstrumentationScope{Name: "acpd", Version: "1.2", Attributes: []*commonpb.KeyValue{kv("scoped", bv(true))}}
	sampled := uint32(trace.FlagsSampled)
	want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{
			Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("pid", iv(7)), kv("service.name", sv("acpd"))}},
			SchemaUrl: "https://opentelemetry.io/schemas/1.26.0",
			ScopeSpans: []*tracepb.ScopeSpans{
				{Scope: scopePB, SchemaUrl: "https://example.com/s", Spans: []*tracepb.Span{
					{
						TraceId: tid[:], SpanId: sid[:], TraceState: "vendor=value,other=x", ParentSpanId: pid[:],
						Flags: sampled | flagHasIsRemote | flagIsRemote,
						Name:  "full", Kind: tracepb.Span_SPAN_KIND_CLIENT,
						StartTimeUnixNano: nanos(t0), EndTimeUnixNano: nanos(t1),
						Attributes: allAttrsPB, DroppedAttributesCount: 3,
						Events: []*tracepb.Span_Event{
							{TimeUnixNano: nanos(t0.Add(time.Millisecond)), Name: "exception", Attributes: []*commonpb.KeyValue{kv("exception.message", sv("boom"))}, DroppedAttributesCount: 1},
							{TimeUnixNano: nanos(t1), Name: "bare"},
						},
						DroppedEventsCount: 2,
						Links: []*tracepb.Span_Link{{TraceId: tid[:], SpanId: lid[:], TraceState: "vendor=value,other=x",
							Attributes: []*commonpb.KeyValue{kv("n", iv(1))}, DroppedAttributesCount: 4,
							Flags: sampled | flagHasIsRemote | flagIsRemote}},
						DroppedLinksCount: 5,
						Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "it failed"},
					},
					{
						TraceId: tid[:], SpanId: pid[:], Flags: flagHasIsRemote, Name: "root ok", Kind: tracepb.Span_SPAN_KIND_SERVER,
						StartTimeUnixNano: nanos(t0), EndTimeUnixNano: nanos(t1),
						Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
					},
					{
						TraceId: tid[:], SpanId: sid[:], TraceState: "vendor=value,other=x", Flags: sampled | flagHasIsRemote,
						Name: "consumer", Kind: tracepb.Span_SPAN_KIND_CONSUMER,
						StartTimeUnixNano: nanos(t0), EndTimeUnixNano: nanos(t1), Status: &tracepb.Status{},
					},
				}},
				{Scope: &commonpb.InstrumentationScope{Name: "second"}, Spans: []*tracepb.Span{{
					TraceId: tid[:], SpanId: sid[:], TraceState: "vendor=value,other=x", ParentSpanId: pid[:],
					Flags: sampled | flagHasIsRemote, Name: "other scope", Kind: tracepb.Span_SPAN_KIND_INTERNAL,
					StartTimeUnixNano: nanos(t0), EndTimeUnixNano: nanos(t1), Status: &tracepb.Status{},
				}}},
			},
		},
		{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", sv("other"))}},
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "second"}, Spans: []*tracepb.Span{{
				TraceId: tid[:], SpanId: sid[:], TraceState: "vendor=value,other=x", Flags: sampled | flagHasIsRemote,
				Name: "other resource", Kind: tracepb.Span_SPAN_KIND_PRODUCER,
				StartTimeUnixNano: nanos(t0), EndTimeUnixNano: nanos(t1), Status: &tracepb.Status{},
			}}}},
		},
	}}
	assertProtoEqual(t, want, got)
}

func TestEncodeMetrics(t *testing.T) {
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "acpd"))
	attrs := attribute.NewSet(attribute.String("gen_ai.token.type", "input"), attribute.Int("n", 2))
	attrsPB := []*commonpb.KeyValue{kv("gen_ai.token.type", sv("input")), kv("n", iv(2))}
	exI := []metricdata.Exemplar[int64]{{FilteredAttributes: []attribute.KeyValue{attribute.String("f", "x")}, Time: t1, Value: -3, SpanID: sid[:], TraceID: tid[:]}}
	exF := []metricdata.Exemplar[float64]{{Time: t1, Value: 0}, {Time: t1, Value: 1.25, SpanID: sid[:], TraceID: tid[:]}}
	exIPB := []*metricpb.Exemplar{{FilteredAttributes: []*commonpb.KeyValue{kv("f", sv("x"))}, TimeUnixNano: nanos(t1),
		Value: &metricpb.Exemplar_AsInt{AsInt: -3}, SpanId: sid[:], TraceId: tid[:]}}
	exFPB := []*metricpb.Exemplar{{TimeUnixNano: nanos(t1), Value: &metricpb.Exemplar_AsDouble{AsDouble: 0}},
		{TimeUnixNano: nanos(t1), Value: &metricpb.Exemplar_AsDouble{AsDouble: 1.25}, SpanId: sid[:], TraceId: tid[:]}}

	rm := &metricdata.ResourceMetrics{Resource: res, ScopeMetrics: []metricdata.ScopeMetrics{
		{
			Scope: instrumentation.Scope{Name: "acpd", Version: "1", SchemaURL: "https://example.com/s"},
			Metrics: []metricdata.Metrics{
				{Name: "gauge.int", Description: "d", Unit: "{x}", Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{
					{Attributes: attrs, Time: t1, Value: 0}, {Time: t1, Value: -9, Exemplars: exI}}}},
				{Name: "gauge.float", Data: metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{
					{StartTime: t0, Time: t1, Value: 0.5, Exemplars: exF}}}},
				{Name: "sum.int", Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
					DataPoints: []metricdata.DataPoint[int64]{{Attributes: attrs, StartTime: t0, Time: t1, Value: 1 << 40}}}},
				{Name: "sum.float", Data: metricdata.Sum[float64]{Temporality: metricdata.DeltaTemporality,
					DataPoints: []metricdata.DataPoint[float64]{{StartTime: t0, Time: t1, Value: -1.5}}}},
				{Name: "hist.float", Unit: "s", Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality,
					DataPoints: []metricdata.HistogramDataPoint[float64]{{Attributes: attrs, StartTime: t0, Time: t1, Count: 3,
						Bounds: []float64{0.1, 1, 10}, BucketCounts: []uint64{0, 2, 1, 0}, Min: metricdata.NewExtrema(0.5),
						Max: metricdata.NewExtrema(2.0), Sum: 3.5, Exemplars: exF}}}},
				{Name: "hist.int", Data: metricdata.Histogram[int64]{Temporality: metricdata.DeltaTemporality,
					DataPoints: []metricdata.HistogramDataPoint[int64]{{StartTime: t0, Time: t1, Count: 0, Bounds: []float64{1},
						BucketCounts: []uint64{0, 0}}}}},
			},
		},
		{
			Scope: instrumentation.Scope{Name: "exp"},
			Metrics: []metricdata.Metrics{
				{Name: "exp.float", Data: metricdata.ExponentialHistogram[float64]{Temporality: metricdata.CumulativeTemporality,
					DataPoints: []metricdata.ExponentialHistogramDataPoint[float64]{{Attributes: attrs, StartTime: t0, Time: t1,
						Count: 6, Min: metricdata.NewExtrema(-4.0), Max: metricdata.NewExtrema(300.0), Sum: 310, Scale: -2,
						ZeroCount: 1, ZeroThreshold: 1e-9,
						PositiveBucket: metricdata.ExponentialBucket{Offset: -3, Counts: []uint64{1, 0, 300, 2}},
						NegativeBucket: metricdata.ExponentialBucket{Offset: 5, Counts: []uint64{1}},
						Exemplars:      exF}}}},
				{Name: "exp.int", Data: metricdata.ExponentialHistogram[int64]{Temporality: metricdata.DeltaTemporality,
					DataPoints: []metricdata.ExponentialHistogramDataPoint[int64]{{StartTime: t0, Time: t1, Count: 1, Sum: 7,
						Scale: 20, Min: metricdata.NewExtrema[int64](7), Max: metricdata.NewExtrema[int64](7),
						PositiveBucket: metricdata.ExponentialBucket{Offset: 1 << 20, Counts: []uint64{1}}, Exemplars: exI}}}},
				{Name: "summary", Data: metricdata.Summary{DataPoints: []metricdata.SummaryDataPoint{{Attributes: attrs,
					StartTime: t0, Time: t1, Count: 4, Sum: 10,
					QuantileValues: []metricdata.QuantileValue{{Quantile: 0, Value: 1}, {Quantile: 0.5, Value: 2.5}, {Quantile: 1, Value: 4}}}}}},
			},
		},
	}}
	raw, err := encodeMetrics(nil, rm)
	require.NoError(t, err)
	got := &colmetricpb.ExportMetricsServiceRequest{}
	require.NoError(t, proto.Unmarshal(raw, got))

	p := func(f float64) *float64 { return &f }
	cumulative, delta := metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	want := &colmetricpb.ExportMetricsServiceRequest{ResourceMetrics: []*metricpb.ResourceMetrics{{
		Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", sv("acpd"))}},
		SchemaUrl: "https://opentelemetry.io/schemas/1.26.0",
		ScopeMetrics: []*metricpb.ScopeMetrics{
			{
				Scope: &commonpb.InstrumentationScope{Name: "acpd", Version: "1"}, SchemaUrl: "https://example.com/s",
				Metrics: []*metricpb.Metric{
					{Name: "gauge.int", Description: "d", Unit: "{x}", Data: &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: []*metricpb.NumberDataPoint{
						{Attributes: attrsPB, TimeUnixNano: nanos(t1), Value: &metricpb.NumberDataPoint_AsInt{AsInt: 0}},
						{TimeUnixNano: nanos(t1), Value: &metricpb.NumberDataPoint_AsInt{AsInt: -9}, Exemplars: exIPB}}}}},
					{Name: "gauge.float", Data: &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: []*metricpb.NumberDataPoint{
						{StartTimeUnixNano: nanos(t0), TimeUnixNano: nanos(t1), Value: &metricpb.NumberDataPoint_AsDouble{AsDouble: 0.5}, Exemplars: exFPB}}}}},
					{Name: "sum.int", Data: &metricpb.Metric_Sum{Sum: &metricpb.Sum{AggregationTemporality: cumulative, IsMonotonic: true,
						DataPoints: []*metricpb.NumberDataPoint{{Attributes: attrsPB, StartTimeUnixNano: nanos(t0), TimeUnixNano: nanos(t1),
							Value: &metricpb.NumberDataPoint_AsInt{AsInt: 1 << 40}}}}}},
					{Name: "sum.float", Data: &metricpb.Metric_Sum{Sum: &metricpb.Sum{AggregationTemporality: delta,
						DataPoints: []*metricpb.NumberDataPoint{{StartTimeUnixNano: nanos(t0), TimeUnixNano: nanos(t1),
							Value: &metricpb.NumberDataPoint_AsDouble{AsDouble: -1.5}}}}}},
					{Name: "hist.float", Unit: "s", Data: &metricpb.Metric_Histogram{Histogram: &metricpb.Histogram{AggregationTemporality: cumulative,
						DataPoints: []*metricpb.HistogramDataPoint{{Attributes: attrsPB, StartTimeUnixNano: nanos(t0), TimeUnixNano: nanos(t1),
							Count: 3, Sum: p(3.5), BucketCounts: []uint64{0, 2, 1, 0}, ExplicitBounds: []float64{0.1, 1, 10},
							Exemplars: exFPB, Min: p(0.5), Max: p(2)}}}}},
					{Name: "hist.int", Data: &metricpb.Metric_Histogram{Histogram: &metricpb.Histogram{AggregationTemporality: delta,
						DataPoints: []*metricpb.HistogramDataPoint{{StartTimeUnixNano: nanos(t0), TimeUnixNano: nanos(t1),
							Sum: p(0), BucketCounts: []uint64{0, 0}, ExplicitBounds: []float64{1}}}}}},
				},
			},
			{
				Scope: &commonpb.InstrumentationScope{Name: "exp"},
				Metrics: []*metricpb.Metric{
					{Name: "exp.float", Data: &metricpb.Metric_ExponentialHistogram{ExponentialHistogram: &metricpb.ExponentialHistogram{
						AggregationTemporality: cumulative, DataPoints: []*metricpb.ExponentialHistogramDataPoint{{
							Attributes: attrsPB, StartTimeUnixNano: nanos(t0), TimeUnixNano: nanos(t1), Count: 6, Sum: p(310),
							Scale: -2, ZeroCount: 1, ZeroThreshold: 1e-9,
							Positive:  &metricpb.ExponentialHistogramDataPoint_Buckets{Offset: -3, BucketCounts: []uint64{1, 0, 300, 2}},
							Negative:  &metricpb.ExponentialHistogramDataPoint_Buckets{Offset: 5, BucketCounts: []uint64{1}},
							Exemplars: exFPB, Min: p(-4), Max: p(300)}}}}},
					{Name: "exp.int", Data: &metricpb.Metric_ExponentialHistogram{ExponentialHistogram: &metricpb.ExponentialHistogram{
						AggregationTemporality: delta, DataPoints: []*metricpb.ExponentialHistogramDataPoint{{
							StartTimeUnixNano: nanos(t0), TimeUnixNano: nanos(t1), Count: 1, Sum: p(7), Scale: 20,
							Positive:  &metricpb.ExponentialHistogramDataPoint_Buckets{Offset: 1 << 20, BucketCounts: []uint64{1}},
							Negative:  &metricpb.ExponentialHistogramDataPoint_Buckets{},
							Exemplars: exIPB, Min: p(7), Max: p(7)}}}}},
					{Name: "summary", Data: &metricpb.Metric_Summary{Summary: &metricpb.Summary{DataPoints: []*metricpb.SummaryDataPoint{{
						Attributes: attrsPB, StartTimeUnixNano: nanos(t0), TimeUnixNano: nanos(t1), Count: 4, Sum: 10,
						QuantileValues: []*metricpb.SummaryDataPoint_ValueAtQuantile{{Quantile: 0, Value: 1}, {Quantile: 0.5, Value: 2.5}, {Quantile: 1, Value: 4}}}}}}},
				},
			},
		},
	}}}
	assertProtoEqual(t, want, got)
}

// An aggregation the encoder does not know is an error naming the metric.
func TestEncodeMetrics_UnknownAggregation(t *testing.T) {
	type other struct{ metricdata.Aggregation }
	_, err := encodeMetrics(nil, &metricdata.ResourceMetrics{ScopeMetrics: []metricdata.ScopeMetrics{{
		Metrics: []metricdata.Metrics{{Name: "odd", Data: other{}}}}}})
	require.ErrorContains(t, err, "metric odd")
}

// Lengths on each side of the one-, two- and three-byte varint limits.
func TestEncoderNestedLengths(t *testing.T) {
	for _, n := range []int{0, 1, 126, 127, 128, 129, 16382, 16383, 16384, 1 << 21} {
		var e encoder
		outer := e.open(1)
		inner := e.open(2)
		e.strAlways(3, strings.Repeat("z", n))
		e.close(inner)
		e.uint(4, 99)
		e.close(outer)

		f, rest, err := next(e.b)
		require.NoError(t, err, n)
		require.Empty(t, rest)
		require.Equal(t, 1, f.num)
		g, rest, err := next(f.p)
		require.NoError(t, err)
		require.Equal(t, 2, g.num)
		h, tail, err := next(g.p)
		require.NoError(t, err)
		assert.Empty(t, tail)
		assert.Len(t, h.p, n)
		last, tail, err := next(rest)
		require.NoError(t, err)
		assert.Empty(t, tail)
		assert.Equal(t, field{num: 4, wire: wireVarint, v: 99}, last)
	}
}
