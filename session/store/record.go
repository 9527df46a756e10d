package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
)

// Version is the record format version written in every record's "v".
const Version = 1

// Kind names what a Record holds; it selects which payload field is set.
type Kind string

// Record kinds. Each names the payload field(s) it uses.
const (
	KindMeta       Kind = "meta"          // Meta: first record; appended again when an activation changes cwd or roots
	KindUser       Kind = "user"          // Prompt (ACP content blocks as sent)
	KindSteer      Kind = "steer"         // Prompt (+MessageID): a message the user added to the running turn (_session/steering), where the model read it
	KindText       Kind = "text"          // Text (+MessageID): assistant text of one model response
	KindReasoning  Kind = "reasoning"     // Text (+MessageID), Thinking: assistant reasoning of one model response
	KindToolCalls  Kind = "tool_calls"    // ToolCalls: the calls one model response asked for
	KindReminder   Kind = "reminder"      // Text: a user-role message for the model only, never replayed
	KindToolCall   Kind = "tool_call"     // Tool: the frame shown to the client when a call starts
	KindToolResult Kind = "tool_result"   // Tool: the final state, content shown and ModelText fed back
	KindPlan       Kind = "plan"          // Plan
	KindMode       Kind = "mode"          // ModeID
	KindModel      Kind = "model"         // ModelID
	KindThought    Kind = "thought_level" // ThoughtLevel: the thinking level the editor chose
	KindLoopStop   Kind = "loop_stop"     // Loop
	KindTitle      Kind = "title"         // Title
	KindTurnEnd    Kind = "turn_end"      // StopReason, Error
	KindUsage      Kind = "usage"         // Usage
	KindExt        Kind = "ext"           // Data: host-defined payload the store does not interpret
	KindCompaction Kind = "compaction"    // Compaction: the model's history was compacted (see Compaction)
	KindAgentStart Kind = "agent_start"   // Agent (+Parent): a subagent run began (type, description, model, prompt)
	KindAgentEnd   Kind = "agent_end"     // Agent (+Parent): a subagent run ended (stop reason or error)
	KindRewind     Kind = "rewind"        // Rewind: the conversation was rewound to before a turn (see Rewind)
)

// maxRecordTitleLen bounds a title record so the index stays small.
const maxRecordTitleLen = 1024

// Record is one line of a session transcript. V and T are filled by Append
// when zero. Exactly the payload fields of Kind are set (see the Kind consts);
// the rest stay zero and are omitted from the JSON.
type Record struct {
	V    int       `json:"v"`
	T    time.Time `json:"t"` // RFC 3339 with nanoseconds on the wire
	Kind Kind      `json:"kind"`
	// Parent is set on every record of a subagent run: the toolCallId of
	// the agent call that started it. Such records are the subagent's own
	// conversation: they never enter the session's history, and their
	// tool calls replay with the parent's id in _meta. It follows Kind, so
	// PeekKind still finds the kind in a line's first bytes.
	Parent string `json:"parent,omitempty"`

	Meta      *SessionMeta       `json:"meta,omitempty"`
	Prompt    []acp.ContentBlock `json:"prompt,omitempty"`
	Text      string             `json:"text,omitempty"`
	MessageID string             `json:"messageId,omitempty"`
	ToolCalls []ToolCall         `json:"toolCalls,omitempty"`
	// Thinking holds a reasoning record's provider thinking blocks, kept
	// byte for byte so a reloaded session replays them to the provider.
	Thinking []model.Thinking `json:"thinking,omitempty"`
	Tool     *ToolCallRecord  `json:"tool,omitempty"`
	Plan     []acp.PlanEntry  `json:"plan,omitempty"`
	ModeID   string           `json:"modeId,omitempty"`
	ModelID  string           `json:"modelId,omitempty"`
	// ThoughtLevel is a thought_level record's level ("off", "high", …).
	ThoughtLevel string          `json:"thoughtLevel,omitempty"`
	Loop         *LoopStop       `json:"loop,omitempty"`
	Title        string          `json:"title,omitempty"`
	StopReason   acp.StopReason  `json:"stopReason,omitempty"`
	Error        string          `json:"error,omitempty"`
	Usage        *Usage          `json:"usage,omitempty"`
	Data         json.RawMessage `json:"data,omitempty"`
	Compaction   *Compaction     `json:"compaction,omitempty"`
	Agent        *AgentRun       `json:"agent,omitempty"`
	Rewind       *Rewind         `json:"rewind,omitempty"`
}

