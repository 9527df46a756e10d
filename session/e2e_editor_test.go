package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// editor is a FakeClient that behaves like an editor: files are read from
// its buffers (falling back to disk) and written to disk, terminals run
// locally; every fs call is recorded.
type editor struct {
	fc    *acptest.FakeClient
	terms *acptest.Terminals

	mu      sync.Mutex
	buffers map[string]string // path -> unsaved buffer text
	reads   []string
	writes  []acp.WriteTextFileRequest
}

func newEditor(t *testing.T) *editor {
	e := &editor{terms: acptest.NewTerminals(), buffers: map[string]string{}}
	t.Cleanup(e.terms.Close)
	e.fc = &acptest.FakeClient{
		ReadTextFileFunc: func(_ context.Context, r *acp.ReadTextFileRequest) (*acp.ReadTextFileResponse, error) {
			e.mu.Lock()
			e.reads = append(e.reads, r.Path)
			buf, ok := e.buffers[r.Path]
			e.mu.Unlock()
			if ok {
				return &acp.ReadTextFileResponse{Content: buf}, nil
			}
			b, err := os.ReadFile(r.Path)
			if errors.Is(err, os.ErrNotExist) {
				return nil, acp.ErrResourceNotFound(r.Path)
			}
			return &acp.ReadTextFileResponse{Content: string(b)}, err
		},
		WriteTextFileFunc: func(_ context.Context, r *acp.WriteTextFileRequest) error {
			e.mu.Lock()
			e.writes = append(e.writes, *r)
			delete(e.buffers, r.Path)
			e.mu.Unlock()
			return os.WriteFile(r.Path, []byte(r.Content), 0o644)
		},
	}
	e.terms.Install(e.fc)
	return e
}

func (e *editor) fsCalls() (reads []string, writes []acp.WriteTextFileRequest) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reads...), append([]acp.WriteTextFileRequest(nil), e.writes...)
}

func call(name string, args map[string]any) modeltest.ToolCall {
	b, _ := json.Marshal(args)
	return modeltest.ToolCall{Name: name, Arguments: string(b)}
}

func calls(cs ...modeltest.ToolCall) modeltest.Response { return modeltest.Response{ToolCalls: cs} }

func forSession(updates []acp.SessionNotification, sid string) []acp.SessionUpdate {
	var out []acp.SessionUpdate
	for _, n := range updates {
		if n.SessionID == sid {
			out = append(out, n.Update)
		}
	}
	return out
}

// toolContent returns every tool-call content item a session showed, from
// tool_call and tool_call_update frames, in order.
func toolContent(updates []acp.SessionUpdate) []acp.ToolCallContent {
	var out []acp.ToolCallContent
	for _, u := range updates {
		switch {
		case u.ToolCall != nil:
			out = append(out, u.ToolCall.Content...)
		case u.ToolCallUpdate != nil:
			out = append(out, u.ToolCallUpdate.Content...)
		}
	}
	return out
}

