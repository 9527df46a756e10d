package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
)

// Audit of the session host against loop-detection.md §7–§12.

// checkChatHistory applies the rules OpenAI-compatible servers enforce on a
// chat history: every assistant tool call has a name and an id unique in
// its message (an empty id is numbered by the request encoder), and the
// messages right after it answer each call exactly once; a tool message
// answers a call of the assistant message before it.
func checkChatHistory(msgs []model.Message) error {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case model.RoleTool:
			return fmt.Errorf("messages[%d]: tool result %q without a preceding call", i, m.ToolCallID)
		case model.RoleAssistant:
			if len(m.ToolCalls) == 0 {
				continue
			}
			open := map[string]bool{}
			var unnamed int
			for j, c := range m.ToolCalls {
				if c.Name == "" {
					return fmt.Errorf("messages[%d].toolCalls[%d]: no name", i, j)
				}
				if c.ID == "" {
					unnamed++
					continue
				}
				if open[c.ID] {
					return fmt.Errorf("messages[%d].toolCalls[%d]: id %q used twice", i, j, c.ID)
				}
				open[c.ID] = true
			}
			for i+1 < len(msgs) && msgs[i+1].Role == model.RoleTool {
				i++
				id := msgs[i].ToolCallID
				switch {
				case id == "" && unnamed > 0:
					unnamed--
				case open[id]:
					delete(open, id)
				default:
					return fmt.Errorf("messages[%d]: tool result %q answers no open call", i, id)
				}
			}
			if len(open) > 0 || unnamed > 0 {
				return fmt.Errorf("messages[%d]: %d tool calls left unanswered", i, len(open)+unnamed)
			}
		}
	}
	return nil
}

// strictProvider refuses a request whose history a real server would
// refuse, and can run a hook after a response's last event (to cancel the
// turn exactly between the stream and the tool run).
type strictProvider struct {
	*scriptProvider
	afterStream func(n int)
}

func (p *strictProvider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		if err := checkChatHistory(req.Messages); err != nil {
			yield(model.Event{}, fmt.Errorf("provider rejected the history: %w", err))
			return
		}
		p.mu.Lock()
		n := len(p.requests)
		p.mu.Unlock()
		for ev, err := range p.scriptProvider.Stream(ctx, req) {
			if !yield(ev, err) {
				return
			}
		}
		if p.afterStream != nil {
			p.afterStream(n)
		}
	}
}

func newStrictHarness(t *testing.T, opts Options, responses ...[]model.Event) (*harness, *strictProvider) {
	t.Helper()
	h := newHarness(t, opts, responses...)
	sp := &strictProvider{scriptProvider: h.prov}
	h.m.opts.Provider = sp
	return h, sp
}

