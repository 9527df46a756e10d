package acp

import (
	"context"
	"encoding/json"
	"fmt"
)

// Meta is the `_meta` extension object every ACP type may carry.
type Meta map[string]any

// MetaParentToolCallID is the `_meta` key acpd puts on the tool calls of a
// subagent run (tool_call, tool_call_update and the permission request's
// toolCall): the toolCallId of the agent call that started the run, so an
// editor can nest them under it. ACP reserves custom root fields, hence a
// `_meta` key, namespaced by a prefix.
const MetaParentToolCallID = "acpd.parentToolCallId"

// MetaPermission is the `_meta` key of a permission request that is not
// the tool call's ordinary question. Its one value,
// PermissionPrivateNetwork, marks a web_fetch about to reach a loopback or
// private network address: acpd asks that every time, in every approval
// mode (yolo too), so a client that cannot ask anyone has to tell its user
// about tools.webFetchAllowPrivate, not about a more permissive mode.
const MetaPermission = "acpd.permission"

// MetaDecisions is the `_meta` key of a tool call's final
// tool_call_update that carries its decision trail, when something other
// than the approval mode alone decided it: a list of {by, verdict,
// reason} (verdict allow, ask, deny or stop; by a decider's name, or
// "user" for the answer to a permission request), in order.
const MetaDecisions = "acpd.decisions"

// PermissionPrivateNetwork is MetaPermission's value for the private
// network question.
const PermissionPrivateNetwork = "privateNetwork"

// PermissionSandboxNetwork is MetaPermission's value for a confined
// command's question about a host it wants to reach through acpd's proxy
// (tools.sandboxNetwork = "proxy"): a client that cannot ask anyone has to
// tell its user about tools.sandboxAllowedDomains.
const PermissionSandboxNetwork = "sandboxNetwork"

// PermissionRewindConflict is MetaPermission's value for a rewind's
// question about files changed since the turns it undoes.
const PermissionRewindConflict = "rewindConflict"

// ProtocolVersion is the only ACP major version acpd speaks.
const ProtocolVersion = 1

// Method names (schema meta.json).
const (
	MethodInitialize     = "initialize"
	MethodAuthenticate   = "authenticate"
	MethodLogout         = "logout"
	MethodSessionNew     = "session/new"
	MethodSessionLoad    = "session/load"
	MethodSessionResume  = "session/resume"
	MethodSessionFork    = "session/fork" // unstable (schema.unstable.json)
	MethodSessionList    = "session/list"
	MethodSessionClose   = "session/close"
	MethodSessionDelete  = "session/delete"
	MethodSessionSetMode = "session/set_mode"
	// MethodSessionSetModel is the model selector before config options;
	// in neither v1 schema, still sent by some clients (see Conn.dispatch).
	MethodSessionSetModel        = "session/set_model"
	MethodSessionSetConfigOption = "session/set_config_option"
	MethodSessionPrompt          = "session/prompt"
	MethodSessionCancel          = "session/cancel"

	MethodSessionUpdate            = "session/update"
	MethodSessionRequestPermission = "session/request_permission"
	MethodFSReadTextFile           = "fs/read_text_file"
	MethodFSWriteTextFile          = "fs/write_text_file"
	MethodTerminalCreate           = "terminal/create"
	MethodTerminalOutput           = "terminal/output"
	MethodTerminalRelease          = "terminal/release"
	MethodTerminalWaitForExit      = "terminal/wait_for_exit"
	MethodTerminalKill             = "terminal/kill"

	MethodCancelRequest = "$/cancel_request"
)

// ---- initialize ----

// InitializeRequest is the params of initialize: the client's latest protocol version and its capabilities.
type InitializeRequest struct {
	ProtocolVersion    int                `json:"protocolVersion"`
	ClientCapabilities ClientCapabilities `json:"clientCapabilities,omitzero"`
	ClientInfo         *Implementation    `json:"clientInfo,omitempty"`
	Meta               Meta               `json:"_meta,omitempty"`
}

// ClientCapabilities is what the client offers; anything absent is unsupported.
type ClientCapabilities struct {
	FS       FileSystemCapabilities `json:"fs,omitzero"`
	Terminal bool                   `json:"terminal,omitempty"`
	Meta     Meta                   `json:"_meta,omitempty"`

	// Auth, Session and Elicitation are decoded so the host can gate
	// terminal auth, boolean config options and elicitation on them.
	Auth        AuthCapabilities           `json:"auth,omitzero"`
	Session     *ClientSessionCapabilities `json:"session,omitempty"`
	Elicitation *ElicitationCapabilities   `json:"elicitation,omitempty"`
	// Subagents (unstable schema): the client shows subagent runs as child
	// sessions (subagent_update).
	Subagents *Capability `json:"subagents,omitempty"`
}

// AuthCapabilities are the client's authentication capabilities.
type AuthCapabilities struct {
	Terminal bool `json:"terminal,omitempty"`
	Meta     Meta `json:"_meta,omitempty"`
}

