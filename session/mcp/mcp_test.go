package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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
	"github.com/acpd/acpd/session/tools"
)

// serverBin is the test MCP server (the official SDK's), badServerBin the
// hand-written misbehaving one; TestMain builds both once.
var serverBin, badServerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpserver")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "mcpserver")
	badServerBin = filepath.Join(dir, "badserver")
	for bin, pkg := range map[string]string{serverBin: "./testdata/mcpserver", badServerBin: "./testdata/badserver"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building the test MCP server:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func stdioServer(name string, args ...string) acp.MCPServer {
	return acp.MCPServer{Name: name, Command: serverBin, Args: args}
}

func testOptions(t *testing.T) (Options, *acptest.SyncBuffer) {
	logs := &acptest.SyncBuffer{}
	return Options{
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ConnectTimeout: 20 * time.Second,
		StopTimeout:    2 * time.Second,
	}, logs
}

// connect starts servers and closes them at the end of the test.
func connect(t *testing.T, servers ...acp.MCPServer) (*Set, []error) {
	t.Helper()
	opts, _ := testOptions(t)
	set, errs := Connect(t.Context(), servers, opts)
	require.NotNil(t, set, "errors: %v", errs)
	t.Cleanup(func() { assert.NoError(t, set.Close()) })
	return set, errs
}

func findTool(t *testing.T, set *Set, name string) tools.Tool {
	t.Helper()
	for _, tl := range set.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	require.FailNowf(t, "tool not found", "%s", name)
	return nil
}

// run builds and executes a call with a plain tools.Env.
func run(t *testing.T, ctx context.Context, tl tools.Tool, args string) tools.Result {
	t.Helper()
	call, err := tl.Build(&tools.Env{}, json.RawMessage(args))
	require.NoError(t, err)
	return call.Execute(ctx, &tools.Env{})
}

func pidOf(t *testing.T, set *Set, server string) int {
	t.Helper()
	res := run(t, t.Context(), findTool(t, set, "mcp__"+server+"__pid"), `{}`)
	require.NoError(t, res.Err)
	pid, err := strconv.Atoi(res.LLMContent)
	require.NoError(t, err)
	return pid
}

// processGone reports whether pid no longer runs (absent or a zombie left
// for an init that does not reap).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// Field 3, after the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] == 'Z'
	}
	return false
}

