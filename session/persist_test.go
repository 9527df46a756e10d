package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/tools"
)

// node is one acpd "process": a Store on a data directory and a Manager
// served over a schema-checked acptest.Pipe.
type node struct {
	m    *Manager
	cc   *acptest.ClientConn
	prov *scriptProvider
	st   *store.Store
}

var testPlan = []acp.PlanEntry{{Content: "read the file", Priority: "high", Status: "in_progress"}}

func durableTools() *tools.Registry {
	r := testTools()
	r.Add(&fakeTool{name: "todo_write", kind: acp.KindThink, plan: testPlan})
	r.Add(&fakeTool{name: "fail_tool", kind: acp.KindOther, execErr: errors.New("boom: disk on fire")})
	return r
}

func startNode(t *testing.T, dir string, opts Options, responses ...[]model.Event) *node {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	n := &node{st: st, prov: &scriptProvider{responses: responses}}
	opts.Provider = n.prov
	opts.Model = "test-model"
	opts.Models = []string{"other-model"}
	if opts.Tools == nil {
		opts.Tools = durableTools
	}
	if opts.ApprovalMode == "" {
		opts.ApprovalMode = ModeYolo
	}
	if opts.Cap == (loopdetect.Cap{}) {
		opts.Cap = loopdetect.Cap{Max: loopdetect.DefaultMaxToolCallsPerTurn}
	}
	opts.Store = st
	n.cc = acptest.Pipe(t, func(c acp.Client) acp.Agent {
		n.m = NewManager(c, opts)
		return n.m
	}, nil)
	t.Cleanup(n.m.Close)
	_, err = n.cc.Initialize(t.Context())
	require.NoError(t, err)
	return n
}

func (n *node) newSession(t *testing.T, cwd string) string {
	t.Helper()
	sid, err := n.cc.NewSession(t.Context(), cwd)
	require.NoError(t, err)
	return sid
}

// load sends session/load and returns the updates that arrived before its
// response.
func (n *node) load(t *testing.T, sid, cwd string) (*acp.LoadSessionResponse, []acp.SessionUpdate, error) {
	t.Helper()
	before := len(n.cc.Updates())
	var resp acp.LoadSessionResponse
	err := n.cc.Call(t.Context(), acp.MethodSessionLoad, &acp.LoadSessionRequest{SessionID: sid, Cwd: cwd, MCPServers: []acp.MCPServer{}}, &resp)
	var ups []acp.SessionUpdate
	for _, u := range n.cc.Updates()[before:] {
		require.Equal(t, sid, u.SessionID)
		// The commands are announced at the end of a load, before its
		// reply (announceCommands): not part of the conversation.
		if u.Update.Kind == acp.UpdateAvailableCommands {
			continue
		}
		ups = append(ups, u.Update)
	}
	return &resp, ups, err
}

func (n *node) prompt(t *testing.T, sid, text string) (*acp.PromptResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	return n.cc.Prompt(ctx, sid, text)
}

// history copies a live session's conversation, holding its turn slot.
func (n *node) history(t *testing.T, sid string) []model.Message {
	t.Helper()
	s := n.m.session(sid)
	require.NotNil(t, s)
	require.NoError(t, s.acquire(t.Context()))
	defer s.release()
	return slices.Clone(s.history)
}

func codeOf(t *testing.T, err error) *acp.Error {
	t.Helper()
	var e *acp.Error
	require.ErrorAs(t, err, &e)
	return e
}

// describe renders an update as "kind[:detail]" for order assertions.
func describe(u acp.SessionUpdate) string {
	switch u.Kind {
	case acp.UpdateUserMessageChunk, acp.UpdateAgentMessageChunk, acp.UpdateAgentThoughtChunk:
		return u.Kind + ":" + u.Content.Text
	case acp.UpdateToolCall:
		return fmt.Sprintf("%s:%s:%s", u.Kind, u.ToolCall.ToolCallID, u.ToolCall.Status)
	case acp.UpdateToolCallUpdate:
		return fmt.Sprintf("%s:%s:%s", u.Kind, u.ToolCallUpdate.ToolCallID, u.ToolCallUpdate.Status)
	case acp.UpdateCurrentMode:
		return u.Kind + ":" + u.CurrentModeID
	case acp.UpdateUsage:
		return fmt.Sprintf("%s:%d/%d", u.Kind, u.Used, u.Size)
	}
	return u.Kind
}

