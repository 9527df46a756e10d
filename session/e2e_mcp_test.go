package session_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

func buildMCPServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpserver")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/acpd/acpd/session/mcp/testdata/mcpserver").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

func toolText(updates []acp.SessionNotification, status acp.ToolCallStatus) []string {
	var out []string
	for _, n := range updates {
		if u := n.Update.ToolCallUpdate; u != nil && u.Status == status {
			for _, c := range u.Content {
				if c.Content != nil {
					out = append(out, c.Content.Text)
				}
			}
		}
	}
	return out
}

// TestE2E_MCP runs a real stdio MCP server passed in session/new through
// turns of the built daemon: listing, a call with permission, a failing
// server reported in the session, cancellation mid-call, a crash with one
// restart, and teardown with no leftover process.
func TestE2E_MCP(t *testing.T) {
	server := buildMCPServer(t)
	var perms []*acp.RequestPermissionRequest
	fc := &acptest.FakeClient{
		RequestPermissionFunc: func(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
			perms = append(perms, r)
			return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: "proceed_once"}}, nil
		},
	}
	d := startDaemon(t, fc, nil, "--approval-mode", "default")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	init, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	assert.True(t, init.AgentCapabilities.MCPCapabilities.HTTP)

	// An SSE server is refused with -32602 naming it.
	var sse acp.NewSessionResponse
	err = d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: d.cwd, MCPServers: []acp.MCPServer{
		{Type: "sse", Name: "old", URL: "http://127.0.0.1:1/sse", Headers: []acp.HTTPHeader{}},
	}}, &sse)
	var e *acp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, acp.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, `"old"`)

	var ns acp.NewSessionResponse
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: d.cwd, MCPServers: []acp.MCPServer{
		{Name: "t", Command: server, Args: []string{}, Env: []acp.EnvVariable{}},
		{Name: "broken", Command: filepath.Join(d.cwd, "no-such-server"), Args: []string{}, Env: []acp.EnvVariable{}},
	}}, &ns))
	sid := ns.SessionID

	call := func(tool, args string) modeltest.Response {
		return modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: "mcp__t__" + tool, Arguments: args}}}
	}
	d.model.Add(call("echo", `{"text":"hi there"}`), modeltest.Response{Text: "echoed"})
	resp, err := d.cc.Prompt(ctx, sid, "echo")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Contains(t, acptest.AgentText(d.cc.Updates(), sid), `"broken"`, "the failed server is reported in the session")
	assert.Contains(t, strings.Join(toolText(d.cc.Updates(), acp.StatusCompleted), "\n"), "hi there")
	require.Len(t, perms, 1)
	assert.Equal(t, "mcp", perms[0].ToolCall.Meta["provenance"])
	tools := d.model.Requests()[0].Tools
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Function.Name)
	}
	assert.Contains(t, names, "mcp__t__echo")

	// Cancel during a slow call.
	d.model.Add(call("slow", `{"ms":30000}`))
	got := make(chan *acp.PromptResponse, 1)
	go func() {
		r, _ := d.cc.Prompt(ctx, sid, "slow")
		got <- r
	}()
	waitFor(t, func() bool {
		for _, n := range d.cc.Updates() {
			if tc := n.Update.ToolCallUpdate; tc != nil && tc.Status == acp.StatusInProgress && len(perms) == 2 {
				return true
			}
		}
		return false
	})
	start := time.Now()
	require.NoError(t, d.cc.Cancel(sid))
	select {
	case r := <-got:
		require.NotNil(t, r)
		assert.Equal(t, acp.StopCancelled, r.StopReason)
		assert.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled MCP call never answered")
	}

	// A crash is reported on the call, the server restarted once, and the
	// next call works.
	d.model.Add(call("crash", `{}`), call("echo", `{"text":"back"}`), modeltest.Response{Text: "recovered"})
	_, err = d.cc.Prompt(ctx, sid, "crash")
	require.NoError(t, err)
	failed := toolText(d.cc.Updates(), acp.StatusFailed)
	assert.Contains(t, strings.Join(failed, "\n"), `"t"`)
	assert.Contains(t, strings.Join(toolText(d.cc.Updates(), acp.StatusCompleted), "\n"), "back")

	// The server's pid, after the restart, to check teardown.
	d.model.Add(call("pid", `{}`), modeltest.Response{Text: "ok"})
	_, err = d.cc.Prompt(ctx, sid, "pid")
	require.NoError(t, err)
	done := toolText(d.cc.Updates(), acp.StatusCompleted)
	pid, err := strconv.Atoi(strings.TrimSpace(done[len(done)-1]))
	require.NoError(t, err, done)

	// Teardown: closing stdin ends the daemon and its MCP servers.
	require.NoError(t, d.stdin.Close())
	waitFor(t, func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