func TestValidateServers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		servers []acp.MCPServer
		field   string // "" means valid
		inMsg   string
	}{
		{name: "empty list", servers: []acp.MCPServer{}},
		{name: "stdio without env", servers: []acp.MCPServer{{Name: "a", Command: "/bin/true"}}},
		{name: "http", servers: []acp.MCPServer{{Type: "http", Name: "h", URL: "https://example.com/mcp", Headers: []acp.HTTPHeader{{Name: "Authorization", Value: "Bearer x"}}}}},
		{name: "sse", servers: []acp.MCPServer{{Name: "a", Command: "/bin/true"}, {Type: "sse", Name: "old", URL: "http://x/sse"}}},
		{name: "sse bad url", servers: []acp.MCPServer{{Type: "sse", Name: "old", URL: "x/sse"}}, field: "mcpServers[0].url", inMsg: `"old"`},
		{name: "mcp over acp refused", servers: []acp.MCPServer{{Name: "a", Command: "/bin/true"}, {Type: "acp", Name: "inner"}}, field: "mcpServers[1].type", inMsg: `"inner": MCP over ACP (type "acp") is not supported`},
		{name: "unknown type", servers: []acp.MCPServer{{Type: "carrier-pigeon", Name: "weird"}}, field: "mcpServers[0].type", inMsg: `"weird"`},
		{name: "no name", servers: []acp.MCPServer{{Command: "/bin/true"}}, field: "mcpServers[0].name", inMsg: "index 0"},
		{name: "duplicate name", servers: []acp.MCPServer{{Name: "a", Command: "/bin/true"}, {Name: "a", Command: "/bin/true"}}, field: "mcpServers[1].name", inMsg: `"a"`},
		{name: "stdio without command", servers: []acp.MCPServer{{Name: "nocmd"}}, field: "mcpServers[0].command", inMsg: `"nocmd"`},
		{name: "bad env name", servers: []acp.MCPServer{{Name: "e", Command: "/bin/true", Env: []acp.EnvVariable{{Name: "A=B", Value: "x"}}}}, field: "mcpServers[0].env[0].name", inMsg: `"e"`},
		{name: "http bad url", servers: []acp.MCPServer{{Type: "http", Name: "h", URL: "ftp://x"}}, field: "mcpServers[0].url", inMsg: `"h"`},
		{name: "http relative url", servers: []acp.MCPServer{{Type: "http", Name: "h", URL: "/mcp"}}, field: "mcpServers[0].url", inMsg: `"h"`},
		{name: "bad header name", servers: []acp.MCPServer{{Type: "http", Name: "h", URL: "http://x", Headers: []acp.HTTPHeader{{Name: "Bad Header", Value: "v"}}}}, field: "mcpServers[0].headers[0].name", inMsg: `"h"`},
		{name: "header value with newline", servers: []acp.MCPServer{{Type: "http", Name: "h", URL: "http://x", Headers: []acp.HTTPHeader{{Name: "X", Value: "a\r\nB: c"}}}}, field: "mcpServers[0].headers[0].value", inMsg: `"h"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateServers(tt.servers)
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var ae *acp.Error
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, acp.CodeInvalidParams, ae.Code)
			assert.Equal(t, map[string]any{"field": tt.field}, ae.Data)
			assert.Contains(t, ae.Message, tt.inMsg)
		})
	}
}

func TestConnect_RejectsInvalidBeforeStarting(t *testing.T) {
	t.Parallel()
	opts, logs := testOptions(t)
	set, errs := Connect(t.Context(), []acp.MCPServer{stdioServer("good"), {Type: "acp", Name: "legacy"}}, opts)
	require.Nil(t, set)
	require.Len(t, errs, 1)
	var ae *acp.Error
	require.ErrorAs(t, errs[0], &ae)
	assert.Equal(t, acp.CodeInvalidParams, ae.Code)
	assert.Contains(t, ae.Message, `"legacy"`)
	assert.NotContains(t, logs.String(), "mcp server connected", "nothing may start when the list is invalid")
}

func TestToolName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 80)
	tests := []struct {
		name, server, tool, want string
	}{
		{name: "plain", server: "files", tool: "read", want: "mcp__files__read"},
		{name: "sanitised", server: "my.server", tool: "do thing/now", want: "mcp__my_server__do_thing_now"},
		{name: "unicode", server: "é", tool: "t", want: "mcp_____t"},
		{name: "unicode per rune", server: "日本", tool: "ツール", want: "mcp__" + "__" + "__" + "___"},
		{name: "long", server: "srv", tool: long, want: "mcp__srv__" + strings.Repeat("x", 45) + "_" + nameHash("srv", long)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := toolName(tt.server, tt.tool)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), MaxToolNameLen)
			assert.Equal(t, got, toolName(tt.server, tt.tool), "deterministic")
		})
	}

	t.Run("collision", func(t *testing.T) {
		t.Parallel()
		used := map[string]bool{"mcp__a_b__t": true}
		got := uniqueName(toolName("a.b", "t"), "a.b", "t", used)
		assert.Equal(t, "mcp__a_b__t_"+nameHash("a.b", "t\x000"), got)
		free := uniqueName(toolName("c", "t"), "c", "t", used)
		assert.Equal(t, "mcp__c__t", free)
	})
}

func TestSet_ToolsListing(t *testing.T) {
	t.Parallel()
	// A page size of 3 makes the client follow tools/list pagination.
	set, errs := connect(t, stdioServer("test", "-page-size", "3"))
	require.Empty(t, errs)

	var names []string
	for _, tl := range set.Tools() {
		names = append(names, tl.Name())
	}
	want := []string{"add_tool", "ask_form", "ask_url", "crash", "dotted_name", "echo", "env", "everything", "fail", "image", "loose", "needs_url", "pid", "progress", "resource", "slow", "spawn", "stats"}
	for i, w := range want {
		want[i] = "mcp__test__" + w
	}
	assert.Equal(t, ResourceToolName, names[len(names)-1], "the resource tool follows the servers' tools")
	names = names[:len(names)-1]
	slices.Sort(names)
	assert.Equal(t, want, names)

	echo := findTool(t, set, "mcp__test__echo")
	spec := echo.Spec()
	assert.Equal(t, "mcp__test__echo", spec.Name)
	assert.Equal(t, "Echoes its text argument.", spec.Description)
	assert.JSONEq(t, `{"type":"object","properties":{"text":{"type":"string"},"times":{"type":"integer","minimum":1}},"required":["text"],"additionalProperties":false}`, string(spec.Parameters))
	assert.Equal(t, acp.KindOther, echo.Kind())

	loose := findTool(t, set, "mcp__test__loose")
	assert.JSONEq(t, `{"type":"object"}`, string(loose.Spec().Parameters), "an invalid server schema falls back to any object")

	call, err := echo.Build(&tools.Env{}, json.RawMessage(`{"text":"hi"}`))
	require.NoError(t, err)
	assert.Equal(t, "test: echo", call.Title())
	assert.Empty(t, call.Locations())
	conf := call.Confirmation()
	assert.Equal(t, tools.ConfirmMCP, conf.Kind)
	assert.Equal(t, "mcp__test__echo", conf.Label)
	require.Len(t, conf.Content, 1)
	assert.Contains(t, conf.Content[0].Content.Text, `"text": "hi"`)

	want2 := map[string]any{"toolName": "mcp__test__echo", "provenance": "mcp", "serverId": "test", "mcpToolName": "echo"}
	fm, ok := call.(interface{ FrameMeta() map[string]any })
	require.True(t, ok, "calls carry frame meta")
	assert.Equal(t, want2, fm.FrameMeta())
	assert.Equal(t, want2, echo.(FrameMetaer).FrameMeta())

	st := set.Status()
	require.Len(t, st, 1)
	assert.Equal(t, Status{Name: "test", Type: "stdio", Connected: true, Tools: len(want), Prompts: 2, Resources: 2}, st[0])
}

func TestTool_Call(t *testing.T) {
	// Not parallel: the daemon environment is changed to prove the child
	// does not inherit it.
	t.Setenv("ACPD_TEST_SECRET", "leak")
	srv := stdioServer("test")
	srv.Env = []acp.EnvVariable{{Name: "ACPD_TEST_VAR", Value: "from-config"}}
	set, errs := connect(t, srv)
	require.Empty(t, errs)

	tests := []struct {
		name, tool, args string
		wantLLM          string
	}{
		{name: "arguments", tool: "echo", args: `{"text":"hi","times":3}`, wantLLM: "echo: hi hi hi"},
		{name: "configured env", tool: "env", args: `{"name":"ACPD_TEST_VAR"}`, wantLLM: "value=from-config"},
		{name: "daemon secrets not inherited", tool: "env", args: `{"name":"ACPD_TEST_SECRET"}`, wantLLM: "unset"},
		{name: "null args", tool: "pid", args: `null`},
		{name: "empty args", tool: "dotted_name", args: ``, wantLLM: "dotted"},
		{name: "invalid schema accepts any object", tool: "loose", args: `{"a":1}`, wantLLM: `got {"a":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, t.Context(), findTool(t, set, "mcp__test__"+tt.tool), tt.args)
			require.NoError(t, res.Err)
			if tt.wantLLM != "" {
				assert.Equal(t, tt.wantLLM, res.LLMContent)
				require.Len(t, res.Content, 1)
				assert.Equal(t, "content", res.Content[0].Type)
				assert.Equal(t, acp.TextBlock(tt.wantLLM), *res.Content[0].Content)
			}
		})
	}
}

