package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/contextmgr"
	"github.com/acpd/acpd/session/contextmgr/contextmgrtest"
	"github.com/acpd/acpd/session/instructions/gittest"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/tools"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

// commandsUpdates returns the available_commands_update lists of sid, each
// as its command names.
func commandsUpdates(d *daemon, sid string) [][]acp.AvailableCommand {
	var out [][]acp.AvailableCommand
	for _, n := range d.cc.Updates() {
		if n.SessionID == sid && n.Update.Kind == acp.UpdateAvailableCommands {
			out = append(out, n.Update.AvailableCommands)
		}
	}
	return out
}

// waitCommands waits for the n-th available_commands_update of sid.
func waitCommands(t testing.TB, d *daemon, sid string, n int) []acp.AvailableCommand {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if us := commandsUpdates(d, sid); len(us) >= n {
			return us[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no available_commands_update #%d for %s", n, sid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func commandNames(cs []acp.AvailableCommand) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// turnText is the agent text of sid sent after the first `skip` updates.
func turnText(d *daemon, sid string, skip int) string {
	return acptest.AgentText(d.cc.Updates()[skip:], sid)
}

// TestE2E_SystemPrompt: the first request's system message holds acpd's
// prompt, then the global, repository-root and workspace AGENTS.md in that
// order (an import inlined, a cyclic one stopped), then the environment
// block with the date and the branch; every later request repeats it byte
// for byte (the provider's prompt cache keeps matching).
func TestE2E_SystemPrompt(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	configHome, repo := t.TempDir(), t.TempDir()
	ws := filepath.Join(repo, "services", "api")
	writeFile(t, filepath.Join(configHome, "acpd", "AGENTS.md"), "GLOBAL-RULE: answer in English.")
	writeFile(t, filepath.Join(repo, "AGENTS.md"), "REPO-RULE: run go test. Style: @docs/style.md")
	writeFile(t, filepath.Join(repo, "docs", "style.md"), "STYLE-RULE: tabs. More in @./loop.md")
	writeFile(t, filepath.Join(repo, "docs", "loop.md"), "LOOP-RULE: back to @./style.md")
	writeFile(t, filepath.Join(ws, "AGENTS.md"), "WORKSPACE-RULE: keep handlers thin.")
	writeFile(t, filepath.Join(ws, "main.go"), "package main\n")
	gittest.Git(t, repo, "init", "-q", "-b", "topic/prompt")
	gittest.Git(t, repo, "add", "-A")
	gittest.Git(t, repo, "commit", "-q", "-m", "Add the API service")
	writeFile(t, filepath.Join(ws, "new.go"), "package main\n")

	d := startDaemonIn(t, ws, configHome, nil, []modeltest.Response{
		{ToolCalls: []modeltest.ToolCall{readCall(filepath.Join(ws, "main.go"))}},
		{Text: "done"},
	})
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "look at main.go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)

	reqs := d.model.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, "system", reqs[0].Messages[0].Role)
	sys := reqs[0].Messages[0].Text()
	t.Logf("system prompt:\n%s", sys)
	at := func(s string) int {
		i := strings.Index(sys, s)
		assert.GreaterOrEqual(t, i, 0, "system prompt lacks %q", s)
		return i
	}
	assert.Less(t, at("You are acpd"), at("GLOBAL-RULE"))
	assert.Less(t, at("GLOBAL-RULE"), at("REPO-RULE"))
	assert.Less(t, at("REPO-RULE"), at("WORKSPACE-RULE"))
	assert.Less(t, at("WORKSPACE-RULE"), at("# Environment"))
	at("--- Context from: " + filepath.Join(repo, "AGENTS.md") + " ---")
	assert.Equal(t, 1, strings.Count(sys, "STYLE-RULE"), "the import is inlined once")
	assert.Equal(t, 1, strings.Count(sys, "LOOP-RULE"), "the nested import is inlined once")
	at("<!-- import cycle stopped: " + filepath.Join(repo, "docs", "style.md") + " -->")
	at("- Date: " + time.Now().Format("Monday, January 2, 2006"))
	at("- Branch: topic/prompt")
	at("?? new.go")
	at("  - Add the API service")
	at("Top-level entries: AGENTS.md, main.go, new.go")
	at("- OS: ")
	assert.Equal(t, reqs[0].Messages[0], reqs[1].Messages[0], "the system message is the same on every request")
}

// TestE2E_FileCommand: commands from .claude/commands and .qwen/commands
// are advertised after session/new; `/review src/x.go` sends the expanded
// prompt; a broken file is left out; a new command file is announced at the
// next prompt; /help answers without asking the model.
func TestE2E_FileCommand(t *testing.T) {
	cwd := t.TempDir()
	writeFile(t, filepath.Join(cwd, "src", "x.go"), "package x\n")
	writeFile(t, filepath.Join(cwd, ".claude", "commands", "review.md"),
		"---\ndescription: Review a file for bugs\nargument-hint: <file>\n---\nReview $ARGUMENTS for bugs and list what you found.\n")
	writeFile(t, filepath.Join(cwd, ".qwen", "commands", "git", "summary.toml"), "description = \"Summarise changes\"\nprompt = \"Summarise {{args}}\"\n")
	writeFile(t, filepath.Join(cwd, ".qwen", "commands", "broken.toml"), "prompt = \"unterminated\n")
	writeFile(t, filepath.Join(cwd, ".acpd", "commands", "bad.md"), "---\ndescription: no end\n")
	configHome := t.TempDir()
	writeFile(t, filepath.Join(configHome, "acpd", "commands", "review.md"), "the global review loses to the project's")
	writeFile(t, filepath.Join(configHome, "acpd", "commands", "standup.md"), "Write my standup notes.")

	d := startDaemonIn(t, cwd, configHome, nil, []modeltest.Response{{Text: "no bugs"}})
	sid := d.session(t)
	cmds := waitCommands(t, d, sid, 1)
	names := commandNames(cmds)
	for _, n := range []string{"compress", "init", "context", "tools", "mcp", "help", "review", "git:summary", "standup"} {
		assert.Contains(t, names, n)
	}
	assert.NotContains(t, names, "broken")
	assert.NotContains(t, names, "bad")
	i := slices.Index(names, "review")
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "Review a file for bugs", cmds[i].Description)
	require.NotNil(t, cmds[i].Input)
	assert.Equal(t, "<file>", cmds[i].Input.Hint)

	resp, err := d.cc.Prompt(t.Context(), sid, "/review src/x.go")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs := d.model.Requests()
	require.Len(t, reqs, 1)
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	assert.Equal(t, "user", last.Role)
	assert.Equal(t, "Review src/x.go for bugs and list what you found.", last.Text())

	// A command file added later is announced while the session is idle;
	// one changed just before a prompt, at that prompt. /help, which only
	// reports, does not reach the model.
	writeFile(t, filepath.Join(cwd, ".acpd", "commands", "later.md"), "---\ndescription: Added later\n---\nLater.")
	assert.Contains(t, commandNames(waitCommands(t, d, sid, 2)), "later")
	require.NoError(t, os.Remove(filepath.Join(cwd, ".qwen", "commands", "git", "summary.toml")))
	before := len(d.cc.Updates())
	resp, err = d.cc.Prompt(t.Context(), sid, "/help")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	assert.NotContains(t, commandNames(waitCommands(t, d, sid, 3)), "git:summary")
	help := turnText(d, sid, before)
	assert.Contains(t, help, "/later: Added later")
	assert.Contains(t, help, "/review <file>: Review a file for bugs")
	assert.Equal(t, 1, d.model.Served(), "/help asked the model nothing")

	// The files left out are named, with their line, by /context.
	before = len(d.cc.Updates())
	_, err = d.cc.Prompt(t.Context(), sid, "/context")
	require.NoError(t, err)
	ctxText := turnText(d, sid, before)
	assert.Contains(t, ctxText, "Warnings\n")
	assert.Contains(t, ctxText, filepath.Join(cwd, ".qwen", "commands", "broken.toml")+":1: invalid TOML")
	assert.Contains(t, ctxText, filepath.Join(cwd, ".acpd", "commands", "bad.md")+":1: front matter opened with --- is never closed")

	// An unknown /name goes to the model unchanged.
	d.model.Add(modeltest.Response{Text: "unknown command passed on"})
	_, err = d.cc.Prompt(t.Context(), sid, "/frobnicate now")
	require.NoError(t, err)
	reqs = d.model.Requests()
	last = reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1]
	assert.Equal(t, "/frobnicate now", last.Text())
}