// lineIndex is the index of the first agent line containing all of subs.
func lineIndex(lines [][]byte, subs ...string) int {
	for i, l := range lines {
		ok := true
		for _, s := range subs {
			ok = ok && bytes.Contains(l, []byte(s))
		}
		if ok {
			return i
		}
	}
	return -1
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestE2E_EditorIO runs read_file, write_file, edit and run_shell_command
// against the built daemon, once for an editor that offers fs and
// terminals (everything must go through it) and once for a client that
// offers nothing (no fs/* or terminal/* request at all; local I/O).
func TestE2E_EditorIO(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps acp.ClientCapabilities
	}{
		{"editor offers fs and terminal", acp.ClientCapabilities{FS: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true}},
		{"client offers nothing", acp.ClientCapabilities{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			viaEditor := tc.caps.Terminal
			ed := newEditor(t)
			d := startDaemon(t, ed.fc, nil)
			ctx := ctxFor(t)
			a, fresh := filepath.Join(d.cwd, "a.txt"), filepath.Join(d.cwd, "new.txt")
			require.NoError(t, os.WriteFile(a, []byte("disk text\n"), 0o644))
			ed.buffers[a] = "buffer text\n" // unsaved in the editor
			d.model.Add(
				calls(call("read_file", map[string]any{"file_path": a})),
				calls(call("write_file", map[string]any{"file_path": fresh, "content": "fresh\n"})),
				calls(call("edit", map[string]any{"file_path": a, "old_string": "text", "new_string": "TEXT"})),
				calls(call("run_shell_command", map[string]any{"command": "echo hi"})),
				modeltest.Response{Text: "all done"},
			)
			_, err := d.cc.InitializeWith(ctx, tc.caps)
			require.NoError(t, err)
			sid, err := d.cc.NewSession(ctx, d.cwd)
			require.NoError(t, err)
			resp, err := d.cc.Prompt(ctx, sid, "work")
			require.NoError(t, err)
			assert.Equal(t, acp.StopEndTurn, resp.StopReason)
			require.NoError(t, d.cc.End())

			ups := forSession(d.cc.Updates(), sid)
			completed, failed := statusCounts(d.cc.Updates())
			assert.Equal(t, 4, completed, "every tool call completed")
			assert.Zero(t, failed)
			reads, writes := ed.fsCalls()
			lines := d.cc.Lines()
			var diffs []acp.ToolCallContent
			for _, c := range toolContent(ups) {
				if c.Type == "diff" {
					diffs = append(diffs, c)
				}
			}
			require.NotEmpty(t, diffs, "edits show diffs")
			for _, c := range diffs {
				assert.True(t, filepath.IsAbs(c.Path), c.Path)
			}
			freshText, err := os.ReadFile(fresh)
			require.NoError(t, err)
			assert.Equal(t, "fresh\n", string(freshText))
			aText, err := os.ReadFile(a)
			require.NoError(t, err)
			shellOut := d.model.Requests()[4].Messages
			toolOut := shellOut[len(shellOut)-1].Text()
			assert.Contains(t, toolOut, "Output: hi", "the model sees the command's output")

			if !viaEditor {
				for _, l := range lines {
					assert.NotContains(t, string(l), `"method":"fs/`, "no fs request without the capability")
					assert.NotContains(t, string(l), `"method":"terminal/`, "no terminal request without the capability")
				}
				assert.Empty(t, reads)
				assert.Empty(t, writes)
				assert.Empty(t, ed.terms.Calls())
				assert.Equal(t, "disk TEXT\n", string(aText), "the edit went to disk")
				assert.Contains(t, strings.Join(toolText(d.cc.Updates(), acp.StatusCompleted), "\n"), "disk text")
				assertDiff(t, diffs, a, "disk text\n", "disk TEXT\n")
				return
			}

			// Reads come from the editor's buffer, writes go through it.
			assert.Contains(t, reads, a)
			assert.Contains(t, strings.Join(toolText(d.cc.Updates(), acp.StatusCompleted), "\n"), "buffer text", "read_file returns the unsaved buffer")
			require.Len(t, writes, 2)
			assert.Equal(t, acp.WriteTextFileRequest{SessionID: sid, Path: fresh, Content: "fresh\n"}, writes[0])
			assert.Equal(t, acp.WriteTextFileRequest{SessionID: sid, Path: a, Content: "buffer TEXT\n"}, writes[1])
			assert.Equal(t, "buffer TEXT\n", string(aText))
			assertDiff(t, diffs, a, "buffer text\n", "buffer TEXT\n")
			var newFile bool
			for _, c := range diffs {
				newFile = newFile || (c.Path == fresh && c.OldText == nil && c.NewText != nil && *c.NewText == "fresh\n")
			}
			assert.True(t, newFile, "write_file of a new file shows a diff with no oldText")

			// The shell ran in an editor terminal: create, embed, wait,
			// output, release.
			tcalls := ed.terms.Calls()
			var methods []string
			for _, c := range tcalls {
				methods = append(methods, c.Method)
			}
			assert.Equal(t, []string{acp.MethodTerminalCreate, acp.MethodTerminalWaitForExit, acp.MethodTerminalOutput, acp.MethodTerminalRelease}, methods)
			require.NotEmpty(t, tcalls)
			// sh -c, wrapped by the sandbox helper where the kernel can
			// confine it (e2e_sandbox_test.go checks the wrapping).
			argv := append([]string{tcalls[0].Command}, tcalls[0].Args...)
			assert.Equal(t, []string{"sh", "-c", "echo hi"}, argv[len(argv)-3:])
			assert.Equal(t, d.cwd, tcalls[0].Cwd)
			term := tcalls[0].TerminalID
			embed := lineIndex(lines, `"sessionUpdate":"tool_call_update"`, `"terminalId":"`+term+`"`)
			release := lineIndex(lines, `"method":"terminal/release"`)
			wait := lineIndex(lines, `"method":"terminal/wait_for_exit"`)
			require.NotEqual(t, -1, embed, "the terminal is embedded in the tool call")
			assert.Less(t, embed, wait, "embedded before waiting, so the editor shows live output")
			assert.Less(t, embed, release)
			assert.True(t, ed.terms.Exited(term))
		})
	}
}