func TestTool_BuildValidation(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, stdioServer("test"))
	require.Empty(t, errs)
	echo := findTool(t, set, "mcp__test__echo")

	tests := []struct {
		name, args string
		inErr      []string
	}{
		{name: "missing required", args: `{}`, inErr: []string{"mcp__test__echo", "invalid arguments", "text"}},
		{name: "wrong type", args: `{"text":5}`, inErr: []string{"/text", "string"}},
		{name: "below minimum", args: `{"text":"a","times":0}`, inErr: []string{"/times"}},
		{name: "extra property", args: `{"text":"a","nope":1}`, inErr: []string{"nope"}},
		{name: "not an object", args: `["text"]`, inErr: []string{"must be a JSON object"}},
		{name: "not JSON", args: `{"text":`, inErr: []string{"not valid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := echo.Build(&tools.Env{}, json.RawMessage(tt.args))
			require.Error(t, err)
			for _, s := range tt.inErr {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestTool_IsError(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, stdioServer("test"))
	require.Empty(t, errs)
	res := run(t, t.Context(), findTool(t, set, "mcp__test__fail"), `{}`)
	require.Error(t, res.Err)
	assert.Equal(t, "it failed on purpose", res.Err.Error())
	assert.Equal(t, "it failed on purpose", res.LLMContent)
	assert.Equal(t, ErrTypeMCPTool, res.ErrType)
	require.Len(t, res.Content, 1)
	assert.Equal(t, "it failed on purpose", res.Content[0].Content.Text)

	// The server is still fine afterwards, and a nil Env is accepted.
	call, err := findTool(t, set, "mcp__test__echo").Build(nil, json.RawMessage(`{"text":"still here"}`))
	require.NoError(t, err)
	ok := call.Execute(t.Context(), nil)
	require.NoError(t, ok.Err)
	assert.Equal(t, "echo: still here", ok.LLMContent)
}

func TestTool_ContentMapping(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, stdioServer("test"))
	require.Empty(t, errs)

	img := run(t, t.Context(), findTool(t, set, "mcp__test__image"), `{}`)
	require.NoError(t, img.Err)
	require.Len(t, img.Content, 2)
	assert.Equal(t, acp.TextBlock("a pixel"), *img.Content[0].Content)
	block := img.Content[1].Content
	assert.Equal(t, "image", block.Type)
	assert.Equal(t, "image/png", block.MimeType)
	raw, err := base64.StdEncoding.DecodeString(block.Data)
	require.NoError(t, err)
	assert.Equal(t, []byte("\x89PNG"), raw[:4])
	assert.Equal(t, fmt.Sprintf("a pixel\n[image image/png, %d bytes]", len(raw)), img.LLMContent)

	res := run(t, t.Context(), findTool(t, set, "mcp__test__resource"), `{}`)
	require.NoError(t, res.Err)
	require.Len(t, res.Content, 3)
	wire, err := json.Marshal(res.Content)
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"type":"content","content":{"type":"resource_link","uri":"file:///tmp/notes.md","name":"notes.md","mimeType":"text/markdown"}},
		{"type":"content","content":{"type":"resource","resource":{"uri":"mem://greeting","mimeType":"text/plain","text":"hello there"}}},
		{"type":"content","content":{"type":"resource","resource":{"uri":"mem://blob","mimeType":"application/octet-stream","blob":"AQID"}}}
	]`, string(wire), "every block reaches the editor as the server sent it")
	assert.Equal(t, "[resource notes.md: file:///tmp/notes.md]\n[resource mem://greeting]\nhello there\n[resource mem://blob, application/octet-stream, 3 bytes]", res.LLMContent)
}

func TestConvertResult(t *testing.T) {
	t.Parallel()
	size := int64(3)
	tests := []struct {
		name     string
		res      *sdk.CallToolResult
		max      int
		wantLLM  string
		wantWire string
	}{
		{name: "empty", res: &sdk.CallToolResult{}, wantWire: `null`},
		{name: "structured only", res: &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}}, wantLLM: `{"n":1}`, wantWire: `[{"type":"content","content":{"type":"text","text":"{\"n\":1}"}}]`},
		{name: "audio", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte{1, 2}}}}, wantLLM: "[audio audio/wav, 2 bytes]", wantWire: `[{"type":"content","content":{"type":"audio","mimeType":"audio/wav","data":"AQI="}}]`},
		{name: "truncated", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "héllo world"}}}, max: 2, wantLLM: "h\n[output truncated: 11 of 12 bytes omitted]", wantWire: `[{"type":"content","content":{"type":"text","text":"héllo world"}}]`},
		{name: "empty text kept", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{}}}, wantWire: `[{"type":"content","content":{"type":"text","text":""}}]`},
		{name: "embedded text resource", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://a", MIMEType: "text/plain", Text: "hi"}}}},
			wantLLM: "[resource mem://a]\nhi", wantWire: `[{"type":"content","content":{"type":"resource","resource":{"uri":"mem://a","mimeType":"text/plain","text":"hi"}}}]`},
		{name: "embedded blob resource", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://b", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}}}},
			wantLLM: "[resource mem://b, application/octet-stream, 3 bytes]", wantWire: `[{"type":"content","content":{"type":"resource","resource":{"uri":"mem://b","mimeType":"application/octet-stream","blob":"AQID"}}}]`},
		{name: "resource link with annotations", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///x/y.md", MIMEType: "text/markdown", Size: &size, Annotations: &sdk.Annotations{Priority: 0.5}}}},
			wantLLM: "[resource y.md: file:///x/y.md]", wantWire: `[{"type":"content","content":{"type":"resource_link","uri":"file:///x/y.md","name":"y.md","mimeType":"text/markdown","size":3,"annotations":{"priority":0.5}}}]`},
		{name: "audiences", res: &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "for the user", Annotations: &sdk.Annotations{Audience: []sdk.Role{"user"}}},
			&sdk.TextContent{Text: "for the model", Annotations: &sdk.Annotations{Audience: []sdk.Role{"assistant"}}},
			&sdk.TextContent{Text: "for both", Annotations: &sdk.Annotations{Audience: []sdk.Role{"user", "assistant"}}},
		}}, wantLLM: "for the model\nfor both",
			wantWire: `[{"type":"content","content":{"type":"text","text":"for the user","annotations":{"audience":["user"]}}},{"type":"content","content":{"type":"text","text":"for both","annotations":{"audience":["user","assistant"]}}}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			llm, content := convertResult(tt.res, tt.max)
			assert.Equal(t, tt.wantLLM, llm)
			wire, err := json.Marshal(content)
			require.NoError(t, err)
			assert.JSONEq(t, tt.wantWire, string(wire))
		})
	}
}