// TestE2E_ContextCommand: /context reports the window, the instruction
// files, tools and MCP servers without a model request, before and after
// a turn that reported usage.
func TestE2E_ContextCommand(t *testing.T) {
	cwd := t.TempDir()
	writeFile(t, filepath.Join(cwd, "AGENTS.md"), "Use tabs.")
	d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{
		{Text: "hi", Usage: &model.Usage{PromptTokens: 1500, CompletionTokens: 20, TotalTokens: 1520}},
	})
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "/context")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	text := acptest.AgentText(d.cc.Updates(), sid)
	assert.Regexp(t, `- Used: \d+ of 131072 tokens \(\d+\.\d%\), estimated\n`, text)
	// One estimator: with no conversation yet, what compaction counts
	// (Used) is exactly the system prompt and tool figures shown.
	var used, system, toolTok int
	_, err = fmt.Sscanf(regexp.MustCompile(`Used: \d+`).FindString(text), "Used: %d", &used)
	require.NoError(t, err)
	_, err = fmt.Sscanf(regexp.MustCompile(`System prompt: about \d+ tokens; tool definitions: about \d+`).FindString(text),
		"System prompt: about %d tokens; tool definitions: about %d", &system, &toolTok)
	require.NoError(t, err)
	assert.Equal(t, used, system+toolTok)
	assert.Contains(t, text, "- Automatic compaction at 98072 tokens")
	assert.Contains(t, text, filepath.Join(cwd, "AGENTS.md")+": about 3 tokens")
	// The built-ins and the agent tool, but not ask_user_question: the
	// client offers no elicitation.
	assert.Contains(t, text, fmt.Sprintf("Tools: %d offered", len(tools.Builtin())))
	assert.Contains(t, text, "MCP servers\n- none")
	assert.Contains(t, text, "Compaction\n- none in this session")
	assert.Zero(t, d.model.Served(), "/context asked the model")
	assert.NotContains(t, text, "Warnings")

	_, err = d.cc.Prompt(t.Context(), sid, "hello "+strings.Repeat("and some context ", 200))
	require.NoError(t, err)
	before := len(d.cc.Updates())
	_, err = d.cc.Prompt(t.Context(), sid, "/context")
	require.NoError(t, err)
	text = turnText(d, sid, before)
	// The provider counted 1500 prompt tokens; the answer "hi" adds about 5.
	assert.Regexp(t, `- Used: 150\d of 131072 tokens \(1\.1%\), the model's last count plus what was added since`, text)
	assert.Contains(t, text, "Conversation: 2 messages")
	assert.Equal(t, 1, d.model.Served())
	// A summary would be larger than this history.
	d.model.Add(modeltest.Response{Text: contextmgrtest.Snapshot(strings.Repeat("long summary ", 200))})
	before = len(d.cc.Updates())
	_, err = d.cc.Prompt(t.Context(), sid, "/compress")
	require.NoError(t, err)
	assert.Contains(t, turnText(d, sid, before), "Nothing to compress: A summary would not make this conversation smaller.")
	assert.Equal(t, 2, d.model.Served(), "only the summary request")

	// /compress summarises the conversation with the focus given; the next
	// request carries the summary instead of the history.
	d.model.Add(modeltest.Response{Text: contextmgrtest.Snapshot("greeting")},
		modeltest.Response{Text: "ok"})
	before = len(d.cc.Updates())
	_, err = d.cc.Prompt(t.Context(), sid, "/compress keep the test names")
	require.NoError(t, err)
	text = turnText(d, sid, before)
	assert.Regexp(t, `Context compressed \(\d+ -> \d+ tokens\)\. Summarised 2 earlier messages; kept 0 verbatim\.`, text)
	reqs := d.model.Requests()
	require.Len(t, reqs, 3)
	// The summary request re-sends the conversation (the provider's cache
	// serves it) and asks for the snapshot with the focus in its last message.
	require.True(t, contextmgrtest.IsInline(reqs[2]))
	assert.Equal(t, reqs[0].Messages, reqs[2].Messages[:len(reqs[0].Messages)], "the conversation as it was last sent")
	assert.Equal(t, reqs[0].Tools, reqs[2].Tools)
	assert.Contains(t, reqs[2].Messages[len(reqs[2].Messages)-1].Text(), "Additional Instructions:\nkeep the test names")
	assert.Contains(t, reqs[2].Messages[1].Text(), "hello and some context")
	before = len(d.cc.Updates())
	_, err = d.cc.Prompt(t.Context(), sid, "/context")
	require.NoError(t, err)
	assert.Regexp(t, `Compaction\n- summary \(manual\) at \d\d:\d\d:\d\d: \d+ -> \d+ tokens\. Summarised`, turnText(d, sid, before))
	_, err = d.cc.Prompt(t.Context(), sid, "next")
	require.NoError(t, err)
	reqs = d.model.Requests()
	var convo []string
	for _, m := range reqs[len(reqs)-1].Messages[1:] {
		convo = append(convo, m.Role+": "+strings.SplitN(m.Text(), "\n", 2)[0])
	}
	assert.Equal(t, []string{"user: " + strings.SplitN(contextmgr.SummaryIntro, "\n", 2)[0], "assistant: " + contextmgr.Ack, "user: next"}, convo)
}