func describeAll(us []acp.SessionUpdate) []string {
	out := make([]string, 0, len(us))
	for _, u := range us {
		out = append(out, describe(u))
	}
	return out
}

func TestDurable_InitializeAdvertisesOnlyWithStore(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprint("durable=", durable), func(t *testing.T) {
			opts := Options{Provider: &scriptProvider{}, Model: "m"}
			if durable {
				st, err := store.Open(t.TempDir(), store.Options{})
				require.NoError(t, err)
				opts.Store = st
			}
			m := NewManager(&recClient{}, opts)
			r, err := m.Initialize(t.Context(), &acp.InitializeRequest{ProtocolVersion: 1})
			require.NoError(t, err)
			caps := r.AgentCapabilities
			assert.Equal(t, durable, caps.LoadSession)
			assert.Equal(t, durable, caps.SessionCapabilities.List != nil)
			assert.Equal(t, durable, caps.SessionCapabilities.Resume != nil)
			assert.Equal(t, durable, caps.SessionCapabilities.Delete != nil)
			assert.NotNil(t, caps.SessionCapabilities.Close)
			if !durable {
				_, err := m.LoadSession(t.Context(), &acp.LoadSessionRequest{SessionID: "x", Cwd: "/"})
				assert.Equal(t, acp.CodeMethodNotFound, codeOf(t, err).Code)
				_, err = m.ListSessions(t.Context(), &acp.ListSessionsRequest{})
				assert.Equal(t, acp.CodeMethodNotFound, codeOf(t, err).Code)
			}
		})
	}
}

// A reloaded session replays every kind of record before the load answers,
// and its next model request carries exactly the live conversation.
func TestDurable_LoadReplaysEverythingAndContinues(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	tc := func(id, name string, args map[string]any) model.Event {
		return callsResp(call{id: id, name: name, args: args})[0]
	}
	r1 := []model.Event{
		{Kind: model.EventReasoning, Text: "thinking"},
		{Kind: model.EventText, Text: "let me look"},
		tc("c1", "read_file", map[string]any{"file_path": "/a"}),
		tc("c2", "no_such_tool", map[string]any{}),
		tc("c3", "fail_tool", map[string]any{"x": 1}),
		{Kind: model.EventUsage, Usage: model.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}},
		{Kind: model.EventFinish, FinishReason: "tool_calls"},
	}
	r2 := callsResp(call{id: "c4", name: "todo_write", args: map[string]any{"todos": "x"}})
	r3 := textResp("first done")
	// Turn 2: five calls in one response pass the explicit cap of 4.
	r4 := callsResp(read("/p1"), read("/p2"), read("/p3"), read("/p4"), read("/p5"))
	opts := Options{Cap: loopdetect.Cap{Max: 4, Explicit: true}}
	n1 := startNode(t, dir, opts, r1, r2, r3, r4)
	sid := n1.newSession(t, cwd)

	resp, err := n1.prompt(t, sid, "first")
	require.NoError(t, err)
	require.Equal(t, acp.StopEndTurn, resp.StopReason)
	require.NoError(t, n1.cc.Call(t.Context(), acp.MethodSessionSetMode, &acp.SetSessionModeRequest{SessionID: sid, ModeID: ModeAutoEdit}, nil))
	require.NoError(t, n1.cc.Call(t.Context(), acp.MethodSessionSetConfigOption,
		map[string]any{"sessionId": sid, "configId": "model", "value": "other-model"}, nil))
	_, err = n1.prompt(t, sid, "second")
	requireLoopError(t, err, loopdetect.LoopTurnToolCallCap)
	live := n1.history(t, sid)
	n1.m.Close()

	n2 := startNode(t, dir, opts, textResp("third done"))
	lr, ups, err := n2.load(t, sid, cwd)
	require.NoError(t, err)
	assert.Equal(t, ModeAutoEdit, lr.Modes.CurrentModeID)
	require.Len(t, lr.ConfigOptions, 2)
	assert.Equal(t, "other-model", lr.ConfigOptions[1].CurrentValue)

	want := []string{
		"current_mode_update:yolo",
		"user_message_chunk:first",
		"usage_update:15/131072",
		"agent_thought_chunk:thinking",
		"agent_message_chunk:let me look",
		"tool_call:c1:in_progress", "tool_call_update:c1:completed",
		"tool_call:c2:pending", "tool_call_update:c2:failed",
		"tool_call:c3:in_progress", "tool_call_update:c3:failed",
		"tool_call:c4:completed", // todo_write: its result, shown whole
		"plan",
		"agent_message_chunk:first done",
		"current_mode_update:auto-edit",
		"user_message_chunk:second",
	}
	got := describeAll(ups)
	require.GreaterOrEqual(t, len(got), len(want)+10, got)
	assert.Equal(t, want, got[:len(want)])
	// The five skipped calls: a pending frame, then failed with the skip text.
	for i, d := range got[len(want):] {
		prefix := "tool_call:"
		if i%2 == 1 {
			prefix = "tool_call_update:"
		}
		assert.True(t, strings.HasPrefix(d, prefix), d)
	}
	assert.Len(t, got[len(want):], 10)
	last := ups[len(ups)-1].ToolCallUpdate
	require.NotNil(t, last)
	assert.Equal(t, loopdetect.LoopDetectedSkipMessage, last.Content[0].Content.Text)
	// Content of the failed and unknown calls is what the client saw live.
	assert.Contains(t, ups[8].ToolCallUpdate.Content[0].Content.Text, "not found in registry")
	assert.Equal(t, "boom: disk on fire", ups[10].ToolCallUpdate.Content[0].Content.Text)
	assert.Equal(t, testPlan, ups[12].Entries)

	// The conversation continues with the full history, the loop context
	// leading the next prompt, on the restored model.
	resp, err = n2.prompt(t, sid, "third")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	require.Len(t, n2.prov.requests, 1)
	req := n2.prov.requests[0]
	assert.Equal(t, "other-model", req.Model)
	wantMsgs := append(slices.Clone(live), model.Message{
		Role: model.RoleUser, Content: loopdetect.LoopDetectedContextMessage + "\n\nthird",
	})
	assert.Equal(t, wantMsgs, req.Messages)
	// New ACP toolCallIds do not collide with the replayed ones.
	s := n2.m.session(sid)
	require.NotNil(t, s)
	require.NoError(t, s.acquire(t.Context()))
	assert.NotEqual(t, "c1", s.newToolCallID("c1"))
	s.release()
}