// ClientSessionCapabilities are the client's session capabilities;
// ConfigOptions.Boolean non-nil means boolean config options are accepted,
// Notices non-nil that `notice` updates may be sent, Compaction non-nil
// that compaction_update and compaction_summary_chunk may be sent.
type ClientSessionCapabilities struct {
	ConfigOptions *SessionConfigOptionsCapabilities `json:"configOptions,omitempty"`
	Notices       *Capability                       `json:"notices,omitempty"`
	Compaction    *Capability                       `json:"compaction,omitempty"`
	Meta          Meta                              `json:"_meta,omitempty"`
}

// Notices reports whether the client accepts `notice` session updates.
func (c ClientCapabilities) Notices() bool { return c.Session != nil && c.Session.Notices != nil }

// Compaction reports whether the client accepts compaction_update and
// compaction_summary_chunk session updates.
func (c ClientCapabilities) Compaction() bool { return c.Session != nil && c.Session.Compaction != nil }

// BooleanOptions reports whether the client accepts boolean config options.
func (c ClientCapabilities) BooleanOptions() bool {
	return c.Session != nil && c.Session.ConfigOptions != nil && c.Session.ConfigOptions.Boolean != nil
}

// ElicitForm reports whether the client serves elicitation/create in form mode.
func (c ClientCapabilities) ElicitForm() bool {
	return c.Elicitation != nil && c.Elicitation.Form != nil
}

// ElicitURL reports whether the client serves elicitation/create in URL mode.
func (c ClientCapabilities) ElicitURL() bool {
	return c.Elicitation != nil && c.Elicitation.URL != nil
}

// SessionConfigOptionsCapabilities lists the config option kinds a client accepts.
type SessionConfigOptionsCapabilities struct {
	Boolean *Capability `json:"boolean,omitempty"`
	Meta    Meta        `json:"_meta,omitempty"`
}

// ElicitationCapabilities lists the elicitation modes a client supports.
type ElicitationCapabilities struct {
	Form *Capability `json:"form,omitempty"`
	URL  *Capability `json:"url,omitempty"`
	Meta Meta        `json:"_meta,omitempty"`
}

// FileSystemCapabilities says whether the client serves fs/read_text_file and fs/write_text_file.
type FileSystemCapabilities struct {
	ReadTextFile  bool `json:"readTextFile,omitempty"`
	WriteTextFile bool `json:"writeTextFile,omitempty"`
	Meta          Meta `json:"_meta,omitempty"`
}

// Implementation names a client or agent (clientInfo, agentInfo).
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
	Meta    Meta   `json:"_meta,omitempty"`
}

// InitializeResponse is the result of initialize.
type InitializeResponse struct {
	ProtocolVersion   int               `json:"protocolVersion"`
	AgentCapabilities AgentCapabilities `json:"agentCapabilities"`
	AuthMethods       []AuthMethod      `json:"authMethods"`
	AgentInfo         *Implementation   `json:"agentInfo,omitempty"`
	Meta              Meta              `json:"_meta,omitempty"`
}

// AgentCapabilities is what acpd advertises; only what works is set.
type AgentCapabilities struct {
	LoadSession         bool                `json:"loadSession"`
	PromptCapabilities  PromptCapabilities  `json:"promptCapabilities"`
	MCPCapabilities     MCPCapabilities     `json:"mcpCapabilities"`
	SessionCapabilities SessionCapabilities `json:"sessionCapabilities"`
	// Auth advertises logout (Auth.Logout non-nil); nil omits it.
	Auth *AgentAuthCapabilities `json:"auth,omitempty"`
	Meta Meta                   `json:"_meta,omitempty"`
}

// AgentAuthCapabilities are the agent's authentication capabilities.
type AgentAuthCapabilities struct {
	Logout *Capability `json:"logout,omitempty"`
	Meta   Meta        `json:"_meta,omitempty"`
}

// PromptCapabilities lists the optional content block types a prompt may carry.
type PromptCapabilities struct {
	Image           bool `json:"image"`
	Audio           bool `json:"audio"`
	EmbeddedContext bool `json:"embeddedContext"`
}

// MCPCapabilities lists the MCP transports, besides stdio, that session/new accepts.
type MCPCapabilities struct {
	HTTP bool `json:"http"`
	SSE  bool `json:"sse"`
}

// Capability is an object capability: non-nil (`{}`) means supported.
type Capability struct {
	Meta Meta `json:"_meta,omitempty"`
}

// SessionCapabilities advertises the optional session methods; a non-nil {} means supported.
type SessionCapabilities struct {
	List                  *Capability `json:"list,omitempty"`
	Delete                *Capability `json:"delete,omitempty"`
	AdditionalDirectories *Capability `json:"additionalDirectories,omitempty"`
	Resume                *Capability `json:"resume,omitempty"`
	Close                 *Capability `json:"close,omitempty"`
	// Fork advertises session/fork, a method of the unstable schema.
	Fork *Capability `json:"fork,omitempty"`
}

// AuthMethod is the agent-type auth method (the default variant).
type AuthMethod struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Meta        Meta   `json:"_meta,omitempty"`
}