// TestE2E_InitCommand: /init has the model study the project and ends in
// a write_file of AGENTS.md, which the next session loads.
func TestE2E_InitCommand(t *testing.T) {
	cwd := t.TempDir()
	writeFile(t, filepath.Join(cwd, "go.mod"), "module example.com/x\n")
	target := filepath.Join(cwd, "AGENTS.md")
	args, err := json.Marshal(map[string]string{"file_path": target, "content": "# Project\n\nRun `go test ./...`.\n"})
	require.NoError(t, err)
	d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{
		{ToolCalls: []modeltest.ToolCall{readCall(filepath.Join(cwd, "go.mod"))}},
		{ToolCalls: []modeltest.ToolCall{{Name: "write_file", Arguments: string(args)}}},
		{Text: "Wrote AGENTS.md."},
	})
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "/init")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)

	reqs := d.model.Requests()
	require.Len(t, reqs, 3)
	first := reqs[0].Messages[len(reqs[0].Messages)-1]
	assert.Equal(t, "user", first.Role)
	assert.Contains(t, first.Text(), "Create the project's instruction file "+target)
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "# Project\n\nRun `go test ./...`.\n", string(got))
	var wrote bool
	for _, n := range d.cc.Updates() {
		if u := n.Update.ToolCallUpdate; u != nil && u.Status == acp.StatusCompleted {
			wrote = true
		}
	}
	assert.True(t, wrote, "the write_file call completed")

	// A new session now loads the written file.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	sid2, err := d.cc.NewSession(ctx, cwd)
	require.NoError(t, err)
	before := len(d.cc.Updates())
	_, err = d.cc.Prompt(ctx, sid2, "/context")
	require.NoError(t, err)
	assert.Contains(t, turnText(d, sid2, before), target+": about")

	// With AGENTS.md present, /init asks for an update.
	d.model.Add(modeltest.Response{Text: "nothing to change"})
	_, err = d.cc.Prompt(ctx, sid2, "/init focus on tests")
	require.NoError(t, err)
	reqs = d.model.Requests()
	last := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1]
	assert.Contains(t, last.Text(), "Update the project's instruction file "+target)
	assert.Contains(t, last.Text(), "Also take this into account: focus on tests")
}

