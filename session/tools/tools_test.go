package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acpd/acpd/acp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	_ Preparer = (*editCall)(nil)
	_ Preparer = (*writeFileCall)(nil)
)

func TestBuiltin_NamesKindsAndSchemas(t *testing.T) {
	want := map[string]acp.ToolKind{
		NameReadFile: acp.KindRead, NameWriteFile: acp.KindEdit, NameEdit: acp.KindEdit,
		NameListDirectory: acp.KindSearch, NameGlob: acp.KindSearch, NameGrepSearch: acp.KindSearch,
		NameRunShellCommand: acp.KindExecute, NameTodoWrite: acp.KindThink,
		NameExitPlanMode: acp.KindSwitchMode, NameWebFetch: acp.KindFetch, NameAskUserQuestion: acp.KindOther,
	}
	specs := NewBuiltinRegistry(nil).Specs()
	require.Len(t, specs, len(want))
	for _, tl := range Builtin() {
		assert.Equal(t, want[tl.Name()], tl.Kind(), tl.Name())
		sp := tl.Spec()
		assert.Equal(t, tl.Name(), sp.Name)
		assert.NotEmpty(t, sp.Description)
		var schema map[string]any
		require.NoError(t, json.Unmarshal(sp.Parameters, &schema), tl.Name())
		assert.Equal(t, "object", schema["type"])
	}
}

func TestNewBuiltinRegistry_Exclude(t *testing.T) {
	r := NewBuiltinRegistry([]string{NameRunShellCommand, NameWriteFile})
	_, ok := r.Get(NameRunShellCommand)
	assert.False(t, ok)
	_, ok = r.Get(NameReadFile)
	assert.True(t, ok)
	assert.Len(t, r.Tools(), len(Builtin())-2)
}

