package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry holds the providers and instruments; nil means disabled.
type Telemetry struct {
	cfg    Config
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	tracer trace.Tracer

	tokens    metric.Float64Histogram
	duration  metric.Float64Histogram
	turnCalls metric.Int64Histogram
	loopStops metric.Int64Counter
}

// Start sets up the SDK when cfg.Enabled; disabled it returns nil, nil and
// touches nothing. Exporters connect lazily, so an unreachable collector is
// not an error here (it is logged by the SDK when an export fails).
func Start(ctx context.Context, cfg Config) (*Telemetry, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	proto, err := protocol(&cfg)
	if err != nil {
		return nil, err
	}
	if cfg.OnError != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(cfg.OnError))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.version", cfg.ServiceVersion)))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	if os.Getenv("OTEL_SERVICE_NAME") == "" && !strings.Contains(os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		res, _ = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", ServiceName)))
	}
	spanExp, metricExp, err := exporters(ctx, cfg, proto)
	if err != nil {
		return nil, err
	}
	interval := cfg.MetricInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	t := &Telemetry{cfg: cfg}
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(spanExp))
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metricExp, sdkmetric.WithInterval(interval))))
	t.tracer = t.tp.Tracer(ScopeName)
	m := t.mp.Meter(ScopeName)
	var errs []error
	var e error
	t.tokens, e = m.Float64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."), metric.WithExplicitBucketBoundaries(tokenBuckets...))
	errs = append(errs, e)
	t.duration, e = m.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	errs = append(errs, e)
	t.turnCalls, e = m.Int64Histogram(MetricTurnToolCalls, metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls the loop guard counted in one prompt turn."), metric.WithExplicitBucketBoundaries(toolCallBuckets...))
	errs = append(errs, e)
	t.loopStops, e = m.Int64Counter(MetricLoopStops, metric.WithUnit("{stop}"),
		metric.WithDescription("Prompt turns stopped by loop protection, by loop_type and cap_reason."))
	errs = append(errs, e)
	if err := errors.Join(errs...); err != nil {
		_ = t.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry instruments: %w", err)
	}
	return t, nil
}

// Shutdown flushes and stops the exporters; bound it with ctx (a black-holed
// collector would otherwise hold it until the exporters' own timeout).
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
}

// ForceFlush exports what is buffered (tests, and before a short-lived
// process exits).
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return errors.Join(t.tp.ForceFlush(ctx), t.mp.ForceFlush(ctx))
}

// Turn is an invoke_agent span; nil when telemetry is off.
type Turn struct {
	t    *Telemetry
	span trace.Span
	ctx  context.Context
}

// StartTurn starts a prompt turn's span. prompt is recorded only with
// LogPrompts.
func (t *Telemetry) StartTurn(ctx context.Context, sessionID, model, prompt string) (context.Context, *Turn) {
	return t.startAgent(ctx, AgentName, sessionID, model, prompt)
}

// StartSubagent starts a subagent run's span, "invoke_agent {agent}" with
// gen_ai.agent.name the agent's name, as a child of the span in ctx (the
// agent call's execute_tool span). It ends like a turn's.
func (t *Telemetry) StartSubagent(ctx context.Context, sessionID, agent, model, prompt string) (context.Context, *Turn) {
	return t.startAgent(ctx, agent, sessionID, model, prompt)
}

// StartAgentTurn starts the span of a prompt turn of another agent, one
// `acpd guard` watches: "invoke_agent {agent}", at the root of its trace.
// The guard knows neither the agent's model nor its provider; an empty
// model or provider leaves its attribute out.
func (t *Telemetry) StartAgentTurn(ctx context.Context, agent, sessionID, model, prompt string) (context.Context, *Turn) {
	return t.startAgent(ctx, agent, sessionID, model, prompt)
}

func (t *Telemetry) startAgent(ctx context.Context, agent, sessionID, model, prompt string) (context.Context, *Turn) {
	if t == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrOperationName, OpInvokeAgent),
		attribute.String(AttrAgentName, agent),
		attribute.String(AttrConversationID, sessionID),
	}
	if c := Connection(ctx); c != "" {
		attrs = append(attrs, attribute.String(AttrConnectionID, c))
	}
	if t.cfg.ProviderName != "" {
		attrs = append(attrs, attribute.String(AttrProviderName, t.cfg.ProviderName))
	}
	if model != "" {
		attrs = append(attrs, attribute.String(AttrRequestModel, model))
	}
	if t.cfg.LogPrompts && prompt != "" {
		msgs, _ := json.Marshal([]map[string]any{{"role": "user", "parts": []map[string]string{{"type": "text", "content": prompt}}}})
		attrs = append(attrs, attribute.String(AttrInputMessages, string(msgs)))
	}
	ctx, span := t.tracer.Start(ctx, OpInvokeAgent+" "+agent, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, &Turn{t: t, span: span, ctx: ctx}
}