// seedSessions writes n transcripts in the store's documented layout
// (<dir>/sessions/<id>.jsonl, one JSON Record a line), one millisecond
// apart: session i has cwd cwds[i%len(cwds)] and the prompt "prompt i".
// Store.Open then builds the index from the files, which is much faster
// than n Creates (each rewrites the whole index).
func seedSessions(t *testing.T, dir string, n int, cwds ...string) {
	t.Helper()
	sessions := filepath.Join(dir, "sessions")
	require.NoError(t, os.MkdirAll(sessions, 0o700))
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("seed-%04d", i)
		at := base.Add(time.Duration(i) * time.Millisecond)
		var buf []byte
		for _, rec := range []store.Record{
			{V: store.Version, T: at, Kind: store.KindMeta, Meta: &store.SessionMeta{ID: id, Cwd: cwds[i%len(cwds)], CreatedAt: at}},
			{V: store.Version, T: at, Kind: store.KindUser, Prompt: []acp.ContentBlock{acp.TextBlock(fmt.Sprintf("prompt %d", i))}},
		} {
			b, err := json.Marshal(rec)
			require.NoError(t, err)
			buf = append(append(buf, b...), '\n')
		}
		require.NoError(t, os.WriteFile(filepath.Join(sessions, id+".jsonl"), buf, 0o600))
	}
}

// listAll walks session/list to the end and returns the sessions and the
// number of pages.
func (n *node) listAll(t *testing.T, cwd string) ([]acp.SessionInfo, int) {
	t.Helper()
	var all []acp.SessionInfo
	pages, cursor := 0, ""
	for {
		var r acp.ListSessionsResponse
		require.NoError(t, n.cc.Call(t.Context(), acp.MethodSessionList, &acp.ListSessionsRequest{Cwd: cwd, Cursor: cursor}, &r))
		pages++
		all = append(all, r.Sessions...)
		if r.NextCursor == "" {
			return all, pages
		}
		require.Less(t, pages, 100, "list does not end")
		cursor = r.NextCursor
	}
}