func TestCheckChatHistory(t *testing.T) {
	user := model.Message{Role: model.RoleUser, Content: "u"}
	asst := func(cs ...model.ToolCall) model.Message {
		return model.Message{Role: model.RoleAssistant, ToolCalls: cs}
	}
	tool := func(id string) model.Message {
		return model.Message{Role: model.RoleTool, ToolCallID: id, Content: "r"}
	}
	tc := func(id, name string) model.ToolCall { return model.ToolCall{ID: id, Name: name} }
	tests := []struct {
		name string
		msgs []model.Message
		ok   bool
	}{
		{"paired", []model.Message{user, asst(tc("a", "x"), tc("", "y")), tool("a"), tool(""), user}, true},
		{"unanswered", []model.Message{user, asst(tc("a", "x")), user}, false},
		{"nameless", []model.Message{user, asst(tc("a", "")), tool("a")}, false},
		{"id twice", []model.Message{user, asst(tc("a", "x"), tc("a", "x")), tool("a"), tool("a")}, false},
		{"stray result", []model.Message{user, tool("a")}, false},
		{"result after user", []model.Message{user, asst(tc("a", "x")), tool("a"), user, tool("a")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkChatHistory(tt.msgs)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

// Whatever a turn runs into, the history it leaves is one a provider
// accepts: the next prompt must not fail because of the previous turn.
func TestHistoryStaysValidForProvider(t *testing.T) {
	nameless := []model.Event{
		{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: "c1", Arguments: []byte(`{}`)}},
		{Kind: model.EventFinish, FinishReason: "tool_calls"},
	}
	tests := []struct {
		name   string
		opts   Options
		script [][]model.Event
		// cancelAfter cancels the turn right after response n streamed.
		cancelAfter int
	}{
		{name: "nameless call", script: [][]model.Event{nameless, textResp("after")}, cancelAfter: -1},
		{name: "one id twice in a response", script: [][]model.Event{
			callsResp(call{id: "same", name: "read_file", args: map[string]any{"file_path": "/a"}},
				call{id: "same", name: "read_file", args: map[string]any{"file_path": "/b"}}),
			textResp("after"),
		}, cancelAfter: -1},
		{name: "cancel between stream and tools", script: [][]model.Event{callsResp(read("/a"), read("/b"))}, cancelAfter: 0},
		{name: "loop stop", opts: Options{Cap: loopdetect.Cap{Max: 1, Explicit: true}},
			script: [][]model.Event{callsResp(read("/a"), read("/b"))}, cancelAfter: -1},
		{name: "repeated replay", script: [][]model.Event{
			callsResp(call{id: "r", name: "read_file", args: map[string]any{"file_path": "/a"}}),
			callsResp(call{id: "r", name: "read_file", args: map[string]any{"file_path": "/a"}}),
			callsResp(call{id: "r", name: "read_file", args: map[string]any{"file_path": "/a"}}),
		}, cancelAfter: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, sp := newStrictHarness(t, tt.opts, append(tt.script, textResp("next"))...)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancelAfter >= 0 {
				sp.afterStream = func(n int) {
					if n == tt.cancelAfter {
						cancel()
					}
				}
			}
			_, err := h.m.Prompt(ctx, &acp.PromptRequest{SessionID: h.sid, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
			if err != nil {
				require.NotContains(t, err.Error(), "provider rejected")
			}
			resp, err := h.prompt(t, "next")
			require.NoError(t, err)
			assert.Equal(t, acp.StopEndTurn, resp.StopReason)
		})
	}
}

// A turn cancelled between a response's stream and its tool run shows each
// call as skipped (pending, then failed with the cancellation text) before
// it answers, and answers each call in history with that text.
func TestCancelBetweenStreamAndTools(t *testing.T) {
	h, sp := newStrictHarness(t, Options{}, callsResp(read("/a"), read("/b")))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sp.afterStream = func(int) { cancel() }
	resp, err := h.m.Prompt(ctx, &acp.PromptRequest{SessionID: h.sid, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
	require.NoError(t, err)
	assert.Equal(t, acp.StopCancelled, resp.StopReason)
	assert.Equal(t, []string{loopdetect.ToolExecutionCancelledMessage, loopdetect.ToolExecutionCancelledMessage}, h.client.failedTexts())
	var statuses []acp.ToolCallStatus
	for _, u := range h.client.updates {
		switch u.Kind {
		case acp.UpdateToolCall:
			statuses = append(statuses, u.ToolCall.Status)
		case acp.UpdateToolCallUpdate:
			statuses = append(statuses, u.ToolCallUpdate.Status)
		}
	}
	assert.Equal(t, []acp.ToolCallStatus{acp.StatusPending, acp.StatusFailed, acp.StatusPending, acp.StatusFailed}, statuses)
	hist := h.m.session(h.sid).history
	require.Len(t, hist, 4, "user, assistant, two results")
	assert.Equal(t, loopdetect.ToolExecutionCancelledMessage, hist[3].Content)
	require.NoError(t, checkChatHistory(hist))
}

// The live history after nameless calls, one id twice in a response, ids
// reused across responses and a cancel between stream and tools is exactly
// what a reload rebuilds, and a provider accepts it.
func TestDurable_OddCallsReloadToTheLiveHistory(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	nameless := []model.Event{
		{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: "call_0", Arguments: []byte(`{}`)}},
		{Kind: model.EventFinish, FinishReason: "tool_calls"},
	}
	twice := callsResp(call{id: "call_0", name: "read_file", args: map[string]any{"file_path": "/a"}},
		call{id: "call_0", name: "read_file", args: map[string]any{"file_path": "/b"}})
	n1 := startNode(t, dir, Options{}, nameless, twice, textResp("done"), callsResp(read("/c")))
	sp := &strictProvider{scriptProvider: n1.prov}
	n1.m.opts.Provider = sp
	sid := n1.newSession(t, cwd)
	resp, err := n1.prompt(t, sid, "first")
	require.NoError(t, err)
	require.Equal(t, acp.StopEndTurn, resp.StopReason)
	sp.afterStream = func(int) { n1.m.Cancel(&acp.SessionIDRequest{SessionID: sid}) }
	resp, err = n1.prompt(t, sid, "second")
	require.NoError(t, err)
	require.Equal(t, acp.StopCancelled, resp.StopReason)
	live := n1.history(t, sid)
	require.NoError(t, checkChatHistory(live))
	n1.m.Close()

	n2 := startNode(t, dir, Options{}, textResp("ok"))
	_, _, err = n2.load(t, sid, cwd)
	require.NoError(t, err)
	_, err = n2.prompt(t, sid, "next")
	require.NoError(t, err)
	got := n2.prov.requests[0].Messages
	require.NoError(t, checkChatHistory(got))
	assert.Equal(t, append(live, model.Message{Role: model.RoleUser, Content: "next"}), got)
}

// §7.6: a failure the tool classifies as UNKNOWN (acpd's spelling) is an
// unclassified failure: it disables enforcement instead of counting
// towards a stop.
func TestRepeatedFailureUnknownTypeNeverStops(t *testing.T) {
	reg := func() *tools.Registry {
		return tools.NewRegistry(&fakeTool{name: "read_file", kind: acp.KindRead, execErr: errors.New("boom"), errType: tools.ErrTypeUnknown})
	}
	h := newHarness(t, Options{Tools: reg, FailureGuard: loopdetect.FailureModeEnforce},
		callsResp(nDistinct("r1", 4)...), callsResp(nDistinct("r2", 4)...), callsResp(nDistinct("r3", 1)...), textResp("done"))
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	for _, r := range h.prov.requests {
		for _, m := range r.Messages {
			assert.NotEqual(t, loopdetect.RepeatedToolFailureReminder, m.Content)
		}
	}
}

// §7.4: arguments the stream could not parse or repair are an
// invalid-params error of the named tool; three stop the turn.
func TestInvalidArgumentsCountUnderToolName(t *testing.T) {
	bad := func(id string) []model.Event {
		return []model.Event{
			{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: id, Name: "read_file", Arguments: []byte(`{"file_path":`), Invalid: "unexpected end of JSON input"}},
			{Kind: model.EventFinish, FinishReason: "tool_calls"},
		}
	}
	h := newHarness(t, Options{}, bad("1"), bad("2"), bad("3"), textResp("unreached"))
	_, err := h.prompt(t, "go")
	requireLoopError(t, err, loopdetect.LoopInvalidToolParamsStagnation)
	assert.Len(t, h.prov.requests, 3)
	msg := `Invalid arguments for tool "read_file": unexpected end of JSON input`
	assert.Equal(t, []string{msg, msg, msg}, h.client.failedTexts())
}

// §10/§11: "Allow All Edits" approves the call, switches the session to
// auto-edit and says so through both mode APIs (current_mode_update and a
// complete config_option_update); the next edit runs without asking.
// "Always Allow" on a command is remembered for that command only.
func TestAllowAlways(t *testing.T) {
	choose := func(id string) func(context.Context, *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		return func(context.Context, *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
			return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: id}}, nil
		}
	}
	t.Run("edit", func(t *testing.T) {
		w := func(p string) call { return call{name: "write_file", args: map[string]any{"file_path": p}} }
		h := newHarness(t, Options{ApprovalMode: ModeDefault}, callsResp(w("/a")), callsResp(w("/b")), textResp("done"))
		h.client.Permission = choose(optProceedAlways)
		_, err := h.prompt(t, "go")
		require.NoError(t, err)
		require.Len(t, h.client.perms, 1, "the second edit does not ask")
		completed, _ := h.client.counts()
		assert.Equal(t, 2, completed)
		var modeUpdates []string
		var opts [][]acp.SessionConfigOption
		for _, u := range h.client.updates {
			switch u.Kind {
			case acp.UpdateCurrentMode:
				modeUpdates = append(modeUpdates, u.CurrentModeID)
			case acp.UpdateConfigOption:
				opts = append(opts, u.ConfigOptions)
			}
		}
		assert.Equal(t, []string{ModeAutoEdit}, modeUpdates)
		require.Len(t, opts, 1)
		assert.Equal(t, h.m.session(h.sid).configOptions(), opts[0])
		assert.Equal(t, "mode", opts[0][0].ID)
		assert.Equal(t, ModeAutoEdit, opts[0][0].CurrentValue)
		assert.Equal(t, ModeAutoEdit, h.m.session(h.sid).getMode())
	})
	t.Run("exec", func(t *testing.T) {
		reg := func() *tools.Registry {
			return tools.NewRegistry(&fakeTool{name: "run_shell_command", kind: acp.KindExecute, confirm: tools.ConfirmExec},
				&fakeTool{name: "other_command", kind: acp.KindExecute, confirm: tools.ConfirmExec})
		}
		x := func(name string, i int) call { return call{name: name, args: map[string]any{"i": i}} }
		h := newHarness(t, Options{ApprovalMode: ModeDefault, Tools: reg},
			callsResp(x("run_shell_command", 1)), callsResp(x("run_shell_command", 2)), callsResp(x("other_command", 3)), textResp("done"))
		h.client.Permission = choose(optProceedAlwaysProject)
		_, err := h.prompt(t, "go")
		require.NoError(t, err)
		require.Len(t, h.client.perms, 2, "remembered for its label only")
		assert.Equal(t, "other_command", h.client.perms[1].ToolCall.Meta["toolName"])
		assert.Equal(t, ModeDefault, h.m.session(h.sid).getMode())
		for _, u := range h.client.updates {
			assert.NotEqual(t, acp.UpdateCurrentMode, u.Kind)
		}
	})
}

// §11: the option sets and labels per confirmation type.
func TestPermissionOptionSets(t *testing.T) {
	allow := acp.PermissionOption{OptionID: optProceedOnce, Name: "Allow", Kind: acp.AllowOnce}
	reject := acp.PermissionOption{OptionID: optCancel, Name: "Reject", Kind: acp.RejectOnce}
	tests := []struct {
		name string
		c    tools.Confirmation
		want []acp.PermissionOption
	}{
		{"edit", tools.Confirmation{Kind: tools.ConfirmEdit, Label: "/w/a"}, []acp.PermissionOption{
			{OptionID: optProceedAlways, Name: "Allow All Edits", Kind: acp.AllowAlways}, allow, reject}},
		{"exec", tools.Confirmation{Kind: tools.ConfirmExec, Label: "git"}, []acp.PermissionOption{
			{OptionID: optProceedAlwaysProject, Name: "Always Allow in project: git", Kind: acp.AllowAlways},
			{OptionID: optProceedAlwaysUser, Name: "Always Allow for user: git", Kind: acp.AllowAlways}, allow, reject}},
		{"mcp", tools.Confirmation{Kind: tools.ConfirmMCP, Label: "mcp__srv__echo"}, []acp.PermissionOption{
			{OptionID: optProceedAlwaysProject, Name: "Always Allow in project: mcp__srv__echo", Kind: acp.AllowAlways},
			{OptionID: optProceedAlwaysUser, Name: "Always Allow for user: mcp__srv__echo", Kind: acp.AllowAlways}, allow, reject}},
		{"info", tools.Confirmation{Kind: tools.ConfirmInfo}, []acp.PermissionOption{
			{OptionID: optProceedAlwaysProject, Name: "Always Allow in project", Kind: acp.AllowAlways},
			{OptionID: optProceedAlwaysUser, Name: "Always Allow for user", Kind: acp.AllowAlways}, allow, reject}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, permissionOptions(tt.c))
		})
	}
}