func TestTool_CancelMidCall(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, stdioServer("test"))
	require.Empty(t, errs)
	slow := findTool(t, set, "mcp__test__slow")
	call, err := slow.Build(&tools.Env{}, json.RawMessage(`{"ms":60000}`))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan tools.Result, 1)
	go func() { done <- call.Execute(ctx, &tools.Env{}) }()

	// Cancel only once the server is running the call.
	stats := findTool(t, set, "mcp__test__stats")
	require.Eventually(t, func() bool {
		return run(t, t.Context(), stats, `{}`).LLMContent == "running=1 cancelled=0"
	}, 5*time.Second, 5*time.Millisecond)
	cancel()
	start := time.Now()
	select {
	case res := <-done:
		assert.Less(t, time.Since(start), time.Second)
		require.ErrorIs(t, res.Err, context.Canceled)
		assert.Equal(t, ErrTypeCancelled, res.ErrType)
		assert.Contains(t, res.LLMContent, "cancelled")
	case <-time.After(time.Second):
		require.FailNow(t, "cancelled call did not return within 1s")
	}

	// The server got notifications/cancelled and stopped the handler.
	assert.Eventually(t, func() bool {
		return run(t, t.Context(), stats, `{}`).LLMContent == "running=0 cancelled=1"
	}, 5*time.Second, 5*time.Millisecond)
}

