package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/mcp/mcptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// mcpVariant is one kind of MCP server the end-to-end tests run against:
// the official Go SDK's and the official TypeScript SDK's, each over stdio
// and Streamable HTTP, all serving the same tools, prompts and resources.
type mcpVariant struct {
	name   string
	server func(t *testing.T) acp.MCPServer
}

var mcpVariants = []mcpVariant{
	{"go-stdio", func(t *testing.T) acp.MCPServer {
		return acp.MCPServer{Name: "srv", Command: mcpServerBin(t), Args: []string{}, Env: []acp.EnvVariable{}}
	}},
	{"go-http", func(t *testing.T) acp.MCPServer {
		s := mcptest.NewServer(0, nil)
		ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
		t.Cleanup(ts.Close)
		return acp.MCPServer{Type: "http", Name: "srv", URL: ts.URL, Headers: []acp.HTTPHeader{}}
	}},
	{"ts-stdio", func(t *testing.T) acp.MCPServer {
		node, script := tsMCPServer(t)
		return acp.MCPServer{Name: "srv", Command: node, Args: []string{script, "stdio"}, Env: []acp.EnvVariable{}}
	}},
	{"ts-http", func(t *testing.T) acp.MCPServer {
		return acp.MCPServer{Type: "http", Name: "srv", URL: tsHTTPServer(t, "http"), Headers: []acp.HTTPHeader{}}
	}},
}

// tsHTTPServer starts the TypeScript SDK server over Streamable HTTP
// (server.mjs with args) and returns its endpoint.
func tsHTTPServer(t *testing.T, args ...string) string {
	t.Helper()
	node, script := tsMCPServer(t)
	cmd := exec.Command(node, append([]string{script}, args...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	require.True(t, ok, "%q", line)
	return url
}

var (
	mcpServerOnce sync.Once
	mcpServerPath string
	mcpServerErr  error
)

// mcpServerBin is the Go SDK test server (session/mcp/testdata/mcpserver),
// built once per test binary.
func mcpServerBin(t *testing.T) string {
	mcpServerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpserver")
		if err != nil {
			mcpServerErr = err
			return
		}
		mcpServerPath = filepath.Join(dir, "mcpserver")
		out, err := exec.Command("go", "build", "-o", mcpServerPath, "github.com/acpd/acpd/session/mcp/testdata/mcpserver").CombinedOutput()
		if err != nil {
			mcpServerErr = &buildError{out: string(out), err: err}
		}
	})
	require.NoError(t, mcpServerErr)
	return mcpServerPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// tsMCPServer installs the TypeScript SDK as locked in testdata/mcpts (once
// per machine, as the interop tests install theirs) and returns node and
// the server script beside its node_modules.
func tsMCPServer(t *testing.T) (node, script string) {
	t.Helper()
	node, npm := acptest.NodeAndNPM(t, "the MCP TypeScript SDK server")
	dir := filepath.Join("testdata", "mcpts")
	modules := acptest.NPMInstall(t, npm, dir, filepath.Join("@modelcontextprotocol", "sdk", "package.json"),
		"ci", "--no-audit", "--no-fund", "--ignore-scripts")
	out := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, "server.mjs"))
	require.NoError(t, err)
	script = filepath.Join(out, "server.mjs")
	require.NoError(t, os.WriteFile(script, b, 0o644))
	require.NoError(t, os.Symlink(modules, filepath.Join(out, "node_modules")))
	return node, script
}

// elicitingEditor is an editor's capabilities: files, a terminal, and
// both elicitation modes.
func elicitingEditor() acp.ClientCapabilities {
	return acp.ClientCapabilities{
		FS: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true,
		Elicitation: &acp.ElicitationCapabilities{Form: &acp.Capability{}, URL: &acp.Capability{}},
	}
}

// mcpSession starts the built daemon with the server in a new session.
func mcpSession(t *testing.T, ctx context.Context, fc *acptest.FakeClient, srv acp.MCPServer, caps *acp.ClientCapabilities) (*daemon, string) {
	t.Helper()
	d := startDaemon(t, fc, nil)
	var err error
	if caps != nil {
		_, err = d.cc.InitializeWith(ctx, *caps)
	} else {
		_, err = d.cc.Initialize(ctx)
	}
	require.NoError(t, err)
	var ns acp.NewSessionResponse
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionNew, acp.NewSessionRequest{Cwd: d.cwd, MCPServers: []acp.MCPServer{srv}}, &ns))
	return d, ns.SessionID
}