// §10 (Decision 5 extended): a call that asks shows its tool_call
// (pending) first, then the permission request for that id, then
// in_progress, then completed with the tool's text as content.
func TestPermissionFrameOrder(t *testing.T) {
	w := call{id: "w1", name: "write_file", args: map[string]any{"file_path": "/w/a"}}
	h := newHarness(t, Options{ApprovalMode: ModeDefault}, callsResp(w), textResp("done"))
	var before []acp.SessionUpdate
	h.client.Permission = func(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		h.client.mu.Lock()
		before = append(before, h.client.updates...)
		h.client.mu.Unlock()
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: optProceedOnce}}, nil
	}
	_, err := h.prompt(t, "go")
	require.NoError(t, err)
	require.Len(t, before, 1, "only the tool_call precedes the request")
	tc := before[0].ToolCall
	require.NotNil(t, tc)
	assert.Equal(t, acp.StatusPending, tc.Status)
	assert.Equal(t, "w1", tc.ToolCallID)
	assert.Equal(t, acp.KindEdit, tc.Kind)
	assert.Equal(t, acp.Meta{"toolName": "write_file"}, tc.Meta)
	assert.Equal(t, map[string]any{"file_path": "/w/a"}, tc.RawInput)

	require.Len(t, h.client.perms, 1)
	pr := h.client.perms[0].ToolCall
	assert.Equal(t, "w1", pr.ToolCallID)
	assert.Equal(t, acp.StatusPending, pr.Status)
	assert.Equal(t, "write_file", pr.Meta["toolName"])

	var after []acp.ToolCallUpdate
	for _, u := range h.client.updates[1:] {
		if u.Kind == acp.UpdateToolCallUpdate {
			after = append(after, *u.ToolCallUpdate)
		}
	}
	require.Len(t, after, 2)
	assert.Equal(t, acp.StatusInProgress, after[0].Status)
	assert.Equal(t, acp.StatusCompleted, after[1].Status)
	assert.Equal(t, []acp.ToolCallContent{acp.TextContent(`ok {"file_path":"/w/a"}`)}, after[1].Content)
}