func TestTool_CrashRestartsOnce(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, stdioServer("crashy"))
	require.Empty(t, errs)
	pid1 := pidOf(t, set, "crashy")
	// Tools stay valid values across restarts and failures.
	echo := findTool(t, set, "mcp__crashy__echo")

	// The call that kills the server reports it, naming the server, and
	// the server is restarted.
	res := run(t, t.Context(), findTool(t, set, "mcp__crashy__crash"), `{}`)
	require.Error(t, res.Err)
	assert.Equal(t, ErrTypeExecution, res.ErrType)
	assert.Contains(t, res.LLMContent, `mcp server "crashy" stopped during the call (exit status 3)`)
	assert.Contains(t, res.LLMContent, "restarted")
	t.Log(res.LLMContent)
	assert.True(t, processGone(pid1), "the crashed process is reaped")

	pid2 := pidOf(t, set, "crashy")
	assert.NotEqual(t, pid1, pid2, "a new process answers")

	// A second crash is reported and not restarted; later calls fail fast.
	res = run(t, t.Context(), findTool(t, set, "mcp__crashy__crash"), `{}`)
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, `mcp server "crashy"`)
	assert.Contains(t, res.LLMContent, "not restarted again")
	t.Log(res.LLMContent)

	start := time.Now()
	res = run(t, t.Context(), echo, `{"text":"x"}`)
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, `mcp server "crashy"`)
	assert.Less(t, time.Since(start), 100*time.Millisecond, "fails fast")
	assert.Empty(t, set.Tools(), "a dead server offers no tools")
	assert.Error(t, set.Status()[0].Err)
}

