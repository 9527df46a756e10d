// Package tools holds acpd's built-in tools (read_file, write_file, edit,
// list_directory, glob, grep_search, run_shell_command, todo_write) and the
// interfaces the session host runs them through. Every tool validates its
// arguments against its JSON schema and confines paths to the session's
// workspace in Build, before any I/O; Execute does the work, through the
// editor (fs/*, terminal/*) when the client offers it, locally otherwise.
package tools

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/shellline"
	"github.com/acpd/acpd/session/tools/confine"
	"github.com/acpd/acpd/session/tools/sandbox"
)

// Env is the session context a tool call runs in. The session host fills it.
type Env struct {
	SessionID string
	// ToolCallID is the ACP id of the call being run.
	ToolCallID string
	// Roots are the absolute workspace roots: the session cwd first, then
	// additionalDirectories. Paths outside them are refused.
	Roots []string
	// RootCache, when set, keeps the roots' resolution for the session.
	RootCache *confine.RootCache
	// Client is the editor connection; nil in unit tests without one.
	Client acp.Client
	// Caps are the client's capabilities; fs and terminal are used only when set.
	Caps acp.ClientCapabilities
	// ShellTimeout bounds run_shell_command when the call gives no timeout.
	ShellTimeout time.Duration
	// MaxOutputBytes truncates large outputs (with a note saying how much was cut).
	MaxOutputBytes int
	// WebFetch tunes web_fetch (limits, and test hooks for the resolver
	// and dialer); nil uses the defaults.
	WebFetch *WebFetchOptions
	// Sandbox confines run_shell_command, locally and in the editor's
	// terminal; nil runs commands unconfined.
	Sandbox *sandbox.Session
	// Unasked says that plan mode runs this call without asking because
	// it was classified read-only: a shell command then runs git with the
	// settings that switch off the programs a repository's configuration
	// can name (readOnlyGitEnv), which its command line cannot show.
	Unasked bool
	// Update sends an intermediate tool_call_update for the running call
	// (the host fills ToolCallID); e.g. to embed a terminal. May be nil.
	Update func(ctx context.Context, u acp.ToolCallUpdate) error
	// Permit asks the user, while the call runs, to allow what c describes
	// (a ConfirmPrivateNetwork question): true when allowed; an error when
	// the question itself failed or was cancelled. The host asks whatever
	// the approval mode and never remembers the answer. Nil means no one
	// can be asked: the call must refuse.
	Permit func(ctx context.Context, c Confirmation) (bool, error)
	// Notify tells the user about something outside the conversation (a
	// sandbox that could not be set up); package notice decides how. May
	// be nil.
	Notify func(k notice.Kind, detail string)
}

// notify calls env.Notify when it is set.
func (env *Env) notify(k notice.Kind, detail string) {
	if env != nil && env.Notify != nil {
		env.Notify(k, detail)
	}
}

// ConfirmKind is what kind of confirmation a call needs (qwen-code's
// confirmation types). The session host maps it to a permission decision per
// approval mode.
type ConfirmKind int

const (
	ConfirmNone       ConfirmKind = iota // read-only: never asks
	ConfirmInfo                          // informational
	ConfirmEdit                          // modifies files: asks in default mode
	ConfirmExec                          // runs a command: asks in default and auto-edit
	ConfirmMCP                           // calls an MCP tool: asks in default and auto-edit
	ConfirmSwitchMode                    // leaves plan mode (exit_plan_mode): always asks
	ConfirmFetch                         // fetches a URL: asks in default and auto-edit
	// ConfirmPrivateNetwork reaches a loopback or private network address.
	// The call asks itself, through Env.Permit, when it connects, in every
	// approval mode, every time; so the host does not ask before it runs.
	ConfirmPrivateNetwork
	// ConfirmNetwork is a confined command reaching, through acpd's proxy,
	// a host nothing allowed (Label: host:port). The command asks itself,
	// through Env.Permit, while it runs; "always" is kept for the host.
	ConfirmNetwork
)

// Confirmation describes what the user is asked to approve.
type Confirmation struct {
	Kind ConfirmKind
	// Label names what an "always allow" covers: the command root for exec
	// ("npm test"), the tool name for MCP.
	Label string
	// NoAlways says that no "always allow" may cover this call: it is not
	// offered, and an earlier one does not answer for it (a command line
	// whose roots do not show all it runs).
	NoAlways bool
	// Content is shown in the permission request (a diff for edits).
	Content []acp.ToolCallContent
	// Shell is the plan-mode classification of an exec call.
	Shell shellline.Class
	// Command is an exec call's command line as parsed (nil for other
	// calls): what a permission rule matches, read as plan mode and
	// "always allow" read it.
	Command *shellline.Line
	// Paths are the real paths (symlinks resolved, inside the workspace)
	// the call reads, writes, searches or runs in: what a path rule
	// matches.
	Paths []string
}

// Tool is one tool the model can call.
type Tool interface {
	Name() string
	// Spec is what the model sees: name, description and parameter schema.
	Spec() model.ToolSpec
	Kind() acp.ToolKind
	// Build validates args against the schema and the workspace and returns
	// the call ready to run. An error here is an invalid-params error (the
	// daemon guard counts it per tool name); its text goes back to the model.
	Build(env *Env, args json.RawMessage) (Call, error)
}