// TestE2E_CommandsAfterLoadAndResume: session/load and session/resume
// announce the commands after their answer too.
func TestE2E_CommandsAfterLoadAndResume(t *testing.T) {
	cwd := t.TempDir()
	writeFile(t, filepath.Join(cwd, ".acpd", "commands", "ship.md"), "Ship it.")
	d := startDaemonIn(t, cwd, t.TempDir(), nil, nil)
	sid := d.session(t)
	ctx := ctxFor(t)
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionClose, acp.SessionIDRequest{SessionID: sid}, nil))
	var lr acp.LoadSessionResponse
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionLoad, acp.LoadSessionRequest{SessionID: sid, Cwd: cwd, MCPServers: []acp.MCPServer{}}, &lr))
	assert.Contains(t, commandNames(waitCommands(t, d, sid, 2)), "ship")
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionClose, acp.SessionIDRequest{SessionID: sid}, nil))
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionResume, acp.ResumeSessionRequest{SessionID: sid, Cwd: cwd, MCPServers: []acp.MCPServer{}}, &lr))
	assert.Contains(t, commandNames(waitCommands(t, d, sid, 3)), "ship")
	// The announcement follows the answer on the wire.
	lines := d.cc.Lines()
	var answered, announced int
	for i, l := range lines {
		if strings.Contains(string(l), `"available_commands_update"`) {
			announced = i
		}
		if strings.Contains(string(l), `"result"`) {
			answered = i
		}
	}
	assert.Greater(t, announced, answered, "the last announcement comes after the resume answer")
}