// AgentRun describes a subagent run: agent_start carries what it was asked
// (Type, Description, Model, Prompt), agent_end how it ended (StopReason,
// or Error: a loop stop, a model failure).
type AgentRun struct {
	Type        string         `json:"type,omitempty"`
	Description string         `json:"description,omitempty"`
	Model       string         `json:"model,omitempty"`
	Prompt      string         `json:"prompt,omitempty"`
	StopReason  acp.StopReason `json:"stopReason,omitempty"`
	Error       string         `json:"error,omitempty"`
}

// SessionMeta identifies a session and its roots.
type SessionMeta struct {
	ID                    string    `json:"id"`
	Cwd                   string    `json:"cwd"`
	AdditionalDirectories []string  `json:"additionalDirectories,omitempty"`
	CreatedAt             time.Time `json:"createdAt"`
	// Agent names the ACP agent `acpd guard` watched in this session (its
	// agentInfo name), and AgentSessionID is that agent's own session id;
	// both are empty for acpd's own sessions.
	Agent          string `json:"agent,omitempty"`
	AgentSessionID string `json:"agentSessionId,omitempty"`
}

// ToolCall is one tool call the model asked for, as the model sent it.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Invalid holds the parse error when Arguments could not be repaired.
	Invalid string `json:"invalid,omitempty"`
	// Thinking is provider data riding on the call (a thought signature).
	Thinking []model.Thinking `json:"thinking,omitempty"`
}

// ToolCallRecord is a tool call as shown to the client (KindToolCall) and,
// in KindToolResult, its outcome including the text the model received.
type ToolCallRecord struct {
	ToolCallID string             `json:"toolCallId"`
	Name       string             `json:"name,omitempty"`
	Title      string             `json:"title,omitempty"`
	Kind       acp.ToolKind       `json:"kind,omitempty"`
	Status     acp.ToolCallStatus `json:"status,omitempty"`
	// ResultHash is what the result signal compared for this call (in a
	// tool_result): loopdetect.ResultHash of the normalised result, as 16
	// hex digits, so acpd stats can replay model.stuckSignal = "results".
	ResultHash string                 `json:"resultHash,omitempty"`
	Locations  []acp.ToolCallLocation `json:"locations,omitempty"`
	RawInput   json.RawMessage        `json:"rawInput,omitempty"`
	RawOutput  json.RawMessage        `json:"rawOutput,omitempty"`
	Content    []acp.ToolCallContent  `json:"content,omitempty"`
	ModelText  string                 `json:"modelText,omitempty"`
	// Decisions is the call's decision trail (package toolcall), in a
	// tool_result: absent when the approval mode alone let it run.
	Decisions []Decision `json:"decisions,omitempty"`
}

