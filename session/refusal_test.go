package session

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model"
)

func refusalResp(text string) []model.Event {
	return []model.Event{{Kind: model.EventText, Text: text}, {Kind: model.EventFinish, FinishReason: "content_filter"}}
}

// ACP: after `refusal`, the user prompt and everything after it is left out
// of the next prompt.
func TestRefusal_TurnLeftOutOfNextPrompt(t *testing.T) {
	h := newHarness(t, Options{}, textResp("hello"), callsResp(read("/w/x")), refusalResp("I won't"), textResp("fine"))
	_, err := h.prompt(t, "one")
	require.NoError(t, err)
	resp, err := h.prompt(t, "forbidden")
	require.NoError(t, err)
	require.Equal(t, acp.StopRefusal, resp.StopReason)
	_, err = h.prompt(t, "three")
	require.NoError(t, err)
	last := h.prov.requests[len(h.prov.requests)-1].Messages
	assert.Equal(t, []model.Message{
		{Role: model.RoleUser, Content: "one"},
		{Role: model.RoleAssistant, Content: "hello"},
		{Role: model.RoleUser, Content: "three"},
	}, last)
}

// A loop note consumed by a refused turn is still owed to the next prompt.
func TestRefusal_KeepsPendingLoopContext(t *testing.T) {
	h := newHarness(t, Options{Cap: loopdetect.Cap{Max: 1, Explicit: true}},
		callsResp(read("/w/a")), callsResp(read("/w/b")), refusalResp("no"), textResp("ok"))
	_, err := h.prompt(t, "loop")
	requireLoopError(t, err, loopdetect.LoopTurnToolCallCap)
	resp, err := h.prompt(t, "refused")
	require.NoError(t, err)
	require.Equal(t, acp.StopRefusal, resp.StopReason)
	_, err = h.prompt(t, "after")
	require.NoError(t, err)
	msgs := h.prov.requests[len(h.prov.requests)-1].Messages
	lastUser := msgs[len(msgs)-1]
	assert.True(t, strings.HasPrefix(lastUser.Content, loopdetect.LoopDetectedContextMessage), lastUser.Content)
	for _, m := range msgs {
		assert.NotContains(t, m.Content, "refused")
	}
}

// A reloaded session leaves the refused turn out exactly as the live one.
func TestDurable_RefusalReloadsToTheLiveHistory(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	n1 := startNode(t, dir, Options{}, textResp("hello"), refusalResp("I won't"))
	sid := n1.newSession(t, cwd)
	_, err := n1.prompt(t, sid, "one")
	require.NoError(t, err)
	resp, err := n1.prompt(t, sid, "forbidden")
	require.NoError(t, err)
	require.Equal(t, acp.StopRefusal, resp.StopReason)
	live := n1.history(t, sid)
	n1.m.Close()

	n2 := startNode(t, dir, Options{}, textResp("ok"))
	_, _, err = n2.load(t, sid, cwd)
	require.NoError(t, err)
	_, err = n2.prompt(t, sid, "next")
	require.NoError(t, err)
	assert.Equal(t, append(live, model.Message{Role: model.RoleUser, Content: "next"}), n2.prov.requests[0].Messages)
	assert.Len(t, live, 2, "only the first turn remains")
}

// The first prompt names the session: a session_info_update with the title
// session/list will show, once.
func TestSessionTitleAnnounced(t *testing.T) {
	h := newHarness(t, Options{}, textResp("a"), textResp("b"))
	_, err := h.prompt(t, "  Fix the flaky test\nin ci  ")
	require.NoError(t, err)
	_, err = h.prompt(t, "and then more")
	require.NoError(t, err)
	require.Len(t, h.client.infos, 1)
	require.NotNil(t, h.client.infos[0].Title)
	assert.Equal(t, "Fix the flaky test", *h.client.infos[0].Title)
	require.NotNil(t, h.client.infos[0].UpdatedAt)
}