// TestE2E_BadInstructionFiles: an AGENTS.md that is a folder, a binary
// QWEN.md and an import escaping the workspace never fail session/new; the
// prompt still runs, and /context names what was skipped.
func TestE2E_BadInstructionFiles(t *testing.T) {
	cwd, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(cwd, "AGENTS.md"), 0o755))
	writeFile(t, filepath.Join(cwd, "QWEN.md"), "\x00\x01binary")
	writeFile(t, filepath.Join(outside, "secret.md"), "SECRET")
	configHome := t.TempDir()
	writeFile(t, filepath.Join(configHome, "acpd", "AGENTS.md"), "Global. @"+filepath.Join(outside, "secret.md"))
	d := startDaemonIn(t, cwd, configHome, nil, []modeltest.Response{{Text: "fine"}})
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "hello")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	sys := d.model.Requests()[0].Messages[0].Text()
	assert.Contains(t, sys, "Global.")
	assert.NotContains(t, sys, "SECRET")
	before := len(d.cc.Updates())
	_, err = d.cc.Prompt(t.Context(), sid, "/context")
	require.NoError(t, err)
	text := turnText(d, sid, before)
	assert.Contains(t, text, filepath.Join(cwd, "AGENTS.md")+": instruction file skipped: is a directory")
	assert.Contains(t, text, filepath.Join(cwd, "QWEN.md")+": instruction file skipped: binary")
	assert.Contains(t, text, "is outside the workspace")
}

// TestE2E_CustomSystemPrompt: model.systemPrompt replaces acpd's own
// prompt; the instructions and the environment are still added.
func TestE2E_CustomSystemPrompt(t *testing.T) {
	cwd := t.TempDir()
	writeFile(t, filepath.Join(cwd, "AGENTS.md"), "PROJECT-RULE")
	cfg := filepath.Join(t.TempDir(), "acpd.toml")
	writeFile(t, cfg, "[model]\nsystemPrompt = \"You are a terse reviewer.\"\n")
	d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{{Text: "ok"}}, "--config", cfg)
	sid := d.session(t)
	_, err := d.cc.Prompt(t.Context(), sid, "hi")
	require.NoError(t, err)
	sys := d.model.Requests()[0].Messages[0].Text()
	assert.True(t, strings.HasPrefix(sys, "You are a terse reviewer.\n\n"), sys)
	assert.NotContains(t, sys, "You are acpd")
	assert.Contains(t, sys, "PROJECT-RULE")
	assert.Contains(t, sys, "# Environment")
}

// TestE2E_ContextOff: context.environment and context.instructions false
// leave both out; the roots are still given.
func TestE2E_ContextOff(t *testing.T) {
	cwd := t.TempDir()
	writeFile(t, filepath.Join(cwd, "AGENTS.md"), "PROJECT-RULE")
	cfg := filepath.Join(t.TempDir(), "acpd.toml")
	writeFile(t, cfg, "[context]\nenvironment = false\ninstructions = false\n")
	d := startDaemonIn(t, cwd, t.TempDir(), nil, []modeltest.Response{{Text: "ok"}}, "--config", cfg)
	sid := d.session(t)
	_, err := d.cc.Prompt(t.Context(), sid, "hi")
	require.NoError(t, err)
	sys := d.model.Requests()[0].Messages[0].Text()
	assert.Contains(t, sys, "You are acpd")
	assert.NotContains(t, sys, "PROJECT-RULE")
	assert.NotContains(t, sys, "# Environment")
	assert.Contains(t, sys, "Workspace roots (absolute): "+cwd)
}