// LogoutRequest is the params of logout.
type LogoutRequest struct {
	Meta Meta `json:"_meta,omitempty"`
}

// AuthenticateRequest is the params of authenticate.
type AuthenticateRequest struct {
	MethodID string `json:"methodId"`
	Meta     Meta   `json:"_meta,omitempty"`
}

// Empty is the `{}` result of methods with nothing to return.
type Empty struct {
	Meta Meta `json:"_meta,omitempty"`
}

// ---- sessions ----

// EnvVariable is one environment variable of an MCP server or terminal.
type EnvVariable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HTTPHeader is one header sent to an HTTP MCP server.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MCPServer is the union of stdio (Type ""), "http" and "sse" server configs.
type MCPServer struct {
	Type    string        `json:"type,omitempty"`
	Name    string        `json:"name"`
	Command string        `json:"command,omitempty"`
	Args    []string      `json:"args,omitempty"`
	Env     []EnvVariable `json:"env,omitempty"`
	URL     string        `json:"url,omitempty"`
	Headers []HTTPHeader  `json:"headers,omitempty"`
	Meta    Meta          `json:"_meta,omitempty"`
}

// NewSessionRequest is the params of session/new.
type NewSessionRequest struct {
	Cwd                   string      `json:"cwd"`
	AdditionalDirectories []string    `json:"additionalDirectories,omitempty"`
	MCPServers            []MCPServer `json:"mcpServers"`
	Meta                  Meta        `json:"_meta,omitempty"`
}

// NewSessionResponse is the result of session/new.
type NewSessionResponse struct {
	SessionID     string                `json:"sessionId"`
	Modes         *SessionModeState     `json:"modes,omitempty"`
	ConfigOptions []SessionConfigOption `json:"configOptions,omitempty"`
	Meta          Meta                  `json:"_meta,omitempty"`
}

// LoadSessionRequest is the params of session/load.
type LoadSessionRequest struct {
	SessionID             string      `json:"sessionId"`
	Cwd                   string      `json:"cwd"`
	AdditionalDirectories []string    `json:"additionalDirectories,omitempty"`
	MCPServers            []MCPServer `json:"mcpServers"`
	Meta                  Meta        `json:"_meta,omitempty"`
}

// LoadSessionResponse is also the result of session/resume.
type LoadSessionResponse struct {
	Modes         *SessionModeState     `json:"modes,omitempty"`
	ConfigOptions []SessionConfigOption `json:"configOptions,omitempty"`
	Meta          Meta                  `json:"_meta,omitempty"`
}

// ResumeSessionRequest is the params of session/resume (mcpServers optional).
type ResumeSessionRequest struct {
	SessionID             string      `json:"sessionId"`
	Cwd                   string      `json:"cwd"`
	AdditionalDirectories []string    `json:"additionalDirectories,omitempty"`
	MCPServers            []MCPServer `json:"mcpServers,omitempty"`
	Meta                  Meta        `json:"_meta,omitempty"`
}

// ForkSessionRequest is the params of session/fork (unstable schema): a
// new session from the conversation of SessionID. systemPrompt is not
// read: acpd does not advertise sessionCapabilities.systemPrompt.
type ForkSessionRequest struct {
	SessionID             string      `json:"sessionId"`
	Cwd                   string      `json:"cwd"`
	AdditionalDirectories []string    `json:"additionalDirectories,omitempty"`
	MCPServers            []MCPServer `json:"mcpServers,omitempty"`
	Meta                  Meta        `json:"_meta,omitempty"`
}

// ForkSessionResponse is the result of session/fork.
type ForkSessionResponse struct {
	SessionID     string                `json:"sessionId"`
	Modes         *SessionModeState     `json:"modes,omitempty"`
	ConfigOptions []SessionConfigOption `json:"configOptions,omitempty"`
	Meta          Meta                  `json:"_meta,omitempty"`
}