func assertDiff(t *testing.T, diffs []acp.ToolCallContent, path, oldText, newText string) {
	t.Helper()
	for _, c := range diffs {
		if c.Path == path && c.OldText != nil && *c.OldText == oldText && c.NewText != nil && *c.NewText == newText {
			return
		}
	}
	t.Errorf("no diff of %s from %q to %q among %d diffs", path, oldText, newText, len(diffs))
}

// TestE2E_CancelDuringTerminal cancels a turn while `sleep 30` runs in an
// editor terminal: the agent abandons its wait with $/cancel_request,
// releases (and so kills) the terminal, and the prompt answers cancelled.
func TestE2E_CancelDuringTerminal(t *testing.T) {
	ed := newEditor(t)
	waiting := make(chan string, 1)
	ed.terms.OnWait = func(id string) { waiting <- id }
	d := startDaemon(t, ed.fc, []modeltest.Response{calls(call("run_shell_command", map[string]any{"command": "sleep 30"}))})
	sid := d.session(t)
	ctx := ctxFor(t)
	got := make(chan *acp.PromptResponse, 1)
	go func() {
		r, err := d.cc.Prompt(ctx, sid, "sleep")
		assert.NoError(t, err)
		got <- r
	}()
	var term string
	select {
	case term = <-waiting:
	case <-ctx.Done():
		t.Fatal("the command never started in a terminal")
	}
	start := time.Now()
	require.NoError(t, d.cc.Cancel(sid))
	select {
	case r := <-got:
		require.NotNil(t, r)
		assert.Equal(t, acp.StopCancelled, r.StopReason)
		assert.Less(t, time.Since(start), 5*time.Second)
	case <-ctx.Done():
		t.Fatal("the cancelled prompt never answered")
	}
	assert.True(t, ed.terms.Exited(term), "the sleep was killed")
	// The final update keeps the terminal, so the editor still shows what
	// the command printed, and says why the call failed.
	var final *acp.ToolCallUpdate
	for _, n := range d.cc.Updates() {
		if u := n.Update.ToolCallUpdate; u != nil && u.Status == acp.StatusFailed {
			final = u
		}
	}
	require.NotNil(t, final)
	var kinds, texts []string
	for _, c := range final.Content {
		kinds = append(kinds, c.Type)
		if c.Content != nil {
			texts = append(texts, c.Content.Text)
		}
	}
	assert.Equal(t, []string{acp.ToolContentTerminal, "content"}, kinds)
	assert.Equal(t, []string{"Tool execution was cancelled."}, texts)
	var methods []string
	for _, c := range ed.terms.Calls() {
		methods = append(methods, c.Method)
	}
	assert.Equal(t, acp.MethodTerminalRelease, methods[len(methods)-1], "the terminal is released: %v", methods)
	lines := d.cc.Lines()
	assert.NotEqual(t, -1, lineIndex(lines, `"method":"$/cancel_request"`), "the pending wait_for_exit is cancelled")
	require.NoError(t, d.cc.End())
	// The session keeps working.
	d.model.Add(modeltest.Response{Text: "awake"})
	r, err := d.cc.Prompt(ctx, sid, "again")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, r.StopReason)
}

