package session_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// reject answers a permission request with its reject option.
func reject(_ int, r *acp.RequestPermissionRequest) string { return optionOf(r, acp.RejectOnce) }

// titles are the titles of the calls asked about.
func titles(reqs []acp.RequestPermissionRequest) []string {
	var out []string
	for _, r := range reqs {
		if r.ToolCall.Title != nil {
			out = append(out, *r.ToolCall.Title)
		}
	}
	return out
}

// fakeBin is a folder of stand-ins for go and curl that print their
// arguments: the rules judge the command line, and nothing real runs.
func fakeBin(t *testing.T) string {
	bin := t.TempDir()
	for _, name := range []string{"go", "curl"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\necho \"fake $(basename $0) $*\"\n"), 0o755))
	}
	return bin
}

// policyDaemon starts acpd in cwd with the configuration text, approval
// mode default, the data folder given and the fake commands first on its
// PATH. The client offers no terminal, so commands run in acpd itself.
func policyDaemon(t *testing.T, cwd, dataDir, config string, fc *acptest.FakeClient, resps ...modeltest.Response) (*daemon, string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(config), 0o644))
	env := []string{"PATH=" + fakeBin(t) + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	d := startDaemonEnv(t, cwd, t.TempDir(), env, fc, resps, "--config", cfg, "--data-dir", dataDir, "--approval-mode", "default")
	ctx := ctxFor(t)
	_, err := d.cc.InitializeWith(ctx, acp.ClientCapabilities{})
	require.NoError(t, err)
	sid, err := d.cc.NewSession(ctx, cwd)
	require.NoError(t, err)
	return d, sid
}

// toolResults are the tool messages of the model's last request, by call id.
func toolResults(srv *modeltest.Server) map[string]string {
	reqs := srv.Requests()
	out := map[string]string{}
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Text()
		}
	}
	return out
}

func shellCall(id, command string) modeltest.ToolCall {
	tc := shellTC(command)
	tc.ID = id
	return tc
}

func writeCall(id, path string) modeltest.ToolCall {
	b, _ := json.Marshal(map[string]string{"file_path": path, "content": "x"})
	return modeltest.ToolCall{ID: id, Name: "write_file", Arguments: string(b)}
}

// The rules through the built binary: an allowed command runs
// without a question, a compound line, a substitution and a redirection
// out of reach ask; a denied command is refused without one and the model
// reads the rule; an edit rule allows src/a.go, not src/../secret nor a
// symlink out of src.
func TestE2E_PermissionRules(t *testing.T) {
	cwd := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(cwd, "src"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(cwd, "other"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(cwd, "other"), filepath.Join(cwd, "src", "link")))
	a := &permissionLog{}
	steps := []modeltest.ToolCall{
		shellCall("run", "go test ./..."),
		shellCall("and", "go test ./... && rm -rf x"),
		shellCall("subst", "go test $(touch y)"),
		shellCall("redir", "go test ./... > /etc/z"),
		shellCall("curl", "curl https://example.com"),
		shellCall("lscurl", "ls; curl https://example.com"),
		writeCall("edit", filepath.Join(cwd, "src", "a.go")),
		writeCall("dotdot", filepath.Join(cwd, "src", "..", "secret")),
		writeCall("symlink", filepath.Join(cwd, "src", "link", "x")),
	}
	var resps []modeltest.Response
	for _, s := range steps {
		resps = append(resps, calls(s))
	}
	resps = append(resps, modeltest.Response{Text: "done"})
	d, sid := policyDaemon(t, cwd, t.TempDir(), `
[permissions]
allow = ["Bash(go test:*)", "Edit(src/**)"]
deny = ["Bash(curl:*)"]
`, a.client(reject), resps...)
	r, err := d.cc.Prompt(ctxFor(t), sid, "work")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, r.StopReason)

	assert.Equal(t, []string{"go test ./... && rm -rf x", "go test $(touch y)", "go test ./... > /etc/z",
		"Write secret", "Write src/link/x"}, trimTitles(titles(a.requests())), "exactly these were asked about")

	results := map[string]string{}
	for _, req := range d.model.Requests() {
		for _, m := range req.Messages {
			if m.Role == "tool" {
				results[m.ToolCallID] = m.Text()
			}
		}
	}
	assert.Contains(t, results["run"], "fake go test ./...", "the allowed command ran")
	for _, id := range []string{"curl", "lscurl"} {
		assert.Contains(t, results[id], `Permission denied: the deny rule "Bash(curl:*)"`, id)
	}
	_, err = os.Stat(filepath.Join(cwd, "src", "a.go"))
	assert.NoError(t, err, "the allowed edit was written")
	_, err = os.Stat(filepath.Join(cwd, "secret"))
	assert.Error(t, err, "the rejected edit was not")

	// The transcript and the editor say which rule decided.
	var trail []any
	for _, u := range forSession(d.cc.Updates(), sid) {
		if tu := u.ToolCallUpdate; tu != nil && tu.ToolCallID == "curl" && tu.Meta[acp.MetaDecisions] != nil {
			trail = tu.Meta[acp.MetaDecisions].([]any)
		}
	}
	require.Len(t, trail, 1)
	assert.Equal(t, "rules", trail[0].(map[string]any)["by"])
	assert.Equal(t, "deny", trail[0].(map[string]any)["verdict"])
}