func TestTool_IdleDeathReportedOnNextCall(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, stdioServer("idle"))
	require.Empty(t, errs)
	pid1 := pidOf(t, set, "idle")
	require.NoError(t, syscall.Kill(pid1, syscall.SIGKILL))
	require.Eventually(t, func() bool { return !set.Status()[0].Connected }, 5*time.Second, 10*time.Millisecond)

	echo := findTool(t, set, "mcp__idle__echo")
	res := run(t, t.Context(), echo, `{"text":"x"}`)
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, `mcp server "idle" had stopped`)
	assert.Contains(t, res.LLMContent, "it was restarted, call the tool again")
	t.Log(res.LLMContent)

	res = run(t, t.Context(), echo, `{"text":"again"}`)
	require.NoError(t, res.Err)
	assert.Equal(t, "echo: again", res.LLMContent)
	assert.NotEqual(t, pid1, pidOf(t, set, "idle"))
}

func TestConnect_MissingCommandReported(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-server")
	opts, logs := testOptions(t)
	set, errs := Connect(t.Context(), []acp.MCPServer{
		{Name: "ghost", Command: missing},
		stdioServer("real"),
	}, opts)
	require.NotNil(t, set)
	t.Cleanup(func() { assert.NoError(t, set.Close()) })

	require.Len(t, errs, 1)
	var se *ServerError
	require.ErrorAs(t, errs[0], &se)
	assert.Equal(t, "ghost", se.Server)
	assert.Contains(t, errs[0].Error(), `mcp server "ghost"`)
	assert.Contains(t, logs.String(), "mcp server failed to start")
	assert.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `msg="mcp server stderr" mcp_server=real line="mcpserver starting"`)
	}, 5*time.Second, 5*time.Millisecond, "the server's stderr goes to the logger")

	for _, tl := range set.Tools() {
		assert.True(t, strings.HasPrefix(tl.Name(), "mcp__real__") || tl.Name() == ResourceToolName, tl.Name())
	}
	res := run(t, t.Context(), findTool(t, set, "mcp__real__echo"), `{"text":"ok"}`)
	require.NoError(t, res.Err)

	st := set.Status()
	require.Len(t, st, 2)
	assert.False(t, st[0].Connected)
	assert.ErrorIs(t, st[0].Err, se)
	assert.True(t, st[1].Connected)
}

