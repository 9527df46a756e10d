package mcp

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/mcp/mcptest"
	"github.com/acpd/acpd/session/tools"
)

func TestPromptArgs(t *testing.T) {
	t.Parallel()
	defs := []*sdk.PromptArgument{{Name: "code", Required: true}, {Name: "language"}, {Name: "level", Required: true}}
	tests := []struct {
		name, text string
		want       map[string]string
		err        string
	}{
		{name: "free text fills the first", text: "fix the bug level=2", want: map[string]string{"code": "fix the bug", "level": "2"}},
		{name: "all by name", text: "code=x language=go level=1", want: map[string]string{"code": "x", "language": "go", "level": "1"}},
		{name: "quoted value", text: `level=3 language="Go 1.26" look here`, want: map[string]string{"code": "look here", "language": "Go 1.26", "level": "3"}},
		{name: "single-quoted value", text: `x level='very high'`, want: map[string]string{"code": "x", "level": "very high"}},
		{name: "free text kept as typed", text: "don't \"touch\"\n  the tests level=1", want: map[string]string{"code": "don't \"touch\"\n  the tests", "level": "1"}},
		{name: "unknown name is text", text: "a=b level=1", want: map[string]string{"code": "a=b", "level": "1"}},
		{name: "missing required", text: "only code", err: "missing required argument level"},
		{name: "first given twice", text: "code=a more level=1", err: `argument "code" is given twice`},
		{name: "named twice", text: "x level=1 level=2", err: `argument "level" is given twice`},
		{name: "open quote", text: `x level="1`, err: "quote is not closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := promptArgs(tt.text, defs)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := promptArgs("anything", nil)
	assert.ErrorContains(t, err, "takes no arguments")
	got, err := promptArgs("  ", nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, "<code> [language=…] level=…", promptHint(defs))
	assert.Equal(t, "[a]", promptHint([]*sdk.PromptArgument{{Name: "a"}}))
}

// The server's prompts are offered as commands and expand to their
// messages; a missing argument gives the usage.
func TestPrompts(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, stdioServer("my.srv"))
	require.Empty(t, errs)
	ps := set.Prompts()
	require.Len(t, ps, 2)
	greet := ps[0]
	assert.Equal(t, "mcp__my_srv__greet", greet.Command)
	assert.Equal(t, "Greets someone.", greet.Description)
	assert.Equal(t, "<name> [style=…]", greet.Hint)
	assert.Equal(t, "mcp__my_srv__with_resource", ps[1].Command)
	assert.Empty(t, ps[1].Hint)

	blocks, err := greet.Expand(t.Context(), "Ada style=formal")
	require.NoError(t, err)
	assert.Equal(t, []acp.ContentBlock{acp.TextBlock("Greet Ada in a formal way.")}, blocks)

	_, err = greet.Expand(t.Context(), "")
	var usage *UsageError
	require.ErrorAs(t, err, &usage)
	assert.Equal(t, "missing required argument name. Usage: /mcp__my_srv__greet <name> [style=…]", usage.Msg)

	blocks, err = ps[1].Expand(t.Context(), "")
	require.NoError(t, err)
	text := mcptest.NotesText
	assert.Equal(t, []acp.ContentBlock{
		acp.TextBlock("What is left to do?"),
		{Type: "resource", Resource: &acp.EmbeddedResource{URI: mcptest.NotesURI, MimeType: "text/markdown", Text: &text}},
	}, blocks)
}

// The resource tool lists and reads; a prompt's mention of a resource is
// read through its server, other blocks are left alone.
func TestResources(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, stdioServer("docs"))
	require.Empty(t, errs)
	rt := findTool(t, set, ResourceToolName)
	assert.Equal(t, acp.KindRead, rt.Kind())

	list := run(t, t.Context(), rt, `{"action":"list"}`)
	require.NoError(t, list.Err)
	assert.Contains(t, list.LLMContent, `MCP server "docs": 1 resources, 1 templates`)
	assert.Contains(t, list.LLMContent, "- mem://notes/todo.md (todo.md) [text/markdown]: The to-do list.")
	assert.Contains(t, list.LLMContent, "- template mem://users/{id} (user): A user by id.")

	for uri, want := range map[string]string{mcptest.NotesURI: mcptest.NotesText, "mem://users/42": "user 42"} {
		res := run(t, t.Context(), rt, `{"action":"read","uri":"`+uri+`"}`)
		require.NoError(t, res.Err, res.LLMContent)
		assert.Equal(t, "[resource "+uri+"]\n"+want, res.LLMContent)
		require.Len(t, res.Content, 1)
		assert.Equal(t, want, *res.Content[0].Content.Resource.Text)
	}
	call, err := rt.Build(&tools.Env{}, json.RawMessage(`{"action":"read","uri":"mem://nowhere"}`))
	require.NoError(t, err)
	assert.Equal(t, tools.ConfirmNone, call.Confirmation().Kind, "reading asks nothing")
	res := call.Execute(t.Context(), &tools.Env{})
	require.Error(t, res.Err)
	assert.Contains(t, res.LLMContent, "no MCP server of this session lists mem://nowhere")
	for args, msg := range map[string]string{
		`{"action":"read"}`:                         "read needs a uri",
		`{"action":"drop"}`:                         `action must be "list" or "read"`,
		`{"action":"list","server":"nope"}`:         `no MCP server "nope" in this session (servers: docs)`,
		`{"action":"list","extra":1}`:               "unknown field",
		`{"action":"read","uri":"x","server":"no"}`: `no MCP server "no"`,
	} {
		_, err := rt.Build(&tools.Env{}, json.RawMessage(args))
		assert.ErrorContains(t, err, msg, args)
	}

	file := acp.ContentBlock{Type: "resource_link", URI: "file:///work/main.go", Name: "main.go"}
	out, changed := set.ReadMentions(t.Context(), []acp.ContentBlock{acp.TextBlock("look"), file})
	assert.False(t, changed, "a workspace file is not an MCP resource")
	assert.Equal(t, []acp.ContentBlock{acp.TextBlock("look"), file}, out)

	notes := mcptest.NotesText
	user := "user 7"
	out, changed = set.ReadMentions(t.Context(), []acp.ContentBlock{
		acp.TextBlock("summarise"),
		{Type: "resource_link", URI: mcptest.NotesURI, Name: "todo.md"},
		file,
		{Type: "resource", Resource: &acp.EmbeddedResource{URI: "mem://users/7", Text: new(string)}},
	})
	require.True(t, changed)
	assert.Equal(t, []acp.ContentBlock{
		acp.TextBlock("summarise"),
		{Type: "resource", Resource: &acp.EmbeddedResource{URI: mcptest.NotesURI, MimeType: "text/markdown", Text: &notes}},
		file,
		{Type: "resource", Resource: &acp.EmbeddedResource{URI: "mem://users/7", MimeType: "text/plain", Text: &user}},
	}, out)
}

