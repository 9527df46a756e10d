package contextmgr

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/tokens"
)

// history is a random conversation: turns of a prompt (sometimes with an
// image), rounds of calls (parallel, some answered as cancelled) with
// their results, reminders, texts. The last turn is the current one: it
// ends on its prompt or on results the model has not seen (calls in
// flight). It returns the history and the current prompt's index.
func history(r *rand.Rand, turns int) ([]model.Message, int) {
	var h []model.Message
	text := func(n int) string { return strings.Repeat("word ", n) }
	id := 0
	cur := 0
	for tn := range turns {
		last := tn == turns-1
		cur = len(h)
		u := model.Message{Role: model.RoleUser, Content: fmt.Sprintf("prompt %d %s", tn, text(r.IntN(50)))}
		if r.IntN(5) == 0 {
			u.Images = []model.Image{{MimeType: "image/png", Data: "aGVsbG8="}}
		}
		h = append(h, u)
		if last && r.IntN(3) == 0 {
			break // the first request of the prompt
		}
		rounds := r.IntN(6)
		if last {
			rounds++
		}
		for rd := range rounds {
			a := model.Message{Role: model.RoleAssistant, Content: text(r.IntN(20)), Reasoning: text(r.IntN(10))}
			n := 1 + r.IntN(3)
			for range n {
				id++
				args, _ := json.Marshal(map[string]string{"file_path": fmt.Sprintf("/f/%d", id)})
				a.ToolCalls = append(a.ToolCalls, model.ToolCall{ID: fmt.Sprintf("call_%d", id), Name: "read_file", Arguments: args})
			}
			h = append(h, a)
			for _, c := range a.ToolCalls {
				content := text(r.IntN(2000))
				if r.IntN(8) == 0 {
					content = "Tool execution was cancelled."
				}
				h = append(h, model.Message{Role: model.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: content})
			}
			if r.IntN(6) == 0 && !(last && rd == rounds-1) {
				h = append(h, model.Message{Role: model.RoleUser, Content: "reminder: " + text(10)})
			}
		}
		if !last {
			h = append(h, model.Message{Role: model.RoleAssistant, Content: "answer " + text(r.IntN(100))})
		}
	}
	return h, cur
}

func total(h []model.Message) int {
	n := 0
	for i := range h {
		n += tokens.Message(&h[i])
	}
	return n
}

// checkPaired fails when a call is separated from its result or a result
// answers no call of the message before it.
func checkPaired(t *testing.T, h []model.Message) {
	t.Helper()
	for i := 0; i < len(h); i++ {
		m := h[i]
		if m.Role == model.RoleTool {
			t.Fatalf("message %d: a tool result that follows no call", i)
		}
		if m.Role != model.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		want := map[string]bool{}
		for _, c := range m.ToolCalls {
			want[c.ID] = true
		}
		for j := range m.ToolCalls {
			k := i + 1 + j
			require.Less(t, k, len(h), "message %d: calls without results at the end", i)
			require.Equal(t, model.RoleTool, h[k].Role, "message %d: call %d without its result", i, j)
			require.True(t, want[h[k].ToolCallID], "message %d: result %s answers another call", i, h[k].ToolCallID)
			delete(want, h[k].ToolCallID)
		}
		i += len(m.ToolCalls)
	}
}

// snapshot is a state snapshot with every section, each holding text.
func snapshot(text string) string {
	var b strings.Builder
	b.WriteString("<state_snapshot>\n")
	for _, sec := range SnapshotSections {
		fmt.Fprintf(&b, "<%s>%s</%s>\n", sec, text, sec)
	}
	b.WriteString("</state_snapshot>")
	return b.String()
}

func sameMsg(a, b model.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && len(a.Images) == len(b.Images) && len(a.ToolCalls) == len(b.ToolCalls)
}

