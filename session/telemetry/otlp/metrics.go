package otlp

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Field numbers are those of opentelemetry/proto/metrics/v1/metrics.proto
// and the collector's metrics service.

// OTLP's AggregationTemporality (not the Go SDK's numbering).
const (
	temporalityDelta      = 1
	temporalityCumulative = 2
)

// encodeMetrics writes an ExportMetricsServiceRequest: resource_metrics 1,
// a ResourceMetrics (resource 1, scope_metrics 2, schema_url 3) of
// ScopeMetrics (scope 1, metrics 2, schema_url 3). An aggregation it does
// not know is an error, not a silently missing metric.
func encodeMetrics(buf []byte, rm *metricdata.ResourceMetrics) ([]byte, error) {
	e := encoder{b: buf}
	rs := e.resourceStart(rm.Resource)
	for _, sm := range rm.ScopeMetrics {
		ss := e.scopeStart(sm.Scope)
		for _, m := range sm.Metrics {
			if err := e.metric(m); err != nil {
				return nil, err
			}
		}
		e.scopeEnd(ss, sm.Scope.SchemaURL)
	}
	e.resourceEnd(rs, rm.Resource)
	return e.b, nil
}

// metric writes Metric (field 2 of ScopeMetrics): name 1, description 2,
// unit 3, then one of gauge 5, sum 7, histogram 9, exponential_histogram
// 10, summary 11.
func (e *encoder) metric(m metricdata.Metrics) error {
	start := e.open(2)
	e.str(1, m.Name)
	e.str(2, m.Description)
	e.str(3, m.Unit)
	switch d := m.Data.(type) {
	case metricdata.Gauge[int64]:
		gauge(e, d)
	case metricdata.Gauge[float64]:
		gauge(e, d)
	case metricdata.Sum[int64]:
		sum(e, d)
	case metricdata.Sum[float64]:
		sum(e, d)
	case metricdata.Histogram[int64]:
		histogram(e, d)
	case metricdata.Histogram[float64]:
		histogram(e, d)
	case metricdata.ExponentialHistogram[int64]:
		expHistogram(e, d)
	case metricdata.ExponentialHistogram[float64]:
		expHistogram(e, d)
	case metricdata.Summary:
		summary(e, d)
	default:
		return fmt.Errorf("metric %s: aggregation %T has no OTLP encoding here", m.Name, m.Data)
	}
	e.close(start)
	return nil
}

func temporality(t metricdata.Temporality) uint64 {
	switch t {
	case metricdata.DeltaTemporality:
		return temporalityDelta
	case metricdata.CumulativeTemporality:
		return temporalityCumulative
	}
	return 0
}

// Gauge: data_points 1.
func gauge[N int64 | float64](e *encoder, g metricdata.Gauge[N]) {
	start := e.open(5)
	for _, dp := range g.DataPoints {
		numberPoint(e, dp)
	}
	e.close(start)
}

// Sum: data_points 1, aggregation_temporality 2, is_monotonic 3.
func sum[N int64 | float64](e *encoder, s metricdata.Sum[N]) {
	start := e.open(7)
	for _, dp := range s.DataPoints {
		numberPoint(e, dp)
	}
	e.uint(2, temporality(s.Temporality))
	e.boolean(3, s.IsMonotonic)
	e.close(start)
}

// numberValue writes the oneof of NumberDataPoint and Exemplar: as_double
// (asDouble) or as_int (asInt, sfixed64).
func numberValue[N int64 | float64](e *encoder, asDouble, asInt int, v N) {
	switch v := any(v).(type) {
	case int64:
		e.fixed64Always(asInt, uint64(v))
	case float64:
		e.doubleAlways(asDouble, v)
	}
}

// NumberDataPoint (data_points 1): attributes 7, start 2, time 3,
// as_double 4 / as_int 6, exemplars 5.
func numberPoint[N int64 | float64](e *encoder, dp metricdata.DataPoint[N]) {
	start := e.pointStart(7, dp.Attributes, dp.StartTime, dp.Time)
	numberValue(e, 4, 6, dp.Value)
	exemplars(e, 5, dp.Exemplars)
	e.close(start)
}