// finished are the tool_call_updates that end a call.
func finished(updates []acp.SessionNotification) []*acp.ToolCallUpdate {
	var out []*acp.ToolCallUpdate
	for _, n := range updates {
		if u := n.Update.ToolCallUpdate; u != nil && (u.Status == acp.StatusCompleted || u.Status == acp.StatusFailed) {
			out = append(out, u)
		}
	}
	return out
}

func mcpCall(tool, args string) modeltest.Response {
	return modeltest.Response{ToolCalls: []modeltest.ToolCall{{Name: tool, Arguments: args}}}
}

// TestE2E_MCPFeatures runs the built daemon against each kind of MCP
// server: a prompt offered in available_commands_update and expanded when
// used, a tool returning every content type, a resource read by the model
// and by an @-mention, tools/list_changed taking effect at the next turn
// with the earlier request unchanged as its prefix, progress reaching the
// editor, and a cancelled call reaching the server.
func TestE2E_MCPFeatures(t *testing.T) {
	for _, v := range mcpVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			testMCPFeatures(t, v.server(t))
		})
	}
}

func testMCPFeatures(t *testing.T, srv acp.MCPServer) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	d, sid := mcpSession(t, ctx, nil, srv, nil)
	prompt := func(blocks ...acp.ContentBlock) *acp.PromptResponse {
		t.Helper()
		var r acp.PromptResponse
		require.NoError(t, d.cc.Call(ctx, acp.MethodSessionPrompt, acp.PromptRequest{SessionID: sid, Prompt: blocks}, &r))
		return &r
	}
	lastUser := func() string {
		reqs := d.model.Requests()
		msgs := reqs[len(reqs)-1].Messages
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == "user" {
				return msgs[i].Text()
			}
		}
		return ""
	}

	// The prompts are commands, with their arguments in the input hint.
	cmds := waitCommands(t, d, sid, 1)
	i := slices.IndexFunc(cmds, func(c acp.AvailableCommand) bool { return c.Name == "mcp__srv__greet" })
	require.GreaterOrEqual(t, i, 0, "%v", commandNames(cmds))
	assert.Equal(t, "Greets someone.", cmds[i].Description)
	require.NotNil(t, cmds[i].Input)
	assert.Equal(t, "<name> [style=…]", cmds[i].Input.Hint)
	assert.Contains(t, commandNames(cmds), "mcp__srv__with_resource")

	d.model.Add(modeltest.Response{Text: "Hello, Ada."})
	prompt(acp.TextBlock("/mcp__srv__greet Ada style=formal"))
	assert.Equal(t, "Greet Ada in a formal way.", lastUser(), "the prompt expanded to its message")
	d.model.Add(modeltest.Response{Text: "Milk."})
	prompt(acp.TextBlock("/mcp__srv__with_resource"))
	assert.Contains(t, lastUser(), "What is left to do?")
	assert.Contains(t, lastUser(), "- buy milk", "the embedded resource reaches the model")
	n := len(d.cc.Updates())
	prompt(acp.TextBlock("/mcp__srv__greet"))
	assert.Contains(t, turnText(d, sid, n), "missing required argument name. Usage: /mcp__srv__greet <name> [style=…]")

	// Every content type reaches the editor.
	d.model.Add(mcpCall("mcp__srv__everything", `{}`), modeltest.Response{Text: "seen"})
	n = len(d.cc.Updates())
	prompt(acp.TextBlock("show me everything"))
	done := finished(d.cc.Updates()[n:])
	require.Len(t, done, 1)
	var kinds []string
	for _, c := range done[0].Content {
		k := c.Content.Type
		if c.Content.Resource != nil && c.Content.Resource.Blob != nil {
			k += "/blob"
		}
		kinds = append(kinds, k)
	}
	assert.Equal(t, []string{"text", "image", "audio", "resource_link", "resource", "resource/blob"}, kinds)
	raw, err := json.Marshal(done[0].RawOutput)
	require.NoError(t, err)
	assert.JSONEq(t, `{"kinds":6}`, string(raw), "structuredContent is the rawOutput")

	// The model reads a resource (from a template); a mention is read
	// through the server.
	d.model.Add(mcpCall("mcp_resources", `{"action":"read","uri":"mem://users/42"}`), modeltest.Response{Text: "read"})
	n = len(d.cc.Updates())
	prompt(acp.TextBlock("who is 42?"))
	done = finished(d.cc.Updates()[n:])
	require.Len(t, done, 1)
	assert.Equal(t, acp.StatusCompleted, done[0].Status)
	assert.Equal(t, "user 42", *done[0].Content[0].Content.Resource.Text)
	d.model.Add(modeltest.Response{Text: "two things"})
	prompt(acp.TextBlock("what is in"), acp.ContentBlock{Type: "resource_link", URI: mcptest.NotesURI, Name: "todo.md"})
	assert.Contains(t, lastUser(), "- write the MCP docs", "the mention was read through the server")

	// tools/list_changed: not within the turn, at a turn boundary (the
	// next one the notice reached in time), with the earlier tools in
	// place and the conversation sent before as the prefix.
	d.model.Add(mcpCall("mcp__srv__add_tool", `{}`), modeltest.Response{Text: "added"})
	prompt(acp.TextBlock("add a tool"))
	reqs := d.model.Requests()
	assert.NotContains(t, toolNames(reqs[len(reqs)-1]), "mcp__srv__added", "a listing change waits for the turn boundary")
	var before, after modeltest.Request
	waitFor(t, func() bool {
		d.model.Add(modeltest.Response{Text: "ok"})
		prompt(acp.TextBlock("and now?"))
		reqs := d.model.Requests()
		before, after = reqs[len(reqs)-2], reqs[len(reqs)-1]
		return slices.Contains(toolNames(after), "mcp__srv__added")
	})
	assert.Equal(t, append(toolNames(before), "mcp__srv__added"), toolNames(after), "earlier tools keep their places; the new one comes last")
	for j := range before.Tools {
		assert.Equal(t, before.Tools[j], after.Tools[j])
	}
	require.Greater(t, len(after.Messages), len(before.Messages))
	for j, m := range before.Messages {
		a, _ := json.Marshal(m)
		b, _ := json.Marshal(after.Messages[j])
		assert.JSONEq(t, string(a), string(b), "message %d of the prefix changed", j)
	}

	// Progress reaches the editor as tool_call_update.
	d.model.Add(mcpCall("mcp__srv__progress", `{}`), modeltest.Response{Text: "done"})
	n = len(d.cc.Updates())
	prompt(acp.TextBlock("progress"))
	var steps []string
	for _, u := range d.cc.Updates()[n:] {
		if tc := u.Update.ToolCallUpdate; tc != nil && tc.Meta["progress"] != nil {
			steps = append(steps, tc.Content[0].Content.Text)
		}
	}
	assert.Equal(t, []string{"step 1 (1/3)", "step 2 (2/3)", "step 3 (3/3)"}, steps)

	// session/cancel reaches the server as notifications/cancelled.
	d.model.Add(mcpCall("mcp__srv__slow", `{"ms":30000}`))
	got := make(chan *acp.PromptResponse, 1)
	n = len(d.cc.Updates())
	go func() { got <- prompt(acp.TextBlock("slow")) }()
	waitFor(t, func() bool {
		for _, u := range d.cc.Updates()[n:] {
			if tc := u.Update.ToolCallUpdate; tc != nil && tc.Status == acp.StatusInProgress {
				return true
			}
			if tc := u.Update.ToolCall; tc != nil && tc.Status == acp.StatusInProgress {
				return true
			}
		}
		return false
	})
	time.Sleep(200 * time.Millisecond) // the call is on its way to the server
	require.NoError(t, d.cc.Cancel(sid))
	select {
	case r := <-got:
		assert.Equal(t, acp.StopCancelled, r.StopReason)
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled turn did not end")
	}
	var stats string
	waitFor(t, func() bool {
		d.model.Add(mcpCall("mcp__srv__stats", `{}`), modeltest.Response{Text: "stats"})
		n := len(d.cc.Updates())
		prompt(acp.TextBlock("stats"))
		done := finished(d.cc.Updates()[n:])
		if len(done) == 1 {
			stats = done[0].Content[0].Content.Text
		}
		return stats == "running=0 cancelled=1"
	})
}

