package agentguard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/loopdetect"
)

// An agent that sends ACP's `name` on its tool calls is keyed by it, ahead
// of what _meta, the id or the title say: six calls named read_file with
// one input are duplicates although each carries another _meta.toolName,
// id prefix and title (so only `name` makes them one tool), and six calls
// with one _meta.toolName but six different names are six tools.
func TestKeysByNameFirst(t *testing.T) {
	t.Parallel()
	same := func(a *fakeAgent, p *prompt) {
		for i := 1; i <= 8; i++ {
			id := fmt.Sprintf("tool%d_%d", i, i)
			a.toolCall(p.sessionID, id, fmt.Sprintf(`,"title":"Step%d x","name":"read_file","kind":"read","status":"in_progress","rawInput":{"path":"a.txt"},"_meta":{"toolName":"alias_%d"}`, i, i))
			a.toolUpdate(p.sessionID, id, `,"status":"completed"`)
		}
		a.answer(p, "end_turn")
	}
	h := newHarness(t, Options{}, func(a *fakeAgent) { a.onPrompt = same })
	sid := h.session()
	d := h.prompt(sid, "same name").loopData(t)
	assert.Equal(t, string(loopdetect.LoopGlobalToolCallDuplicate), d["loopType"])
	assert.EqualValues(t, 6, d["toolCalls"])
	assert.EqualValues(t, 6, d["maxKeyRepeat"])

	differ := func(a *fakeAgent, p *prompt) {
		for i := 1; i <= 8; i++ {
			id := fmt.Sprintf("call_%d", i)
			a.toolCall(p.sessionID, id, fmt.Sprintf(`,"title":"Read a.txt","name":"tool_%d","kind":"read","status":"in_progress","rawInput":{"path":"a.txt"},"_meta":{"toolName":"read_file"}`, i))
			a.toolUpdate(p.sessionID, id, `,"status":"completed"`)
		}
		a.answer(p, "end_turn")
	}
	h2 := newHarness(t, Options{}, func(a *fakeAgent) { a.onPrompt = differ })
	sid2 := h2.session()
	r := h2.prompt(sid2, "different names")
	require.Nil(t, r.Error, r.line)
	assert.Equal(t, "end_turn", r.StopReason)
}
