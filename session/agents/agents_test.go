package agents

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/tools"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

// known accepts acpd's built-in tool names and two configured models.
var known = Check{
	Tool: func(n string) bool {
		return slices.Contains([]string{"read_file", "write_file", "edit", "list_directory", "glob", "grep_search",
			"run_shell_command", "todo_write", "exit_plan_mode", "web_fetch", "agent"}, n)
	},
	Model: func(n string) bool { return n == "big-model" || n == "small-model" },
}

func TestParse_FrontMatterForms(t *testing.T) {
	for _, tc := range []struct {
		name  string
		text  string
		tools []string // nil: every tool
		model string
		desc  string
	}{
		{name: "comma list and Claude names", text: "---\nname: rev\ndescription: Reviews code\ntools: Read, Grep, Glob\n---\nYou review.",
			tools: []string{"read_file", "grep_search", "glob"}, desc: "Reviews code"},
		{name: "yaml block list", text: "---\nname: rev\ndescription: \"Reviews code\"\ntools:\n  - read_file\n  - 'glob'\nmodel: small-model\n---\nYou review.",
			tools: []string{"read_file", "glob"}, model: "small-model", desc: "Reviews code"},
		{name: "flow list", text: "---\nname: rev\ndescription: Reviews\ntools: [read_file, LS]\n---\nYou review.",
			tools: []string{"read_file", "list_directory"}, desc: "Reviews"},
		{name: "no tools, inherit model", text: "---\nname: rev\ndescription: Reviews\nmodel: inherit\ncolor: blue\n---\n\nYou review.\n",
			desc: "Reviews"},
		{name: "empty tools list", text: "---\nname: rev\ndescription: Reviews\ntools: []\n---\nYou review.",
			tools: []string{}, desc: "Reviews"},
		{name: "folded description, CRLF", text: "---\r\nname: rev\r\ndescription: >\r\n  Reviews code\r\n  carefully\r\n---\r\nYou review.",
			desc: "Reviews code carefully"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "rev.md"), tc.text)
			l := Load([]Dir{{Path: dir, Source: SourceProject}})
			require.Empty(t, l.Warnings)
			set := NewSet(Builtins(), l, known)
			require.Empty(t, set.Warnings)
			a, ok := set.Lookup("rev")
			require.True(t, ok)
			assert.Equal(t, tc.tools, a.Tools)
			assert.Equal(t, tc.model, a.Model)
			assert.Equal(t, tc.desc, a.Description)
			assert.Equal(t, "You review.", a.Prompt)
			assert.Equal(t, SourceProject, a.Source)
			assert.Equal(t, filepath.Join(dir, "rev.md"), a.Path)
		})
	}
}

func TestLoad_BrokenFilesWarnWithLine(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"nofm.md":     "You review.",
		"open.md":     "---\nname: x\ndescription: y\nYou review.",
		"noname.md":   "---\ndescription: y\n---\nbody",
		"nodesc.md":   "---\nname: nodesc\n---\nbody",
		"badname.md":  "---\nname: has space\ndescription: y\n---\nbody",
		"nobody.md":   "---\nname: nobody\ndescription: y\n---\n\n",
		"badline.md":  "---\nname: badline\ndescription: y\nthis is not a key\n---\nbody",
		"twice.md":    "---\nname: twice\nname: again\ndescription: y\n---\nbody",
		"binary.md":   "---\nname: bin\x00\ndescription: y\n---\nbody",
		"ok.md":       "---\nname: ok\ndescription: fine\n---\nbody",
		"ignored.txt": "not an agent",
	}
	for n, text := range files {
		write(t, filepath.Join(dir, n), text)
	}
	write(t, filepath.Join(dir, "huge.md"), "---\nname: huge\ndescription: y\n---\n"+strings.Repeat("x", maxFileSize))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.md"), 0o755))
	l := Load([]Dir{{Path: dir, Source: SourceProject}})
	require.Len(t, l.Agents, 1)
	assert.Equal(t, "ok", l.Agents[0].Name)
	want := []string{
		"nofm.md:1: no front matter",
		"open.md:1: front matter opened with --- is never closed",
		"noname.md:1: missing the required key \"name\"",
		"nodesc.md:1: missing the required key \"description\"",
		"badname.md:2: \"has space\" is not a usable agent name",
		"nobody.md:4: the agent's system prompt",
		"badline.md:4: front matter line \"this is not a key\" is not `key: value`",
		"twice.md:3: key \"name\" is given twice",
		"binary.md:1: not a UTF-8 text file",
		fmt.Sprintf("huge.md:1: file is larger than %d bytes", maxFileSize),
	}
	require.Len(t, l.Warnings, len(want), "warnings: %q", l.Warnings)
	for _, w := range want {
		found := slices.ContainsFunc(l.Warnings, func(got string) bool {
			return strings.HasPrefix(got, filepath.Join(dir, w)) && strings.HasSuffix(got, "; agent left out")
		})
		assert.True(t, found, "no warning %q in %q", w, l.Warnings)
	}
}

