package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model/anthropic/anthropictest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// permissionEditor answers the permission requests that reach the editor
// with the first option of the kind given, and keeps them.
type permissionEditor struct {
	kind acp.PermissionOptionKind
	mu   sync.Mutex
	reqs []acp.RequestPermissionRequest
}

func (p *permissionEditor) answer(params json.RawMessage) *acp.RequestPermissionResponse {
	var r acp.RequestPermissionRequest
	_ = json.Unmarshal(params, &r)
	p.mu.Lock()
	p.reqs = append(p.reqs, r)
	p.mu.Unlock()
	for _, o := range r.Options {
		if o.Kind == p.kind {
			return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: o.OptionID}}
		}
	}
	return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}
}

// asked are the commands of the requests the editor got.
func (p *permissionEditor) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.reqs {
		in, _ := r.ToolCall.RawInput.(map[string]any)
		cmd, _ := in["command"].(string)
		out = append(out, cmd)
	}
	return out
}

// askingAcpd is acpd as the guarded agent in approval mode default, so it
// asks before every command, with stand-ins for go, curl and make first
// on its PATH (the rules judge the line; nothing real runs).
func askingAcpd(t *testing.T, srv *modeltest.Server) guardAgent {
	t.Helper()
	a := innerAcpd(t, srv)
	for i, arg := range a.cmd {
		if arg == "yolo" {
			a.cmd[i] = "default"
		}
	}
	bin := t.TempDir()
	for _, name := range []string{"go", "curl", "make"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\necho \"fake $(basename $0) $*\"\n"), 0o755))
	}
	for i, e := range a.env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			a.env[i] = "PATH=" + bin + ":" + v
		}
	}
	return a
}

func shellStep(id, command string) modeltest.Response {
	args, _ := json.Marshal(map[string]string{"command": command})
	return modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: id, Name: "run_shell_command", Arguments: string(args)}}}
}

// toolText is what the guarded agent's model read for call id.
func toolText(srv *modeltest.Server, id string) string {
	for _, r := range srv.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" && m.ToolCallID == id {
				return m.Text()
			}
		}
	}
	return ""
}

// TestGuard_PermissionRules: acpd guard answers the guarded agent's
// permission requests from acpd's rules and hooks: an allowed command
// runs without reaching the editor, a denied one is refused with the
// agent's reject option, a PreToolUse hook that exits 2 refuses its call,
// a PostToolUse hook runs after a completed call, and the rest is asked;
// the editor's "always allow" becomes a rule in the guard's state folder
// that a new guard process honours, and acpd permissions lists.
func TestGuard_PermissionRules(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t)
	a := askingAcpd(t, srv)
	data, hookDir := t.TempDir(), t.TempDir()
	marker := filepath.Join(hookDir, "post.json")
	block := filepath.Join(hookDir, "block.sh")
	require.NoError(t, os.WriteFile(block, []byte("#!/bin/sh\nif grep -q 'make deploy' ; then echo 'deploys go through CI' >&2; exit 2; fi\nexit 0\n"), 0o755))
	cfg := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
[permissions]
allow = ["Bash(go test:*)"]
deny = ["Bash(curl:*)"]

[[hooks.PreToolUse]]
matcher = "Bash"
hooks = [{ type = "command", command = "`+block+`" }]