// pointStart opens a data point (data_points 1 in every kind) and writes
// what all kinds share: the attributes (whose field number differs by
// kind), start_time_unix_nano 2 and time_unix_nano 3. The caller writes the
// rest and closes the point.
func (e *encoder) pointStart(attrs int, set attribute.Set, start, t time.Time) int {
	p := e.open(1)
	e.attrSet(attrs, set)
	e.fixed64(2, unixNano(start))
	e.fixed64(3, unixNano(t))
	return p
}

// Exemplar: filtered_attributes 7, time 2, as_double 3 / as_int 6,
// span_id 4, trace_id 5.
func exemplars[N int64 | float64](e *encoder, num int, xs []metricdata.Exemplar[N]) {
	for _, x := range xs {
		start := e.open(num)
		e.keyValues(7, x.FilteredAttributes)
		e.fixed64(2, unixNano(x.Time))
		numberValue(e, 3, 6, x.Value)
		e.bytes(4, x.SpanID)
		e.bytes(5, x.TraceID)
		e.close(start)
	}
}

// Histogram: data_points 1, aggregation_temporality 2. HistogramDataPoint:
// attributes 9, start 2, time 3, count 4, sum 5 (optional), bucket_counts
// 6, explicit_bounds 7, exemplars 8, min 11, max 12 (optional).
func histogram[N int64 | float64](e *encoder, h metricdata.Histogram[N]) {
	start := e.open(9)
	for _, dp := range h.DataPoints {
		p := e.pointStart(9, dp.Attributes, dp.StartTime, dp.Time)
		e.fixed64(4, dp.Count)
		e.doubleAlways(5, float64(dp.Sum))
		e.packedFixed64(6, dp.BucketCounts)
		e.packedDouble(7, dp.Bounds)
		exemplars(e, 8, dp.Exemplars)
		extrema(e, 11, dp.Min)
		extrema(e, 12, dp.Max)
		e.close(p)
	}
	e.uint(2, temporality(h.Temporality))
	e.close(start)
}

func extrema[N int64 | float64](e *encoder, num int, x metricdata.Extrema[N]) {
	if v, ok := x.Value(); ok {
		e.doubleAlways(num, float64(v))
	}
}

// ExponentialHistogram: data_points 1, aggregation_temporality 2.
// ExponentialHistogramDataPoint: attributes 1, start 2, time 3, count 4,
// sum 5 (optional), scale 6 (sint32), zero_count 7, positive 8, negative 9
// (Buckets: offset 1 sint32, bucket_counts 2 packed uint64), exemplars 11,
// min 12, max 13 (optional), zero_threshold 14.
func expHistogram[N int64 | float64](e *encoder, h metricdata.ExponentialHistogram[N]) {
	start := e.open(10)
	for _, dp := range h.DataPoints {
		p := e.pointStart(1, dp.Attributes, dp.StartTime, dp.Time)
		e.fixed64(4, dp.Count)
		e.doubleAlways(5, float64(dp.Sum))
		e.sint(6, dp.Scale)
		e.fixed64(7, dp.ZeroCount)
		buckets(e, 8, dp.PositiveBucket)
		buckets(e, 9, dp.NegativeBucket)
		exemplars(e, 11, dp.Exemplars)
		extrema(e, 12, dp.Min)
		extrema(e, 13, dp.Max)
		e.double(14, dp.ZeroThreshold)
		e.close(p)
	}
	e.uint(2, temporality(h.Temporality))
	e.close(start)
}

func buckets(e *encoder, num int, b metricdata.ExponentialBucket) {
	start := e.open(num)
	e.sint(1, b.Offset)
	e.packedVarint(2, b.Counts)
	e.close(start)
}

// Summary: data_points 1. SummaryDataPoint: attributes 7, start 2, time 3,
// count 4, sum 5, quantile_values 6 (quantile 1, value 2).
func summary(e *encoder, s metricdata.Summary) {
	start := e.open(11)
	for _, dp := range s.DataPoints {
		p := e.pointStart(7, dp.Attributes, dp.StartTime, dp.Time)
		e.fixed64(4, dp.Count)
		e.double(5, dp.Sum)
		for _, q := range dp.QuantileValues {
			qv := e.open(6)
			e.double(1, q.Quantile)
			e.double(2, q.Value)
			e.close(qv)
		}
		e.close(p)
	}
	e.close(start)
}