func TestSet_ProjectWinsToolsAndModelsChecked(t *testing.T) {
	home, root, extra := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(home, "agents", "rev.md"), "---\nname: rev\ndescription: global\n---\nglobal prompt")
	write(t, filepath.Join(home, "agents", "only-global.md"), "---\nname: only-global\ndescription: g\n---\ng")
	write(t, filepath.Join(extra, ".acpd", "agents", "rev.md"), "---\nname: rev\ndescription: extra root\n---\nextra")
	write(t, filepath.Join(root, ".claude", "agents", "rev.md"), "---\nname: rev\ndescription: claude\n---\nclaude")
	write(t, filepath.Join(root, ".qwen", "agents", "rev.md"),
		"---\nname: rev\ndescription: qwen\ntools: Read, Frobnicate, Task, todo_write\nmodel: sonnet\n---\nqwen prompt")
	write(t, filepath.Join(root, ".acpd", "agents", "explore.md"), "---\nname: explore\ndescription: mine\n---\nx")

	dirs := Dirs([]string{root, extra}, filepath.Join(home, "agents"))
	set := NewSet(Builtins(), Load(dirs), known)
	rev, ok := set.Lookup("rev")
	require.True(t, ok)
	assert.Equal(t, "qwen", rev.Description, ".qwen beats .claude in the cwd, which beats other roots and the global folder")
	assert.Equal(t, []string{"read_file"}, rev.Tools)
	assert.Empty(t, rev.Model)
	g, ok := set.Lookup("only-global")
	require.True(t, ok)
	assert.Equal(t, SourceGlobal, g.Source)
	_, ok = set.Lookup("explore")
	assert.False(t, ok, "a built-in name is reserved in any case")

	qwen := filepath.Join(root, ".qwen", "agents", "rev.md")
	assert.ElementsMatch(t, []string{
		qwen + `:4: unknown tool "Frobnicate"; left out of the agent's tools`,
		qwen + `:4: tool "Task" is not available to subagents; left out of the agent's tools`,
		qwen + `:4: tool "todo_write" is not available to subagents; left out of the agent's tools`,
		qwen + `:5: model "sonnet" is not one of the configured models; the agent runs on the session's model`,
		filepath.Join(root, ".acpd", "agents", "explore.md") + `:2: agent "explore" has the name of a built-in agent; left out`,
	}, set.Warnings)
	names := []string{}
	for _, a := range set.Agents() {
		names = append(names, a.Name)
	}
	assert.Equal(t, []string{GeneralPurpose, Explore, "only-global", "rev"}, names)
	assert.NotEqual(t, "", set.Stamp())
	assert.Equal(t, set.Stamp(), Stamp(dirs))
	write(t, filepath.Join(root, ".acpd", "agents", "new.md"), "---\nname: new\ndescription: n\n---\nn")
	assert.NotEqual(t, set.Stamp(), Stamp(dirs), "a new file changes the stamp")
}

