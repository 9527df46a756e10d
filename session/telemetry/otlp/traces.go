package otlp

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Field numbers below are those of the OTLP .proto definitions
// (opentelemetry/proto/{common,resource,trace}/v1 and the collector's
// trace service); each function names the message it writes.

// Span flags: the low byte carries the W3C trace flags; these two say
// whether the parent's remoteness is known and whether it was remote.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// keyValues writes repeated KeyValue attributes as field num.
func (e *encoder) keyValues(num int, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		start := e.open(num)
		e.keyValue(kv)
		e.close(start)
	}
}

func (e *encoder) attrSet(num int, s attribute.Set) {
	for it := s.Iter(); it.Next(); {
		start := e.open(num)
		e.keyValue(it.Attribute())
		e.close(start)
	}
}

// keyValue writes KeyValue: key = 1, value = 2.
func (e *encoder) keyValue(kv attribute.KeyValue) {
	e.str(1, string(kv.Key))
	start := e.open(2)
	e.anyValue(kv.Value)
	e.close(start)
}

// anyValue writes AnyValue's oneof: string 1, bool 2, int 3, double 4,
// array 5 (ArrayValue, values = 1), kvlist 6 (KeyValueList, values = 1),
// bytes 7. An empty value has no member set.
func (e *encoder) anyValue(v attribute.Value) {
	switch v.Type() {
	case attribute.STRING:
		e.strAlways(1, v.AsString())
	case attribute.BOOL:
		e.boolAlways(2, v.AsBool())
	case attribute.INT64:
		e.intAlways(3, v.AsInt64())
	case attribute.FLOAT64:
		e.doubleAlways(4, v.AsFloat64())
	case attribute.BYTESLICE:
		e.bytesAlways(7, v.AsByteSlice())
	case attribute.BOOLSLICE:
		arrayValue(e, v.AsBoolSlice(), func(b bool) { e.boolAlways(2, b) })
	case attribute.INT64SLICE:
		arrayValue(e, v.AsInt64Slice(), func(i int64) { e.intAlways(3, i) })
	case attribute.FLOAT64SLICE:
		arrayValue(e, v.AsFloat64Slice(), func(f float64) { e.doubleAlways(4, f) })
	case attribute.STRINGSLICE:
		arrayValue(e, v.AsStringSlice(), func(s string) { e.strAlways(1, s) })
	case attribute.SLICE:
		arrayValue(e, v.AsSlice(), e.anyValue)
	case attribute.MAP:
		m := e.open(6)
		e.keyValues(1, v.AsMap())
		e.close(m)
	}
}

// arrayValue writes AnyValue's array member (5): an ArrayValue whose
// values (1) are AnyValues, each written by member.
func arrayValue[T any](e *encoder, vs []T, member func(T)) {
	arr := e.open(5)
	for _, v := range vs {
		el := e.open(1)
		member(v)
		e.close(el)
	}
	e.close(arr)
}

// resource writes Resource: attributes = 1.
func (e *encoder) resource(num int, r *resource.Resource) {
	start := e.open(num)
	if r != nil {
		e.attrSet(1, *r.Set())
	}
	e.close(start)
}

// scope writes InstrumentationScope: name 1, version 2, attributes 3.
func (e *encoder) scope(num int, s instrumentation.Scope) {
	start := e.open(num)
	e.str(1, s.Name)
	e.str(2, s.Version)
	e.attrSet(3, s.Attributes)
	e.close(start)
}

// resourceStart opens a ResourceSpans or ResourceMetrics (field 1 of the
// export request; the two messages share their numbering: resource 1, the
// scopes 2, schema_url 3) and writes its resource; resourceEnd writes the
// schema URL and closes it.
func (e *encoder) resourceStart(r *resource.Resource) int {
	start := e.open(1)
	e.resource(1, r)
	return start
}

func (e *encoder) resourceEnd(start int, r *resource.Resource) {
	if r != nil {
		e.str(3, r.SchemaURL())
	}
	e.close(start)
}

// scopeStart opens a ScopeSpans or ScopeMetrics (field 2 of its resource
// message; scope 1, the spans or metrics 2, schema_url 3) and writes its
// scope; scopeEnd writes the schema URL and closes it.
func (e *encoder) scopeStart(s instrumentation.Scope) int {
	start := e.open(2)
	e.scope(1, s)
	return start
}