// ListSessionsRequest is the params of session/list: an optional cwd filter and cursor.
type ListSessionsRequest struct {
	Cwd    string `json:"cwd,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	Meta   Meta   `json:"_meta,omitempty"`
}

// ListSessionsResponse is one page of session/list; NextCursor is empty on the last page.
type ListSessionsResponse struct {
	Sessions   []SessionInfo `json:"sessions"`
	NextCursor string        `json:"nextCursor,omitempty"`
	Meta       Meta          `json:"_meta,omitempty"`
}

// SessionInfo describes one stored session in session/list.
type SessionInfo struct {
	SessionID             string   `json:"sessionId"`
	Cwd                   string   `json:"cwd"`
	AdditionalDirectories []string `json:"additionalDirectories,omitempty"`
	Title                 string   `json:"title,omitempty"`
	UpdatedAt             string   `json:"updatedAt,omitempty"`
	Meta                  Meta     `json:"_meta,omitempty"`
}

// SessionIDRequest is the params of session/close, session/delete and session/cancel.
type SessionIDRequest struct {
	SessionID string `json:"sessionId"`
	Meta      Meta   `json:"_meta,omitempty"`
}

// SessionModeState is the current mode and the modes a session offers.
type SessionModeState struct {
	CurrentModeID  string        `json:"currentModeId"`
	AvailableModes []SessionMode `json:"availableModes"`
}

// SessionMode is one approval mode a session can be switched to.
type SessionMode struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// SetSessionModelRequest is the legacy session/set_model's params.
type SetSessionModelRequest struct {
	SessionID string `json:"sessionId"`
	ModelID   string `json:"modelId"`
	Meta      Meta   `json:"_meta,omitempty"`
}

// SetSessionModeRequest is the params of session/set_mode.
type SetSessionModeRequest struct {
	SessionID string `json:"sessionId"`
	ModeID    string `json:"modeId"`
	Meta      Meta   `json:"_meta,omitempty"`
}

// SessionConfigOption is a select option (Type "select": CurrentValue
// among Options) or a boolean one (Type "boolean": Bool).
type SessionConfigOption struct {
	ID           string                      `json:"id"`
	Name         string                      `json:"name"`
	Description  string                      `json:"description,omitempty"`
	Category     string                      `json:"category,omitempty"`
	Type         string                      `json:"type"` // "select" | "boolean"
	CurrentValue string                      `json:"currentValue"`
	Options      []SessionConfigSelectOption `json:"options"`
	Bool         bool                        `json:"-"` // a boolean option's value
}

// SessionConfigSelectOption is one value of a select config option.
type SessionConfigSelectOption struct {
	Value       string `json:"value"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// SetSessionConfigOptionRequest carries a string value (or a boolean with Type "boolean").
type SetSessionConfigOptionRequest struct {
	SessionID string          `json:"sessionId"`
	ConfigID  string          `json:"configId"`
	Type      string          `json:"type,omitempty"`
	Value     json.RawMessage `json:"value"`
	Meta      Meta            `json:"_meta,omitempty"`
}

// SetSessionConfigOptionResponse carries the complete, updated option list.
type SetSessionConfigOptionResponse struct {
	ConfigOptions []SessionConfigOption `json:"configOptions"`
	Meta          Meta                  `json:"_meta,omitempty"`
}

// ---- prompt ----

// PromptRequest is the params of session/prompt.
type PromptRequest struct {
	SessionID string         `json:"sessionId"`
	Prompt    []ContentBlock `json:"prompt"`
	Meta      Meta           `json:"_meta,omitempty"`
}

// StopReason says why a prompt turn ended.
type StopReason string

// Stop reasons (schema StopReason).
const (
	StopEndTurn         StopReason = "end_turn"
	StopMaxTokens       StopReason = "max_tokens"
	StopMaxTurnRequests StopReason = "max_turn_requests"
	StopRefusal         StopReason = "refusal"
	StopCancelled       StopReason = "cancelled"
)

// PromptResponse is the result of session/prompt.
type PromptResponse struct {
	StopReason StopReason `json:"stopReason"`
	Meta       Meta       `json:"_meta,omitempty"`
}

// ---- content ----

// ContentBlock is the union text | image | audio | resource_link | resource,
// discriminated by Type. Only the fields of its variant are written.
type ContentBlock struct {
	Type        string            `json:"type"`
	Text        string            `json:"text,omitempty"`
	Data        string            `json:"data,omitempty"`
	MimeType    string            `json:"mimeType,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Name        string            `json:"name,omitempty"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Size        *int64            `json:"size,omitempty"`
	Resource    *EmbeddedResource `json:"resource,omitempty"`
	Annotations json.RawMessage   `json:"annotations,omitempty"`
	Meta        Meta              `json:"_meta,omitempty"`
}

// EmbeddedResource is text (Text set) or blob (Blob set) resource contents.
type EmbeddedResource struct {
	URI      string  `json:"uri"`
	MimeType string  `json:"mimeType,omitempty"`
	Text     *string `json:"text,omitempty"`
	Blob     *string `json:"blob,omitempty"`
	Meta     Meta    `json:"_meta,omitempty"`
}

// TextBlock returns a text content block.
func TextBlock(s string) ContentBlock { return ContentBlock{Type: "text", Text: s} }

// ---- tool calls ----

// ToolKind tells the client how to present a tool call.
type ToolKind string

// Tool kinds (schema ToolKind).
const (
	KindRead       ToolKind = "read"
	KindEdit       ToolKind = "edit"
	KindDelete     ToolKind = "delete"
	KindMove       ToolKind = "move"
	KindSearch     ToolKind = "search"
	KindExecute    ToolKind = "execute"
	KindThink      ToolKind = "think"
	KindFetch      ToolKind = "fetch"
	KindSwitchMode ToolKind = "switch_mode"
	KindOther      ToolKind = "other"
)

// ToolCallStatus is a tool call's lifecycle state; ACP has no "cancelled" status.
type ToolCallStatus string

// Tool call statuses (schema ToolCallStatus).
const (
	StatusPending    ToolCallStatus = "pending"
	StatusInProgress ToolCallStatus = "in_progress"
	StatusCompleted  ToolCallStatus = "completed"
	StatusFailed     ToolCallStatus = "failed"
)

// ToolCallLocation is a file (and 1-based line) a tool call touches, for follow-along UIs.
type ToolCallLocation struct {
	Path string `json:"path"`
	Line *int   `json:"line,omitempty"`
}

// ToolCallContent is the union content | diff | terminal, discriminated by Type.
type ToolCallContent struct {
	Type       string        `json:"type"`
	Content    *ContentBlock `json:"content,omitempty"`
	Path       string        `json:"path,omitempty"`
	OldText    *string       `json:"oldText,omitempty"`
	NewText    *string       `json:"newText,omitempty"`
	TerminalID string        `json:"terminalId,omitempty"`
}

// TextContent wraps text as tool-call content.
func TextContent(s string) ToolCallContent {
	b := TextBlock(s)
	return ToolCallContent{Type: "content", Content: &b}
}

// DiffContent is tool-call content showing an edit; oldText nil means a new file.
func DiffContent(path string, oldText *string, newText string) ToolCallContent {
	return ToolCallContent{Type: "diff", Path: path, OldText: oldText, NewText: &newText}
}

// TerminalContent embeds a client terminal in a tool call.
func TerminalContent(id string) ToolCallContent {
	return ToolCallContent{Type: "terminal", TerminalID: id}
}

// ToolCall is the tool_call update that introduces a call.
type ToolCall struct {
	ToolCallID string `json:"toolCallId"`
	Title      string `json:"title"`
	// Name is the tool's registered name (mcp__server__tool for MCP
	// tools, "agent" for subagents), beside the human Title.
	Name      string             `json:"name,omitempty"`
	Kind      ToolKind           `json:"kind,omitempty"`
	Status    ToolCallStatus     `json:"status,omitempty"`
	Content   []ToolCallContent  `json:"content,omitempty"`
	Locations []ToolCallLocation `json:"locations,omitempty"`
	RawInput  any                `json:"rawInput,omitempty"`
	RawOutput any                `json:"rawOutput,omitempty"`
	Meta      Meta               `json:"_meta,omitempty"`
}

// ToolCallUpdate sends only the fields that changed.
type ToolCallUpdate struct {
	ToolCallID string             `json:"toolCallId"`
	Title      *string            `json:"title,omitempty"`
	Name       string             `json:"name,omitempty"`
	Kind       ToolKind           `json:"kind,omitempty"`
	Status     ToolCallStatus     `json:"status,omitempty"`
	Content    []ToolCallContent  `json:"content,omitempty"`
	Locations  []ToolCallLocation `json:"locations,omitempty"`
	RawInput   any                `json:"rawInput,omitempty"`
	RawOutput  any                `json:"rawOutput,omitempty"`
	Meta       Meta               `json:"_meta,omitempty"`
}

// ---- plan, commands, usage ----

// PlanEntry is one item of the agent's plan; a plan update always carries the full list.
type PlanEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority"` // high | medium | low
	Status   string `json:"status"`   // pending | in_progress | completed
}