// End ends the turn's span and records its tool calls and any loop stop.
func (tu *Turn) End(e TurnEnd) {
	if tu == nil {
		return
	}
	ctx := context.WithoutCancel(tu.ctx)
	tu.t.turnCalls.Record(ctx, int64(e.ToolCalls))
	tu.span.SetAttributes(attribute.Int(AttrTurnToolCalls, e.ToolCalls))
	if e.StopReason != "" {
		tu.span.SetAttributes(attribute.String(AttrStopReason, e.StopReason))
	}
	if e.LoopType != "" {
		tu.t.loopStops.Add(ctx, 1, metric.WithAttributes(
			attribute.String(AttrLoopType, e.LoopType), attribute.String(AttrCapReason, e.CapReason)))
		tu.span.SetAttributes(attribute.String(AttrLoopType, e.LoopType))
		if e.CapReason != "" {
			tu.span.SetAttributes(attribute.String(AttrCapReason, e.CapReason))
		}
	}
	if e.Err != nil {
		tu.span.SetAttributes(attribute.String(AttrErrorType, errorType(e)))
		tu.span.SetStatus(codes.Error, e.Err.Error())
	}
	tu.span.End()
}

// Chat is a chat span; nil when telemetry is off.
type Chat struct {
	t     *Telemetry
	span  trace.Span
	ctx   context.Context
	model string
	start time.Time
}

// StartChat starts a model request's span.
func (t *Telemetry) StartChat(ctx context.Context, model string) (context.Context, *Chat) {
	if t == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrOperationName, OpChat),
		attribute.String(AttrProviderName, t.cfg.ProviderName),
		attribute.String(AttrRequestModel, model),
	}
	if c := Connection(ctx); c != "" {
		attrs = append(attrs, attribute.String(AttrConnectionID, c))
	}
	ctx, span := t.tracer.Start(ctx, OpChat+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, &Chat{t: t, span: span, ctx: ctx, model: model, start: time.Now()}
}

// End ends the request's span and records its duration and token usage.
func (c *Chat) End(e ChatEnd) {
	if c == nil {
		return
	}
	ctx := context.WithoutCancel(c.ctx)
	common := []attribute.KeyValue{
		attribute.String(AttrOperationName, OpChat),
		attribute.String(AttrProviderName, c.t.cfg.ProviderName),
		attribute.String(AttrRequestModel, c.model),
	}
	durAttrs := common
	if e.Err != nil {
		durAttrs = append(durAttrs[:len(durAttrs):len(durAttrs)], attribute.String(AttrErrorType, "_OTHER"))
		c.span.SetAttributes(attribute.String(AttrErrorType, "_OTHER"))
		c.span.SetStatus(codes.Error, e.Err.Error())
	}
	c.t.duration.Record(ctx, time.Since(c.start).Seconds(), metric.WithAttributes(durAttrs...))
	if e.HaveUsage {
		c.span.SetAttributes(attribute.Int(AttrInputTokens, e.InputTokens), attribute.Int(AttrOutputTokens, e.OutputTokens),
			attribute.Int(AttrCacheReadTokens, e.CacheReadTokens), attribute.Int(AttrCacheWriteTokens, e.CacheWriteTokens))
		in := append(common[:len(common):len(common)], attribute.String(AttrTokenType, TokenInput))
		out := append(common[:len(common):len(common)], attribute.String(AttrTokenType, TokenOutput))
		c.t.tokens.Record(ctx, float64(e.InputTokens), metric.WithAttributes(in...))
		c.t.tokens.Record(ctx, float64(e.OutputTokens), metric.WithAttributes(out...))
	}
	if e.FinishReason != "" {
		c.span.SetAttributes(attribute.StringSlice(AttrFinishReasons, []string{e.FinishReason}))
	}
	c.span.End()
}

// Tool is an execute_tool span; nil when telemetry is off.
type Tool struct{ span trace.Span }

// StartTool starts a tool call's span; args are recorded only with
// LogPrompts. The returned context carries the span, so what the call
// starts (an agent call's subagent run) nests under it.
func (t *Telemetry) StartTool(ctx context.Context, name, callID string, args []byte) (context.Context, *Tool) {
	if t == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrOperationName, OpExecuteTool),
		attribute.String(AttrToolName, name),
		attribute.String(AttrToolCallID, callID),
		attribute.String(AttrToolType, "function"),
	}
	if c := Connection(ctx); c != "" {
		attrs = append(attrs, attribute.String(AttrConnectionID, c))
	}
	if t.cfg.LogPrompts && len(args) > 0 {
		attrs = append(attrs, attribute.String(AttrToolCallArguments, string(args)))
	}
	ctx, span := t.tracer.Start(ctx, OpExecuteTool+" "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, &Tool{span: span}
}

// End ends the tool call's span; errType is "" on success.
func (tl *Tool) End(errType string) {
	if tl == nil {
		return
	}
	if errType != "" {
		tl.span.SetAttributes(attribute.String(AttrErrorType, errType))
		tl.span.SetStatus(codes.Error, errType)
	}
	tl.span.End()
}
