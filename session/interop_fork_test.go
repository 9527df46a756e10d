package session_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// session/fork and /fork through the official TypeScript SDK, the wire
// checked against the unstable schema: each fork's next model request
// carries the forked history (all of it, or up to the turn named), and the
// source goes on untouched.
func TestInterop_Fork(t *testing.T) {
	node, npm := acptest.NodeAndNPM(t, "the fork interop test")
	clientDir := acptest.InteropClient(t, npm, interopDir)
	srv := modeltest.NewServer(t,
		modeltest.Response{Text: "noted kiwi"},
		modeltest.Response{Text: "noted 7"},
		modeltest.Response{Text: "kiwi"},
		modeltest.Response{Text: "you did not say"},
		modeltest.Response{Text: "yes"},
	)
	workspace := t.TempDir()
	v, err := acptest.UnstableValidator()
	require.NoError(t, err)
	var sum struct {
		Fatal          string              `json:"fatal"`
		SDKErrors      []string            `json:"sdkErrors"`
		ForkCapability map[string]any      `json:"forkCapability"`
		Source         string              `json:"source"`
		Forked         string              `json:"forked"`
		ForkModes      string              `json:"forkModes"`
		SlashForked    string              `json:"slashForked"`
		Texts          map[string]string   `json:"texts"`
		Users          map[string][]string `json:"users"`
	}
	out, _ := acptest.RunInteropScriptWith(t, v, node, clientDir, "fork.mjs", workspace,
		[]string{"XDG_CONFIG_HOME=" + t.TempDir(), "OPENAI_API_KEY=test-key"},
		acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted",
		"--data-dir", t.TempDir(), "--log-level", "warn", "--approval-mode", "default")
	require.NoError(t, json.Unmarshal(out, &sum))
	assert.Empty(t, sum.SDKErrors)
	assert.NotNil(t, sum.ForkCapability, "sessionCapabilities.fork advertised")
	require.NotEmpty(t, sum.Forked)
	assert.NotEqual(t, sum.Source, sum.Forked)
	assert.Equal(t, "default", sum.ForkModes)
	assert.Equal(t, "kiwi", sum.Texts["in-fork"])
	require.NotEmpty(t, sum.SlashForked, "the /fork answer names the new session: %q", sum.Texts["slash-fork"])
	assert.Equal(t, []string{"the word is kiwi"}, sum.Users["load"], "the /fork 1 session replays turn 1 only")

	history := func(i int) []string {
		var out []string
		for _, m := range srv.Requests()[i].Messages {
			if m.Role != "system" {
				out = append(out, m.Role+":"+m.Text())
			}
		}
		return out
	}
	require.Len(t, srv.Requests(), 5)
	assert.Equal(t, []string{"user:the word is kiwi", "assistant:noted kiwi", "user:and the number is 7", "assistant:noted 7",
		"user:what was the word?"}, history(2), "session/fork carries the whole conversation")
	assert.Equal(t, []string{"user:the word is kiwi", "assistant:noted kiwi", "user:and the number?"}, history(3),
		"/fork 1 carries turn 1")
	assert.Equal(t, []string{"user:the word is kiwi", "assistant:noted kiwi", "user:and the number is 7", "assistant:noted 7",
		"user:still there?"}, history(4), "the source is untouched")
}