func TestBuild_SchemaErrorsNameTheParameter(t *testing.T) {
	w := newWorkspace(t)
	tests := []struct {
		tool, args string
		want       []string
	}{
		{NameReadFile, `{}`, []string{"read_file", "file_path"}},
		{NameReadFile, `{"file_path": 7}`, []string{"params/file_path", "string"}},
		{NameReadFile, `{"file_path": "/x", "offset": -1}`, []string{"params/offset"}},
		{NameReadFile, `{"file_path": "/x", "limit": 0}`, []string{"params/limit"}},
		{NameReadFile, `{"file_path": "/x", "offset": 1.5}`, []string{"params/offset"}},
		{NameReadFile, `not json`, []string{"not valid JSON"}},
		{NameReadFile, `[]`, []string{"params", "object"}},
		{NameWriteFile, `{"file_path": "/x"}`, []string{"content"}},
		{NameEdit, `{"file_path": "/x", "old_string": "a"}`, []string{"new_string"}},
		{NameEdit, `{"file_path": "/x", "old_string": "a", "new_string": "b", "replace_all": "yes"}`, []string{"params/replace_all"}},
		{NameListDirectory, `{"path": "/x", "ignore": "*.go"}`, []string{"params/ignore"}},
		{NameGlob, `{"path": "/x"}`, []string{"pattern"}},
		{NameGrepSearch, `{"pattern": ["a"]}`, []string{"params/pattern"}},
		{NameGrepSearch, `{"pattern": "(unclosed"}`, []string{"params/pattern", "regular expression"}},
		{NameGlob, `{"pattern": "[z-a"}`, []string{"params/pattern"}},
		{NameRunShellCommand, `{"description": "x"}`, []string{"command"}},
		{NameRunShellCommand, `{"command": "ls", "timeout": 0}`, []string{"params/timeout"}},
		{NameRunShellCommand, `{"command": "ls", "timeout": 600001}`, []string{"params/timeout"}},
		{NameRunShellCommand, `{"command": "   "}`, []string{"params/command", "empty"}},
		{NameTodoWrite, `{"todos": [{"id": "1", "content": "x", "status": "done"}]}`, []string{"params/todos/0/status"}},
		{NameTodoWrite, `{"todos": [{"id": "1", "status": "pending"}]}`, []string{"params/todos/0", "content"}},
		{NameTodoWrite, `{"todos": [{"id": "1", "content": "a", "status": "pending"}, {"id": "1", "content": "b", "status": "pending"}]}`, []string{"params/todos/1/id", "duplicate"}},
		{NameExitPlanMode, `{}`, []string{"exit_plan_mode", "plan"}},
		{NameExitPlanMode, `{"plan": ""}`, []string{"params/plan"}},
		{NameExitPlanMode, `{"plan": "  \n "}`, []string{"params/plan"}},
		{NameExitPlanMode, `{"plan": 3}`, []string{"params/plan", "string"}},
		{NameWebFetch, `{"url": "https://example.com"}`, []string{"web_fetch", "prompt"}},
		{NameWebFetch, `{"prompt": "p"}`, []string{"web_fetch", "url"}},
		{NameWebFetch, `{"url": "", "prompt": "p"}`, []string{"params/url"}},
		{NameWebFetch, `{"url": "https://example.com", "prompt": 1}`, []string{"params/prompt", "string"}},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			_, err := tool(t, tt.tool).Build(w.env, json.RawMessage(tt.args))
			require.Error(t, err)
			for _, s := range tt.want {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestExitPlanMode_TitleAndConfirmation(t *testing.T) {
	w := newWorkspace(t)
	c, err := tool(t, NameExitPlanMode).Build(w.env, json.RawMessage(`{"plan":"## Add a cache\n1. write cache.go\n2. test it"}`))
	require.NoError(t, err)
	assert.Equal(t, "Plan: Add a cache", c.Title())
	assert.Empty(t, c.Locations())
	conf := c.Confirmation()
	assert.Equal(t, ConfirmSwitchMode, conf.Kind)
	assert.Equal(t, []acp.ToolCallContent{acp.TextContent("## Add a cache\n1. write cache.go\n2. test it")}, conf.Content)
	long := strings.Repeat("x", 200)
	c, err = tool(t, NameExitPlanMode).Build(w.env, json.RawMessage(`{"plan":"`+long+`"}`))
	require.NoError(t, err)
	assert.Equal(t, "Plan: "+strings.Repeat("x", 79)+"…", c.Title())
}

func TestTodoWrite_BecomesPlan(t *testing.T) {
	w := newWorkspace(t)
	c, res := run(t, t.Context(), w.env, NameTodoWrite, map[string]any{"todos": []map[string]any{
		{"id": "1", "content": "read the code", "status": "completed"},
		{"id": "2", "content": "write the fix", "status": "in_progress"},
		{"id": "3", "content": "run the tests", "status": "pending"},
	}})
	require.NoError(t, res.Err)
	assert.Equal(t, ConfirmNone, c.Confirmation().Kind)
	assert.Empty(t, res.Content)
	assert.Equal(t, []acp.PlanEntry{
		{Content: "read the code", Priority: "medium", Status: "completed"},
		{Content: "write the fix", Priority: "medium", Status: "in_progress"},
		{Content: "run the tests", Priority: "medium", Status: "pending"},
	}, res.Plan)
	assert.Contains(t, res.LLMContent, "write the fix")

	_, res = run(t, t.Context(), w.env, NameTodoWrite, map[string]any{"todos": []any{}})
	require.NoError(t, res.Err)
	assert.NotNil(t, res.Plan)
	assert.Empty(t, res.Plan)
}

func TestTruncateHead(t *testing.T) {
	assert.Equal(t, "abc", truncateHead("abc", 3))
	got := truncateHead("héllo world", 2)
	assert.Equal(t, "h\n\n[output truncated: 11 of 12 bytes omitted]", got)
}

func TestTailBuffer(t *testing.T) {
	b := newTailBuffer(4)
	for _, s := range []string{"ab", "cdef", "ghijklmn", "o"} {
		_, err := b.Write([]byte(s))
		require.NoError(t, err)
	}
	assert.Equal(t, "lmno", b.String())
	assert.Equal(t, 11, b.dropped())
}

// TestBuiltinSchemasCompile compiles every built-in tool's parameter schema,
// which the tools otherwise do only on first use.
func TestBuiltinSchemasCompile(t *testing.T) {
	for _, tl := range Builtin() {
		spec, ok := tl.(interface{ compiled() *jsonschema.Resolved })
		require.True(t, ok, "%s has no toolSpec", tl.Name())
		require.NotNil(t, spec.compiled(), tl.Name())
		// A keyword the library does not know (a misspelt "minLenght")
		// would be ignored, not enforced.
		var walk func(s *jsonschema.Schema, at string)
		walk = func(s *jsonschema.Schema, at string) {
			assert.Empty(t, s.Extra, "%s: unknown keywords at %s", tl.Name(), at)
			for name, p := range s.Properties {
				walk(p, at+"/properties/"+name)
			}
			if s.Items != nil {
				walk(s.Items, at+"/items")
			}
		}
		walk(spec.compiled().Schema(), "")
	}
}
