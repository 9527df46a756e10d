package session_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/model/modeltest"
)

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	return p
}

// TestE2E_Hooks drives Claude Code's hook contract through the built
// binary: a PreToolUse hook that exits 2 refuses its call and the model
// reads its stderr; one answering permissionDecision "allow" skips the
// question, and its updatedInput changes the command that runs; one that
// hangs is killed at its timeout and the turn goes on (the call is then
// asked about as usual); a PostToolUse hook's additionalContext reaches the
// next model request; a UserPromptSubmit hook that exits 2 drops a prompt
// before the model sees it.
func TestE2E_Hooks(t *testing.T) {
	cwd, hooksDir := t.TempDir(), t.TempDir()
	pre := script(t, hooksDir, "pre.sh", `in=$(cat)
case "$in" in
*'go vet'*) echo 'vet is banned here' >&2; exit 2 ;;
*'go build'*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}' ;;
*'go run'*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"go version"}}}' ;;
*'go fmt'*) sleep 30 ;;
esac
exit 0
`)
	post := script(t, hooksDir, "post.sh", `cat >/dev/null
echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"POST-CONTEXT-MARKER"}}'
`)
	prompt := script(t, hooksDir, "prompt.sh", `in=$(cat)
case "$in" in
*forbidden*) echo 'no forbidden prompts' >&2; exit 2 ;;
esac
`)
	a := &permissionLog{}
	d, sid := policyDaemon(t, cwd, t.TempDir(), `
[[hooks.PreToolUse]]
matcher = "Bash"
hooks = [{ type = "command", command = "`+pre+`", timeout = 2 }]

[[hooks.PostToolUse]]
matcher = "run_shell_command"
hooks = [{ type = "command", command = "`+post+`" }]

[[hooks.UserPromptSubmit]]
hooks = [{ type = "command", command = "`+prompt+`" }]
`, a.client(reject),
		calls(shellCall("vet", "go vet ./...")), calls(shellCall("build", "go build ./...")),
		calls(shellCall("run", "go run .")), calls(shellCall("fmt", "go fmt ./...")), modeltest.Response{Text: "done"})

	start := time.Now()
	r, err := d.cc.Prompt(ctxFor(t), sid, "work")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, r.StopReason)
	assert.Less(t, time.Since(start), 25*time.Second, "the hanging hook was killed at its timeout")

	assert.Equal(t, []string{"go fmt ./..."}, trimTitles(titles(a.requests())), "only the call whose hook hung was asked about")
	results := toolResults(d.model)
	assert.Contains(t, results["vet"], "vet is banned here", "the blocking hook's stderr reached the model")
	assert.NotContains(t, results["vet"], "fake go")
	assert.Contains(t, results["build"], "fake go build ./...", "allowed by the hook without a question")
	assert.Contains(t, results["run"], "fake go version", "updatedInput ran instead")

	// The refused vet call never ran, so no PostToolUse hook saw it; the
	// build call did, and the request after it carries the hook's context.
	reqs := d.model.Requests()
	require.GreaterOrEqual(t, len(reqs), 3)
	text := func(i int) string {
		s := ""
		for _, m := range reqs[i].Messages {
			s += m.Text() + "\n"
		}
		return s
	}
	assert.NotContains(t, text(1), "POST-CONTEXT-MARKER", "no PostToolUse for a call that never ran")
	assert.Contains(t, text(2), "POST-CONTEXT-MARKER", "PostToolUse context in the next model request")

	n := len(d.model.Requests())
	r, err = d.cc.Prompt(ctxFor(t), sid, "do the forbidden thing")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, r.StopReason)
	assert.Len(t, d.model.Requests(), n, "the blocked prompt never reached the model")
	shown := ""
	for _, u := range forSession(d.cc.Updates(), sid) {
		if u.Kind == acp.UpdateAgentMessageChunk && u.Content != nil {
			shown += u.Content.Text
		}
	}
	assert.Contains(t, shown, "no forbidden prompts", "the user is told why")
}

// trustAnswer answers the trust question with answer and rejects every
// other request.
func trustAnswer(answer string) func(int, *acp.RequestPermissionRequest) string {
	return func(_ int, r *acp.RequestPermissionRequest) string {
		if r.Meta["acpd.permission"] == "workspaceTrust" {
			return answer
		}
		return optionOf(r, acp.RejectOnce)
	}
}

// trustAsked counts the trust questions among the requests.
func trustAsked(reqs []acp.RequestPermissionRequest) int {
	n := 0
	for _, r := range reqs {
		if r.Meta["acpd.permission"] == "workspaceTrust" {
			n++
		}
	}
	return n
}

// TestE2E_ProjectTrust: a workspace whose .claude/settings.json allows
// Bash(*), denies Bash(curl:*) and has a SessionStart hook. Declined, the
// hook does not run and commands ask, while the deny applies; trusted (a
// new process asks again, since declining lasts for a process), the hook
// runs and commands run without a question; after the file changes,
// trust is asked again and, declined, the allow is off again.
func TestE2E_ProjectTrust(t *testing.T) {
	cwd, dataDir, marks := t.TempDir(), t.TempDir(), t.TempDir()
	marker := filepath.Join(marks, "started")
	settings := filepath.Join(cwd, ".claude", "settings.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(settings), 0o755))
	write := func(extra string) {
		require.NoError(t, os.WriteFile(settings, []byte(`{
  "permissions": {"allow": ["Bash(*)"`+extra+`], "deny": ["Bash(curl:*)"]},
  "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch `+marker+`"}]}]}
}`), 0o644))
	}
	write("")
	turn := func(answer string) (*permissionLog, map[string]string) {
		a := &permissionLog{}
		d, sid := policyDaemon(t, cwd, dataDir, "", a.client(trustAnswer(answer)),
			calls(shellCall("test", "go test ./...")), calls(shellCall("curl", "curl https://example.com")), modeltest.Response{Text: "done"})
		_, err := d.cc.Prompt(ctxFor(t), sid, "work")
		require.NoError(t, err)
		res := toolResults(d.model)
		d.stop(t)
		return a, res
	}

	a, res := turn("decline")
	assert.Equal(t, 1, trustAsked(a.requests()), "trust asked once")
	assert.NoFileExists(t, marker, "no project hook before trust")
	assert.Equal(t, []string{"go test ./..."}, trimTitles(titles(a.requests()[1:])), "the project's allow is off")
	assert.Contains(t, res["curl"], `the deny rule "Bash(curl:*)"`, "the project's deny applies untrusted")

	a, res = turn("trust")
	assert.Equal(t, 1, trustAsked(a.requests()))
	assert.Len(t, a.requests(), 1, "trusted: the command ran without a question")
	assert.FileExists(t, marker, "the SessionStart hook ran once trusted")
	assert.Contains(t, res["test"], "fake go test ./...")
	assert.Contains(t, res["curl"], `the deny rule "Bash(curl:*)"`)
	trust, err := os.ReadFile(filepath.Join(dataDir, "trust.json"))
	require.NoError(t, err)
	assert.Contains(t, string(trust), cwd[strings.LastIndex(cwd, "/")+1:], "trust is kept in the state folder")

	require.NoError(t, os.Remove(marker))
	write(`, "Bash(make:*)"`)
	a, _ = turn("decline")
	assert.Equal(t, 1, trustAsked(a.requests()), "the changed file asks again")
	assert.NoFileExists(t, marker)
	assert.Equal(t, []string{"go test ./..."}, trimTitles(titles(a.requests()[1:])))
}
