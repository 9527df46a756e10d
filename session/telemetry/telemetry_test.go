package telemetry_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/telemetry"
	"github.com/acpd/acpd/session/telemetry/telemetrytest"
)

// Off: nothing is set up, no goroutine starts, every call is a no-op.
func TestDisabled(t *testing.T) {
	before := runtime.NumGoroutine()
	tel, err := telemetry.Start(t.Context(), telemetry.Config{Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	require.Nil(t, tel)
	ctx, turn := tel.StartTurn(t.Context(), "s", "m", "p")
	assert.Equal(t, t.Context(), ctx)
	_, chat := tel.StartChat(ctx, "m")
	chat.End(telemetry.ChatEnd{})
	tctx, tool := tel.StartTool(ctx, "read_file", "c1", nil)
	assert.Equal(t, ctx, tctx)
	tool.End("")
	sctx, sub := tel.StartSubagent(ctx, "s", "Explore", "m", "p")
	assert.Equal(t, ctx, sctx)
	sub.End(telemetry.TurnEnd{})
	turn.End(telemetry.TurnEnd{LoopType: "turn_tool_call_cap"})
	require.NoError(t, tel.ForceFlush(ctx))
	require.NoError(t, tel.Shutdown(ctx))
	assert.Equal(t, before, runtime.NumGoroutine())
}

// The same turn exported over each protocol, plaintext and TLS, arrives
// with the same spans, attributes and metrics. The TLS collectors are
// reached as a deployment would configure them, through the standard
// variables alone (endpoint, protocol, certificate, headers), which the
// exporters read themselves.
func TestExport(t *testing.T) {
	for _, tc := range []struct {
		name, proto string
		collector   func(testing.TB) *telemetrytest.Collector
		fromEnv     bool
	}{
		{"http", telemetry.ProtocolHTTP, telemetrytest.NewCollector, false},
		{"grpc", telemetry.ProtocolGRPC, telemetrytest.NewGRPCCollector, false},
		{"http over TLS", telemetry.ProtocolHTTP, telemetrytest.NewTLSCollector, true},
		{"grpc over TLS", telemetry.ProtocolGRPC, telemetrytest.NewTLSGRPCCollector, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.collector(t)
			cfg := telemetry.Config{Enabled: true, ProviderName: "openai", ServiceVersion: "test", LogPrompts: true}
			if tc.fromEnv {
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL())
				t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", map[string]string{"http": "http/protobuf", "grpc": "grpc"}[tc.proto])
				t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", c.CAFile())
				t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-token=a%20b")
			} else {
				cfg.Protocol, cfg.Endpoint = tc.proto, c.URL()
			}
			testExport(t, cfg, c)
			if tc.fromEnv {
				hs := c.Headers()
				require.NotEmpty(t, hs)
				for _, h := range hs {
					assert.Equal(t, "a b", h.Get("X-Collector-Token"))
				}
			}
		})
	}
}