// AvailableCommand is a slash command the client may offer.
type AvailableCommand struct {
	Name        string                 `json:"name"`
	Description string                 `json:"description"`
	Input       *AvailableCommandInput `json:"input,omitempty"`
}

// AvailableCommandInput hints at a slash command's argument.
type AvailableCommandInput struct {
	Hint string `json:"hint"`
}

// SessionUpdate is one `update` of a session/update notification. Set
// exactly one variant field; Kind is written as `sessionUpdate`.
type SessionUpdate struct {
	Kind string // sessionUpdate discriminator, e.g. "agent_message_chunk"

	Content   *ContentBlock // *_chunk variants
	MessageID string        // *_chunk variants, optional

	ToolCall       *ToolCall       // "tool_call"
	ToolCallUpdate *ToolCallUpdate // "tool_call_update"

	Entries           []PlanEntry           // "plan"
	AvailableCommands []AvailableCommand    // "available_commands_update"
	CurrentModeID     string                // "current_mode_update"
	ConfigOptions     []SessionConfigOption // "config_option_update"

	Title     *string // "session_info_update"
	UpdatedAt *string // "session_info_update"

	Notice *Notice // "notice"

	// Compaction is the "compaction_update" variant; CompactionID with
	// Content is the "compaction_summary_chunk" variant.
	Compaction   *CompactionUpdate
	CompactionID string

	Used uint64 // "usage_update"
	Size uint64 // "usage_update"
	Cost *Cost  // "usage_update", optional

	Subagent *SubagentUpdate // "subagent_update" (unstable schema)

	Meta Meta // `_meta` of the update object, any variant
}