// Decision is one entry of a tool call's decision trail: who decided
// (a decider's name, "user" for the editor's answer), the verdict (allow,
// ask, deny, stop, abstain) and why; Context is what a reviewer added for
// the model, After marks a reviewer's decision, taken after the call ran.
type Decision struct {
	By      string `json:"by"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
	Context string `json:"context,omitempty"`
	After   bool   `json:"after,omitempty"`
}

// LoopStop records a turn stopped by the loop guard.
type LoopStop struct {
	LoopType string `json:"loopType"`
	Message  string `json:"message,omitempty"`
	// The guard's facts at the stop, absent in records written before acpd
	// kept them: which cap rule fired (explicit, stuck, backstop; cap stops
	// only), the turn's total counted, the highest repeat of one (tool,
	// args) key, the cap in force, and the windowed signal when
	// model.stuckWindow is set.
	CapReason           string `json:"capReason,omitempty"`
	ToolCalls           int    `json:"toolCalls,omitempty"`
	MaxKeyRepeat        int    `json:"maxKeyRepeat,omitempty"`
	MaxToolCallsPerTurn int    `json:"maxToolCallsPerTurn,omitempty"`
	Explicit            bool   `json:"explicit,omitempty"`
	StuckWindow         int    `json:"stuckWindow,omitempty"`
	WindowKeyRepeat     int    `json:"windowKeyRepeat,omitempty"`
	// RepeatedTool and RepeatCount name the repeated call of a
	// global-duplicate or stuck stop.
	RepeatedTool string `json:"repeatedTool,omitempty"`
	RepeatCount  int    `json:"repeatCount,omitempty"`
	// StuckSignal is "results" when model.stuckSignal was, with the
	// highest result count of one key; Warned marks a stop that came after
	// the turn's warning (model.loopRecovery = "warn").
	StuckSignal  string `json:"stuckSignal,omitempty"`
	ResultRepeat int    `json:"resultRepeat,omitempty"`
	Warned       bool   `json:"warned,omitempty"`
}

// Usage is token accounting: one model response's tokens and, when known,
// the context window used and its size (ACP usage_update). A record with
// no Size reports tokens only (a summary's or a subagent's request).
type Usage struct {
	PromptTokens     int    `json:"promptTokens,omitempty"`
	CompletionTokens int    `json:"completionTokens,omitempty"`
	TotalTokens      int    `json:"totalTokens,omitempty"`
	Used             uint64 `json:"used,omitempty"`
	Size             uint64 `json:"size,omitempty"`
	// CachedTokens is the part of PromptTokens the provider served from
	// its prompt cache; ReasoningTokens the part of CompletionTokens spent
	// reasoning.
	CachedTokens    int `json:"cachedTokens,omitempty"`
	ReasoningTokens int `json:"reasoningTokens,omitempty"`
	// CacheWriteTokens is the part of PromptTokens written to the
	// provider's cache (Anthropic bills it above the input price).
	CacheWriteTokens int `json:"cacheWriteTokens,omitempty"`
	// Origin is "" for the turn's own request, "summary" for a
	// compaction's, "subagent" for a subagent run's (package usage).
	Origin string `json:"origin,omitempty"`
	// Model is the model the request went to.
	Model string `json:"model,omitempty"`
	// Estimated: the provider reported no usage; acpd estimated the counts.
	Estimated bool `json:"estimated,omitempty"`
	// Cost is the request's cost in Currency at the prices configured when
	// it was made; absent without prices.
	Cost     float64 `json:"cost,omitempty"`
	Currency string  `json:"currency,omitempty"`
}

// ErrInvalidRecord is wrapped by Append for a record that names an unknown
// kind or lacks the payload its kind requires.
var ErrInvalidRecord = errors.New("invalid record")

func invalid(kind Kind, format string, args ...any) error {
	return fmt.Errorf("%w: kind %q: %s", ErrInvalidRecord, kind, fmt.Sprintf(format, args...))
}

// validate checks that rec carries the payload its kind needs. It is used on
// both append and load, so a transcript never holds a record the replay
// cannot interpret.
func (r *Record) validate() error {
	switch r.Kind {
	case KindMeta:
		if r.Meta == nil {
			return invalid(r.Kind, "field meta is missing")
		}
		if err := ValidateID(r.Meta.ID); err != nil {
			return invalid(r.Kind, "field meta.id: %v", err)
		}
		if r.Meta.Cwd == "" {
			return invalid(r.Kind, "field meta.cwd is empty")
		}
	case KindUser:
		if r.Prompt == nil {
			return invalid(r.Kind, "field prompt is missing")
		}
	case KindSteer:
		if len(r.Prompt) == 0 {
			return invalid(r.Kind, "field prompt is empty")
		}
	case KindText, KindReasoning:
		// Empty text is legal: a response may carry only tool calls.
	case KindReminder:
		if r.Text == "" {
			return invalid(r.Kind, "field text is empty")
		}
	case KindToolCalls:
		if len(r.ToolCalls) == 0 {
			return invalid(r.Kind, "field toolCalls is empty")
		}
		for i, c := range r.ToolCalls {
			if c.ID == "" {
				return invalid(r.Kind, "field toolCalls[%d].id is empty", i)
			}
			if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
				return invalid(r.Kind, "field toolCalls[%d].arguments is not JSON", i)
			}
		}
	case KindToolCall, KindToolResult:
		if r.Tool == nil {
			return invalid(r.Kind, "field tool is missing")
		}
		if r.Tool.ToolCallID == "" {
			return invalid(r.Kind, "field tool.toolCallId is empty")
		}
		if len(r.Tool.RawInput) > 0 && !json.Valid(r.Tool.RawInput) {
			return invalid(r.Kind, "field tool.rawInput is not JSON")
		}
		if len(r.Tool.RawOutput) > 0 && !json.Valid(r.Tool.RawOutput) {
			return invalid(r.Kind, "field tool.rawOutput is not JSON")
		}
	case KindPlan:
		if r.Plan == nil {
			return invalid(r.Kind, "field plan is missing")
		}
	case KindMode:
		if r.ModeID == "" {
			return invalid(r.Kind, "field modeId is empty")
		}
	case KindModel:
		if r.ModelID == "" {
			return invalid(r.Kind, "field modelId is empty")
		}
	case KindThought:
		if r.ThoughtLevel == "" {
			return invalid(r.Kind, "field thoughtLevel is empty")
		}
	case KindLoopStop:
		if r.Loop == nil || r.Loop.LoopType == "" {
			return invalid(r.Kind, "field loop.loopType is empty")
		}
	case KindTitle:
		if r.Title == "" {
			return invalid(r.Kind, "field title is empty")
		}
		if len(r.Title) > maxRecordTitleLen {
			return invalid(r.Kind, "field title is longer than %d bytes", maxRecordTitleLen)
		}
	case KindTurnEnd:
		if r.StopReason == "" && r.Error == "" {
			return invalid(r.Kind, "fields stopReason and error are both empty")
		}
	case KindUsage:
		if r.Usage == nil {
			return invalid(r.Kind, "field usage is missing")
		}
	case KindExt:
		if len(r.Data) == 0 || !json.Valid(r.Data) {
			return invalid(r.Kind, "field data is not JSON")
		}
	case KindCompaction:
		if r.Compaction == nil {
			return invalid(r.Kind, "field compaction is missing")
		}
		if err := r.Compaction.validate(); err != nil {
			return invalid(r.Kind, "field compaction.%v", err)
		}
	case KindAgentStart, KindAgentEnd:
		if r.Parent == "" {
			return invalid(r.Kind, "field parent is empty")
		}
		if r.Agent == nil {
			return invalid(r.Kind, "field agent is missing")
		}
		if r.Kind == KindAgentStart && r.Agent.Type == "" {
			return invalid(r.Kind, "field agent.type is empty")
		}
	case KindRewind:
		if r.Rewind == nil || r.Rewind.Turn < 1 {
			return invalid(r.Kind, "field rewind.turn is missing or below 1")
		}
	case "":
		return fmt.Errorf("%w: field kind is empty", ErrInvalidRecord)
	default:
		return fmt.Errorf("%w: field kind: unknown kind %q", ErrInvalidRecord, r.Kind)
	}
	return nil
}