// Call is a validated tool call.
type Call interface {
	Title() string
	Locations() []acp.ToolCallLocation
	Confirmation() Confirmation
	// Execute runs the call. It honours ctx: on cancel it stops promptly
	// (processes are killed, terminals released) and returns.
	Execute(ctx context.Context, env *Env) Result
}

// Result is the outcome of Execute.
type Result struct {
	// LLMContent is the text fed back to the model (the error text on failure).
	LLMContent string
	// Content is shown to the client in the final tool_call_update.
	Content []acp.ToolCallContent
	// RawOutput is optional debugging output for the client.
	RawOutput any
	// Err is set when the call failed; ErrType classifies it (FILE_NOT_FOUND,
	// PERMISSION_DENIED, EXECUTION_FAILED, TIMEOUT, …) for the
	// repeated-failure guard.
	Err     error
	ErrType string
	// Plan, when non-nil, is sent as a `plan` update instead of tool-call
	// frames (todo_write).
	Plan []acp.PlanEntry
	// Locations, when non-nil, replaces the call's locations in the final
	// tool_call_update (e.g. the line an edit landed on, known only after it ran).
	Locations []acp.ToolCallLocation
}

// Preparer is implemented by calls that must look at the current state
// before the user is asked (write_file and edit fetch the file, through the
// editor when it offers fs, so the permission request shows the whole-file
// diff). The host calls Prepare after Build and before Confirmation when the
// call implements it; without it Confirmation shows a smaller diff.
type Preparer interface {
	Prepare(ctx context.Context, env *Env) error
}

// Error types for Result.ErrType (qwen-code's ToolErrorType names), keyed on
// by the repeated-failure guard together with the tool name.
const (
	ErrTypeInvalidParams      = "INVALID_TOOL_PARAMS"
	ErrTypeUnknown            = "UNKNOWN"
	ErrTypeExecutionFailed    = "EXECUTION_FAILED"
	ErrTypeCancelled          = "CANCELLED"
	ErrTypeTimeout            = "TIMEOUT"
	ErrTypeFileNotFound       = "FILE_NOT_FOUND"
	ErrTypeFileWriteFailure   = "FILE_WRITE_FAILURE"
	ErrTypeReadContentFailure = "READ_CONTENT_FAILURE"
	ErrTypeFileTooLarge       = "FILE_TOO_LARGE"
	ErrTypePermissionDenied   = "PERMISSION_DENIED"
	ErrTypeNoSpaceLeft        = "NO_SPACE_LEFT"
	ErrTypeTargetIsDirectory  = "TARGET_IS_DIRECTORY"
	ErrTypePathNotInWorkspace = "PATH_NOT_IN_WORKSPACE"
	ErrTypeSearchPathNotFound = "SEARCH_PATH_NOT_FOUND"
	ErrTypeCreateExistingFile = "ATTEMPT_TO_CREATE_EXISTING_FILE"
	ErrTypeEditNoOccurrence   = "EDIT_NO_OCCURRENCE_FOUND"
	ErrTypeEditMultipleOccurs = "EDIT_EXPECTED_OCCURRENCE_MISMATCH"
	ErrTypeEditNoChange       = "EDIT_NO_CHANGE"
	ErrTypeGrepExecutionError = "GREP_EXECUTION_ERROR"
	// ErrTypeSandboxUnavailable: [tools] sandbox = "required" and the
	// command could not be confined, so it was not run.
	ErrTypeSandboxUnavailable  = "SANDBOX_UNAVAILABLE"
	ErrTypeGlobExecutionError  = "GLOB_EXECUTION_ERROR"
	ErrTypeLsExecutionError    = "LS_EXECUTION_ERROR"
	ErrTypePathIsNotADirectory = "PATH_IS_NOT_A_DIRECTORY"
)

// Registry maps names to tools, in registration order. A session holds a
// dozen or two tools, so a name is looked up by scanning them: as fast as a
// map at that size, and an idle session does not carry a map's buckets.
type Registry struct {
	order []Tool
}

// NewRegistry returns a registry holding ts.
func NewRegistry(ts ...Tool) *Registry {
	r := &Registry{}
	for _, t := range ts {
		r.Add(t)
	}
	return r
}

func (r *Registry) index(name string) int {
	for i, t := range r.order {
		if t.Name() == name {
			return i
		}
	}
	return -1
}

// Add registers t, replacing a tool of the same name.
func (r *Registry) Add(t Tool) {
	if i := r.index(t.Name()); i >= 0 {
		r.order[i] = t
		return
	}
	r.order = append(r.order, t)
}

// Remove takes the tool named name out of the registry, if it is there.
func (r *Registry) Remove(name string) {
	if i := r.index(name); i >= 0 {
		r.order = slices.Delete(r.order, i, i+1) // Tools hands out copies only
	}
}

// Get returns the tool named name.
func (r *Registry) Get(name string) (Tool, bool) {
	if i := r.index(name); i >= 0 {
		return r.order[i], true
	}
	return nil, false
}

// Specs returns the model-facing specs of every tool, in order.
func (r *Registry) Specs() []model.ToolSpec {
	out := make([]model.ToolSpec, 0, len(r.order))
	for _, t := range r.order {
		out = append(out, t.Spec())
	}
	return out
}

// Tools returns the registered tools in order.
func (r *Registry) Tools() []Tool { return append([]Tool(nil), r.order...) }