// §10: an unoffered option id fails the call with the request-failure text
// and skips the rest of the batch as after a cancel; the turn ends.
func TestUnofferedOptionStopsBatch(t *testing.T) {
	x := func(i int) call {
		return call{name: "run_shell_command", args: map[string]any{"command": fmt.Sprint("echo ", i)}}
	}
	h := newHarness(t, Options{ApprovalMode: ModeDefault}, callsResp(x(1), x(2)), textResp("unreached"))
	h.client.Permission = func(context.Context, *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
		return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: "allow_everything"}}, nil
	}
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Equal(t, []string{
		`Permission request failed for "run_shell_command": Permission response selected unoffered option: allow_everything`,
		loopdetect.PermissionCancelSkipMessage,
	}, h.client.failedTexts())
	assert.Len(t, h.client.perms, 1)
	assert.Len(t, h.prov.requests, 1)
}

// §12 / vector 125, adapted to acpd: the exact initialize result. acpd
// answers protocol version 1 whatever the client asks, names itself, and
// advertises only what works: images and embedded text context (no audio),
// MCP over HTTP and legacy SSE, close and additionalDirectories always, load,
// list, resume and delete only with a store; logout; one agent-type auth
// method; prompt queueing as an opt-in (agentCapabilities._meta) and the
// steering extension (the answer's top-level _meta).
func TestInitializeExactResult(t *testing.T) {
	const auth = `"authMethods":[{"id":"openai","name":"Use OpenAI API key","description":"Requires setting the ` + "`OPENAI_API_KEY`" + ` environment variable"}],
		"agentInfo":{"name":"acpd","title":"acpd","version":"1.2.3"},"_meta":{"steering":{"supported":true}}}`
	const prompt = `"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":true}`
	tests := []struct {
		name    string
		durable bool
		want    string
	}{
		{"in memory", false, `{"protocolVersion":1,"agentCapabilities":{"loadSession":false,` + prompt + `,
			"sessionCapabilities":{"additionalDirectories":{},"close":{}},"auth":{"logout":{}},"_meta":{"promptQueueing":true}},` + auth},
		{"durable", true, `{"protocolVersion":1,"agentCapabilities":{"loadSession":true,` + prompt + `,
			"sessionCapabilities":{"additionalDirectories":{},"close":{},"list":{},"resume":{},"delete":{},"fork":{}},"auth":{"logout":{}},"_meta":{"promptQueueing":true}},` + auth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Provider: &scriptProvider{}, Model: "m", Version: "1.2.3"}
			if tt.durable {
				st, err := store.Open(t.TempDir(), store.Options{})
				require.NoError(t, err)
				opts.Store = st
			}
			m := NewManager(&recClient{}, opts)
			for _, v := range []int{1, 2, 0} {
				r, err := m.Initialize(t.Context(), &acp.InitializeRequest{ProtocolVersion: v})
				require.NoError(t, err)
				b, err := json.Marshal(r)
				require.NoError(t, err)
				assert.JSONEq(t, tt.want, string(b), "protocolVersion %d", v)
			}
		})
	}
}