func TestDurable_ListPaginates1000(t *testing.T) {
	dir, cwdA, cwdB := t.TempDir(), t.TempDir(), t.TempDir()
	seedSessions(t, dir, 1000, cwdA, cwdA, cwdB)
	n := startNode(t, dir, Options{})

	all, pages := n.listAll(t, "")
	assert.Equal(t, 1000/store.DefaultPageSize, pages)
	require.Len(t, all, 1000)
	for i, s := range all {
		// Newest first: seed 999 was updated last.
		idx := 999 - i
		require.Equal(t, fmt.Sprintf("seed-%04d", idx), s.SessionID)
		assert.Equal(t, fmt.Sprintf("prompt %d", idx), s.Title)
		assert.Equal(t, []string{cwdA, cwdA, cwdB}[idx%3], s.Cwd)
		ts, err := time.Parse(time.RFC3339Nano, s.UpdatedAt)
		require.NoError(t, err, s.UpdatedAt)
		if i > 0 {
			prev, _ := time.Parse(time.RFC3339Nano, all[i-1].UpdatedAt)
			assert.True(t, ts.Before(prev), "%s not before %s", ts, prev)
		}
	}

	onlyB, _ := n.listAll(t, cwdB)
	require.Len(t, onlyB, 333)
	for _, s := range onlyB {
		assert.Equal(t, cwdB, s.Cwd)
	}

	for _, tc := range []struct {
		name  string
		req   acp.ListSessionsRequest
		field string
	}{
		{"bad cursor", acp.ListSessionsRequest{Cursor: "not-a-cursor"}, "cursor"},
		{"relative cwd", acp.ListSessionsRequest{Cwd: "rel/dir"}, "cwd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := n.cc.Call(t.Context(), acp.MethodSessionList, &tc.req, nil)
			e := codeOf(t, err)
			assert.Equal(t, acp.CodeInvalidParams, e.Code)
			assert.Contains(t, fmt.Sprint(e.Data), tc.field)
		})
	}
}

// chunks are the user and agent text chunks of a replay, in order.
func chunks(ups []acp.SessionUpdate) []string {
	var out []string
	for _, u := range ups {
		if u.Kind == acp.UpdateUserMessageChunk || u.Kind == acp.UpdateAgentMessageChunk {
			out = append(out, describe(u))
		}
	}
	return out
}

// load → prompt → load again (in a new process each time) shows both turns;
// a load of a session live on the same connection replays it and keeps it.
func TestDurable_LoadPromptLoad(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	n1 := startNode(t, dir, Options{}, textResp("one"))
	sid := n1.newSession(t, cwd)
	_, err := n1.prompt(t, sid, "first")
	require.NoError(t, err)
	n1.m.Close()

	n2 := startNode(t, dir, Options{}, textResp("two"))
	_, ups, err := n2.load(t, sid, cwd)
	require.NoError(t, err)
	assert.Equal(t, []string{"user_message_chunk:first", "agent_message_chunk:one"}, chunks(ups))
	_, err = n2.prompt(t, sid, "second")
	require.NoError(t, err)
	both := []string{"user_message_chunk:first", "agent_message_chunk:one", "user_message_chunk:second", "agent_message_chunk:two"}

	// Same connection, session live: replayed from disk, still usable.
	_, ups, err = n2.load(t, sid, cwd)
	require.NoError(t, err)
	assert.Equal(t, both, chunks(ups))
	n2.m.Close()

	n3 := startNode(t, dir, Options{}, textResp("three"))
	_, ups, err = n3.load(t, sid, cwd)
	require.NoError(t, err)
	assert.Equal(t, both, chunks(ups))
	_, err = n3.prompt(t, sid, "third")
	require.NoError(t, err)
	require.Len(t, n3.prov.requests, 1)
	var texts []string
	for _, m := range n3.prov.requests[0].Messages {
		texts = append(texts, string(m.Role)+":"+m.Content)
	}
	assert.Equal(t, []string{"user:first", "assistant:one", "user:second", "assistant:two", "user:third"}, texts)
}

