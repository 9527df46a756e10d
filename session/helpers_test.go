package session

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/tools"
)

// The permission options and refusals the tests name, as package toolcall
// has them.
const (
	optProceedOnce          = toolcall.OptProceedOnce
	optProceedAlways        = toolcall.OptProceedAlways
	optProceedAlwaysProject = toolcall.OptProceedAlwaysProject
	optProceedAlwaysUser    = toolcall.OptProceedAlwaysUser
	optCancel               = toolcall.OptCancel
	todoWriteTool           = tools.NameTodoWrite
)

var (
	permissionOptions  = toolcall.PermissionOptions
	planBlockedMessage = toolcall.PlanBlockedMessage
)

// recClient is an acp.Client that records updates and answers permission
// requests with Permission (allow once when nil).
type recClient struct {
	mu         sync.Mutex
	updates    []acp.SessionUpdate
	infos      []acp.SessionUpdate // session_info_update only
	commands   []acp.SessionUpdate // available_commands_update only
	perms      []*acp.RequestPermissionRequest
	Permission func(ctx context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error)
}

func (c *recClient) SessionUpdate(_ context.Context, n *acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.Update.Kind == acp.UpdateSessionInfo {
		// Kept apart so tests can index a turn's frames by position.
		c.infos = append(c.infos, n.Update)
		return nil
	}
	if n.Update.Kind == acp.UpdateAvailableCommands {
		// Sent outside turns (after session/new, load, resume).
		c.commands = append(c.commands, n.Update)
		return nil
	}
	c.updates = append(c.updates, n.Update)
	return nil
}

func (c *recClient) RequestPermission(ctx context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.perms = append(c.perms, r)
	c.mu.Unlock()
	if c.Permission != nil {
		return c.Permission(ctx, r)
	}
	return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: optProceedOnce}}, nil
}

func (c *recClient) ReadTextFile(context.Context, *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
	return nil, fmt.Errorf("not offered")
}
func (c *recClient) WriteTextFile(context.Context, *acp.WriteTextFileRequest) error {
	return fmt.Errorf("not offered")
}
func (c *recClient) CreateTerminal(context.Context, *acp.CreateTerminalRequest) (*acp.CreateTerminalResponse, error) {
	return nil, fmt.Errorf("not offered")
}
func (c *recClient) TerminalOutput(context.Context, *acp.TerminalRequest) (*acp.TerminalOutputResponse, error) {
	return nil, fmt.Errorf("not offered")
}
func (c *recClient) WaitForTerminalExit(context.Context, *acp.TerminalRequest) (*acp.TerminalExitStatus, error) {
	return nil, fmt.Errorf("not offered")
}
func (c *recClient) KillTerminal(context.Context, *acp.TerminalRequest) error {
	return fmt.Errorf("not offered")
}
func (c *recClient) ReleaseTerminal(context.Context, *acp.TerminalRequest) error {
	return fmt.Errorf("not offered")
}

// counts returns how many tool calls ended completed and failed.
func (c *recClient) counts() (completed, failed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range c.updates {
		if u.Kind == acp.UpdateToolCallUpdate {
			switch u.ToolCallUpdate.Status {
			case acp.StatusCompleted:
				completed++
			case acp.StatusFailed:
				failed++
			}
		}
	}
	return
}

func (c *recClient) failedTexts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, u := range c.updates {
		if u.Kind == acp.UpdateToolCallUpdate && u.ToolCallUpdate.Status == acp.StatusFailed {
			for _, cc := range u.ToolCallUpdate.Content {
				if cc.Content != nil {
					out = append(out, cc.Content.Text)
				}
			}
		}
	}
	return out
}

// scriptProvider serves one scripted response per Stream call and records
// every request.
type scriptProvider struct {
	mu        sync.Mutex
	responses [][]model.Event
	requests  []model.Request
	// block, when set, makes Stream wait on it (or ctx) before answering.
	block chan struct{}
}

