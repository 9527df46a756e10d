package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/telemetry/telemetrytest"
)

// A loop-stopped turn run by the built binary, exported over OTLP/HTTP and
// OTLP/gRPC to in-test receivers: the turn, model and tool spans and the
// loop-stop counter with its attributes arrive.
func TestTelemetry_LoopStoppedTurn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		proto     string
		collector func(testing.TB) *telemetrytest.Collector
	}{
		{"http", telemetrytest.NewCollector},
		{"grpc", telemetrytest.NewGRPCCollector},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			t.Parallel()
			testLoopStoppedTurnTelemetry(t, tc.proto, tc.collector(t))
		})
	}
}

func testLoopStoppedTurnTelemetry(t *testing.T, proto string, c *telemetrytest.Collector) {
	e := newRunEnv(t)
	read := `{"toolCalls":[{"name":"read_file","arguments":{"file_path":"%s/x.txt"}}],"usage":{"promptTokens":100,"completionTokens":7,"cachedTokens":64}}` + "\n"
	script := e.script(t, strings.Repeat(read, 3)+`{"text":"never"}`+"\n")
	o := e.run(t, "", e.scripted(script, "--max-tool-calls-per-turn", "2", "--output-format", "json",
		"--telemetry", "--telemetry-protocol", proto, "--telemetry-endpoint", c.URL(), "go")...)
	require.Equal(t, 3, o.code, o.stderr)
	res := decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Empty(t, c.Errors())

	turns := c.SpansNamed("invoke_agent acpd")
	require.Len(t, turns, 1, "spans: %v", c.Spans())
	ta := telemetrytest.Attrs(turns[0].Attributes)
	assert.Equal(t, res.SessionID, ta["gen_ai.conversation.id"])
	assert.Equal(t, "script", ta["gen_ai.provider.name"])
	assert.Equal(t, "demo", ta["gen_ai.request.model"])
	assert.Equal(t, "turn_tool_call_cap", ta["loop_type"])
	assert.Equal(t, "explicit", ta["cap_reason"])
	assert.Equal(t, int64(3), ta["acpd.turn.tool_calls"])
	assert.NotContains(t, ta, "gen_ai.input.messages", "prompts are not logged by default")

	chats := c.SpansNamed("chat demo")
	require.Len(t, chats, 3)
	for _, s := range chats {
		assert.Equal(t, turns[0].SpanId, s.ParentSpanId)
		assert.Equal(t, int64(100), telemetrytest.Attrs(s.Attributes)["gen_ai.usage.input_tokens"])
		assert.Equal(t, int64(64), telemetrytest.Attrs(s.Attributes)["gen_ai.usage.cache_read.input_tokens"])
	}
	tools := c.SpansNamed("execute_tool read_file")
	require.Len(t, tools, 2, "the third call was skipped, never executed")
	for _, s := range tools {
		assert.Equal(t, turns[0].SpanId, s.ParentSpanId)
	}

	assert.Equal(t, map[string]int64{"cap_reason=explicit,loop_type=turn_tool_call_cap": 1}, c.Counts("acpd.loop.stops"))
	hist := c.Metric("acpd.turn.tool_calls").GetHistogram().DataPoints
	require.Len(t, hist, 1)
	assert.Equal(t, 3.0, hist[0].GetSum())
	assert.NotNil(t, c.Metric("gen_ai.client.token.usage"))
	assert.NotNil(t, c.Metric("gen_ai.client.operation.duration"))
}

// A subagent run through the built binary is an invoke_agent span named for
// its agent, under the agent call's execute_tool span, with its own model
// requests and tool calls under it.
func TestTelemetry_SubagentSpans(t *testing.T) {
	t.Parallel()
	c := telemetrytest.NewCollector(t)
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"id":"agent_1","name":"agent","arguments":{"description":"Read x","prompt":"TASK-T: read x.txt","subagent_type":"Explore"}}]}
{"match":"TASK-T","toolCalls":[{"id":"s1","name":"read_file","arguments":{"file_path":"%s/x.txt"}}]}
{"match":"TASK-T","text":"hello"}
{"text":"done"}
`)
	o := e.run(t, "", e.scripted(script, "--telemetry", "--telemetry-protocol", "http", "--telemetry-endpoint", c.URL(), "go")...)
	require.Equal(t, 0, o.code, o.stderr)
	turns := c.SpansNamed("invoke_agent acpd")
	calls := c.SpansNamed("execute_tool agent")
	runs := c.SpansNamed("invoke_agent Explore")
	reads := c.SpansNamed("execute_tool read_file")
	require.Len(t, turns, 1, "spans: %v", c.Spans())
	require.Len(t, calls, 1)
	require.Len(t, runs, 1)
	require.Len(t, reads, 1)
	assert.Equal(t, turns[0].SpanId, calls[0].ParentSpanId)
	assert.Equal(t, calls[0].SpanId, runs[0].ParentSpanId)
	assert.Equal(t, runs[0].SpanId, reads[0].ParentSpanId)
	chats := c.SpansNamed("chat demo")
	require.Len(t, chats, 4)
	under := 0
	for _, s := range chats {
		if string(s.ParentSpanId) == string(runs[0].SpanId) {
			under++
		}
	}
	assert.Equal(t, 2, under, "the subagent's two model requests")
	ra := telemetrytest.Attrs(runs[0].Attributes)
	assert.Equal(t, "Explore", ra["gen_ai.agent.name"])
	assert.Equal(t, int64(1), ra["acpd.turn.tool_calls"])
	assert.Equal(t, "end_turn", ra["acpd.stop_reason"])
}

// An unreachable collector neither fails nor stops a turn; acpd exits 0.
func TestTelemetry_UnreachableCollector(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"name":"read_file","arguments":{"file_path":"%s/x.txt"}}]}`+"\n"+`{"text":"done"}`+"\n")
	for _, proto := range []string{"http", "grpc"} {
		o := e.run(t, "", e.scripted(script, "--output-format", "json", "--telemetry", "--telemetry-protocol", proto,
			"--telemetry-endpoint", "http://127.0.0.1:1", "go")...)
		require.Equal(t, 0, o.code, o.stderr)
		assert.Equal(t, "end_turn", decodeResult(t, strings.TrimSpace(o.stdout)).StopReason)
	}
}