// session/resume restores the session without sending any update.
func TestDurable_ResumeSendsNothing(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	n1 := startNode(t, dir, Options{}, textResp("one"))
	sid := n1.newSession(t, cwd)
	_, err := n1.prompt(t, sid, "first")
	require.NoError(t, err)
	n1.m.Close()

	n2 := startNode(t, dir, Options{}, textResp("two"))
	var r acp.LoadSessionResponse
	require.NoError(t, n2.cc.Call(t.Context(), acp.MethodSessionResume, &acp.ResumeSessionRequest{SessionID: sid, Cwd: cwd}, &r))
	assert.Equal(t, ModeYolo, r.Modes.CurrentModeID)
	// Nothing of the conversation: only, announced after the reply, the
	// commands (whether that update is in yet depends on scheduling).
	for _, u := range n2.cc.Updates() {
		assert.Equal(t, acp.UpdateAvailableCommands, u.Update.Kind, "resume sent %s", u.Update.Kind)
	}
	_, err = n2.prompt(t, sid, "second")
	require.NoError(t, err)
	require.Len(t, n2.prov.requests, 1)
	assert.Len(t, n2.prov.requests[0].Messages, 3)
	for _, u := range n2.cc.Updates() {
		assert.NotEqual(t, acp.UpdateUserMessageChunk, u.Update.Kind, "no replay on resume")
	}
}

// session/close keeps the transcript (it can be loaded again); delete
// removes it from disk and from list, and deleting again or deleting an
// unknown id succeeds.
func TestDurable_CloseAndDelete(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	n := startNode(t, dir, Options{}, textResp("one"))
	sid := n.newSession(t, cwd)
	_, err := n.prompt(t, sid, "first")
	require.NoError(t, err)

	require.NoError(t, n.cc.Call(t.Context(), acp.MethodSessionClose, &acp.SessionIDRequest{SessionID: sid}, nil))
	assert.Nil(t, n.m.session(sid))
	_, err = n.prompt(t, sid, "after close")
	assert.Equal(t, acp.CodeInvalidParams, codeOf(t, err).Code)
	all, _ := n.listAll(t, "")
	require.Len(t, all, 1)
	assert.Equal(t, "first", all[0].Title)
	_, ups, err := n.load(t, sid, cwd)
	require.NoError(t, err)
	assert.Equal(t, []string{"user_message_chunk:first", "agent_message_chunk:one"}, chunks(ups))

	// Delete the (live again) session, twice, and an unknown one.
	for _, id := range []string{sid, sid, store.NewID()} {
		require.NoError(t, n.cc.Call(t.Context(), acp.MethodSessionDelete, &acp.SessionIDRequest{SessionID: id}, nil))
	}
	assert.Nil(t, n.m.session(sid))
	assert.False(t, n.st.Exists(sid))
	all, _ = n.listAll(t, "")
	assert.Empty(t, all)
	_, _, err = n.load(t, sid, cwd)
	e := codeOf(t, err)
	assert.Equal(t, acp.CodeResourceNotFound, e.Code)
	assert.Contains(t, e.Message, "session:"+sid)

	err = n.cc.Call(t.Context(), acp.MethodSessionDelete, &acp.SessionIDRequest{SessionID: "../escape"}, nil)
	assert.Equal(t, acp.CodeInvalidParams, codeOf(t, err).Code)
}

// Closing a session during a turn answers that turn `cancelled`, records
// its end, and leaves a transcript that loads.
func TestDurable_CloseDuringTurn(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	n := startNode(t, dir, Options{}, textResp("never"))
	n.prov.block = make(chan struct{})
	sid := n.newSession(t, cwd)
	got := make(chan *acp.PromptResponse, 1)
	go func() {
		r, _ := n.cc.Prompt(t.Context(), sid, "wait")
		got <- r
	}()
	require.Eventually(t, func() bool {
		n.prov.mu.Lock()
		defer n.prov.mu.Unlock()
		return len(n.prov.requests) == 1
	}, testTimeout, tick)
	require.NoError(t, n.cc.Call(t.Context(), acp.MethodSessionClose, &acp.SessionIDRequest{SessionID: sid}, nil))
	select {
	case r := <-got:
		require.NotNil(t, r)
		assert.Equal(t, acp.StopCancelled, r.StopReason)
	case <-time.After(testTimeout):
		t.Fatal("prompt never answered")
	}
	tr, err := n.st.Load(sid)
	require.NoError(t, err)
	end := tr.Records[len(tr.Records)-1]
	assert.Equal(t, store.KindTurnEnd, end.Kind)
	assert.Equal(t, acp.StopCancelled, end.StopReason)
}