[[hooks.PostToolUse]]
matcher = "Bash"
hooks = [{ type = "command", command = "cat > `+marker+`" }]
`), 0o644))

	srv.Add(shellStep("allowed", "go test ./..."), shellStep("denied", "curl https://example.com"),
		shellStep("hooked", "make deploy"), shellStep("asked", "make build"), modeltest.Response{Text: "done"})
	ed := &permissionEditor{kind: acp.AllowAlways}
	g := startGuardEditor(t, a, ed, "--config", cfg, "--data-dir", data)
	sid := g.newSession(a.ws)
	stop, e := g.prompt(sid, "work")
	require.Nil(t, e, "stderr:\n%s", g.stderr.String())
	assert.Equal(t, acp.StopEndTurn, stop)

	assert.Equal(t, []string{"make build"}, ed.asked(), "only the call no rule or hook decided reached the editor")
	assert.Contains(t, toolText(srv, "allowed"), "fake go test ./...")
	assert.NotContains(t, toolText(srv, "denied"), "fake curl", "the denied command did not run")
	assert.NotContains(t, toolText(srv, "hooked"), "fake make", "the hook's refusal held")
	assert.Contains(t, toolText(srv, "asked"), "fake make build")
	require.Eventually(t, func() bool { _, err := os.Stat(marker); return err == nil }, 10*time.Second, 50*time.Millisecond,
		"the PostToolUse hook ran")
	post, err := os.ReadFile(marker)
	require.NoError(t, err)
	assert.Contains(t, string(post), `"hook_event_name":"PostToolUse"`)
	assert.Contains(t, string(post), `"tool_name":"Bash"`)
	g.closeAndCheck()

	// The "always" answer is a rule of the workspace in the guard's data
	// folder, and a new guard runs the command without the editor.
	files, err := filepath.Glob(filepath.Join(data, "permissions", "*.toml"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	kept, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Contains(t, string(kept), `"Bash(make build:*)"`)

	// The inner acpd kept its own "always" in its data folder: give it a
	// fresh one, so only the guard's rule can answer.
	a2 := a
	a2.cmd = slices.Clone(a.cmd)
	for i := range a2.cmd[:len(a2.cmd)-1] {
		if a2.cmd[i] == "--data-dir" {
			a2.cmd[i+1] = t.TempDir()
		}
	}
	srv.Add(shellStep("again", "make build"), modeltest.Response{Text: "done"})
	ed2 := &permissionEditor{kind: acp.RejectOnce}
	g2 := startGuardEditor(t, a2, ed2, "--config", cfg, "--data-dir", data)
	sid2 := g2.newSession(a.ws)
	_, e = g2.prompt(sid2, "again")
	require.Nil(t, e, "stderr:\n%s", g2.stderr.String())
	assert.Empty(t, ed2.asked(), "the kept rule answered")
	assert.Contains(t, toolText(srv, "again"), "fake make build")
	g2.closeAndCheck()

	cmd := exec.Command(acpdBinary(t), "permissions", "--config", cfg, "--data-dir", data)
	cmd.Dir, cmd.Env = a.ws, a.env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "Bash(make build:*)")
	assert.Contains(t, string(out), files[0])

	// acpd stats names the rule and the hook that decided.
	cmd = exec.Command(acpdBinary(t), "stats", "--config", os.DevNull, "--data-dir", data)
	cmd.Env = a.env
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "rules allow: 2")
	assert.Contains(t, string(out), "rules deny: 1")
	assert.Contains(t, string(out), "hooks deny: 1")
}

// startGuardEditor runs `acpd guard FLAGS -- AGENT` as startGuard does,
// with the flags given (a configuration, a data folder) and ed answering
// the permission requests that reach the editor.
func startGuardEditor(t *testing.T, a guardAgent, ed *permissionEditor, flags ...string) *guarded {
	t.Helper()
	args := append([]string{acpdBinary(t), "guard", "--log-level", "warn"}, flags...)
	g := startEditor(t, a, append(append(args, "--"), a.cmd...))
	g.mu.Lock()
	g.onPermission = ed.answer
	g.mu.Unlock()
	return g
}

// TestGuard_PermissionRules_ClaudeAgentACP: in front of claude-agent-acp
// (Claude Code from npm), the guard answers Claude's Bash permission
// requests from the rules: an allowed command runs and a denied one does
// not, neither reaching the editor; the editor's "always allow" for
// another command is kept as a rule in acpd's state folder.
func TestGuard_PermissionRules_ClaudeAgentACP(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t)
	a := claudeAgent(t, srv)
	steps := []string{"touch made.txt", "rm target.txt", "mkdir newdir"}
	var mu sync.Mutex
	served := 0
	srv.SetResponder(func(r anthropictest.Request) (anthropictest.Response, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(r.Tools) == 0 || served >= len(steps) {
			return anthropictest.Response{Text: "done"}, true
		}
		args, _ := json.Marshal(map[string]string{"command": steps[served], "description": "a step"})
		served++
		return anthropictest.Response{Thinking: "Running a command.", ToolCalls: []anthropictest.ToolCall{{ID: fmt.Sprintf("toolu_%d", served),
			Name: "Bash", Arguments: string(args)}}}, true
	})
	cfg := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[permissions]\nallow = [\"Bash(touch:*)\"]\ndeny = [\"Bash(rm:*)\"]\n"), 0o644))
	data := t.TempDir()
	ed := &permissionEditor{kind: acp.AllowAlways}
	g := startGuardEditor(t, a, ed, "--config", cfg, "--data-dir", data)
	sid := g.newSession(a.ws)
	stop, e := g.prompt(sid, "do the steps")
	require.Nil(t, e, "stderr:\n%s", g.stderr.String())
	assert.Equal(t, acp.StopEndTurn, stop)
	g.closeAndCheck()

	assert.FileExists(t, filepath.Join(a.ws, "made.txt"), "the allowed command ran")
	assert.FileExists(t, filepath.Join(a.ws, "target.txt"), "the denied command did not")
	assert.Equal(t, []string{"mkdir newdir"}, ed.asked(), "only the command no rule decided reached the editor")
	files, err := filepath.Glob(filepath.Join(data, "permissions", "*.toml"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	kept, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Contains(t, string(kept), `"Bash(mkdir:*)"`, "the editor's always allow is a rule of the workspace")
}