// tools/list_changed is applied only by Refresh, and the tools keep their
// order with the new one last.
func TestToolListChanged(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	changed := 0
	opts, _ := testOptions(t)
	opts.Changed = func() {
		mu.Lock()
		changed++
		mu.Unlock()
	}
	set, errs := Connect(t.Context(), []acp.MCPServer{stdioServer("t")}, opts)
	require.Empty(t, errs)
	t.Cleanup(func() { _ = set.Close() })
	names := func() []string {
		var out []string
		for _, tl := range set.Tools() {
			out = append(out, tl.Name())
		}
		return out
	}
	before := names()
	res := run(t, t.Context(), findTool(t, set, "mcp__t__add_tool"), `{}`)
	require.NoError(t, res.Err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return changed > 0
	}, 5*time.Second, 5*time.Millisecond, "the session is told")
	assert.Equal(t, before, names(), "nothing changes before Refresh")
	assert.Equal(t, Changes{Tools: true}, set.Refresh(t.Context()))
	after := names()
	require.Len(t, after, len(before)+1)
	assert.Equal(t, before[:len(before)-1], after[:len(before)-1], "earlier tools keep their places")
	assert.Equal(t, []string{ResourceToolName, "mcp__t__added"}, after[len(before)-1:], "the new tool comes last")
	assert.Equal(t, Changes{}, set.Refresh(t.Context()), "nothing more to apply")
	res = run(t, t.Context(), findTool(t, set, "mcp__t__added"), `{}`)
	require.NoError(t, res.Err)
	assert.Equal(t, "I was added", res.LLMContent)
}

// The server's progress reaches the call's tool_call_update.
func TestProgress(t *testing.T) {
	t.Parallel()
	set, errs := connect(t, stdioServer("p"))
	require.Empty(t, errs)
	var mu sync.Mutex
	var updates []acp.ToolCallUpdate
	env := &tools.Env{ToolCallID: "call-1", Update: func(_ context.Context, u acp.ToolCallUpdate) error {
		mu.Lock()
		updates = append(updates, u)
		mu.Unlock()
		return nil
	}}
	call, err := findTool(t, set, "mcp__p__progress").Build(env, nil)
	require.NoError(t, err)
	res := call.Execute(t.Context(), env)
	require.NoError(t, res.Err)
	assert.Equal(t, "progressed", res.LLMContent)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, updates, 3)
	for i, u := range updates {
		n := float64(i + 1)
		assert.Equal(t, acp.Meta{"progress": map[string]any{"progress": n, "total": 3.0, "message": "step " + string(rune('1'+i))}}, u.Meta)
		assert.Equal(t, "step "+string(rune('1'+i))+" ("+string(rune('1'+i))+"/3)", u.Content[0].Content.Text)
	}
}
