package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// agentTC is an agent tool call as the model sends it.
func agentTC(id, desc, prompt, typ string) modeltest.ToolCall {
	args := map[string]string{"description": desc, "prompt": prompt}
	if typ != "" {
		args["subagent_type"] = typ
	}
	b, _ := json.Marshal(args)
	return modeltest.ToolCall{ID: id, Name: "agent", Arguments: string(b)}
}

// subRequests are the model requests of the subagent run whose prompt
// holds key, in order.
func subRequests(srv *modeltest.Server, key string) []modeltest.Request {
	var out []modeltest.Request
	for _, r := range srv.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" {
				if strings.Contains(m.Text(), key) {
					out = append(out, r)
				}
				break
			}
		}
	}
	return out
}

func offered(r modeltest.Request) []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// frames are the tool-call frames of a turn: every tool_call and
// tool_call_update, as (id, status, parent from _meta).
type frame struct{ id, status, parent string }

func toolFrames(ns []acp.SessionNotification) []frame {
	var out []frame
	for _, n := range ns {
		switch u := n.Update; {
		case u.ToolCall != nil:
			p, _ := u.ToolCall.Meta[acp.MetaParentToolCallID].(string)
			out = append(out, frame{u.ToolCall.ToolCallID, string(u.ToolCall.Status), p})
		case u.ToolCallUpdate != nil:
			p, _ := u.ToolCallUpdate.Meta[acp.MetaParentToolCallID].(string)
			out = append(out, frame{u.ToolCallUpdate.ToolCallID, string(u.ToolCallUpdate.Status), p})
		}
	}
	return out
}

// finalContent is the text of the last update of call id.
func finalContent(ns []acp.SessionNotification, id string) (status acp.ToolCallStatus, text string) {
	for _, n := range ns {
		if u := n.Update.ToolCallUpdate; u != nil && u.ToolCallID == id && u.Status != "" {
			status, text = u.Status, ""
			for _, c := range u.Content {
				if c.Content != nil {
					text += c.Content.Text
				}
			}
		}
	}
	return status, text
}

// An Explore run through the built binary: its requests carry only the
// read-only tools and none of the parent's conversation; its tool call is
// shown nested under the agent call; its answer reaches the parent as the
// tool result; session/load replays the run as the editor first saw it.
func TestE2E_SubagentExplore(t *testing.T) {
	cwd := t.TempDir()
	cfg := filepath.Join(cwd, "config.go")
	require.NoError(t, os.WriteFile(cfg, []byte("package main\nconst port = 8080\n"), 0o644))
	const key = "EXPLORE-TASK-17"
	d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{
		{Text: "I will delegate.", ToolCalls: []modeltest.ToolCall{agentTC("call_agent", "Find the port", key+": where is the port set? Report the path.", "Explore")}},
		{Text: "The port is 8080, set in config.go."},
	})
	d.model.Add(
		modeltest.Response{Match: key, Text: "Reading the config.", ToolCalls: []modeltest.ToolCall{readCall(cfg)}},
		modeltest.Response{Match: key, Text: "The port is set in " + cfg + ":2 (const port = 8080)."},
	)
	sid := d.session(t)
	skip := len(d.cc.Updates())
	resp, err := d.cc.Prompt(t.Context(), sid, "PARENT-SECRET: which port does the server use?")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)

	subs := subRequests(d.model, key)
	require.Len(t, subs, 2)
	for _, r := range subs {
		assert.Equal(t, []string{"read_file", "list_directory", "glob", "grep_search", "web_fetch"}, offered(r))
		for _, m := range r.Messages {
			assert.NotContains(t, m.Text(), "PARENT-SECRET", "none of the parent's conversation")
			assert.NotContains(t, m.Text(), "I will delegate")
		}
	}
	require.Len(t, subs[0].Messages, 2, "the system prompt and the task")
	assert.Contains(t, subs[0].Messages[0].Text(), "You are read-only")
	assert.Equal(t, key+": where is the port set? Report the path.", subs[0].Messages[1].Text())
	reqs := d.model.Requests()
	last := reqs[len(reqs)-1].Messages
	answer := last[len(last)-1]
	assert.Equal(t, "tool", answer.Role)
	assert.Equal(t, "call_agent", answer.ToolCallID)
	assert.Equal(t, "The port is set in "+cfg+":2 (const port = 8080).", answer.Text())
	assert.Contains(t, offered(reqs[0]), "agent")

	live := d.cc.Updates()[skip:]
	assert.Equal(t, "I will delegate.The port is 8080, set in config.go.", acptest.AgentText(live, sid),
		"the subagent's text is not the assistant's")
	frames := toolFrames(live)
	require.Len(t, frames, 4, "%v", frames)
	assert.Equal(t, frame{"call_agent", "in_progress", ""}, frames[0])
	subID := frames[1].id
	assert.Equal(t, []frame{{subID, "in_progress", "call_agent"}, {subID, "completed", "call_agent"}, {"call_agent", "completed", ""}}, frames[1:])
	for _, n := range live {
		if tc := n.Update.ToolCall; tc != nil && tc.ToolCallID == "call_agent" {
			assert.Equal(t, "Find the port", tc.Title)
			assert.Equal(t, acp.KindOther, tc.Kind)
		}
		assert.NotEqual(t, acp.UpdateAgentThoughtChunk, n.Update.Kind)
	}
	st, text := finalContent(live, "call_agent")
	assert.Equal(t, acp.StatusCompleted, st)
	assert.Equal(t, answer.Text(), text)

	// The replay shows the same calls, nested the same way.
	before := len(d.cc.Updates())
	var lr acp.LoadSessionResponse
	require.NoError(t, d.cc.Call(t.Context(), acp.MethodSessionLoad, acp.LoadSessionRequest{SessionID: sid, Cwd: cwd, MCPServers: []acp.MCPServer{}}, &lr))
	replayed := toolFrames(d.cc.Updates()[before:])
	assert.Equal(t, frames, replayed)
}