// trimTitles are the asked calls' titles without what the tools add
// around a command or path.
func trimTitles(ts []string) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		if i := strings.Index(t, " ("); i > 0 {
			t = t[:i]
		}
		out = append(out, t)
	}
	return out
}

// "Always allow" outlives the process: the rule lands in acpd's state
// folder, never in the workspace; a new acpd on the workspace runs the same
// command prefix without a question; acpd permissions lists it with its
// file, and acpd permissions rm removes it.
func TestE2E_AlwaysAllowPersists(t *testing.T) {
	cwd, dataDir := t.TempDir(), t.TempDir()
	a := &permissionLog{}
	d, sid := policyDaemon(t, cwd, dataDir, "", a.client(func(int, *acp.RequestPermissionRequest) string { return "proceed_always_project" }),
		calls(shellCall("first", "go test ./...")), modeltest.Response{Text: "done"})
	_, err := d.cc.Prompt(ctxFor(t), sid, "test it")
	require.NoError(t, err)
	require.Len(t, a.requests(), 1)
	d.stop(t)

	files, err := filepath.Glob(filepath.Join(dataDir, "permissions", "*.toml"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Contains(t, string(data), `"Bash(go test:*)"`)
	ws, err := os.ReadDir(cwd)
	require.NoError(t, err)
	assert.Empty(t, ws, "nothing was written into the workspace")

	b := &permissionLog{}
	d2, sid2 := policyDaemon(t, cwd, dataDir, "", b.client(reject),
		calls(shellCall("again", "go test -run TestX ./pkg")), modeltest.Response{Text: "done"})
	_, err = d2.cc.Prompt(ctxFor(t), sid2, "again")
	require.NoError(t, err)
	assert.Empty(t, b.requests(), "the new process asked nothing")
	assert.Contains(t, toolResults(d2.model)["again"], "fake go test -run TestX ./pkg")
	d2.stop(t)

	out := acpdCmd(t, cwd, dataDir, "permissions")
	assert.Contains(t, out, "Bash(go test:*)")
	assert.Contains(t, out, files[0])
	out = acpdCmd(t, cwd, dataDir, "permissions", "rm", "Bash(go test:*)")
	assert.Contains(t, out, "Removed the allow rule Bash(go test:*) from "+files[0])
	assert.NotContains(t, acpdCmd(t, cwd, dataDir, "permissions"), "Bash(go test:*)")
}

// acpdCmd runs the built acpd in dir with the data folder and no
// configuration file, and returns its output; it must succeed.
func acpdCmd(t *testing.T, dir, dataDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(acpdBin, append([]string{"--config", os.DevNull, "--data-dir", dataDir}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// A subagent's calls go through the same rules: its allowed command runs
// without a question and its denied one is refused; acpd stats says which
// rule decided each.
func TestE2E_SubagentHonoursRules(t *testing.T) {
	cwd, dataDir := t.TempDir(), t.TempDir()
	const key = "SUBTASK-RULES"
	a := &permissionLog{}
	d, sid := policyDaemon(t, cwd, dataDir, `
[permissions]
allow = ["Bash(go test:*)"]
deny = ["Bash(curl:*)"]
`, a.client(reject),
		modeltest.Response{ToolCalls: []modeltest.ToolCall{agentTC("call_agent", "Test", key+": run the tests", "general-purpose")}},
		modeltest.Response{Text: "the subagent is done"})
	d.model.Add(
		modeltest.Response{Match: key, ToolCalls: []modeltest.ToolCall{shellCall("sub_go", "go test ./...")}},
		modeltest.Response{Match: key, ToolCalls: []modeltest.ToolCall{shellCall("sub_curl", "curl https://example.com")}},
		modeltest.Response{Match: key, Text: "tests ran"},
	)
	_, err := d.cc.Prompt(ctxFor(t), sid, "delegate")
	require.NoError(t, err)
	assert.Empty(t, a.requests(), "nothing was asked")
	subs := subRequests(d.model, key)
	require.Len(t, subs, 3)
	var results []string
	for _, m := range subs[2].Messages {
		if m.Role == "tool" {
			results = append(results, m.Text())
		}
	}
	require.Len(t, results, 2)
	assert.Contains(t, results[0], "fake go test ./...")
	assert.Contains(t, results[1], `the deny rule "Bash(curl:*)"`)
	d.stop(t)

	stats := acpdCmd(t, cwd, dataDir, "stats", "--session", sid)
	assert.Contains(t, stats, "rules allow: 1")
	assert.Contains(t, stats, "rules deny: 1")
	assert.Contains(t, stats, `refused by rules: Permission denied: the deny rule "Bash(curl:*)"`)
}
