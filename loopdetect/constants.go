package loopdetect

// Thresholds and limits of the reference implementation (loop-detection.md §1).
const (
	// GlobalDuplicateThreshold is how often one repeat key may occur in a turn
	// before it counts as stuck: a heuristic halt, and the adaptive cap's
	// "stuck" signal.
	GlobalDuplicateThreshold = 6
	// DefaultMaxToolCallsPerTurn is the soft per-turn cap used when none is configured.
	DefaultMaxToolCallsPerTurn = 100
	// AdaptiveCapHardMultiplier turns a default (non-explicit) cap into its
	// hard backstop: cap × 10.
	AdaptiveCapHardMultiplier = 10
	// ToolCallLoopThreshold is the number of consecutive identical calls that halt (always-on).
	ToolCallLoopThreshold = 5
	// ShellCommandStagnationThreshold is the number of consecutive git overview
	// inspection shell calls that halt (always-on).
	ShellCommandStagnationThreshold = StagnationThreshold
	// AlternatingPatternCycles is the number of A,B cycles (window 6) that halt.
	AlternatingPatternCycles = 3
	// FileReadThreshold is the number of read-like calls within the last
	// FileReadWindow calls that halt once a non-read tool has been seen.
	FileReadThreshold = 8
	// FileReadWindow is the number of recent calls the read-file loop looks at.
	FileReadWindow = 15
	// StagnationThreshold is the same-name streak that halts as action stagnation.
	StagnationThreshold = 8
	// ContentChunkSize is the sliding content chunk, in UTF-16 code units.
	ContentChunkSize = 50
	// ContentLoopThreshold is the number of close occurrences of one chunk that halt.
	ContentLoopThreshold = 10
	// MaxHistoryLength is the content history kept, in UTF-16 code units.
	MaxHistoryLength = 1000
	// ThoughtRepeatThreshold is the number of identical trailing thoughts that halt.
	ThoughtRepeatThreshold = 3
	// MaxThoughtHistory is the number of thought signatures kept.
	MaxThoughtHistory = 50
	// DaemonInvalidToolParamsThreshold is the number of invalid-parameter
	// errors per tool name after which the daemon stops the turn.
	DaemonInvalidToolParamsThreshold = 3
	// RepeatedToolFailureThreshold is the failure count the repeated-failure
	// guard needs before it warns.
	RepeatedToolFailureThreshold = 8
	// RepeatedToolFailureBatchThreshold is the batch count the repeated-failure
	// guard needs before it warns.
	RepeatedToolFailureBatchThreshold = 2

	// thoughtDescriptionPrefix is how much of a thought description (UTF-16
	// units) goes into its signature.
	thoughtDescriptionPrefix = 200
	// maxAverageChunkDistance is 1.5 × ContentChunkSize, kept in halves to stay integral.
	maxAverageChunkDistanceX2 = 3 * ContentChunkSize
)

// LoopType names the detector that fired. Its values are the wire values
// sent in ACP error data (data.loopType) and in telemetry.
type LoopType string

// The LoopType wire values.
const (
	LoopConsecutiveIdenticalToolCalls LoopType = "consecutive_identical_tool_calls"
	LoopChantingIdenticalSentences    LoopType = "chanting_identical_sentences"
	LoopRepetitiveThoughts            LoopType = "repetitive_thoughts"
	LoopReadFileLoop                  LoopType = "read_file_loop"
	LoopActionStagnation              LoopType = "action_stagnation"
	LoopShellCommandStagnation        LoopType = "shell_command_stagnation"
	LoopGlobalToolCallDuplicate       LoopType = "global_tool_call_duplicate"
	LoopAlternatingToolCallPattern    LoopType = "alternating_tool_call_pattern"
	LoopTurnToolCallCap               LoopType = "turn_tool_call_cap"
	LoopInvalidToolParamsStagnation   LoopType = "invalid_tool_params_stagnation"
	LoopRepeatedToolExecutionFailure  LoopType = "repeated_tool_execution_failure"
)

// Exact daemon texts (loop-detection.md §1). Clients and models see them
// byte for byte, so they live here once.
const (
	// LoopDetectedSkipMessage is the tool result of a call skipped by a loop stop.
	LoopDetectedSkipMessage = "Skipped because loop detection stopped the current turn before this tool call could run."
	// PermissionCancelSkipMessage is the tool result of a call skipped after a cancelled permission request.
	PermissionCancelSkipMessage = "Skipped because a permission request was cancelled before the user answered; user input is required before continuing."
	// LoopDetectedContextMessage is the text part recorded after a loop stop, which the model sees next prompt.
	LoopDetectedContextMessage = "System: this turn was terminated because the model exceeded tool-call safety limits. Try a different approach on the next turn."
	// LoopDetectedTurnErrorMessage is the JSON-RPC error message of a loop-stopped foreground prompt.
	LoopDetectedTurnErrorMessage = "Tool-call loop protection stopped this turn. The session is still available; send a more specific instruction to continue."
	// ToolExecutionCancelledMessage is the result of a tool call cancelled while running.
	ToolExecutionCancelledMessage = "Tool execution was cancelled."
	// ToolPostExecutionCancelledMessage is the result of a call whose output was discarded after it completed.
	ToolPostExecutionCancelledMessage = "The tool had already completed; its output was discarded."
	// RepeatedToolFailureReminder is appended after tool responses when the repeated-failure guard warns.
	RepeatedToolFailureReminder = "System: the same tool execution has failed repeatedly for the same classified reason. Do not repeat the same approach. Inspect the returned result, change the approach or required preconditions, or explain the blocker."
	// RepeatedToolFailureStopMessage is recorded (after "System: ") when the repeated-failure guard stops a turn.
	RepeatedToolFailureStopMessage = "Automatic continuation stopped because the same tool execution failure continued after a corrective reminder. New user input is required to continue."
)