// A .claude/agents agent runs with exactly its tools (Claude's names
// mapped to acpd's) and its own prompt; /agents lists it, and a broken
// file with its file:line.
func TestE2E_SubagentFromClaudeFile(t *testing.T) {
	cwd := t.TempDir()
	dir := filepath.Join(cwd, ".claude", "agents")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "reviewer.md"), []byte(`---
name: reviewer
description: Reviews a change for bugs
tools: Read, Grep, Bash, Frobnicate
color: red
---
You are REVIEWER-PROMPT-42. Read the diff and list bugs.
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.md"), []byte("---\nname: broken\n---\nno description\n"), 0o644))
	const key = "REVIEW-TASK-9"
	d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{
		{ToolCalls: []modeltest.ToolCall{agentTC("call_rev", "Review main.go", key+": review main.go", "reviewer")}},
		{Text: "No bugs."},
	})
	d.model.Add(modeltest.Response{Match: key, Text: "No bugs found."})
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "review my change")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	subs := subRequests(d.model, key)
	require.Len(t, subs, 1)
	assert.Equal(t, []string{"read_file", "grep_search", "run_shell_command"}, offered(subs[0]))
	sys := subs[0].Messages[0].Text()
	assert.True(t, strings.HasPrefix(sys, "You are REVIEWER-PROMPT-42. Read the diff and list bugs."), "%s", sys)
	assert.Contains(t, sys, "Workspace roots", "the session's environment follows the agent's prompt")
	assert.Contains(t, d.model.Requests()[0].Tools[len(d.model.Requests()[0].Tools)-1].Function.Description,
		"- reviewer: Reviews a change for bugs (Tools: read_file, grep_search, run_shell_command)")

	skip := len(d.cc.Updates())
	_, err = d.cc.Prompt(t.Context(), sid, "/agents")
	require.NoError(t, err)
	out := acptest.AgentText(d.cc.Updates()[skip:], sid)
	assert.Contains(t, out, "- reviewer (project, "+filepath.Join(dir, "reviewer.md")+"): Reviews a change for bugs\n  tools: read_file, grep_search, run_shell_command")
	assert.Contains(t, out, filepath.Join(dir, "broken.md")+`:1: missing the required key "description"; agent left out`)
	assert.Contains(t, out, filepath.Join(dir, "reviewer.md")+`:4: unknown tool "Frobnicate"; left out of the agent's tools`)
	assert.Contains(t, out, "- Explore (built-in)")
}