// Cost is the cumulative session cost of a usage_update.
type Cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// SessionUpdate kinds.
const (
	UpdateUserMessageChunk  = "user_message_chunk"
	UpdateAgentMessageChunk = "agent_message_chunk"
	UpdateAgentThoughtChunk = "agent_thought_chunk"
	UpdateToolCall          = "tool_call"
	UpdateToolCallUpdate    = "tool_call_update"
	UpdatePlan              = "plan"
	UpdateAvailableCommands = "available_commands_update"
	UpdateCurrentMode       = "current_mode_update"
	UpdateConfigOption      = "config_option_update"
	UpdateSessionInfo       = "session_info_update"
	UpdateUsage             = "usage_update"
	UpdateNotice            = "notice"
	UpdateCompaction        = "compaction_update"
	UpdateCompactionChunk   = "compaction_summary_chunk"
	UpdateSubagent          = "subagent_update"
)

// SubagentUpdate (unstable schema SubagentUpdate) announces a child
// session the parent created, on the parent's session, and patches it
// later: nil fields are left unchanged.
type SubagentUpdate struct {
	SessionID    string                       `json:"sessionId"`
	Title        *string                      `json:"title,omitempty"`
	Description  *string                      `json:"description,omitempty"`
	Capabilities *SubagentSessionCapabilities `json:"capabilities,omitempty"`
	State        *SubagentState               `json:"state,omitempty"`
	Cwd          string                       `json:"cwd,omitempty"`
}

// SubagentSessionCapabilities are the mutations a client may make on a
// child: Cancel non-nil permits session/cancel with the child's id.
type SubagentSessionCapabilities struct {
	Cancel *Capability `json:"cancel,omitempty"`
}

// Child session states (unstable schema StateUpdate).
const (
	SubagentRunning = "running"
	SubagentIdle    = "idle"
)

// SubagentState is a child's work state: running, or idle with the reason
// its work stopped (StopReason, or "error" with Error).
type SubagentState struct {
	State      string     `json:"state"`
	StopReason StopReason `json:"stopReason,omitempty"`
	Error      *Error     `json:"error,omitempty"`
}

// StopError is a child's stop reason when its work failed.
const StopError StopReason = "error"

// NoticeSeverity is a notice's presentation hint.
type NoticeSeverity string

// Notice severities (schema NoticeSeverity).
const (
	SeverityInfo    NoticeSeverity = "info"
	SeverityWarning NoticeSeverity = "warning"
	SeverityError   NoticeSeverity = "error"
)