func (e *encoder) scopeEnd(start int, schemaURL string) {
	e.str(3, schemaURL)
	e.close(start)
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

// scopeKey groups spans (and metrics) of one instrumentation scope.
type scopeKey struct {
	name, version, schemaURL string
	attrs                    attribute.Distinct
}

func keyOf(s instrumentation.Scope) scopeKey {
	return scopeKey{s.Name, s.Version, s.SchemaURL, s.Attributes.Equivalent()}
}

// encodeTraces writes an ExportTraceServiceRequest: resource_spans = 1,
// each ResourceSpans (resource 1, scope_spans 2, schema_url 3) holding
// ScopeSpans (scope 1, spans 2, schema_url 3). Spans are grouped by
// resource and scope in the order they came.
func encodeTraces(buf []byte, spans []sdktrace.ReadOnlySpan) []byte {
	e := encoder{b: buf}
	type group struct {
		res    *resource.Resource
		scopes []scopeKey
		spans  map[scopeKey][]sdktrace.ReadOnlySpan
		scope  map[scopeKey]instrumentation.Scope
	}
	var groups []*group
	byRes := map[attribute.Distinct]*group{}
	for _, s := range spans {
		res := s.Resource()
		var rk attribute.Distinct
		if res != nil {
			rk = res.Equivalent()
		}
		g := byRes[rk]
		if g == nil {
			g = &group{res: res, spans: map[scopeKey][]sdktrace.ReadOnlySpan{}, scope: map[scopeKey]instrumentation.Scope{}}
			byRes[rk] = g
			groups = append(groups, g)
		}
		sc := s.InstrumentationScope()
		k := keyOf(sc)
		if _, ok := g.spans[k]; !ok {
			g.scopes = append(g.scopes, k)
			g.scope[k] = sc
		}
		g.spans[k] = append(g.spans[k], s)
	}
	for _, g := range groups {
		rs := e.resourceStart(g.res)
		for _, k := range g.scopes {
			ss := e.scopeStart(g.scope[k])
			for _, s := range g.spans[k] {
				sp := e.open(2)
				e.span(s)
				e.close(sp)
			}
			e.scopeEnd(ss, k.schemaURL)
		}
		e.resourceEnd(rs, g.res)
	}
	return e.b
}

// span writes Span: trace_id 1, span_id 2, trace_state 3, parent_span_id
// 4, name 5, kind 6, start 7, end 8, attributes 9, dropped_attributes 10,
// events 11, dropped_events 12, links 13, dropped_links 14, status 15,
// flags 16.
func (e *encoder) span(s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	e.bytesAlways(1, tid[:])
	e.bytesAlways(2, sid[:])
	e.str(3, sc.TraceState().String())
	parent := s.Parent()
	if parent.SpanID().IsValid() {
		psid := parent.SpanID()
		e.bytesAlways(4, psid[:])
	}
	e.str(5, s.Name())
	e.uint(6, uint64(spanKind(s.SpanKind())))
	e.fixed64(7, unixNano(s.StartTime()))
	e.fixed64(8, unixNano(s.EndTime()))
	e.keyValues(9, s.Attributes())
	e.uint(10, uint64(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		// Event: time 1, name 2, attributes 3, dropped_attributes 4.
		start := e.open(11)
		e.fixed64(1, unixNano(ev.Time))
		e.str(2, ev.Name)
		e.keyValues(3, ev.Attributes)
		e.uint(4, uint64(ev.DroppedAttributeCount))
		e.close(start)
	}
	e.uint(12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		// Link: trace_id 1, span_id 2, trace_state 3, attributes 4,
		// dropped_attributes 5, flags 6.
		start := e.open(13)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		e.bytesAlways(1, ltid[:])
		e.bytesAlways(2, lsid[:])
		e.str(3, l.SpanContext.TraceState().String())
		e.keyValues(4, l.Attributes)
		e.uint(5, uint64(l.DroppedAttributeCount))
		e.fixed32(6, spanFlags(l.SpanContext)|uint32(l.SpanContext.TraceFlags()))
		e.close(start)
	}
	e.uint(14, uint64(s.DroppedLinks()))
	// Status: message 2, code 3 (OTLP numbers Ok 1 and Error 2, the
	// reverse of the Go API's).
	st := s.Status()
	start := e.open(15)
	switch st.Code {
	case codes.Error:
		e.str(2, st.Description)
		e.uint(3, 2)
	case codes.Ok:
		e.uint(3, 1)
	}
	e.close(start)
	e.fixed32(16, spanFlags(parent)|uint32(sc.TraceFlags()))
}

// spanFlags are the remoteness bits of a span's or link's flags: for a
// span, whether its parent was remote; for a link, whether the linked
// context was. The caller adds the low byte, the trace flags.
func spanFlags(sc trace.SpanContext) uint32 {
	f := uint32(flagHasIsRemote)
	if sc.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// spanKind maps the Go API's kinds to OTLP's (which happen to share the
// numbers; the switch keeps that from being an accident).
func spanKind(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}