// FuzzPlan: over random histories, every compaction stage (stubs, summary,
// drop) leaves every call with its result, keeps the current prompt and
// the calls in flight verbatim, and its size bookkeeping is exact.
func FuzzPlan(f *testing.F) {
	for seed := range uint64(40) {
		f.Add(seed, uint8(seed%9+1), uint16(2000+seed*500))
	}
	f.Fuzz(func(t *testing.T, seed uint64, turns uint8, window uint16) {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		h, cur := history(r, int(turns%12)+1)
		checkPaired(t, append(h[:len(h):len(h)], model.Message{Role: model.RoleUser}))
		overhead := r.IntN(500)
		th := ComputeThresholds(int(window)+1000, 0.85)
		in := Input{History: h, Cur: cur, Used: total(h) + overhead, Th: th}
		orig := append([]model.Message(nil), h...)
		p := NewPlan(in)
		inflight := len(h)
		if h[len(h)-1].Role == model.RoleTool {
			for inflight = len(h) - 1; h[inflight].Role == model.RoleTool; inflight-- {
			}
		}
		check := func(stage string, after int, c interface {
			Apply([]model.Message) ([]model.Message, func(int) int, bool)
		}) {
			out, moved, ok := c.Apply(h)
			require.True(t, ok, stage)
			// The last message may be a tool result: close the history for the check.
			checkPaired(t, out)
			at := moved(cur)
			require.GreaterOrEqual(t, at, 0, "%s: the current prompt was dropped", stage)
			require.True(t, sameMsg(orig[cur], out[at]), "%s: the current prompt changed", stage)
			tail := orig[inflight:]
			require.GreaterOrEqual(t, len(out), len(tail))
			for i, m := range tail {
				require.True(t, sameMsg(m, out[len(out)-len(tail)+i]), "%s: a message in flight changed", stage)
			}
			assert.Equal(t, total(out)+overhead, after, "%s: size bookkeeping", stage)
		}
		c, after := p.Stub()
		check("stub", after, c)
		if p.Summarisable() {
			c, after, err := p.Summarised("<analysis>x</analysis>" + snapshot("short"))
			if err == nil {
				check("summary", after, c)
				assert.Less(t, after, p.Stubbed())
			} else {
				require.ErrorIs(t, err, ErrNotSmaller)
			}
			_, _, err = p.Summarised("<analysis>only thinking</analysis>")
			require.ErrorIs(t, err, ErrEmptySummary)
			_, _, err = p.Summarised("I'm sorry, but I cannot help with that request.")
			require.ErrorIs(t, err, ErrNotASnapshot)
		}
		if c, after, err := p.Drop(); err == nil {
			check("drop", after, c)
		} else {
			require.ErrorIs(t, err, ErrNothingToDrop)
		}
		// A summary ahead of need covers everything but the current prompt
		// and the calls in flight, with the same invariants.
		whole := NewPlan(Input{History: h, Cur: cur, Used: total(h) + overhead, Th: th, Whole: true})
		assert.Equal(t, orig[:inflight], whole.Seen(), "what the model has seen")
		if whole.Summarisable() {
			assert.Equal(t, total(whole.ToSummarise()), whole.SummarisedTokens())
			if c, after, err := whole.Summarised(snapshot("short")); err == nil {
				check("whole summary", after, c)
				out, _, _ := c.Apply(h)
				// Only the head, the current prompt and the calls in flight remain.
				assert.LessOrEqual(t, len(out), 3+len(orig[inflight:]))
			} else {
				require.ErrorIs(t, err, ErrNotSmaller)
			}
		}
		for i := range h {
			require.True(t, sameMsg(orig[i], h[i]), "planning changed the history")
		}
	})
}

// Stubs replace the oldest results first and never the ones in flight.
func TestPlan_StubsOldestFirst(t *testing.T) {
	big := strings.Repeat("x", 40_000) // 10,000 tokens
	h := []model.Message{{Role: model.RoleUser, Content: "first"}}
	for i := range 4 {
		id := fmt.Sprint("c", i)
		h = append(h,
			model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: id, Name: "read_file", Arguments: json.RawMessage(`{"file_path":"/a"}`)}}},
			model.Message{Role: model.RoleTool, ToolCallID: id, Name: "read_file", Content: big})
	}
	th := ComputeThresholds(48_000, 0.85) // auto 15,000, target 7,500
	p := NewPlan(Input{History: h, Cur: 0, Used: total(h), Th: th})
	c, after := p.Stub()
	require.Len(t, c.Stubs, 3, "all but the result in flight")
	assert.Equal(t, "c0", c.Stubs[0].ToolCallID)
	assert.Equal(t, 10000, c.Stubs[0].Tokens)
	assert.Greater(t, after, th.Target, "the result in flight alone is over the target")
	assert.Equal(t, p.StubsEnough(), p.StubsLeaveRoom(0))
	mid := (th.Auto + th.Target) / 2
	assert.True(t, p.StubsLeaveRoom(mid-after), "room up to the midpoint")
	assert.False(t, p.StubsLeaveRoom(mid-after+1))
	out, _, ok := c.Apply(h)
	require.True(t, ok)
	assert.Equal(t, big, out[len(out)-1].Content)
	assert.Equal(t, `[acpd: the output of read_file {"file_path":"/a"} (about 10000 tokens) was removed to fit the model's context window. Run the tool again if you need it.]`, out[2].Content)
	assert.Equal(t, big, h[2].Content, "the history itself is not changed")
}