// A subagent that repeats one call past 100 calls is stopped by its own
// guard (adaptive cap, stuck); the agent call fails saying why, the
// parent's turn goes on and ends end_turn, and `acpd stats` lists the run
// as a turn of its own linked to its parent turn.
func TestE2E_SubagentStoppedByItsOwnGuard(t *testing.T) {
	cwd := t.TempDir()
	same := filepath.Join(cwd, "same.txt")
	require.NoError(t, os.WriteFile(same, []byte("same"), 0o644))
	const key = "LOOPING-TASK-3"
	d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{
		{ToolCalls: []modeltest.ToolCall{agentTC("call_loop", "Read it", key+": read same.txt until it changes", "")}},
		{Text: "The subagent got stuck; I will stop here."},
	})
	for i := range 105 {
		c := readCall(same)
		c.ID = fmt.Sprintf("call_same_%d", i)
		d.model.Add(modeltest.Response{Match: key, ToolCalls: []modeltest.ToolCall{c}, WholeArguments: true})
	}
	sid := d.session(t)
	skip := len(d.cc.Updates())
	resp, err := d.cc.Prompt(t.Context(), sid, "go")
	require.NoError(t, err, "the parent's turn is not stopped")
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Equal(t, 101, d.model.ServedMatching(key), "the 101st call's batch stopped the run")
	live := d.cc.Updates()[skip:]
	st, text := finalContent(live, "call_loop")
	assert.Equal(t, acp.StatusFailed, st)
	assert.Contains(t, text, "loop type turn_tool_call_cap, cap reason stuck, 101 tool calls, read_file repeated 101 times")
	completed, failed := statusCounts(live)
	assert.Equal(t, 100, completed)
	assert.Equal(t, 2, failed, "the skipped call and the agent call")
	reqs := d.model.Requests()
	last := reqs[len(reqs)-1].Messages
	assert.Equal(t, text, last[len(last)-1].Text(), "the parent's model is told why")

	var rep struct {
		Turns []struct {
			Turn, Run, ToolCalls         int
			Agent, ParentToolCallID      string
			Outcome, LoopType, CapReason string
		}
	}
	statsJSON(t, d.dataDir, &rep)
	require.Len(t, rep.Turns, 2, "%+v", rep.Turns)
	assert.Equal(t, 1, rep.Turns[0].ToolCalls, "the parent's guard counted the agent call once")
	assert.Equal(t, "end_turn", rep.Turns[0].Outcome)
	r := rep.Turns[1]
	assert.Equal(t, []any{1, 1, "general-purpose", "call_loop", 101, "loop", "turn_tool_call_cap", "stuck"},
		[]any{r.Turn, r.Run, r.Agent, r.ParentToolCallID, r.ToolCalls, r.Outcome, r.LoopType, r.CapReason})
}