func TestConnect_TimeoutReported(t *testing.T) {
	t.Parallel()
	// sleep never answers initialize.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	opts, _ := testOptions(t)
	opts.ConnectTimeout = 200 * time.Millisecond
	opts.StopTimeout = 100 * time.Millisecond
	set, errs := Connect(t.Context(), []acp.MCPServer{{Name: "mute", Command: sleep, Args: []string{"30"}}}, opts)
	require.NotNil(t, set)
	defer set.Close()
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), `mcp server "mute": connect: no answer within 200ms`)
}

// httpServer is a streamable HTTP MCP server on loopback that records the
// headers of every request.
func httpServer(t testing.TB) (string, func() http.Header) {
	s := sdk.NewServer(&sdk.Implementation{Name: "httpserver", Version: "1.0.0"}, nil)
	s.AddTool(&sdk.Tool{
		Name:        "whoami",
		Description: "Returns the X-Api-Key header.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"greeting":{"type":"string"}}}`),
	}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in struct {
			Greeting string `json:"greeting"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &in)
		key := ""
		if req.Extra != nil {
			key = req.Extra.Header.Get("X-Api-Key")
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Greeting + " key=" + key}}}, nil
	})
	var mu sync.Mutex
	var last http.Header
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.Header.Clone()
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

func TestHTTPServer(t *testing.T) {
	t.Parallel()
	url, lastHeader := httpServer(t)
	set, errs := connect(t, acp.MCPServer{Type: "http", Name: "web", URL: url, Headers: []acp.HTTPHeader{
		{Name: "X-Api-Key", Value: "s3cret"},
		{Name: "X-Client", Value: "acpd-test"},
	}})
	require.Empty(t, errs)

	tl := set.Tools()
	require.Len(t, tl, 1)
	assert.Equal(t, "mcp__web__whoami", tl[0].Name())

	res := run(t, t.Context(), tl[0], `{"greeting":"hello"}`)
	require.NoError(t, res.Err)
	assert.Equal(t, "hello key=s3cret", res.LLMContent)
	assert.Equal(t, "acpd-test", lastHeader().Get("X-Client"))
	assert.Equal(t, []Status{{Name: "web", Type: "http", Connected: true, Tools: 1}}, set.Status())
}

func TestHTTPServer_Unreachable(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close()
	opts, _ := testOptions(t)
	set, errs := Connect(t.Context(), []acp.MCPServer{{Type: "http", Name: "gone", URL: url}}, opts)
	require.NotNil(t, set)
	defer set.Close()
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), `mcp server "gone"`)
	assert.Empty(t, set.Tools())
}

func TestSet_CloseLeavesNoProcesses(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("process-group cleanup is Linux-only")
	}
	opts, _ := testOptions(t)
	set, errs := Connect(t.Context(), []acp.MCPServer{stdioServer("a"), stdioServer("b")}, opts)
	require.Empty(t, errs)
	pidA, pidB := pidOf(t, set, "a"), pidOf(t, set, "b")
	echo := findTool(t, set, "mcp__a__echo")
	spawned := run(t, t.Context(), findTool(t, set, "mcp__a__spawn"), `{}`)
	require.NoError(t, spawned.Err)
	grandchild, err := strconv.Atoi(spawned.LLMContent)
	require.NoError(t, err)
	require.False(t, processGone(grandchild))

	start := time.Now()
	require.NoError(t, set.Close())
	assert.Less(t, time.Since(start), opts.StopTimeout, "servers exit on stdin close, without signals")
	assert.True(t, processGone(pidA), "server a is gone")
	assert.True(t, processGone(pidB), "server b is gone")
	assert.Eventually(t, func() bool { return processGone(grandchild) }, 5*time.Second, 10*time.Millisecond, "the grandchild is killed with the group")

	require.NoError(t, set.Close(), "Close is idempotent")
	res := run(t, t.Context(), echo, `{"text":"x"}`)
	assert.Error(t, res.Err, "calls after Close fail")
	assert.Contains(t, res.LLMContent, `mcp server "a" is closed`)
}

func TestSet_CloseDuringCall(t *testing.T) {
	t.Parallel()
	opts, _ := testOptions(t)
	opts.StopTimeout = 200 * time.Millisecond
	set, errs := Connect(t.Context(), []acp.MCPServer{stdioServer("busy")}, opts)
	require.Empty(t, errs)
	pid := pidOf(t, set, "busy")
	call, err := findTool(t, set, "mcp__busy__slow").Build(&tools.Env{}, json.RawMessage(`{"ms":60000}`))
	require.NoError(t, err)
	done := make(chan tools.Result, 1)
	go func() { done <- call.Execute(t.Context(), &tools.Env{}) }()
	stats := findTool(t, set, "mcp__busy__stats")
	require.Eventually(t, func() bool { return run(t, t.Context(), stats, `{}`).LLMContent == "running=1 cancelled=0" }, 5*time.Second, 5*time.Millisecond)

	start := time.Now()
	require.NoError(t, set.Close())
	assert.Less(t, time.Since(start), 2*time.Second, "Close does not wait for calls in flight")
	select {
	case res := <-done:
		require.Error(t, res.Err)
		assert.Contains(t, res.LLMContent, `mcp server "busy" was closed during the call`)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "in-flight call did not end after Close")
	}
	assert.True(t, processGone(pid))
}

func TestChildEnv_PathKeepsAbsoluteEntries(t *testing.T) {
	t.Setenv("PATH", strings.Join([]string{"/usr/local/bin", ".", "", "node_modules/.bin", "/usr/bin"}, string(filepath.ListSeparator)))
	var path string
	for _, kv := range childEnv(nil) {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	assert.Equal(t, "/usr/local/bin"+string(filepath.ListSeparator)+"/usr/bin", path, "a relative entry would be looked up in the server's folder")
	if runtime.GOOS != "windows" {
		assert.Equal(t, "/", neutralDir())
	}
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "mcp.json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	sh, err = filepath.Abs(sh)
	require.NoError(t, err)
	servers, err := LoadConfig(write(`{"mcpServers":{
		"web":{"type":"http","url":"https://example.com/mcp","headers":{"X-B":"2","X-A":"1"}},
		"files":{"command":"sh","args":["-c","true"],"env":{"B":"2","A":"1"}},
		"old":{"type":"sse","url":"http://127.0.0.1:9/sse"}}}`))
	require.NoError(t, err)
	assert.Equal(t, []acp.MCPServer{
		{Name: "files", Command: sh, Args: []string{"-c", "true"}, Env: []acp.EnvVariable{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}},
		{Name: "old", Type: "sse", URL: "http://127.0.0.1:9/sse"},
		{Name: "web", Type: "http", URL: "https://example.com/mcp", Headers: []acp.HTTPHeader{{Name: "X-A", Value: "1"}, {Name: "X-B", Value: "2"}}},
	}, servers)
	for body, msg := range map[string]string{
		`{"mcpServers":{"a":{"command":"./bin/server"}}}`:            `command "./bin/server" is relative`,
		`{"mcpServers":{"a":{"command":"no-such-server-anywhere"}}}`: `executable file not found`,
		`{"mcpServers":{"a":{"type":"http","url":"ftp://x"}}}`:       `url must be an absolute http or https URL`,
		`{"servers":{}}`: `unknown field "servers"`,
		`{}`:             `no "mcpServers" object`,
		`[`:              `unexpected EOF`,
	} {
		_, err := LoadConfig(write(body))
		assert.ErrorContains(t, err, msg, body)
	}
}
