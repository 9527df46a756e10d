package otlp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ErrShutdown is an export's answer after Shutdown.
var ErrShutdown = errors.New("otlp: the exporter is shut down")

// exporter is what the span and metric exporters share: a client and a
// reusable request buffer (the SDK never exports concurrently on one
// exporter; the mutex makes that a guarantee rather than an assumption).
type exporter struct {
	c      *client
	signal string

	mu       sync.Mutex
	buf      []byte
	shutdown bool
}

func (x *exporter) send(ctx context.Context, encode func([]byte) ([]byte, error), what string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.shutdown {
		return ErrShutdown
	}
	msg, err := encode(x.buf[:0])
	if err != nil {
		return fmt.Errorf("otlp %s: %w", x.signal, err)
	}
	if cap(msg) <= 4<<20 {
		x.buf = msg // keep an ordinary batch's buffer for the next one
	}
	resp, err := x.c.export(ctx, msg)
	if err != nil {
		return fmt.Errorf("otlp %s export to %s: %w", x.signal, x.c.s.url, err)
	}
	if err := partialSuccess(resp, what); err != nil {
		return fmt.Errorf("otlp %s export to %s: %w", x.signal, x.c.s.url, err)
	}
	return nil
}

func (x *exporter) close(ctx context.Context) error {
	// Cancel first: an export in flight holds the mutex until it ends.
	x.c.close()
	x.mu.Lock()
	x.shutdown = true
	x.mu.Unlock()
	return ctx.Err()
}

// Target is where the exporter sends: the signal's URL for http, the
// collector's scheme://host:port for grpc.
func (x *exporter) Target() string { return x.c.s.url }

// TraceExporter is an sdktrace.SpanExporter speaking OTLP.
type TraceExporter struct{ exporter }

var _ sdktrace.SpanExporter = (*TraceExporter)(nil)

// NewTraceExporter resolves o and the variables for traces; it does not
// connect (the first export does).
func NewTraceExporter(o Options) (*TraceExporter, error) {
	s, err := resolve(o, signalTraces)
	if err != nil {
		return nil, err
	}
	return &TraceExporter{exporter{c: newClient(s, signalTraces), signal: signalTraces}}, nil
}

// ExportSpans sends one batch.
func (x *TraceExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	return x.send(ctx, func(b []byte) ([]byte, error) { return encodeTraces(b, spans), nil }, "spans")
}

// Shutdown ends exports in flight; later exports fail with ErrShutdown.
func (x *TraceExporter) Shutdown(ctx context.Context) error { return x.close(ctx) }

// MetricExporter is an sdkmetric.Exporter speaking OTLP.
type MetricExporter struct {
	exporter
	temporality sdkmetric.TemporalitySelector
	aggregation sdkmetric.AggregationSelector
}

var _ sdkmetric.Exporter = (*MetricExporter)(nil)

// NewMetricExporter resolves o and the variables for metrics, the
// temporality and histogram preferences included.
func NewMetricExporter(o Options) (*MetricExporter, error) {
	s, err := resolve(o, signalMetrics)
	if err != nil {
		return nil, err
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	x := &MetricExporter{exporter: exporter{c: newClient(s, signalMetrics), signal: signalMetrics},
		temporality: sdkmetric.DefaultTemporalitySelector, aggregation: sdkmetric.DefaultAggregationSelector}
	const tp = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
	switch v := strings.TrimSpace(getenv(tp)); strings.ToLower(v) {
	case "", "cumulative":
	case "delta":
		x.temporality = deltaTemporality
	case "lowmemory":
		x.temporality = lowMemoryTemporality
	default:
		return nil, fmt.Errorf("%s: %q is not supported; use cumulative, delta or lowmemory", tp, v)
	}
	const ha = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"
	switch v := strings.TrimSpace(getenv(ha)); strings.ToLower(v) {
	case "", "explicit_bucket_histogram":
	case "base2_exponential_bucket_histogram":
		x.aggregation = func(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
			if k == sdkmetric.InstrumentKindHistogram {
				// The specification's defaults for this aggregation.
				return sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}
			}
			return sdkmetric.DefaultAggregationSelector(k)
		}
	default:
		return nil, fmt.Errorf("%s: %q is not supported; use explicit_bucket_histogram or base2_exponential_bucket_histogram", ha, v)
	}
	return x, nil
}

// Delta for what is summed or bucketed anew each interval, cumulative for
// what goes up and down (an up-down counter's delta means nothing alone).
func deltaTemporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	switch k {
	case sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindHistogram, sdkmetric.InstrumentKindObservableCounter:
		return metricdata.DeltaTemporality
	}
	return metricdata.CumulativeTemporality
}

// Delta only for synchronous counters and histograms, where it saves the
// SDK from keeping every series' total.
func lowMemoryTemporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	switch k {
	case sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindHistogram:
		return metricdata.DeltaTemporality
	}
	return metricdata.CumulativeTemporality
}

// Temporality is the SDK's question: per instrument kind.
func (x *MetricExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return x.temporality(k)
}

// Aggregation is the SDK's question: per instrument kind.
func (x *MetricExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return x.aggregation(k)
}

// Export sends one collection.
func (x *MetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if rm == nil || len(rm.ScopeMetrics) == 0 {
		return nil
	}
	return x.send(ctx, func(b []byte) ([]byte, error) { return encodeMetrics(b, rm) }, "data points")
}

// ForceFlush has nothing to do: nothing is held between exports.
func (x *MetricExporter) ForceFlush(ctx context.Context) error { return ctx.Err() }

// Shutdown ends exports in flight; later exports fail with ErrShutdown.
func (x *MetricExporter) Shutdown(ctx context.Context) error { return x.close(ctx) }

// Probe sends the collector an empty ExportTraceServiceRequest (valid
// OTLP, recorded as nothing), once, without retrying, with the headers,
// TLS set-up and timeout the trace exporter would use. It answers where
// it sent it and why the collector did not take it; ctx bounds it.
func Probe(ctx context.Context, o Options) (target string, err error) {
	s, err := resolve(o, signalTraces)
	if err != nil {
		return "", err
	}
	c := newClient(s, signalTraces)
	defer c.close()
	body, err := c.encodeBody(nil)
	if err != nil {
		return s.url, err
	}
	if s.proto == ProtocolGRPC {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	resp, err := c.attempt(ctx, body)
	if err != nil {
		return s.url, err
	}
	return s.url, partialSuccess(resp, "spans")
}