func TestAccounting(t *testing.T) {
	var a Accounting
	a.SetOverhead(100)
	h := []model.Message{{Role: model.RoleUser, Content: strings.Repeat("a", 400)}}
	a.Sync(h)
	assert.Equal(t, 104+100, a.Used(), "estimate plus overhead")
	assert.Equal(t, 255, a.UsedAtMost())
	assert.True(t, a.Estimated())
	a.Sent()
	a.Observe(1000) // the provider counted the request
	assert.False(t, a.Estimated())
	assert.Equal(t, 1000, a.Used())
	h = append(h, model.Message{Role: model.RoleAssistant, Content: strings.Repeat("b", 40)})
	a.Sync(h)
	assert.Equal(t, 1000+14, a.Used(), "provider count plus what was appended")
	assert.Equal(t, 1000+17, a.UsedAtMost(), "the estimated part padded by a quarter")
	a.Reset()
	a.Sync(h[:1])
	assert.Equal(t, 104+1000-104, a.Used(), "calibrated overhead after a rewrite")
	a.Sync(nil)
	assert.Equal(t, 1000-104, a.Used(), "a shorter history is recounted")
	assert.Equal(t, 1600+4, tokens.Message(&model.Message{Role: model.RoleUser, Images: []model.Image{{MimeType: "image/png", Data: "x"}}}))
}

func TestValidateSummary(t *testing.T) {
	good := snapshot("none")
	got, err := ValidateSummary("<analysis>thinking</analysis>\n" + good + "\ntrailing chatter")
	require.NoError(t, err)
	assert.Equal(t, good, got)
	for answer, want := range map[string]error{
		"":                                   ErrEmptySummary,
		"<analysis>only thinking</analysis>": ErrEmptySummary,
		"I'm sorry, but I cannot help with that request.":                             ErrNotASnapshot,
		"Here is a summary: the user asked for files to be read.":                     ErrNotASnapshot,
		"<state_snapshot><current_work>reading files</current_work></state_snapshot>": ErrNotASnapshot,
		strings.Replace(good, "</next_step>", "", 1):                                  ErrNotASnapshot,
		strings.TrimSuffix(good, "</state_snapshot>"):                                 ErrNotASnapshot, // cut short
	} {
		_, err := ValidateSummary(answer)
		assert.ErrorIs(t, err, want, answer)
	}
	_, err = ValidateSummary("<state_snapshot><current_work>x</current_work></state_snapshot>")
	assert.ErrorContains(t, err, "missing primary_request_and_intent, key_technical_concepts")
	assert.Contains(t, InlineDirective("keep the tests"), "Additional Instructions:\nkeep the tests")
	assert.True(t, strings.HasPrefix(InlineDirective(""), SummaryPrompt))
	assert.True(t, strings.HasSuffix(InlineDirective(""), SummaryDirective))
}

func TestExtractSummary(t *testing.T) {
	assert.Equal(t, "<state_snapshot>x</state_snapshot>", ExtractSummary("<analysis>a</analysis>\n<state_snapshot>x</state_snapshot> trailing"))
	assert.Equal(t, "plain summary", ExtractSummary("<analysis>a\nb</analysis>\nplain summary"))
	assert.Equal(t, "", ExtractSummary("<analysis>unterminated"))
	assert.Equal(t, "", ExtractSummary("<state_snapshot> </state_snapshot>"))
}

func TestSummaryRequest_FitsItsBudget(t *testing.T) {
	msgs := []model.Message{{Role: model.RoleUser, Content: SummaryIntro + "old summary"}}
	for i := range 100 {
		msgs = append(msgs, model.Message{Role: model.RoleUser, Content: fmt.Sprintf("prompt %d %s", i, strings.Repeat("y", 2000))})
	}
	req := SummaryRequest("m", msgs, "focus on tests", 10_000, 2_000)
	require.Len(t, req.Messages, 1)
	body := req.Messages[0].Content
	assert.LessOrEqual(t, tokens.Text(body)+tokens.Text(req.System), 10_000)
	assert.Contains(t, body, "old summary", "an earlier summary always stays")
	assert.Contains(t, body, "prompt 99", "the newest messages stay")
	assert.NotContains(t, body, "prompt 0 ", "the oldest are left out")
	assert.Contains(t, req.System, "Additional Instructions:\nfocus on tests")
	assert.Equal(t, 2_000, req.MaxTokens)
	assert.Empty(t, req.Tools)
}