func (p *scriptProvider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		p.mu.Lock()
		req.Messages = append([]model.Message(nil), req.Messages...)
		p.requests = append(p.requests, req)
		if len(p.responses) == 0 {
			p.mu.Unlock()
			yield(model.Event{}, fmt.Errorf("model script exhausted"))
			return
		}
		evs := p.responses[0]
		p.responses = p.responses[1:]
		block := p.block
		p.mu.Unlock()
		if block != nil {
			select {
			case <-block:
			case <-ctx.Done():
				yield(model.Event{}, ctx.Err())
				return
			}
		}
		for _, ev := range evs {
			if ctx.Err() != nil {
				yield(model.Event{}, ctx.Err())
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

var callSeq int

// calls builds one model response holding the given tool calls (name, args).
func callsResp(cs ...call) []model.Event {
	var evs []model.Event
	for _, c := range cs {
		callSeq++
		id := c.id
		if id == "" {
			id = fmt.Sprintf("call_%d", callSeq)
		}
		b, _ := json.Marshal(c.args)
		evs = append(evs, model.Event{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: id, Name: c.name, Arguments: b}})
	}
	return append(evs, model.Event{Kind: model.EventFinish, FinishReason: "tool_calls"})
}

func textResp(s string) []model.Event {
	return []model.Event{{Kind: model.EventText, Text: s}, {Kind: model.EventFinish, FinishReason: "stop"}}
}

type call struct {
	name string
	args map[string]any
	id   string
}

func read(path string) call { return call{name: "read_file", args: map[string]any{"file_path": path}} }

// fakeTool is a test tool: it validates nothing unless buildErr is set and
// answers "ok <args>".
type fakeTool struct {
	name     string
	kind     acp.ToolKind
	confirm  tools.ConfirmKind
	buildErr error
	execErr  error
	errType  string
	run      func(ctx context.Context) // optional: runs during Execute
	plan     []acp.PlanEntry
}

func (f *fakeTool) Name() string { return f.name }
func (f *fakeTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: f.name, Description: "test tool", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (f *fakeTool) Kind() acp.ToolKind { return f.kind }
func (f *fakeTool) Build(_ *tools.Env, args json.RawMessage) (tools.Call, error) {
	if f.buildErr != nil {
		return nil, f.buildErr
	}
	return &fakeCall{t: f, args: string(args)}, nil
}

type fakeCall struct {
	t    *fakeTool
	args string
}

func (c *fakeCall) Title() string                     { return c.t.name + " " + c.args }
func (c *fakeCall) Locations() []acp.ToolCallLocation { return nil }
func (c *fakeCall) Confirmation() tools.Confirmation {
	return tools.Confirmation{Kind: c.t.confirm, Label: c.t.name}
}
func (c *fakeCall) Execute(ctx context.Context, _ *tools.Env) tools.Result {
	if c.t.run != nil {
		c.t.run(ctx)
	}
	if c.t.execErr != nil {
		return tools.Result{LLMContent: c.t.execErr.Error(), Err: c.t.execErr, ErrType: c.t.errType}
	}
	return tools.Result{LLMContent: "ok " + c.args, Plan: c.t.plan}
}

func testTools() *tools.Registry {
	return tools.NewRegistry(
		&fakeTool{name: "read_file", kind: acp.KindRead},
		&fakeTool{name: "write_file", kind: acp.KindEdit, confirm: tools.ConfirmEdit},
		&fakeTool{name: "run_shell_command", kind: acp.KindExecute, confirm: tools.ConfirmExec},
	)
}

type harness struct {
	m      *Manager
	client *recClient
	prov   *scriptProvider
	sid    string
}

func newHarness(t *testing.T, opts Options, responses ...[]model.Event) *harness {
	t.Helper()
	h := &harness{client: &recClient{}, prov: &scriptProvider{responses: responses}}
	opts.Provider = h.prov
	opts.Model = "test-model"
	if opts.Tools == nil {
		opts.Tools = testTools
	}
	if opts.Cap == (loopdetect.Cap{}) {
		opts.Cap = loopdetect.Cap{Max: loopdetect.DefaultMaxToolCallsPerTurn}
	}
	if opts.ApprovalMode == "" {
		opts.ApprovalMode = ModeYolo
	}
	h.m = NewManager(h.client, opts)
	_, err := h.m.Initialize(t.Context(), &acp.InitializeRequest{ProtocolVersion: 1})
	require.NoError(t, err)
	r, err := h.m.NewSession(t.Context(), &acp.NewSessionRequest{Cwd: t.TempDir(), MCPServers: []acp.MCPServer{}})
	require.NoError(t, err)
	h.sid = r.SessionID
	return h
}

func (h *harness) prompt(t *testing.T, text string) (*acp.PromptResponse, error) {
	t.Helper()
	return h.m.Prompt(t.Context(), &acp.PromptRequest{SessionID: h.sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

// requireLoopError checks the reference's rejection (code, message and the
// data fields code, errorKind and loopType, exactly as qwen-code sends them,
// so a client written for the reference reads acpd's stop the same way) and
// that every other data field is one of the facts the guard adds; it returns
// the data for the caller to check those.
func requireLoopError(t *testing.T, err error, lt loopdetect.LoopType) map[string]any {
	t.Helper()
	var e *acp.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, acp.CodeInternalError, e.Code)
	require.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, e.Message)
	data, ok := e.Data.(map[string]any)
	require.True(t, ok, "data is %T", e.Data)
	ref := map[string]any{}
	for k, v := range data {
		switch k {
		case "code", "errorKind", "loopType":
			ref[k] = v
		case "capReason", "toolCalls", "maxKeyRepeat", "maxToolCallsPerTurn", "explicit",
			"stuckWindow", "windowKeyRepeat", "repeatedTool", "repeatCount":
		default:
			t.Fatalf("unexpected data field %q", k)
		}
	}
	require.Equal(t, map[string]any{"code": "LOOP_DETECTED", "errorKind": "loop_detected", "loopType": string(lt)}, ref)
	return data
}

const (
	testTimeout = 10 * time.Second
	tick        = 2 * time.Millisecond
)
