package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
	var permMu sync.Mutex
	var perms []*acp.RequestPermissionRequest
	permCount := func() int {
		permMu.Lock()
		defer permMu.Unlock()
		return len(perms)
	}
	fc := &acptest.FakeClient{
		RequestPermissionFunc: func(_ context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
			permMu.Lock()
			perms = append(perms, r)
			permMu.Unlock()
			return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: "proceed_once"}}, nil
		},
	}
	d := startDaemon(t, fc, nil, "--approval-mode", "default")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	init, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	assert.True(t, init.AgentCapabilities.MCPCapabilities.HTTP)

	assert.True(t, init.AgentCapabilities.MCPCapabilities.SSE)

	// MCP over ACP (the unstable {type:"acp"} entry) is refused with
	// -32602 naming the server and why.
	var refused acp.NewSessionResponse
	err = d.cc.Call(ctx, acp.MethodSessionNew, map[string]any{"cwd": d.cwd, "mcpServers": []any{
		map[string]any{"type": "acp", "name": "inner", "serverId": "s1"},
	}}, &refused)
	var e *acp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, acp.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, `"inner": MCP over ACP (type "acp") is not supported`)

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
	require.Equal(t, 1, permCount())
	permMu.Lock()
	assert.Equal(t, "mcp", perms[0].ToolCall.Meta["provenance"])
	permMu.Unlock()
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
			if tc := n.Update.ToolCallUpdate; tc != nil && tc.Status == acp.StatusInProgress && permCount() == 2 {
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

// TestE2E_MCPOverHTTP passes a streamable HTTP MCP server on loopback to
// session/new and calls its tool through a turn; the configured headers
// reach the server.
func TestE2E_MCPOverHTTP(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "web", Version: "1.0.0"}, nil)
	srv.AddTool(&sdk.Tool{
		Name:        "whoami",
		Description: "Greets with the caller's X-Api-Key header.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"greeting":{"type":"string"}},"required":["greeting"]}`),
	}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in struct {
			Greeting string `json:"greeting"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		key := ""
		if req.Extra != nil {
			key = req.Extra.Header.Get("X-Api-Key")
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Greeting + " key=" + key}}}, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)

	d := startDaemon(t, nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	var ns acp.NewSessionResponse
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: d.cwd, MCPServers: []acp.MCPServer{
		{Type: "http", Name: "web", URL: ts.URL, Headers: []acp.HTTPHeader{{Name: "X-Api-Key", Value: "s3cret"}}},
	}}, &ns))
	d.model.Add(
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: "mcp__web__whoami", Arguments: `{"greeting":"hello"}`}}},
		modeltest.Response{Text: "greeted"},
	)
	resp, err := d.cc.Prompt(ctx, ns.SessionID, "who am i")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.Contains(t, strings.Join(toolText(d.cc.Updates(), acp.StatusCompleted), "\n"), "hello key=s3cret")
}

// TestE2E_SIGTERMDuringTurn: SIGTERM cancels every turn and the daemon exits
// 0 within a second, also with a shell command running.
func TestE2E_SIGTERMDuringTurn(t *testing.T) {
	d := startDaemon(t, nil, []modeltest.Response{{ToolCalls: []modeltest.ToolCall{{Name: "run_shell_command", Arguments: `{"command":"sleep 30"}`}}}})
	sid := d.session(t)
	go func() { _, _ = d.cc.Prompt(t.Context(), sid, "sleep") }()
	waitFor(t, func() bool {
		for _, n := range d.cc.Updates() {
			if tc := n.Update.ToolCall; tc != nil && tc.Status == acp.StatusInProgress {
				return true
			}
		}
		return false
	})
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait() }()
	start := time.Now()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status 0")
		assert.Less(t, time.Since(start), time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("acpd did not exit after SIGTERM")
	}
	d.waited = true
}