func TestSet_BoundsAgentCount(t *testing.T) {
	dir := t.TempDir()
	for i := range maxFiles + 5 {
		write(t, filepath.Join(dir, fmt.Sprintf("a%03d.md", i)), fmt.Sprintf("---\nname: a%03d\ndescription: d\n---\np", i))
	}
	l := Load([]Dir{{Path: dir, Source: SourceProject}})
	assert.Len(t, l.Agents, maxFiles)
	assert.Contains(t, l.Warnings, fmt.Sprintf("%s: more than %d agent files; the rest are left out", dir, maxFiles))
	set := NewSet(Builtins(), l, known)
	assert.Len(t, set.Agents(), maxAgents)
	assert.True(t, slices.ContainsFunc(set.Warnings, func(w string) bool {
		return strings.Contains(w, fmt.Sprintf("more than %d agents", maxAgents))
	}), "%q", set.Warnings)
}

func TestAgent_ReadOnly(t *testing.T) {
	b := Builtins()
	assert.False(t, b[0].ReadOnly(), "general-purpose")
	assert.True(t, b[1].ReadOnly(), "Explore")
	assert.True(t, (&Agent{Tools: []string{"grep_search"}}).ReadOnly())
	assert.True(t, (&Agent{Tools: []string{}}).ReadOnly(), "no tools at all cannot change anything")
	assert.False(t, (&Agent{Tools: []string{"read_file", "edit"}}).ReadOnly())
}

func TestTool_BuildAndDescription(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "rev.md"), "---\nname: rev\ndescription: Reviews   code\n  in depth\ntools: Read\n---\np")
	tool := NewTool(NewSet(Builtins(), Load([]Dir{{Path: dir, Source: SourceProject}}), known))
	spec := tool.Spec()
	assert.Equal(t, ToolName, spec.Name)
	assert.Contains(t, spec.Description, "\n- general-purpose: Researches complex questions")
	assert.Contains(t, spec.Description, "\n- Explore: Read-only: finds files")
	assert.Contains(t, spec.Description, "(Tools: read_file, list_directory, glob, grep_search, web_fetch)")
	assert.Contains(t, spec.Description, "\n- rev: Reviews code in depth (Tools: read_file)")
	assert.True(t, json.Valid(spec.Parameters))

	c, err := tool.Build(&tools.Env{}, json.RawMessage(`{"description":"Find the config","prompt":"Where is X set?"}`))
	require.NoError(t, err)
	call := c.(*Call)
	assert.Equal(t, GeneralPurpose, call.Agent.Name, "subagent_type defaults to general-purpose")
	assert.Equal(t, "Find the config", call.Title())
	assert.Equal(t, tools.ConfirmNone, call.Confirmation().Kind)

	c, err = tool.Build(&tools.Env{}, json.RawMessage(`{"description":"x","prompt":"y","subagent_type":"rev"}`))
	require.NoError(t, err)
	assert.Equal(t, "rev", c.(*Call).Agent.Name)

	_, err = tool.Build(&tools.Env{}, json.RawMessage(`{"description":"x","prompt":"y","subagent_type":"nope"}`))
	require.EqualError(t, err, `invalid parameters for agent: params/subagent_type: unknown agent "nope"; available: general-purpose, Explore, rev`)
	_, err = tool.Build(&tools.Env{}, json.RawMessage(`{"description":"x"}`))
	require.ErrorContains(t, err, "invalid parameters for agent")
	_, err = tool.Build(&tools.Env{}, json.RawMessage(`{"description":" ","prompt":"y"}`))
	require.ErrorContains(t, err, "params/description")

	res := call.Execute(t.Context(), &tools.Env{})
	assert.Error(t, res.Err, "only a session runs a subagent")
}

func TestCall_TitleIsShort(t *testing.T) {
	c := &Call{Description: strings.Repeat("é", 200) + "\nmore"}
	assert.Equal(t, maxTitle, len([]rune(c.Title())))
	assert.True(t, strings.HasSuffix(c.Title(), "…"))
}

func TestSubagentTool(t *testing.T) {
	for _, n := range []string{"agent", "task", "todo_write", "exit_plan_mode"} {
		assert.False(t, SubagentTool(n), n)
	}
	for _, n := range []string{"read_file", "run_shell_command", "mcp__x__y"} {
		assert.True(t, SubagentTool(n), n)
	}
}