// TestE2E_MCPElicitation runs the built daemon against each kind of MCP
// server with an editor that offers form and URL elicitations: a form
// answered by the editor reaches the server, a URL elicitation is shown
// to the editor (tied to the call) and completed, and a -32042 answer is
// elicited and the call retried. An editor without elicitation gets none:
// the server's question fails.
func TestE2E_MCPElicitation(t *testing.T) {
	for _, v := range mcpVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			testMCPElicitation(t, v.server(t))
		})
	}
}

func testMCPElicitation(t *testing.T, srv acp.MCPServer) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	var asked []acp.CreateElicitationRequest
	var completed []string
	fc := &acptest.FakeClient{
		CreateElicitationFunc: func(_ context.Context, r *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
			mu.Lock()
			asked = append(asked, *r)
			mu.Unlock()
			if r.Mode == "form" {
				return &acp.CreateElicitationResponse{Action: acp.ElicitAccept, Content: map[string]json.RawMessage{
					"name": json.RawMessage(`"Ada"`), "color": json.RawMessage(`"green"`)}}, nil
			}
			return &acp.CreateElicitationResponse{Action: acp.ElicitAccept}, nil
		},
		OnElicitationComplete: func(n acp.CompleteElicitationNotification) {
			mu.Lock()
			completed = append(completed, n.ElicitationID)
			mu.Unlock()
		},
	}
	caps := elicitingEditor()
	d, sid := mcpSession(t, ctx, fc, srv, &caps)
	run := func(tool string) *acp.ToolCallUpdate {
		t.Helper()
		d.model.Add(mcpCall(tool, `{}`), modeltest.Response{Text: "ok"})
		n := len(d.cc.Updates())
		var r acp.PromptResponse
		require.NoError(t, d.cc.Call(ctx, acp.MethodSessionPrompt, acp.PromptRequest{SessionID: sid, Prompt: []acp.ContentBlock{acp.TextBlock(tool)}}, &r))
		done := finished(d.cc.Updates()[n:])
		require.Len(t, done, 1)
		return done[0]
	}
	last := func() acp.CreateElicitationRequest {
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, asked)
		return asked[len(asked)-1]
	}

	u := run("mcp__srv__ask_form")
	assert.Equal(t, "form: action=accept name=Ada color=green", u.Content[0].Content.Text, "the editor's answer reached the server")
	q := last()
	assert.Equal(t, sid, q.SessionID)
	assert.Equal(t, u.ToolCallID, q.ToolCallID, "tied to the running tool call")
	assert.Equal(t, `MCP server "srv": Who are you?`, q.Message)
	assert.Equal(t, []string{"name"}, q.RequestedSchema.Required)
	assert.Equal(t, []string{"red", "green"}, q.RequestedSchema.Properties["color"].Enum)

	u = run("mcp__srv__ask_url")
	assert.Equal(t, "url: action=accept", u.Content[0].Content.Text)
	q = last()
	assert.Equal(t, "url", q.Mode)
	assert.Equal(t, "https://example.com/consent?flow=1", q.URL)
	assert.Equal(t, u.ToolCallID, q.ToolCallID)
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(completed, q.ElicitationID)
	})

	u = run("mcp__srv__needs_url")
	assert.Equal(t, acp.StatusCompleted, u.Status)
	assert.Equal(t, "needs_url: done after consent", u.Content[0].Content.Text, "-32042 elicited, then retried")
	q = last()
	assert.Equal(t, "https://example.com/archive-login", q.URL)
	assert.Equal(t, u.ToolCallID, q.ToolCallID)

	// An editor without elicitation: the server may not ask, and its call
	// fails saying so.
	d2, sid2 := mcpSession(t, ctx, nil, srv, nil)
	d2.model.Add(mcpCall("mcp__srv__ask_form", `{}`), modeltest.Response{Text: "ok"})
	_, err := d2.cc.Prompt(ctx, sid2, "ask")
	require.NoError(t, err)
	done := finished(d2.cc.Updates())
	require.Len(t, done, 1)
	assert.Equal(t, acp.StatusFailed, done[0].Status)
	assert.Contains(t, strings.ToLower(done[0].Content[0].Content.Text), "elicitation")
}