// Two agent calls of one response run concurrently: each run's first
// request waits, in the model server, for the other's to arrive, which can
// happen only if both runs are under way at once.
func TestE2E_SubagentsOverlap(t *testing.T) {
	d := startDaemon(t, nil, []modeltest.Response{
		{ToolCalls: []modeltest.ToolCall{agentTC("call_a", "Task A", "PAR-TASK-A: answer A", "Explore"), agentTC("call_b", "Task B", "PAR-TASK-B: answer B", "Explore")}},
		{Text: "both done"},
	})
	d.model.Add(
		modeltest.Response{Match: "PAR-TASK-A", Text: "answer A"},
		modeltest.Response{Match: "PAR-TASK-B", Text: "answer B"},
	)
	arrived := map[string]chan struct{}{"PAR-TASK-A": make(chan struct{}), "PAR-TASK-B": make(chan struct{})}
	var once sync.Map
	var overlapped sync.Map
	d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		for key, ch := range arrived {
			if len(r.Messages) < 2 || !strings.Contains(r.Messages[1].Text(), key) {
				continue
			}
			if _, dup := once.LoadOrStore(key, true); !dup {
				close(ch)
			}
			other := "PAR-TASK-A"
			if key == other {
				other = "PAR-TASK-B"
			}
			select {
			case <-arrived[other]:
				overlapped.Store(key, true)
			case <-time.After(15 * time.Second):
			}
		}
		return modeltest.Response{}, false
	})
	sid := d.session(t)
	skip := len(d.cc.Updates())
	resp, err := d.cc.Prompt(t.Context(), sid, "do both")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	for _, key := range []string{"PAR-TASK-A", "PAR-TASK-B"} {
		_, ok := overlapped.Load(key)
		assert.True(t, ok, "run %s did not overlap the other", key)
	}
	live := d.cc.Updates()[skip:]
	for id, want := range map[string]string{"call_a": "answer A", "call_b": "answer B"} {
		st, text := finalContent(live, id)
		assert.Equal(t, acp.StatusCompleted, st)
		assert.Equal(t, want, text)
	}
	reqs := d.model.Requests()
	var results []string
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "tool" {
			results = append(results, m.ToolCallID+"="+m.Text())
		}
	}
	assert.Equal(t, []string{"call_a=answer A", "call_b=answer B"}, results, "results in call order")
}

// shellTC runs command with run_shell_command.
func shellTC(command string) modeltest.ToolCall {
	b, _ := json.Marshal(map[string]string{"command": command})
	return modeltest.ToolCall{Name: "run_shell_command", Arguments: string(b)}
}

// procsWith lists the pids of processes whose command line holds marker.
func procsWith(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// session/cancel while two subagents run commands cancels both at once: the
// prompt answers cancelled, and no command is left running.
func TestE2E_SubagentCancel(t *testing.T) {
	// Commands run in acpd itself, not in an editor's terminal.
	d := startDaemon(t, &acptest.FakeClient{}, []modeltest.Response{
		{ToolCalls: []modeltest.ToolCall{agentTC("call_a", "Wait A", "CANCEL-TASK-A", ""), agentTC("call_b", "Wait B", "CANCEL-TASK-B", "")}},
	})
	marker := fmt.Sprintf("37.%d", os.Getpid()%1000+1000)
	d.model.Add(
		modeltest.Response{Match: "CANCEL-TASK-A", ToolCalls: []modeltest.ToolCall{shellTC("sleep " + marker + "1")}},
		modeltest.Response{Match: "CANCEL-TASK-B", ToolCalls: []modeltest.ToolCall{shellTC("sleep " + marker + "2")}},
	)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := d.cc.InitializeWith(ctx, acp.ClientCapabilities{})
	require.NoError(t, err)
	sid, err := d.cc.NewSession(ctx, d.cwd)
	require.NoError(t, err)
	waitCommands(t, d, sid, 1)
	done := make(chan *acp.PromptResponse, 1)
	go func() {
		r, err := d.cc.Prompt(ctx, sid, "wait for both")
		assert.NoError(t, err)
		done <- r
	}()
	require.Eventually(t, func() bool {
		return len(procsWith(marker+"1")) > 0 && len(procsWith(marker+"2")) > 0
	}, 20*time.Second, 10*time.Millisecond, "both subagents' commands started")
	require.NoError(t, d.cc.Cancel(sid))
	select {
	case r := <-done:
		require.NotNil(t, r)
		assert.Equal(t, acp.StopCancelled, r.StopReason)
	case <-time.After(15 * time.Second):
		t.Fatal("the prompt did not answer after session/cancel")
	}
	assert.Empty(t, procsWith(marker), "a cancelled subagent leaves no process behind")
	live := d.cc.Updates()
	for _, id := range []string{"call_a", "call_b"} {
		st, _ := finalContent(live, id)
		assert.Equal(t, acp.StatusFailed, st, id)
	}
	assert.Equal(t, 1, d.model.ServedMatching("CANCEL-TASK-A"))
	assert.Equal(t, 1, d.model.ServedMatching("CANCEL-TASK-B"))
	assert.True(t, slices.ContainsFunc(toolFrames(live), func(f frame) bool { return f.parent == "call_b" && f.status == "failed" }))
}
