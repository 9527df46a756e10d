package telemetry

// The names acpd's spans, attributes and metrics use. The GenAI semantic
// conventions are still in development (they moved to
// open-telemetry/semantic-conventions-genai, and otel-go's semconv packages
// from v1.42.0 on no longer carry them), so every name lives here, once, to
// be renamed in one place when they settle.
const (
	// Operation names (gen_ai.operation.name) and span name prefixes.
	OpInvokeAgent = "invoke_agent" // one span per prompt turn: "invoke_agent acpd"
	OpChat        = "chat"         // one span per model request: "chat {model}"
	OpExecuteTool = "execute_tool" // one span per tool call: "execute_tool {tool}"

	// AgentName is gen_ai.agent.name and the invoke_agent span's suffix.
	AgentName = "acpd"
	// ServiceName is the default service.name (OTEL_SERVICE_NAME overrides it).
	ServiceName = "acpd"
	// ScopeName is the instrumentation scope of every span and metric.
	ScopeName = "github.com/acpd/acpd/session/telemetry"

	AttrOperationName   = "gen_ai.operation.name"
	AttrProviderName    = "gen_ai.provider.name"
	AttrAgentName       = "gen_ai.agent.name"
	AttrConversationID  = "gen_ai.conversation.id"
	AttrRequestModel    = "gen_ai.request.model"
	AttrFinishReasons   = "gen_ai.response.finish_reasons"
	AttrInputTokens     = "gen_ai.usage.input_tokens"
	AttrOutputTokens    = "gen_ai.usage.output_tokens"
	AttrCacheReadTokens = "gen_ai.usage.cache_read.input_tokens" // part of input_tokens
	// AttrCacheWriteTokens is the part of input_tokens written to the
	// provider's cache (the GenAI conventions' cache_creation count).
	AttrCacheWriteTokens  = "gen_ai.usage.cache_creation.input_tokens"
	AttrTokenType         = "gen_ai.token.type"
	AttrInputMessages     = "gen_ai.input.messages" // opt-in: telemetry.logPrompts
	AttrToolName          = "gen_ai.tool.name"
	AttrToolCallID        = "gen_ai.tool.call.id"
	AttrToolType          = "gen_ai.tool.type"
	AttrToolCallArguments = "gen_ai.tool.call.arguments" // opt-in: telemetry.logPrompts
	AttrErrorType         = "error.type"

	// acpd's own attributes: the turn's outcome and what the loop guard saw.
	AttrStopReason    = "acpd.stop_reason"
	AttrTurnToolCalls = "acpd.turn.tool_calls"
	AttrLoopType      = "loop_type"  // on the loop-stop counter and the turn span
	AttrCapReason     = "cap_reason" // explicit, stuck, backstop (turn_tool_call_cap only)

	MetricTokenUsage        = "gen_ai.client.token.usage"        // histogram {token}, by gen_ai.token.type
	MetricOperationDuration = "gen_ai.client.operation.duration" // histogram s, per model request
	MetricTurnToolCalls     = "acpd.turn.tool_calls"             // histogram {call}, per prompt turn
	MetricLoopStops         = "acpd.loop.stops"                  // counter {stop}, by loop_type and cap_reason

	TokenInput  = "input"
	TokenOutput = "output"
)

// Histogram buckets: the GenAI conventions' advice for tokens and seconds,
// and for tool calls per turn boundaries around the soft cap (100) and the
// backstop (1000).
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	toolCallBuckets = []float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
)