func testExport(t *testing.T, cfg telemetry.Config, c *telemetrytest.Collector) {
	tel, err := telemetry.Start(t.Context(), cfg)
	require.NoError(t, err)
	require.NotNil(t, tel)

	ctx, turn := tel.StartTurn(t.Context(), "sess1", "qwen3", "fix the tests")
	_, chat := tel.StartChat(ctx, "qwen3")
	chat.End(telemetry.ChatEnd{HaveUsage: true, InputTokens: 1200, OutputTokens: 30, CacheReadTokens: 1024, FinishReason: "tool_calls"})
	_, read := tel.StartTool(ctx, "read_file", "call_1", []byte(`{"file_path":"/w/x"}`))
	read.End("")
	_, shell := tel.StartTool(ctx, "run_shell_command", "call_2", nil)
	shell.End("EXECUTION_FAILED")
	turn.End(telemetry.TurnEnd{ToolCalls: 101, LoopType: "turn_tool_call_cap", CapReason: "stuck", Err: errors.New("loop")})
	require.NoError(t, tel.Shutdown(t.Context()))
	assert.Empty(t, c.Errors())

	turns := c.SpansNamed("invoke_agent acpd")
	require.Len(t, turns, 1)
	ta := telemetrytest.Attrs(turns[0].Attributes)
	assert.Equal(t, "invoke_agent", ta["gen_ai.operation.name"])
	assert.Equal(t, "sess1", ta["gen_ai.conversation.id"])
	assert.Equal(t, "openai", ta["gen_ai.provider.name"])
	assert.Equal(t, int64(101), ta["acpd.turn.tool_calls"])
	assert.Equal(t, "turn_tool_call_cap", ta["loop_type"])
	assert.Equal(t, "stuck", ta["cap_reason"])
	assert.Equal(t, "loop_detected", ta["error.type"])
	assert.Contains(t, ta["gen_ai.input.messages"], "fix the tests", "logPrompts")

	chats := c.SpansNamed("chat qwen3")
	require.Len(t, chats, 1)
	assert.Equal(t, turns[0].SpanId, chats[0].ParentSpanId)
	ca := telemetrytest.Attrs(chats[0].Attributes)
	assert.Equal(t, int64(1200), ca["gen_ai.usage.input_tokens"])
	assert.Equal(t, int64(30), ca["gen_ai.usage.output_tokens"])
	assert.Equal(t, int64(1024), ca["gen_ai.usage.cache_read.input_tokens"])
	assert.Equal(t, []string{"tool_calls"}, ca["gen_ai.response.finish_reasons"])

	tools := c.SpansNamed("execute_tool read_file")
	require.Len(t, tools, 1)
	assert.Equal(t, turns[0].SpanId, tools[0].ParentSpanId)
	tla := telemetrytest.Attrs(tools[0].Attributes)
	assert.Equal(t, "call_1", tla["gen_ai.tool.call.id"])
	assert.Equal(t, `{"file_path":"/w/x"}`, tla["gen_ai.tool.call.arguments"])
	failed := c.SpansNamed("execute_tool run_shell_command")
	require.Len(t, failed, 1)
	assert.Equal(t, "EXECUTION_FAILED", telemetrytest.Attrs(failed[0].Attributes)["error.type"])

	assert.Equal(t, map[string]int64{"cap_reason=stuck,loop_type=turn_tool_call_cap": 1}, c.Counts("acpd.loop.stops"))

	calls := c.Metric("acpd.turn.tool_calls").GetHistogram().DataPoints
	require.Len(t, calls, 1)
	assert.Equal(t, 101.0, calls[0].GetSum())

	tokens := c.Metric("gen_ai.client.token.usage").GetHistogram().DataPoints
	require.Len(t, tokens, 2)
	byType := map[any]float64{}
	for _, dp := range tokens {
		byType[telemetrytest.Attrs(dp.Attributes)["gen_ai.token.type"]] = dp.GetSum()
	}
	assert.Equal(t, map[any]float64{"input": 1200, "output": 30}, byType)
	require.NotNil(t, c.Metric("gen_ai.client.operation.duration"))
}

// A subagent run is an invoke_agent span named for its agent, under the
// agent call's execute_tool span, with its model requests under it.
func TestSubagentSpan(t *testing.T) {
	c := telemetrytest.NewCollector(t)
	tel, err := telemetry.Start(t.Context(), telemetry.Config{Enabled: true, Protocol: telemetry.ProtocolHTTP, Endpoint: c.URL()})
	require.NoError(t, err)
	ctx, turn := tel.StartTurn(t.Context(), "sess1", "qwen3", "")
	actx, call := tel.StartTool(ctx, "agent", "call_1", nil)
	sctx, run := tel.StartSubagent(actx, "sess1", "Explore", "qwen3", "where?")
	_, chat := tel.StartChat(sctx, "qwen3")
	chat.End(telemetry.ChatEnd{FinishReason: "stop"})
	run.End(telemetry.TurnEnd{ToolCalls: 3, LoopType: "turn_tool_call_cap", CapReason: "stuck", Err: errors.New("loop")})
	call.End("SUBAGENT_LOOP_DETECTED")
	turn.End(telemetry.TurnEnd{ToolCalls: 1, StopReason: "end_turn"})
	require.NoError(t, tel.Shutdown(t.Context()))

	turns := c.SpansNamed("invoke_agent acpd")
	tools := c.SpansNamed("execute_tool agent")
	runs := c.SpansNamed("invoke_agent Explore")
	chats := c.SpansNamed("chat qwen3")
	require.Len(t, turns, 1)
	require.Len(t, tools, 1)
	require.Len(t, runs, 1)
	require.Len(t, chats, 1)
	assert.Equal(t, turns[0].SpanId, tools[0].ParentSpanId)
	assert.Equal(t, tools[0].SpanId, runs[0].ParentSpanId)
	assert.Equal(t, runs[0].SpanId, chats[0].ParentSpanId)
	ra := telemetrytest.Attrs(runs[0].Attributes)
	assert.Equal(t, "Explore", ra["gen_ai.agent.name"])
	assert.Equal(t, "sess1", ra["gen_ai.conversation.id"])
	assert.Equal(t, int64(3), ra["acpd.turn.tool_calls"])
	assert.Equal(t, "stuck", ra["cap_reason"])
	assert.Equal(t, map[string]int64{"cap_reason=stuck,loop_type=turn_tool_call_cap": 1}, c.Counts("acpd.loop.stops"))
}

