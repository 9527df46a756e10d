package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/contextmgr"
	"github.com/acpd/acpd/session/contextmgr/contextmgrtest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// A summariser that refuses, or whose answer a content filter stops, never
// becomes the session's memory: with prompts too long to stub away (only
// tool results can be stubbed) in a 16k window, every compaction's summary
// fails, the oldest turns are dropped instead, the refusal is sent in no
// later request, and every prompt ends end_turn inside the window.
func TestE2E_UnusableSummaryNeverBecomesTheMemory(t *testing.T) {
	const window = 16000
	refusal := "I'm sorry, but I cannot help with that request."
	for _, tc := range []struct {
		name, why string
		resp      modeltest.Response
	}{
		{"refusal", "the summary is not the state snapshot asked for: no closed <state_snapshot> element",
			modeltest.Response{Text: refusal}},
		// A complete snapshot, but the provider's filter stopped it: the
		// stop reason alone rules it out.
		{"content filter", "the provider's content filter stopped the summary",
			modeltest.Response{Text: contextmgrtest.Snapshot(refusal), Finish: "content_filter"}},
		{"cut off", "the summary was cut off at its length limit",
			modeltest.Response{Text: contextmgrtest.Snapshot(refusal), Finish: "length"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			d := startSmall(t, window, window, "--data-dir", dataDir)
			d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
				return tc.resp, isSummaryRequest(r)
			})
			sid := d.session(t)
			for i := range 8 {
				d.model.Add(modeltest.Response{Text: fmt.Sprint("noted ", i)})
				resp, err := d.cc.Prompt(t.Context(), sid, bigPrompt(i, 12<<10))
				require.NoError(t, err, "prompt %d", i)
				assert.Equal(t, acp.StopEndTurn, resp.StopReason, "prompt %d", i)
			}
			checkNoneRefused(t, d.model, window)
			summaries := 0
			for i, r := range d.model.Requests() {
				if isSummaryRequest(r) {
					summaries++
					continue
				}
				for _, m := range r.Messages {
					assert.NotContains(t, m.Text(), refusal, "request %d carries the summariser's answer", i)
					assert.False(t, strings.HasPrefix(m.Text(), contextmgr.SummaryIntro), "request %d carries a summary", i)
				}
			}
			assert.Positive(t, summaries)
			details := compactionDetails(d)
			require.NotEmpty(t, details)
			assert.Contains(t, details[0], "The summary failed ("+tc.why+").")
			assert.Contains(t, details[0], "Dropped the oldest part of the conversation.")
			transcript, err := os.ReadFile(filepath.Join(dataDir, "sessions", sid+".jsonl"))
			require.NoError(t, err)
			assert.NotContains(t, string(transcript), `"method":"summary"`, "no summary was recorded")
		})
	}
}

// A provider that took a request of N tokens and then refuses one as too
// long, naming a smaller window, is not believed below N: the learned
// window stays at what was accepted. A bare 413 (a proxy's body limit) is
// not an overflow at all: the prompt fails with the provider's message and
// the window is unchanged.
func TestE2E_LearnedWindowKeepsWhatWasAccepted(t *testing.T) {
	d := startSmall(t, 1_000_000, 0)
	d.model.SetReportUsage(true)
	sid := d.session(t)
	d.model.Add(modeltest.Response{Text: "noted"})
	_, err := d.cc.Prompt(t.Context(), sid, bigPrompt(0, 64<<10))
	require.NoError(t, err)
	accepted := d.model.Requests()[0].Tokens
	require.Greater(t, accepted, 16000)

	var refused atomic.Bool
	d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		last := r.Messages[len(r.Messages)-1]
		if !isSummaryRequest(r) && last.Text() == "one more thing" && refused.CompareAndSwap(false, true) {
			return modeltest.Response{Status: 400, ErrorMessage: fmt.Sprintf(
				"This model's maximum context length is 16000 tokens. However, your messages resulted in %d tokens.", r.Tokens)}, true
		}
		return summariser(r)
	})
	d.model.Add(modeltest.Response{Text: "noted again"})
	resp, err := d.cc.Prompt(t.Context(), sid, "one more thing")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	var sizes []uint64
	for _, u := range d.cc.Updates() {
		if u.Update.Kind == acp.UpdateUsage {
			sizes = append(sizes, u.Update.Size)
		}
	}
	require.NotEmpty(t, sizes)
	assert.Equal(t, uint64(accepted), sizes[len(sizes)-1], "the learned window is what the provider accepted, not the 16,000 it named")

	d.model.Add(modeltest.Response{Status: 413, ErrorMessage: "Request Entity Too Large"})
	_, err = d.cc.Prompt(t.Context(), sid, "and again")
	var ae *acp.Error
	require.ErrorAs(t, err, &ae)
	assert.Contains(t, ae.Message, "Request Entity Too Large")
	n := len(d.model.Requests())
	d.model.Add(modeltest.Response{Text: "still here"})
	resp, err = d.cc.Prompt(t.Context(), sid, "still there?")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	for _, r := range d.model.Requests()[n:] {
		assert.False(t, isSummaryRequest(r), "a bare 413 forces no compaction")
	}
}