// §8: unknown and closing sessions are invalid params with the documented
// texts.
func TestUnknownAndClosingSession(t *testing.T) {
	h := newHarness(t, Options{})
	_, err := h.m.Prompt(t.Context(), &acp.PromptRequest{SessionID: "nope", Prompt: []acp.ContentBlock{acp.TextBlock("x")}})
	e := codeOf(t, err)
	assert.Equal(t, acp.CodeInvalidParams, e.Code)
	assert.Equal(t, "Session not found for id: nope", e.Message)
	_, err = h.m.SetSessionMode(t.Context(), &acp.SetSessionModeRequest{SessionID: "nope", ModeID: ModePlan})
	assert.Equal(t, "Session not found for id: nope", codeOf(t, err).Message)

	s := h.m.session(h.sid)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	_, err = h.prompt(t, "x")
	e = codeOf(t, err)
	assert.Equal(t, acp.CodeInvalidParams, e.Code)
	assert.Equal(t, "Session is closing", e.Message)
}

// §7.2: only calls that will run are counted: a call repeating an id of
// the same response is dropped, and a provider replay is answered without
// being counted. With an explicit cap of 2, one real call per response
// never crosses it.
func TestGuardCountsOnlyCallsThatRun(t *testing.T) {
	a := call{id: "a", name: "read_file", args: map[string]any{"file_path": "/a"}}
	b := call{id: "b", name: "read_file", args: map[string]any{"file_path": "/b"}}
	bAgain := call{id: "b", name: "read_file", args: map[string]any{"file_path": "/b2"}}
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 2, Explicit: true}},
		callsResp(a), callsResp(a, b, bAgain), textResp("done"))
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	completed, failed := h.client.counts()
	assert.Equal(t, 2, completed)
	assert.Equal(t, 1, failed, "the replay of a is answered, not run")
}