// The standard variables choose the endpoint and protocol when the
// configuration does not.
func TestStandardEnvironment(t *testing.T) {
	c := telemetrytest.NewCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	tel, err := telemetry.Start(t.Context(), telemetry.Config{Enabled: true})
	require.NoError(t, err)
	_, turn := tel.StartTurn(t.Context(), "s", "m", "")
	turn.End(telemetry.TurnEnd{StopReason: "end_turn"})
	require.NoError(t, tel.Shutdown(t.Context()))
	assert.Len(t, c.SpansNamed("invoke_agent acpd"), 1)

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err = telemetry.Start(t.Context(), telemetry.Config{Enabled: true})
	require.ErrorContains(t, err, "OTEL_EXPORTER_OTLP_PROTOCOL")
	_, err = telemetry.Start(t.Context(), telemetry.Config{Enabled: true, Protocol: "udp"})
	require.ErrorContains(t, err, "telemetry.protocol")
}

// A collector that refuses connections or never answers costs a turn
// nothing: spans end at once (export is asynchronous), and shutdown is
// bounded by its context.
func TestUnreachableCollector(t *testing.T) {
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer hole.Close()
	go func() {
		for {
			conn, err := hole.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, never answered
		}
	}()
	for _, tc := range []struct{ name, proto, endpoint string }{
		{"refused http", telemetry.ProtocolHTTP, "http://127.0.0.1:1"},
		{"refused grpc", telemetry.ProtocolGRPC, "http://127.0.0.1:1"},
		{"black hole http", telemetry.ProtocolHTTP, "http://" + hole.Addr().String()},
		{"black hole grpc", telemetry.ProtocolGRPC, "http://" + hole.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel, err := telemetry.Start(t.Context(), telemetry.Config{Enabled: true, Protocol: tc.proto, Endpoint: tc.endpoint,
				MetricInterval: 10 * time.Millisecond})
			require.NoError(t, err)
			for range 50 {
				ctx, turn := tel.StartTurn(t.Context(), "s", "m", "")
				_, chat := tel.StartChat(ctx, "m")
				chat.End(telemetry.ChatEnd{})
				_, tool := tel.StartTool(ctx, "read_file", "c", nil)
				tool.End("")
				turn.End(telemetry.TurnEnd{StopReason: "end_turn", ToolCalls: 1})
			}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			done := make(chan struct{})
			go func() { _ = tel.Shutdown(ctx); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Shutdown did not honour its context")
			}
		})
	}
}

// Probe sends the collector an empty export over the configured protocol,
// or the one the standard variables name, and says why a collector did
// not take it.
func TestProbe(t *testing.T) {
	for _, tc := range []struct {
		proto     string
		collector func(testing.TB) *telemetrytest.Collector
		target    func(base string) string
	}{
		{telemetry.ProtocolHTTP, telemetrytest.NewCollector, func(b string) string { return b + "/v1/traces" }},
		{telemetry.ProtocolGRPC, telemetrytest.NewGRPCCollector, func(b string) string { return b }},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			c := tc.collector(t)
			proto, target, err := telemetry.Probe(t.Context(), telemetry.Config{Enabled: true, Protocol: tc.proto, Endpoint: c.URL()})
			require.NoError(t, err)
			assert.Equal(t, tc.proto, proto)
			assert.Equal(t, tc.target(c.URL()), target)
			assert.Equal(t, 1, c.Requests())
			assert.Empty(t, c.Spans(), "an empty export records nothing")

			// From the standard variables alone.
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL())
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", map[string]string{"http": "http/protobuf", "grpc": "grpc"}[tc.proto])
			proto, target, err = telemetry.Probe(t.Context(), telemetry.Config{Enabled: true})
			require.NoError(t, err)
			assert.Equal(t, tc.proto, proto)
			assert.Equal(t, tc.target(c.URL()), target)
			assert.Equal(t, 2, c.Requests())

			_, _, err = telemetry.Probe(t.Context(), telemetry.Config{Enabled: true, Protocol: tc.proto, Endpoint: "http://127.0.0.1:1"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "refused")
		})
	}
}

// The probe carries OTEL_EXPORTER_OTLP_HEADERS (percent-decoded), as the
// exporters do, and reports a collector's refusal with its status and
// body, at once (no retry).
func TestProbe_HeadersAndRefusal(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		http.Error(w, "bad api key", http.StatusUnauthorized)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=a%20b,x-team=t1")
	_, target, err := telemetry.Probe(t.Context(), telemetry.Config{Enabled: true, Protocol: telemetry.ProtocolHTTP, Endpoint: srv.URL})
	assert.Equal(t, srv.URL+"/v1/traces", target)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "401 Unauthorized")
	assert.Contains(t, err.Error(), "bad api key")
	assert.Equal(t, "a b", got.Get("X-Api-Key"))
	assert.Equal(t, "t1", got.Get("X-Team"))
	assert.Equal(t, "application/x-protobuf", got.Get("Content-Type"))
}
