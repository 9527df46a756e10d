package session_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/contextmgr/contextmgrtest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// hangFirstSummary makes the first summary request hang until the request
// is cancelled and answers the later ones; hung closes when the first
// arrives.
func hangFirstSummary(d *daemon) (hung chan struct{}) {
	var once sync.Once
	hung = make(chan struct{})
	d.model.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		if !isSummaryRequest(r) {
			return modeltest.Response{}, false
		}
		first := false
		once.Do(func() { first = true; close(hung) })
		if first {
			return modeltest.Response{Hang: true}, true
		}
		return summariser(r)
	})
	return hung
}

// compactionCalls lists the final status of each compaction tool call the
// session showed, in order.
func compactionCalls(updates []acp.SessionUpdate) []acp.ToolCallStatus {
	var ids []string
	last := map[string]acp.ToolCallStatus{}
	for _, u := range updates {
		switch {
		case u.ToolCall != nil && strings.HasPrefix(u.ToolCall.ToolCallID, "compact"):
			ids = append(ids, u.ToolCall.ToolCallID)
			last[u.ToolCall.ToolCallID] = u.ToolCall.Status
		case u.ToolCallUpdate != nil && strings.HasPrefix(u.ToolCallUpdate.ToolCallID, "compact"):
			last[u.ToolCallUpdate.ToolCallID] = u.ToolCallUpdate.Status
		}
	}
	out := make([]acp.ToolCallStatus, len(ids))
	for i, id := range ids {
		out[i] = last[id]
	}
	return out
}

// TestE2E_InterruptedCompaction: the editor interrupts a compaction whose
// summary request hangs — with session/cancel during /compress, or with a
// new session/prompt during /compress or during an automatic compaction.
// The interrupted prompt answers cancelled at once, its compaction tool
// call ends failed, nothing is recorded, and the history stays whole: the
// next summary still sees the first prompt, and the session goes on.
func TestE2E_InterruptedCompaction(t *testing.T) {
	const window = 48000
	for _, tc := range []struct {
		name      string
		prompt    string // the prompt whose compaction is interrupted
		interrupt string // "cancel" or "prompt"
	}{
		{"cancel during /compress", "/compress keep the facts", "cancel"},
		{"prompt during /compress", "/compress keep the facts", "prompt"},
		{"prompt during an automatic compaction", "", "prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			d := startSmall(t, window, window, "--data-dir", dataDir)
			hung := hangFirstSummary(d)
			sid := d.session(t)
			twoThenLarge(t, d, sid)
			first := tc.prompt
			if first == "" {
				first = bigPrompt(2, 32<<10) // past the threshold: compacts first
			}
			done := make(chan *acp.PromptResponse, 1)
			go func() {
				resp, err := d.cc.Prompt(ctxFor(t), sid, first)
				assert.NoError(t, err)
				done <- resp
			}()
			select {
			case <-hung:
			case <-time.After(20 * time.Second):
				t.Fatal("no summary request")
			}

			d.model.Add(modeltest.Response{Text: "after"})
			var second chan error
			if tc.interrupt == "cancel" {
				require.NoError(t, d.cc.Cancel(sid))
			} else {
				second = make(chan error, 1)
				go func() {
					_, err := d.cc.Prompt(ctxFor(t), sid, "what now?")
					second <- err
				}()
			}
			select {
			case resp := <-done:
				require.NotNil(t, resp)
				assert.Equal(t, acp.StopCancelled, resp.StopReason)
			case <-time.After(20 * time.Second):
				t.Fatal("the interrupted prompt did not answer")
			}
			if second != nil {
				select {
				case err := <-second:
					require.NoError(t, err)
				case <-time.After(30 * time.Second):
					t.Fatal("the prompt after the interruption did not answer")
				}
			} else {
				_, err := d.cc.Prompt(ctxFor(t), sid, "what now?")
				require.NoError(t, err)
			}

			statuses := compactionCalls(forSession(d.cc.Updates(), sid))
			require.NotEmpty(t, statuses)
			assert.Equal(t, acp.StatusFailed, statuses[0], "the interrupted compaction ended failed")
			// The history was whole after the interruption: any later
			// summary saw the first prompt, and no compaction was recorded
			// for the interrupted one.
			var summaries []modeltest.Request
			for _, r := range d.model.Requests() {
				if isSummaryRequest(r) {
					summaries = append(summaries, r)
				}
			}
			for _, s := range summaries[1:] {
				assert.Contains(t, contextmgrtest.Input(s), "Prompt 0.")
			}
			transcript, err := os.ReadFile(filepath.Join(dataDir, "sessions", sid+".jsonl"))
			require.NoError(t, err)
			assert.Equal(t, len(statuses)-1, strings.Count(string(transcript), `"kind":"compaction"`),
				"only the compactions that finished are recorded")
			reqs := d.model.Requests()
			last := reqs[len(reqs)-1]
			assert.Equal(t, "what now?", last.Messages[len(last.Messages)-1].Text())
			checkNoneRefused(t, d.model, window)
		})
	}
}