// §7.6 in warn mode: the reminder follows the tool results of round 2;
// round 3 would stop but only warns, and the turn ends normally.
func TestRepeatedFailureWarnMode(t *testing.T) {
	reg := func() *tools.Registry {
		return tools.NewRegistry(&fakeTool{name: "read_file", kind: acp.KindRead, execErr: errors.New("File not found"), errType: tools.ErrTypeFileNotFound})
	}
	h := newHarness(t, Options{Tools: reg, FailureGuard: loopdetect.FailureModeWarn},
		callsResp(nDistinct("r1", 4)...), callsResp(nDistinct("r2", 4)...), callsResp(nDistinct("r3", 1)...), textResp("done"))
	resp, err := h.prompt(t, "go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	require.Len(t, h.prov.requests, 4)
	third := h.prov.requests[2].Messages
	assert.Equal(t, model.RoleTool, third[len(third)-2].Role)
	assert.Equal(t, model.Message{Role: model.RoleUser, Content: loopdetect.RepeatedToolFailureReminder}, third[len(third)-1])
	for _, m := range h.prov.requests[3].Messages {
		assert.NotContains(t, m.Content, loopdetect.RepeatedToolFailureStopMessage)
	}
}

// funcProvider streams whatever its function yields.
type funcProvider func(ctx context.Context, req model.Request, yield func(model.Event, error) bool)

func (f funcProvider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) { f(ctx, req, yield) }
}

// §9: a turn cancelled mid-stream answers cancelled after the partial text
// went out; its user message and the partial answer stay in history, and
// the next prompt continues from there.
func TestCancelMidStreamKeepsPartialAnswer(t *testing.T) {
	h := newHarness(t, Options{})
	streaming := make(chan struct{})
	var reqs []model.Request
	h.m.opts.Provider = funcProvider(func(ctx context.Context, req model.Request, yield func(model.Event, error) bool) {
		reqs = append(reqs, req)
		if len(reqs) > 1 {
			for _, ev := range textResp("fresh") {
				yield(ev, nil)
			}
			return
		}
		if !yield(model.Event{Kind: model.EventText, Text: "partial"}, nil) {
			return
		}
		close(streaming)
		<-ctx.Done()
		yield(model.Event{}, ctx.Err())
	})
	done := make(chan *acp.PromptResponse, 1)
	go func() {
		r, _ := h.prompt(t, "go")
		done <- r
	}()
	select {
	case <-streaming:
	case <-t.Context().Done():
		t.Fatal("stream never started")
	}
	h.m.Cancel(&acp.SessionIDRequest{SessionID: h.sid})
	var resp *acp.PromptResponse
	select {
	case resp = <-done:
	case <-t.Context().Done():
		t.Fatal("prompt never answered")
	}
	require.NotNil(t, resp)
	assert.Equal(t, acp.StopCancelled, resp.StopReason)
	require.NotEmpty(t, h.client.updates)
	assert.Equal(t, "partial", h.client.updates[0].Content.Text)

	_, err := h.prompt(t, "again")
	require.NoError(t, err)
	require.Len(t, reqs, 2)
	assert.Equal(t, []model.Message{
		{Role: model.RoleUser, Content: "go"},
		{Role: model.RoleAssistant, Content: "partial"},
		{Role: model.RoleUser, Content: "again"},
	}, reqs[1].Messages)
}
