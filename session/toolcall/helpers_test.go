package toolcall

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
	"github.com/acpd/acpd/session/turnguard"
)

// echoTool is a tool whose calls ask as conf says and answer with their
// arguments; a "bad" argument fails Build.
type echoTool struct {
	name string
	conf tools.Confirmation
	ran  []string // the arguments of every call that ran
	mu   sync.Mutex
}

func (e *echoTool) Name() string         { return e.name }
func (e *echoTool) Spec() model.ToolSpec { return model.ToolSpec{Name: e.name} }
func (e *echoTool) Kind() acp.ToolKind   { return acp.KindExecute }
func (e *echoTool) Build(_ *tools.Env, args json.RawMessage) (tools.Call, error) {
	var a struct {
		Arg string `json:"arg"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Arg == "bad" {
		return nil, fmt.Errorf("invalid parameters for %s: params/arg: bad", e.name)
	}
	return &echoCall{t: e, arg: a.Arg}, nil
}

type echoCall struct {
	t   *echoTool
	arg string
}

func (c *echoCall) Title() string                     { return c.t.name + " " + c.arg }
func (c *echoCall) Locations() []acp.ToolCallLocation { return nil }
func (c *echoCall) Confirmation() tools.Confirmation  { return c.t.conf }
func (c *echoCall) Execute(context.Context, *tools.Env) tools.Result {
	c.t.mu.Lock()
	c.t.ran = append(c.t.ran, c.arg)
	c.t.mu.Unlock()
	return tools.Result{LLMContent: "ran " + c.arg}
}

// fakeHost records what the lifecycle records, shows and asks.
type fakeHost struct {
	tools   *tools.Registry
	mode    Mode
	records []store.Record
	updates []acp.SessionUpdate
	asked   []*acp.RequestPermissionRequest
	// answer picks the option a permission request is answered with
	// (the first allow-once option when nil).
	answer func(r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error)
}

func (h *fakeHost) NewCallID(p string) string           { return p }
func (h *fakeHost) Tool(name string) (tools.Tool, bool) { return h.tools.Get(name) }
func (h *fakeHost) Env(id string) *tools.Env            { return &tools.Env{SessionID: "s", ToolCallID: id} }
func (h *fakeHost) Mode() Mode                          { return h.mode }
func (h *fakeHost) Body(*Call) Body                     { return nil }
func (h *fakeHost) Record(r store.Record)               { h.records = append(h.records, r) }
func (h *fakeHost) Update(_ context.Context, u acp.SessionUpdate) {
	h.updates = append(h.updates, u)
}
func (h *fakeHost) RequestPermission(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
	h.asked = append(h.asked, r)
	if h.answer != nil {
		return h.answer(r)
	}
	return choose(OptProceedOnce)(r)
}
func (h *fakeHost) Checkpoint(*Call) string               { return "" }
func (h *fakeHost) Plan(context.Context, []acp.PlanEntry) {}
func (h *fakeHost) LoopWarning(context.Context, string)   {}

func choose(id string) func(*acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
	return func(*acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: id}}, nil
	}
}

// newTurn is a turn of h with the built-in deciders around ds.
func newTurn(h *fakeHost, ds ...Decider) *Turn {
	all := append([]Decider{PlanMode{}}, ds...)
	all = append(all, &Grants{}, Approval{})
	return &Turn{Host: h, Deciders: all, AgentConcurrency: 1,
		Guard: turnguard.New(loopdetect.Cap{Max: loopdetect.DefaultMaxToolCallsPerTurn}, false, loopdetect.FailureModeOff, slog.New(slog.DiscardHandler))}
}

// batch runs one response of calls to tool with the given arguments.
func batch(t *testing.T, tc *Turn, name string, args ...string) *Batch {
	t.Helper()
	var calls []model.ToolCall
	for i, a := range args {
		calls = append(calls, model.ToolCall{ID: fmt.Sprint("c", i), Name: name, Arguments: json.RawMessage(a)})
	}
	return tc.RunBatch(t.Context(), tc.Prepare(calls))
}

// final is the last tool_call_update h showed for id.
func (h *fakeHost) final(t *testing.T, id string) acp.ToolCallUpdate {
	t.Helper()
	for i := len(h.updates) - 1; i >= 0; i-- {
		if u := h.updates[i]; u.Kind == acp.UpdateToolCallUpdate && u.ToolCallUpdate.ToolCallID == id {
			return *u.ToolCallUpdate
		}
	}
	require.FailNow(t, "no update for "+id)
	return acp.ToolCallUpdate{}
}

// result is the tool_result record of id.
func (h *fakeHost) result(t *testing.T, id string) *store.ToolCallRecord {
	t.Helper()
	for _, r := range h.records {
		if r.Kind == store.KindToolResult && r.Tool.ToolCallID == id {
			return r.Tool
		}
	}
	require.FailNow(t, "no result for "+id)
	return nil
}

// deciderFunc is a decider made of a function.
type deciderFunc struct {
	name string
	f    func(c *Call) Decision
}

func (d deciderFunc) Name() string                               { return d.name }
func (d deciderFunc) Decide(_ context.Context, c *Call) Decision { return d.f(c) }