// A second process (another Store and Manager on the same data directory)
// cannot load, resume or delete a session the first one holds.
func TestDurable_LockedByAnotherProcess(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	n1 := startNode(t, dir, Options{})
	sid := n1.newSession(t, cwd)
	n2 := startNode(t, dir, Options{})
	_, _, err := n2.load(t, sid, cwd)
	e := codeOf(t, err)
	assert.Equal(t, acp.CodeInternalError, e.Code)
	assert.Equal(t, "session "+sid+" is in use by another acpd process", e.Message)
	err = n2.cc.Call(t.Context(), acp.MethodSessionResume, &acp.ResumeSessionRequest{SessionID: sid, Cwd: cwd}, nil)
	assert.Equal(t, "session "+sid+" is in use by another acpd process", codeOf(t, err).Message)
	err = n2.cc.Call(t.Context(), acp.MethodSessionDelete, &acp.SessionIDRequest{SessionID: sid}, nil)
	assert.Equal(t, "session "+sid+" is in use by another acpd process", codeOf(t, err).Message)

	// Once the first process lets go, the second one loads it.
	require.NoError(t, n1.cc.Call(t.Context(), acp.MethodSessionClose, &acp.SessionIDRequest{SessionID: sid}, nil))
	_, _, err = n2.load(t, sid, cwd)
	require.NoError(t, err)
}

func TestDurable_LoadValidation(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	n := startNode(t, dir, Options{})
	sid := n.newSession(t, cwd)
	n.m.Close()
	n = startNode(t, dir, Options{})
	cases := []struct {
		name  string
		req   acp.LoadSessionRequest
		code  int
		field string
	}{
		{"relative cwd", acp.LoadSessionRequest{SessionID: sid, Cwd: "rel"}, acp.CodeInvalidParams, "cwd"},
		{"relative extra root", acp.LoadSessionRequest{SessionID: sid, Cwd: cwd, AdditionalDirectories: []string{"x"}}, acp.CodeInvalidParams, "additionalDirectories[0]"},
		{"id escaping the data dir", acp.LoadSessionRequest{SessionID: "../../etc/passwd", Cwd: cwd}, acp.CodeInvalidParams, "sessionId"},
		{"empty id", acp.LoadSessionRequest{SessionID: "", Cwd: cwd}, acp.CodeInvalidParams, "sessionId"},
		{"unknown id", acp.LoadSessionRequest{SessionID: store.NewID(), Cwd: cwd}, acp.CodeResourceNotFound, "uri"},
		{"unnamed MCP server", acp.LoadSessionRequest{SessionID: sid, Cwd: cwd, MCPServers: []acp.MCPServer{{Command: "/bin/true"}}}, acp.CodeInvalidParams, "mcpServers[0].name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.MCPServers == nil {
				tc.req.MCPServers = []acp.MCPServer{}
			}
			err := n.cc.Call(t.Context(), acp.MethodSessionLoad, &tc.req, nil)
			e := codeOf(t, err)
			assert.Equal(t, tc.code, e.Code, e.Message)
			assert.Contains(t, fmt.Sprint(e.Data), tc.field)
		})
	}
	// None of the failures took the session's lock.
	_, _, err := n.load(t, sid, cwd)
	require.NoError(t, err)
}

// A transcript write that fails answers the prompt -32603 naming the
// failure: before the turn starts (nothing runs) and in the middle of a
// turn (it stops after the batch).
func TestDurable_StoreWriteFailure(t *testing.T) {
	t.Run("before the turn", func(t *testing.T) {
		n := startNode(t, t.TempDir(), Options{}, textResp("unreached"))
		sid := n.newSession(t, t.TempDir())
		require.NoError(t, n.m.session(sid).w.Close())
		_, err := n.prompt(t, sid, "hello")
		e := codeOf(t, err)
		assert.Equal(t, acp.CodeInternalError, e.Code)
		assert.Contains(t, e.Message, "session "+sid+": writing the transcript failed")
		assert.Contains(t, e.Message, store.ErrClosed.Error())
		assert.Empty(t, n.prov.requests, "no model request without a recorded prompt")
	})
	t.Run("during a tool call", func(t *testing.T) {
		var n *node
		var sid string
		closer := func() *tools.Registry {
			return tools.NewRegistry(&fakeTool{name: "read_file", kind: acp.KindRead, run: func(context.Context) {
				_ = n.m.session(sid).w.Close()
			}})
		}
		n = startNode(t, t.TempDir(), Options{Tools: closer}, callsResp(read("/a")), textResp("unreached"))
		sid = n.newSession(t, t.TempDir())
		_, err := n.prompt(t, sid, "hello")
		e := codeOf(t, err)
		assert.Equal(t, acp.CodeInternalError, e.Code)
		assert.Contains(t, e.Message, "writing the transcript failed")
		assert.Len(t, n.prov.requests, 1, "the turn stops after the batch")
	})
}