// Notice is a fire-and-forget message for the user, outside the
// conversation; sent only to a client advertising session.notices.
type Notice struct {
	Severity    NoticeSeverity `json:"severity"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
}

// CompactionStatus is a compaction's lifecycle state.
type CompactionStatus string

// Compaction statuses (schema CompactionStatus).
const (
	CompactionInProgress CompactionStatus = "in_progress"
	CompactionCompleted  CompactionStatus = "completed"
	CompactionFailed     CompactionStatus = "failed"
	CompactionCancelled  CompactionStatus = "cancelled"
)

// CompactionUpdate creates a compaction entity (first update) or patches
// it: Summary nil and Error "" leave the stored values unchanged.
type CompactionUpdate struct {
	CompactionID string           `json:"compactionId"`
	Status       CompactionStatus `json:"status"`
	Summary      []ContentBlock   `json:"summary,omitempty"`
	Error        string           `json:"error,omitempty"`
}

// MarshalJSON writes the variant selected by Kind.
func (u SessionUpdate) MarshalJSON() ([]byte, error) {
	m := map[string]any{"sessionUpdate": u.Kind}
	switch u.Kind {
	case UpdateUserMessageChunk, UpdateAgentMessageChunk, UpdateAgentThoughtChunk:
		if u.Content == nil {
			return nil, fmt.Errorf("acp: %s without content", u.Kind)
		}
		// The hot path of a turn: a struct, not the generic map.
		return json.Marshal(struct {
			Kind      string        `json:"sessionUpdate"`
			Content   *ContentBlock `json:"content"`
			MessageID string        `json:"messageId,omitempty"`
			Meta      Meta          `json:"_meta,omitempty"`
		}{u.Kind, u.Content, u.MessageID, u.Meta})
	case UpdateToolCall:
		if u.ToolCall == nil {
			return nil, fmt.Errorf("acp: tool_call without ToolCall")
		}
		tc := u.ToolCall
		return appendToolCallUpdate(make([]byte, 0, 512), &toolCallFields{
			kind: u.Kind, id: tc.ToolCallID, title: &tc.Title, name: tc.Name, toolKind: tc.Kind, status: tc.Status,
			content: tc.Content, locations: tc.Locations, rawInput: tc.RawInput, rawOutput: tc.RawOutput, meta: tc.Meta,
		})
	case UpdateToolCallUpdate:
		if u.ToolCallUpdate == nil {
			return nil, fmt.Errorf("acp: tool_call_update without ToolCallUpdate")
		}
		tu := u.ToolCallUpdate
		return appendToolCallUpdate(make([]byte, 0, 512), &toolCallFields{
			kind: u.Kind, id: tu.ToolCallID, title: tu.Title, name: tu.Name, toolKind: tu.Kind, status: tu.Status,
			content: tu.Content, locations: tu.Locations, rawInput: tu.RawInput, rawOutput: tu.RawOutput, meta: tu.Meta,
		})
	case UpdatePlan:
		m["entries"] = nonNil(u.Entries)
	case UpdateAvailableCommands:
		m["availableCommands"] = nonNil(u.AvailableCommands)
	case UpdateCurrentMode:
		m["currentModeId"] = u.CurrentModeID
	case UpdateConfigOption:
		m["configOptions"] = nonNil(u.ConfigOptions)
	case UpdateSessionInfo:
		if u.Title != nil {
			m["title"] = *u.Title
		}
		if u.UpdatedAt != nil {
			m["updatedAt"] = *u.UpdatedAt
		}
	case UpdateNotice:
		if u.Notice == nil || u.Notice.Title == "" {
			return nil, fmt.Errorf("acp: notice without a title")
		}
		m["severity"] = u.Notice.Severity
		m["title"] = u.Notice.Title
		if u.Notice.Description != "" {
			m["description"] = u.Notice.Description
		}
	case UpdateCompaction:
		if u.Compaction == nil || u.Compaction.CompactionID == "" {
			return nil, fmt.Errorf("acp: compaction_update without a compactionId")
		}
		m["compactionId"] = u.Compaction.CompactionID
		m["status"] = u.Compaction.Status
		if u.Compaction.Summary != nil {
			m["summary"] = u.Compaction.Summary
		}
		if u.Compaction.Error != "" {
			m["error"] = u.Compaction.Error
		}
	case UpdateCompactionChunk:
		if u.CompactionID == "" || u.Content == nil {
			return nil, fmt.Errorf("acp: compaction_summary_chunk without compactionId or content")
		}
		m["compactionId"] = u.CompactionID
		m["content"] = u.Content
	case UpdateSubagent:
		if u.Subagent == nil || u.Subagent.SessionID == "" {
			return nil, fmt.Errorf("acp: subagent_update without a sessionId")
		}
		b, err := json.Marshal(u.Subagent)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
	case UpdateUsage:
		m["used"] = u.Used
		m["size"] = u.Size
		if u.Cost != nil {
			m["cost"] = u.Cost
		}
	default:
		return nil, fmt.Errorf("acp: unknown session update kind %q", u.Kind)
	}
	if len(u.Meta) > 0 {
		m["_meta"] = u.Meta
	}
	return json.Marshal(m)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// SessionNotification is the params of session/update.
type SessionNotification struct {
	SessionID string        `json:"sessionId"`
	Update    SessionUpdate `json:"update"`
	Meta      Meta          `json:"_meta,omitempty"`
}

// ---- permission ----

// PermissionOptionKind tells the client how to present a permission option.
type PermissionOptionKind string

// Permission option kinds (schema PermissionOptionKind).
const (
	AllowOnce    PermissionOptionKind = "allow_once"
	AllowAlways  PermissionOptionKind = "allow_always"
	RejectOnce   PermissionOptionKind = "reject_once"
	RejectAlways PermissionOptionKind = "reject_always"
)

// PermissionOption is one choice offered by session/request_permission.
type PermissionOption struct {
	OptionID string               `json:"optionId"`
	Name     string               `json:"name"`
	Kind     PermissionOptionKind `json:"kind"`
}

// RequestPermissionRequest asks the user to approve a tool call.
type RequestPermissionRequest struct {
	SessionID string             `json:"sessionId"`
	ToolCall  ToolCallUpdate     `json:"toolCall"`
	Options   []PermissionOption `json:"options"`
	Meta      Meta               `json:"_meta,omitempty"`
}

// RequestPermissionResponse carries the user's answer.
type RequestPermissionResponse struct {
	Outcome PermissionOutcome `json:"outcome"`
	Meta    Meta              `json:"_meta,omitempty"`
}

// PermissionOutcome is {outcome:"cancelled"} or {outcome:"selected", optionId}.
type PermissionOutcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

// ---- fs ----

// ReadTextFileRequest is the params of fs/read_text_file (line is 1-based).
type ReadTextFileRequest struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Line      *int   `json:"line,omitempty"`
	Limit     *int   `json:"limit,omitempty"`
}

// ReadTextFileResponse is the file content, possibly with unsaved editor changes.
type ReadTextFileResponse struct {
	Content string `json:"content"`
}

// WriteTextFileRequest is the params of fs/write_text_file.
type WriteTextFileRequest struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Content   string `json:"content"`
}

// ---- terminal ----

// CreateTerminalRequest asks the client to run a command in a terminal.
type CreateTerminalRequest struct {
	SessionID       string        `json:"sessionId"`
	Command         string        `json:"command"`
	Args            []string      `json:"args,omitempty"`
	Env             []EnvVariable `json:"env,omitempty"`
	Cwd             string        `json:"cwd,omitempty"`
	OutputByteLimit *uint64       `json:"outputByteLimit,omitempty"`
}

// CreateTerminalResponse names the terminal; it is returned before the command ends.
type CreateTerminalResponse struct {
	TerminalID string `json:"terminalId"`
}

// TerminalRequest is the params of terminal/output, wait_for_exit, kill and release.
type TerminalRequest struct {
	SessionID  string `json:"sessionId"`
	TerminalID string `json:"terminalId"`
}

// TerminalExitStatus is how a terminal command ended: an exit code or a signal.
type TerminalExitStatus struct {
	ExitCode *int    `json:"exitCode,omitempty"`
	Signal   *string `json:"signal,omitempty"`
}

// TerminalOutputResponse is a terminal's output so far, and its exit status once it has one.
type TerminalOutputResponse struct {
	Output     string              `json:"output"`
	Truncated  bool                `json:"truncated"`
	ExitStatus *TerminalExitStatus `json:"exitStatus,omitempty"`
}

// WaitForExitResponse is the result of terminal/wait_for_exit.
type WaitForExitResponse = TerminalExitStatus

// CancelRequestNotification is the params of $/cancel_request.
type CancelRequestNotification struct {
	RequestID json.RawMessage `json:"requestId"`
}

// ---- elicitation ----

// MethodElicitationCreate asks the user for structured input (client side).
const MethodElicitationCreate = "elicitation/create"

// MethodElicitationComplete tells the client that a URL elicitation's
// out-of-band step finished (a notification).
const MethodElicitationComplete = "elicitation/complete"

// CreateElicitationRequest is a session-scoped elicitation: in form mode
// the client renders RequestedSchema and returns what the user entered; in
// url mode it offers to open URL (ElicitationID names it for
// elicitation/complete).
type CreateElicitationRequest struct {
	SessionID       string            `json:"sessionId"`
	ToolCallID      string            `json:"toolCallId,omitempty"`
	Mode            string            `json:"mode"` // "form" or "url"
	Message         string            `json:"message"`
	RequestedSchema ElicitationSchema `json:"requestedSchema,omitzero"`
	ElicitationID   string            `json:"elicitationId,omitempty"`
	URL             string            `json:"url,omitempty"`
	Meta            Meta              `json:"_meta,omitempty"`
}

// CompleteElicitationNotification is the params of elicitation/complete.
type CompleteElicitationNotification struct {
	ElicitationID string `json:"elicitationId"`
	Meta          Meta   `json:"_meta,omitempty"`
}

// ElicitationSchema is the form: an object of primitive-typed properties.
type ElicitationSchema struct {
	Type       string                         `json:"type"` // "object"
	Title      string                         `json:"title,omitempty"`
	Properties map[string]ElicitationProperty `json:"properties"`
	Required   []string                       `json:"required,omitempty"`
}

// ElicitationProperty is one form field: a string (free text, one of Enum
// or of OneOf), a number, an integer, a boolean, or an array of strings
// chosen from Items.
type ElicitationProperty struct {
	Type        string            `json:"type"` // "string" | "number" | "integer" | "boolean" | "array"
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	OneOf       []EnumOption      `json:"oneOf,omitempty"`
	Enum        []string          `json:"enum,omitempty"`
	Items       *ElicitationItems `json:"items,omitempty"`
	MinItems    *int              `json:"minItems,omitempty"`
	MaxItems    *int              `json:"maxItems,omitempty"`
	MinLength   *int              `json:"minLength,omitempty"`
	MaxLength   *int              `json:"maxLength,omitempty"`
	Pattern     string            `json:"pattern,omitempty"`
	Format      string            `json:"format,omitempty"` // email | uri | date | date-time
	Minimum     *float64          `json:"minimum,omitempty"`
	Maximum     *float64          `json:"maximum,omitempty"`
	Default     json.RawMessage   `json:"default,omitempty"`
}

// ElicitationItems are the choices of a multi-select field: titled
// (AnyOf) or plain strings (Type "string" with Enum).
type ElicitationItems struct {
	Type  string       `json:"type,omitempty"`
	Enum  []string     `json:"enum,omitempty"`
	AnyOf []EnumOption `json:"anyOf,omitempty"`
}

// EnumOption is one titled choice.
type EnumOption struct {
	Const       string `json:"const"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

// Elicitation actions (schema CreateElicitationResponse).
const (
	ElicitAccept  = "accept"
	ElicitDecline = "decline"
	ElicitCancel  = "cancel"
)

// CreateElicitationResponse is the user's answer: Content is set when
// Action is accept (values are strings, numbers, booleans or string arrays).
type CreateElicitationResponse struct {
	Action  string                     `json:"action"`
	Content map[string]json.RawMessage `json:"content,omitempty"`
	Meta    Meta                       `json:"_meta,omitempty"`
}

// Elicitor is implemented by clients that can send elicitation/create
// (*Conn does). It is apart from Client so that clients without
// elicitation need not implement it.
type Elicitor interface {
	CreateElicitation(ctx context.Context, req *CreateElicitationRequest) (*CreateElicitationResponse, error)
}

// ElicitationCompleter is implemented by clients that can be sent
// elicitation/complete (*Conn is).
type ElicitationCompleter interface {
	CompleteElicitation(ctx context.Context, n *CompleteElicitationNotification) error
}