// TestE2E_InitializeNegotiation: any requested version gets 1, agentInfo
// names acpd, and every capability has its schema type: booleans for
// loadSession, promptCapabilities and mcpCapabilities, `{}` objects for
// sessionCapabilities and auth.logout.
func TestE2E_InitializeNegotiation(t *testing.T) {
	d := startDaemon(t, nil, nil)
	ctx := ctxFor(t)
	for _, version := range []int{99, 1, 2} {
		var raw json.RawMessage
		require.NoError(t, d.cc.Call(ctx, acp.MethodInitialize, map[string]any{"protocolVersion": version}, &raw))
		var r struct {
			ProtocolVersion   int `json:"protocolVersion"`
			AgentCapabilities struct {
				LoadSession         any            `json:"loadSession"`
				PromptCapabilities  map[string]any `json:"promptCapabilities"`
				MCPCapabilities     map[string]any `json:"mcpCapabilities"`
				SessionCapabilities map[string]any `json:"sessionCapabilities"`
				Auth                map[string]any `json:"auth"`
			} `json:"agentCapabilities"`
			AuthMethods []any `json:"authMethods"`
			AgentInfo   struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"agentInfo"`
		}
		require.NoError(t, json.Unmarshal(raw, &r))
		assert.Equal(t, 1, r.ProtocolVersion, "requested %d", version)
		assert.Equal(t, "acpd", r.AgentInfo.Name)
		assert.NotEmpty(t, r.AgentInfo.Version)
		assert.NotNil(t, r.AuthMethods, "authMethods is an array")
		caps := r.AgentCapabilities
		assert.IsType(t, true, caps.LoadSession)
		assert.Equal(t, true, caps.LoadSession, "a data dir makes sessions loadable")
		for _, group := range []map[string]any{caps.PromptCapabilities, caps.MCPCapabilities} {
			require.NotEmpty(t, group)
			for k, v := range group {
				assert.IsType(t, true, v, k)
			}
		}
		for _, k := range []string{"list", "resume", "close", "delete"} {
			assert.IsType(t, map[string]any{}, caps.SessionCapabilities[k], "sessionCapabilities.%s is an object", k)
		}
		for k, v := range caps.SessionCapabilities {
			assert.IsType(t, map[string]any{}, v, "sessionCapabilities.%s", k)
		}
		if caps.Auth != nil {
			if v, ok := caps.Auth["logout"]; ok {
				assert.IsType(t, map[string]any{}, v, "auth.logout")
			}
		}
	}
}

// TestE2E_ConfigOptionsAndModes: set_config_option answers the complete
// list with the new value; modes and the mode option stay in sync both
// ways; bad values are refused naming the field; set_mode mid-turn is
// accepted and governs the rest of the turn.
func TestE2E_ConfigOptionsAndModes(t *testing.T) {
	ed := newEditor(t)
	gate, waiting := make(chan struct{}), make(chan struct{}, 1)
	wait := ed.fc.WaitForTerminalExitFunc
	ed.fc.WaitForTerminalExitFunc = func(ctx context.Context, r *acp.TerminalRequest) (*acp.TerminalExitStatus, error) {
		waiting <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return wait(ctx, r)
	}
	d := startDaemon(t, ed.fc, nil)
	ctx := ctxFor(t)
	_, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	var ns acp.NewSessionResponse
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: d.cwd, MCPServers: []acp.MCPServer{}}, &ns))
	sid := ns.SessionID
	require.NotNil(t, ns.Modes)
	ids := func(opts []acp.SessionConfigOption) map[string]string {
		m := map[string]string{}
		for _, o := range opts {
			m[o.ID] = o.CurrentValue
		}
		return m
	}
	assert.Equal(t, map[string]string{"mode": "yolo", "model": "scripted"}, ids(ns.ConfigOptions))
	assert.Equal(t, "yolo", ns.Modes.CurrentModeID)

	set := func(id, value string) (map[string]string, error) {
		var r acp.SetSessionConfigOptionResponse
		err := d.cc.Call(ctx, acp.MethodSessionSetConfigOption, map[string]any{"sessionId": sid, "configId": id, "value": value}, &r)
		return ids(r.ConfigOptions), err
	}
	got, err := set("mode", "auto-edit")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"mode": "auto-edit", "model": "scripted"}, got)
	got, err = set("model", "scripted")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"mode": "auto-edit", "model": "scripted"}, got)
	for _, bad := range []struct{ id, value, field string }{{"mode", "turbo", "value"}, {"model", "gpt-nope", "value"}, {"colour", "red", "configId"}} {
		_, err := set(bad.id, bad.value)
		var e *acp.Error
		require.ErrorAs(t, err, &e, "%s=%s", bad.id, bad.value)
		assert.Equal(t, acp.CodeInvalidParams, e.Code)
	}
	// set_mode is reflected in the mode option.
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionSetMode, acp.SetSessionModeRequest{SessionID: sid, ModeID: "yolo"}, nil))
	got, err = set("model", "scripted")
	require.NoError(t, err)
	assert.Equal(t, "yolo", got["mode"])

	// Mid-turn: while a command runs, switch to plan mode; the turn's next
	// call (a write) is then refused by plan mode.
	out := filepath.Join(d.cwd, "out.txt")
	d.model.Add(
		calls(call("run_shell_command", map[string]any{"command": "echo gated"})),
		calls(call("write_file", map[string]any{"file_path": out, "content": "x"})),
		modeltest.Response{Text: "planned"},
	)
	done := make(chan *acp.PromptResponse, 1)
	go func() {
		r, err := d.cc.Prompt(ctx, sid, "go")
		assert.NoError(t, err)
		done <- r
	}()
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the command never ran")
	}
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionSetMode, acp.SetSessionModeRequest{SessionID: sid, ModeID: "plan"}, nil), "set_mode mid-turn")
	got, err = set("model", "scripted")
	require.NoError(t, err, "set_config_option mid-turn")
	assert.Equal(t, "plan", got["mode"])
	close(gate)
	select {
	case r := <-done:
		require.NotNil(t, r)
		assert.Equal(t, acp.StopEndTurn, r.StopReason)
	case <-ctx.Done():
		t.Fatal("the turn never ended")
	}
	assert.NoFileExists(t, out, "plan mode refused the write")
	assert.Contains(t, strings.Join(toolText(d.cc.Updates(), acp.StatusFailed), "\n"), "Plan mode is active")
	require.NoError(t, d.cc.End())
}

// TestE2E_TwoSessionsConcurrently runs a turn of one session while another
// session's turn is blocked in a terminal on the same connection: the
// updates interleave on the wire but each session's stay its own and in
// order.
func TestE2E_TwoSessionsConcurrently(t *testing.T) {
	ed := newEditor(t)
	gate, waiting := make(chan struct{}), make(chan struct{}, 1)
	wait := ed.fc.WaitForTerminalExitFunc
	ed.fc.WaitForTerminalExitFunc = func(ctx context.Context, r *acp.TerminalRequest) (*acp.TerminalExitStatus, error) {
		waiting <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return wait(ctx, r)
	}
	d := startDaemon(t, ed.fc, nil)
	ctx := ctxFor(t)
	_, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	sa, err := d.cc.NewSession(ctx, d.cwd)
	require.NoError(t, err)
	sb, err := d.cc.NewSession(ctx, d.cwd)
	require.NoError(t, err)
	b := filepath.Join(d.cwd, "b.txt")
	require.NoError(t, os.WriteFile(b, []byte("bee\n"), 0o644))
	// The model serves requests in arrival order: A's first, then B's two
	// (A is blocked meanwhile), then A's last.
	d.model.Add(
		calls(call("run_shell_command", map[string]any{"command": "echo alpha"})),
		calls(call("read_file", map[string]any{"file_path": b})),
		modeltest.Response{Text: "beta is done"},
		modeltest.Response{Text: "alpha is done"},
	)
	doneA := make(chan *acp.PromptResponse, 1)
	go func() {
		r, err := d.cc.Prompt(ctx, sa, "alpha")
		assert.NoError(t, err)
		doneA <- r
	}()
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("A's command never ran")
	}
	rb, err := d.cc.Prompt(ctx, sb, "beta")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, rb.StopReason)
	select {
	case <-doneA:
		t.Fatal("A answered while its command was blocked")
	default:
	}
	close(gate)
	select {
	case ra := <-doneA:
		require.NotNil(t, ra)
		assert.Equal(t, acp.StopEndTurn, ra.StopReason)
	case <-ctx.Done():
		t.Fatal("A never answered")
	}
	require.NoError(t, d.cc.End())

	var all []acp.SessionNotification
	for _, n := range d.cc.Updates() {
		if n.Update.Kind != acp.UpdateAvailableCommands { // sent after session/new, before the turns
			all = append(all, n)
		}
	}
	assert.Equal(t, "alpha is done", acptest.AgentText(all, sa))
	assert.Equal(t, "beta is done", acptest.AgentText(all, sb))
	// Each session's frames, in order: tool_call, its updates, the text.
	for sid, wantTool := range map[string]string{sa: "echo alpha", sb: "b.txt"} {
		var kinds []string
		var toolID string
		for _, u := range forSession(all, sid) {
			switch u.Kind {
			case acp.UpdateToolCall:
				toolID = u.ToolCall.ToolCallID
				assert.Contains(t, u.ToolCall.Title, wantTool, "session %s shows its own call", sid)
			case acp.UpdateToolCallUpdate:
				assert.Equal(t, toolID, u.ToolCallUpdate.ToolCallID)
			}
			if len(kinds) == 0 || kinds[len(kinds)-1] != u.Kind {
				kinds = append(kinds, u.Kind)
			}
		}
		assert.Equal(t, []string{acp.UpdateSessionInfo, acp.UpdateToolCall, acp.UpdateToolCallUpdate, acp.UpdateAgentMessageChunk}, kinds, "session %s", sid)
	}
	// B's whole turn sits between A's tool call and A's text on the wire.
	var order []string
	for _, n := range all {
		if len(order) == 0 || order[len(order)-1] != n.SessionID {
			order = append(order, n.SessionID)
		}
	}
	assert.Equal(t, []string{sa, sb, sa}, order)
}

// TestE2E_CloseDuringTurn: session/close while a turn streams answers the
// prompt `cancelled` first, then `{}`; the session is gone afterwards.
func TestE2E_CloseDuringTurn(t *testing.T) {
	d := startDaemon(t, nil, []modeltest.Response{{Text: "thinking…", Hang: true}})
	sid := d.session(t)
	ctx := ctxFor(t)
	got := make(chan *acp.PromptResponse, 1)
	go func() {
		r, err := d.cc.Prompt(ctx, sid, "think")
		assert.NoError(t, err)
		got <- r
	}()
	_, err := d.cc.WaitUpdates(ctx, 2) // available_commands_update, then the turn's first chunk
	require.NoError(t, err)
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionClose, acp.SessionIDRequest{SessionID: sid}, nil))
	lines := d.cc.Lines()
	cancelled := lineIndex(lines, `"stopReason":"cancelled"`)
	require.NotEqual(t, -1, cancelled, "the prompt answered before the close")
	assert.Equal(t, `{}`, string(lastResult(t, lines)), "close answers {} last")
	select {
	case r := <-got:
		require.NotNil(t, r)
		assert.Equal(t, acp.StopCancelled, r.StopReason)
	case <-ctx.Done():
		t.Fatal("the prompt never answered")
	}
	_, err = d.cc.Prompt(ctx, sid, "again")
	var e *acp.Error
	require.ErrorAs(t, err, &e, "a closed session takes no prompts")
	assert.Equal(t, acp.CodeInvalidParams, e.Code)
}

func lastResult(t *testing.T, lines [][]byte) json.RawMessage {
	t.Helper()
	require.NotEmpty(t, lines)
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(lines[len(lines)-1], &m))
	return m.Result
}

// TestE2E_AllowAllEditsKeepsModeViewsInSync: answering an edit's
// permission with "Allow All Edits" switches the session to auto-edit; an
// editor that shows modes and one that shows the mode config option must
// both learn it (current_mode_update and config_option_update).
func TestE2E_AllowAllEditsKeepsModeViewsInSync(t *testing.T) {
	fc := &acptest.FakeClient{
		RequestPermissionFunc: func(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
			for _, o := range r.Options {
				if o.Kind == acp.AllowAlways {
					return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: o.OptionID}}, nil
				}
			}
			return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}, nil
		},
	}
	d := startDaemon(t, fc, nil, "--approval-mode", "default")
	ctx := ctxFor(t)
	_, err := d.cc.InitializeWith(ctx, acp.ClientCapabilities{})
	require.NoError(t, err)
	sid, err := d.cc.NewSession(ctx, d.cwd)
	require.NoError(t, err)
	d.model.Add(
		calls(call("write_file", map[string]any{"file_path": filepath.Join(d.cwd, "a.txt"), "content": "a"})),
		modeltest.Response{Text: "written"},
	)
	r, err := d.cc.Prompt(ctx, sid, "write")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, r.StopReason)
	var mode, option string
	for _, u := range forSession(d.cc.Updates(), sid) {
		switch u.Kind {
		case acp.UpdateCurrentMode:
			mode = u.CurrentModeID
		case acp.UpdateConfigOption:
			for _, o := range u.ConfigOptions {
				if o.Category == "mode" {
					option = o.CurrentValue
				}
			}
		}
	}
	assert.Equal(t, "auto-edit", mode, "current_mode_update")
	assert.Equal(t, "auto-edit", option, "config_option_update of the mode option")
}

// TestE2E_EditorMissingFile: the editor answers -32002 for a missing file;
// the call fails with a message naming the path and the turn goes on.
func TestE2E_EditorMissingFile(t *testing.T) {
	ed := newEditor(t)
	d := startDaemon(t, ed.fc, nil)
	missing := filepath.Join(d.cwd, "missing.txt")
	d.model.Add(calls(call("read_file", map[string]any{"file_path": missing})), modeltest.Response{Text: "no such file"})
	sid := d.session(t)
	r, err := d.cc.Prompt(ctxFor(t), sid, "read it")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, r.StopReason)
	reads, _ := ed.fsCalls()
	assert.Empty(t, reads, "a file missing on disk is not asked of the editor")
	completed, failed := statusCounts(d.cc.Updates())
	assert.Equal(t, 0, completed)
	assert.Equal(t, 1, failed)
	msgs := d.model.Requests()[1].Messages
	assert.Contains(t, msgs[len(msgs)-1].Text(), missing, "the model is told which file is missing")
}