// The repeated-failure guard's reminder and stop text are recorded as
// model-only messages: a reloaded session's history is the live one, and
// its next prompt carries no loop context (as live).
func TestDurable_RepeatedFailureReminderAndStop(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	reg := func() *tools.Registry {
		return tools.NewRegistry(&fakeTool{name: "read_file", kind: acp.KindRead, execErr: errors.New("File not found"), errType: "FILE_NOT_FOUND"})
	}
	opts := Options{Tools: reg, FailureGuard: loopdetect.FailureModeEnforce}
	n1 := startNode(t, dir, opts, callsResp(nDistinct("r1", 4)...), callsResp(nDistinct("r2", 4)...), callsResp(nDistinct("r3", 1)...))
	sid := n1.newSession(t, cwd)
	_, err := n1.prompt(t, sid, "go")
	requireLoopError(t, err, loopdetect.LoopRepeatedToolExecutionFailure)
	live := n1.history(t, sid)
	require.Equal(t, "System: "+loopdetect.RepeatedToolFailureStopMessage, live[len(live)-1].Content)
	n1.m.Close()

	n2 := startNode(t, dir, opts, textResp("ok"))
	_, ups, err := n2.load(t, sid, cwd)
	require.NoError(t, err)
	for _, u := range ups {
		if u.Content != nil {
			assert.NotContains(t, u.Content.Text, loopdetect.RepeatedToolFailureReminder, "reminders are not replayed")
		}
	}
	_, err = n2.prompt(t, sid, "next")
	require.NoError(t, err)
	want := append(slices.Clone(live), model.Message{Role: model.RoleUser, Content: "next"})
	assert.Equal(t, want, n2.prov.requests[0].Messages)
}

// Providers that reuse ids ("call_0" in every response) or send none get
// unique ACP toolCallIds; the transcript records calls under those, so a
// reloaded history pairs every result with its call and loses none.
func TestDurable_ReusedAndMissingProviderIDs(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	noID := []model.Event{
		{Kind: model.EventToolCall, ToolCall: model.ToolCall{Name: "read_file", Arguments: []byte(`{"file_path":"/c"}`)}},
		{Kind: model.EventFinish, FinishReason: "tool_calls"},
	}
	n1 := startNode(t, dir, Options{},
		callsResp(call{id: "call_0", name: "read_file", args: map[string]any{"file_path": "/a"}}),
		callsResp(call{id: "call_0", name: "read_file", args: map[string]any{"file_path": "/b"}}),
		noID, textResp("done"))
	sid := n1.newSession(t, cwd)
	_, err := n1.prompt(t, sid, "go")
	require.NoError(t, err)
	n1.m.Close()

	n2 := startNode(t, dir, Options{}, textResp("ok"))
	_, _, err = n2.load(t, sid, cwd)
	require.NoError(t, err)
	_, err = n2.prompt(t, sid, "next")
	require.NoError(t, err)
	msgs := n2.prov.requests[0].Messages
	var results []string
	ids := map[string]bool{}
	calls := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
		}
		if m.Role == model.RoleTool {
			require.True(t, calls[m.ToolCallID], "result %q answers a call", m.ToolCallID)
			require.False(t, ids[m.ToolCallID], "one result per id")
			ids[m.ToolCallID] = true
			results = append(results, m.Content)
		}
	}
	assert.Equal(t, []string{`ok {"file_path":"/a"}`, `ok {"file_path":"/b"}`, `ok {"file_path":"/c"}`}, results)
}
