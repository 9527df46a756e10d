package stats

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/usage"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// tc is a recorded call: id, tool, arguments.
func tc(id, name, args string) store.ToolCall {
	return store.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// transcripts writes two sessions whose per-turn figures are worked out by
// hand in TestCollect_KnownFigures.
func transcripts(t *testing.T) (dataDir string) {
	t.Helper()
	dataDir = t.TempDir()
	st, err := store.Open(dataDir, store.Options{})
	require.NoError(t, err)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	prompt := []acp.ContentBlock{acp.TextBlock("go")}
	result := func(id, text string) store.Record {
		return store.Record{Kind: store.KindToolResult, Tool: &store.ToolCallRecord{ToolCallID: id, Status: acp.StatusCompleted, ModelText: text}}
	}

	a, err := st.Create(store.SessionMeta{ID: "sessA", Cwd: "/w/a", CreatedAt: t0})
	require.NoError(t, err)
	recs := []store.Record{
		// Turn 1: 8 calls in 4 responses; read_file p1 three times.
		{T: at(0), Kind: store.KindUser, Prompt: prompt},
		{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("a1", "read_file", `{"p":1}`), tc("a2", "read_file", `{"p":2}`)}},
		result("a1", "x"), result("a2", "x"),
		{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("a3", "grep_search", `{"q":"x"}`)}},
		{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("a4", "read_file", `{"p":1}`), tc("a5", "read_file", `{"p":3}`)}},
		{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("a6", "read_file", `{ "p" : 1 }`),
			tc("a7", "run_shell_command", `{"command":"go test"}`), tc("a8", "run_shell_command", `{"command":"go test"}`)}},
		{Kind: store.KindText, Text: "done"},
		// Its requests' usage: two of its own (one reporting cached and
		// reasoning tokens, priced), a compaction's summary and a
		// subagent's request; a record of the context's fill alone after
		// the compaction, which is no request.
		usageRec(store.Usage{PromptTokens: 1000, CompletionTokens: 50, TotalTokens: 1050, Used: 1050, Size: 48000,
			CachedTokens: 800, ReasoningTokens: 20, Model: "m", Cost: 0.0012, Currency: "USD"}),
		usageRec(store.Usage{PromptTokens: 3000, CompletionTokens: 400, Origin: "summary", Model: "m", Cost: 0.003, Currency: "USD"}),
		usageRec(store.Usage{Used: 900, Size: 48000}),
		usageRec(store.Usage{PromptTokens: 1100, CompletionTokens: 10, CachedTokens: 1024, Used: 1110, Size: 48000, Model: "m", Cost: 0.0002, Currency: "USD"}),
		usageRec(store.Usage{PromptTokens: 500, CompletionTokens: 100, Origin: "subagent", Model: "m", Estimated: true, Cost: 0.001, Currency: "USD"}),
		{T: at(2 * time.Second), Kind: store.KindTurnEnd, StopReason: acp.StopEndTurn},
		// A /compress between turns: its summary's usage belongs to no turn.
		usageRec(store.Usage{PromptTokens: 2000, CompletionTokens: 300, CachedTokens: 1500, Origin: "summary", Model: "m", Cost: 0.002, Currency: "USD"}),
		// Turn 2: one call, then a provider replay of it (not counted); cancelled.
		{T: at(10 * time.Second), Kind: store.KindUser, Prompt: prompt},
		{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("c1", "read_file", `{"p":9}`)}},
		result("c1", "x"),
		{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("c1_2", "read_file", `{"p":9}`)}},
		result("c1_2", `Duplicate provider tool call id "c1": this call was already answered in this turn and was not executed again.`),
		{T: at(10*time.Second + 500*time.Millisecond), Kind: store.KindTurnEnd, StopReason: acp.StopCancelled},
		// Turn 3: an explicit cap of 2 stopped the second response.
		{T: at(20 * time.Second), Kind: store.KindUser, Prompt: prompt},
		{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("e1", "read_file", `{"p":1}`), tc("e2", "read_file", `{"p":2}`)}},
		{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("e3", "read_file", `{"p":3}`)}},
		{Kind: store.KindLoopStop, Loop: &store.LoopStop{LoopType: "turn_tool_call_cap", CapReason: "explicit", ToolCalls: 3,
			MaxKeyRepeat: 1, MaxToolCallsPerTurn: 2, Explicit: true}},
		{T: at(21 * time.Second), Kind: store.KindTurnEnd, Error: loopdetect.LoopDetectedTurnErrorMessage},
		// Turn 4: never ended.
		{T: at(30 * time.Second), Kind: store.KindUser, Prompt: prompt},
		{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("f1", "list_directory", `{}`)}},
	}
	for _, r := range recs {
		if r.T.IsZero() {
			r.T = at(time.Second)
		}
		require.NoError(t, a.Append(r))
	}
	require.NoError(t, a.Close())

	b, err := st.Create(store.SessionMeta{ID: "sessB", Cwd: "/w/b/sub", CreatedAt: at(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, b.Append(store.Record{T: at(time.Hour), Kind: store.KindUser, Prompt: prompt}))
	require.NoError(t, b.Append(store.Record{T: at(time.Hour + 90*time.Second), Kind: store.KindTurnEnd, StopReason: acp.StopEndTurn}))
	require.NoError(t, b.Close())
	// A daemon half-way through writing a record.
	f, err := os.OpenFile(filepath.Join(dataDir, "sessions", "sessB.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"v":1,"t":"2026-11-30T10:02:00Z","kind":"user","prom`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return dataDir
}

func usageRec(u store.Usage) store.Record { return store.Record{Kind: store.KindUsage, Usage: &u} }

// row is the figures of one turn, as the test writes them down.
type row struct {
	session                                 string
	turn, calls, keys, maxRep, streak       int
	maxRepTool, streakTool, outcome, capRsn string
	duration                                time.Duration
}

func rowOf(t Turn) row {
	return row{t.Session, t.Turn, t.ToolCalls, t.DistinctKeys, t.MaxRepeat, t.MaxNameStreak,
		t.MaxRepeatTool, t.StreakTool, t.OutcomeText(), t.CapReason, t.Duration}
}

var knownRows = []row{
	{"sessA", 1, 8, 5, 3, 3, "read_file", "read_file", "end_turn", "", 2 * time.Second},
	{"sessA", 2, 1, 1, 1, 1, "read_file", "read_file", "cancelled", "", 500 * time.Millisecond},
	{"sessA", 3, 3, 3, 1, 3, "read_file", "read_file", "turn_tool_call_cap/explicit", "explicit", time.Second},
	{"sessA", 4, 1, 1, 1, 1, "list_directory", "list_directory", "incomplete", "", 0},
	{"sessB", 1, 0, 0, 0, 0, "", "", "end_turn", "", 90 * time.Second},
}

func TestCollect_KnownFigures(t *testing.T) {
	dir := transcripts(t)
	rep, err := Collect(Options{DataDir: dir})
	require.NoError(t, err)
	var got []row
	for _, tr := range rep.Turns {
		got = append(got, rowOf(*tr))
		assert.Nil(t, tr.WhatIf)
	}
	assert.Equal(t, knownRows, got)

	s := rep.Summary
	assert.Equal(t, 2, s.Sessions)
	assert.Equal(t, 5, s.Turns)
	assert.Equal(t, 13, s.ToolCalls)
	// Calls per turn, sorted: 0 1 1 3 8.
	assert.Equal(t, []int{1, 8, 8, 8}, []int{s.P50, s.P90, s.P99, s.Max})
	assert.Equal(t, 0, s.TurnsPast100)
	assert.Equal(t, map[string]int{"end_turn": 2, "cancelled": 1, "turn_tool_call_cap/explicit": 1, "incomplete": 1}, s.Outcomes)
	assert.Equal(t, map[int]int{3: 1, 0: 1}, s.MaxRepeatEndTurn)
	assert.Equal(t, 1, s.Skipped, "the torn last record")

	// The first turn's usage, summed over its four requests.
	first := rep.Turns[0]
	assert.Equal(t, usage.Tokens{Requests: 4, Input: 5600, Cached: 1824, Output: 560, Reasoning: 20, Estimated: 1}, first.Usage)
	assert.Equal(t, &usage.Tokens{Requests: 1, Input: 3000, Output: 400}, first.Summaries)
	assert.Equal(t, &usage.Tokens{Requests: 1, Input: 500, Output: 100, Estimated: 1}, first.Subagents)
	require.NotNil(t, first.Cost)
	assert.InDelta(t, 0.0054, first.Cost.Amount, 1e-12)
	assert.Equal(t, "USD", first.Cost.Currency)
	assert.Equal(t, usage.Tokens{}, rep.Turns[1].Usage)
	assert.Nil(t, rep.Turns[1].Cost)
	// The totals are what the provider reported, the /compress between
	// turns included: cached 800 + 1,024 + 1,500.
	assert.Equal(t, usage.Tokens{Requests: 5, Input: 7600, Cached: 3324, Output: 860, Reasoning: 20, Estimated: 1}, s.Usage)
	assert.Equal(t, usage.Tokens{Requests: 2, Input: 5000, Cached: 1500, Output: 700}, s.Summaries)
	assert.Equal(t, usage.Tokens{Requests: 1, Input: 500, Output: 100, Estimated: 1}, s.Subagents)
	assert.InDelta(t, 3324.0/7600, s.CachedShare, 1e-12)
	assert.InDelta(t, 0.0074, s.Costs["USD"], 1e-12)
	// Filtered to a later start, the /compress before it is left out.
	late, err := Collect(Options{DataDir: dir, Since: t0.Add(5 * time.Second)})
	require.NoError(t, err)
	assert.Zero(t, late.Summary.Usage.Input)
}

func TestCollect_Filters(t *testing.T) {
	dir := transcripts(t)
	turnsOf := func(o Options) []string {
		o.DataDir = dir
		rep, err := Collect(o)
		require.NoError(t, err)
		var out []string
		for _, tr := range rep.Turns {
			out = append(out, fmt.Sprintf("%s/%d", tr.Session, tr.Turn))
		}
		return out
	}
	assert.Equal(t, []string{"sessB/1"}, turnsOf(Options{Sessions: []string{"sessB"}}))
	assert.Equal(t, []string{"sessB/1"}, turnsOf(Options{Cwd: "/w/b"}))
	assert.Equal(t, []string{"sessA/1", "sessA/2", "sessA/3", "sessA/4"}, turnsOf(Options{Cwd: "/w/a"}))
	assert.Len(t, turnsOf(Options{Cwd: "/w"}), 5)
	assert.Empty(t, turnsOf(Options{Cwd: "/w/a/b"}))
	assert.Empty(t, turnsOf(Options{Cwd: "/w/b/su"}), "a prefix of a folder name is not that folder")
	assert.Equal(t, []string{"sessA/3", "sessA/4", "sessB/1"}, turnsOf(Options{Since: t0.Add(15 * time.Second)}),
		"turn numbers stay the session's own")
	_, err := Collect(Options{DataDir: dir, Sessions: []string{"../x"}})
	require.ErrorContains(t, err, "--session")
	_, err = Collect(Options{DataDir: dir, Sessions: []string{"sessB", "sessZ"}})
	require.ErrorContains(t, err, `--session: no session "sessZ" in `+dir)
	_, err = Collect(Options{DataDir: filepath.Join(dir, "missing")})
	require.ErrorContains(t, err, "session.dataDir: ")
	require.ErrorContains(t, err, filepath.Join(dir, "missing"))
	_, err = Collect(Options{DataDir: filepath.Join(dir, "sessions", "sessA.jsonl")})
	require.ErrorContains(t, err, "is not a folder")
	rep, err := Collect(Options{DataDir: t.TempDir()})
	require.NoError(t, err, "a data folder with no sessions yet")
	assert.Empty(t, rep.Turns)
}

func TestCollect_WhatIf(t *testing.T) {
	dir := transcripts(t)
	changes := func(s Settings) map[string]Change {
		rep, err := Collect(Options{DataDir: dir, WhatIf: &s})
		require.NoError(t, err)
		out := map[string]Change{}
		for _, tr := range rep.Turns {
			if tr.WhatIf != nil {
				out[fmt.Sprintf("%s/%d", tr.Session, tr.Turn)] = *tr.WhatIf
			}
		}
		assert.Equal(t, len(out), rep.Summary.WhatIf.Changed)
		return out
	}
	// The settings turn 3 ran with: nothing changes but turn 1, which a
	// hard cap of 2 stops on its second response (call 3).
	assert.Equal(t, map[string]Change{
		"sessA/1": {Stops: true, LoopType: "turn_tool_call_cap", CapReason: "explicit", AtCall: 3, Why: "3 calls past the hard cap of 2"},
	}, changes(Settings{Cap: loopdetect.Cap{Max: 2, Explicit: true}, SkipLoopDetection: true}))
	// The adaptive default lets turn 3's stop through.
	assert.Equal(t, map[string]Change{
		"sessA/3": {AtCall: 3, Why: "no cap or duplicate rule holds at call 3 (3 calls, max repeat 1); the transcript ends there"},
	}, changes(Settings{Cap: loopdetect.DefaultCap(), SkipLoopDetection: true}))
	// Adaptive soft cap 2 (backstop 20): turn 1 passes 2 calls but is neither
	// stuck (max repeat 3) nor past 20, so only turn 3 changes.
	got := changes(Settings{Cap: loopdetect.Cap{Max: 2}, SkipLoopDetection: true})
	assert.Len(t, got, 1)
	assert.False(t, got["sessA/3"].Stops)
}

func TestReport_Formats(t *testing.T) {
	dir := transcripts(t)
	rep, err := Collect(Options{DataDir: dir, WhatIf: &Settings{Cap: loopdetect.Cap{Max: 2, Explicit: true}, SkipLoopDetection: true}})
	require.NoError(t, err)

	var tbl bytes.Buffer
	require.NoError(t, rep.Write(&tbl, FormatTable))
	out := tbl.String()
	assert.Contains(t, out, "START (UTC)       SESSION       TURN  AGENT          CALLS   KEYS  MAXREP  STREAK  OUTCOME")
	assert.Contains(t, out, "2026-11-30 09:00  sessA            1  acpd               8      5       3       3  end_turn                               2.0s")
	assert.Contains(t, out, "turn_tool_call_cap/explicit")
	assert.Contains(t, out, "5 turns in 2 sessions, 13 tool calls (1 damaged lines skipped)")
	assert.Contains(t, out, "calls per turn: p50 1, p90 8, p99 8, max 8; 0 turns past 100 calls")
	assert.Contains(t, out, "turns that ended normally, by the most one call repeated: no call in 1 turn, 3× in 1 turn")
	assert.Contains(t, out, "1 turns would change (1 would stop, 0 would go on)")
	assert.Contains(t, out, "sessA turn 1: end_turn -> turn_tool_call_cap/explicit at call 3: 3 calls past the hard cap of 2")
	assert.Contains(t, out, "DURATION       IN   CACHED      OUT   REASON  COST")
	assert.Contains(t, out, "2.0s    ~5.6k     1.8k      560       20  0.0054 USD")
	assert.Contains(t, out, "tokens: 5 requests, input 7600 (3324 cached, 43.7%), output 860 (20 reasoning); 1 requests estimated; "+
		"summaries: 2 requests, input 5000, output 700; subagents: 1 requests, input 500, output 100")
	assert.Contains(t, out, "cost: 0.0074 USD")

	var js bytes.Buffer
	require.NoError(t, rep.Write(&js, FormatJSON))
	var back struct {
		Turns []struct {
			Session    string  `json:"session"`
			ToolCalls  int     `json:"toolCalls"`
			DurationMs int64   `json:"durationMs"`
			WhatIf     *Change `json:"whatIf"`
		} `json:"turns"`
		Summary Summary `json:"summary"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Len(t, back.Turns, 5)
	assert.Equal(t, int64(2000), back.Turns[0].DurationMs)
	assert.Equal(t, 3, back.Turns[0].WhatIf.AtCall)
	assert.Equal(t, 13, back.Summary.ToolCalls)
	assert.Equal(t, 3324, back.Summary.Usage.Cached)
	var raw struct {
		Turns []map[string]any `json:"turns"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &raw))
	assert.Equal(t, map[string]any{"requests": 4.0, "inputTokens": 5600.0, "cachedInputTokens": 1824.0, "outputTokens": 560.0,
		"reasoningTokens": 20.0, "estimatedRequests": 1.0}, raw.Turns[0]["usage"])
	cost := raw.Turns[0]["cost"].(map[string]any)
	assert.InDelta(t, 0.0054, cost["amount"], 1e-12)
	assert.Equal(t, "USD", cost["currency"])

	var cs bytes.Buffer
	require.NoError(t, rep.Write(&cs, FormatCSV))
	rows, err := csv.NewReader(&cs).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 6)
	assert.Equal(t, csvHeader, rows[0])
	assert.Equal(t, []string{"sessA", "1", "/w/a", "2026-11-30T09:00:00Z", "8", "5", "3", "read_file", "3", "read_file",
		"end_turn", "", "", "2000", "turn_tool_call_cap/explicit", "3", "3 calls past the hard cap of 2", "0", "", "",
		"4", "5600", "1824", "560", "20", "1", "3000", "400", "500", "100", "0.005400", "USD", "", "stopped", "", "0"}, rows[1])
	assert.Equal(t, []string{"0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "", "", "", "finished", "", "0"}, rows[2][20:])

	require.ErrorContains(t, rep.Write(&cs, "xml"), `unknown format "xml"`)
}

// Cache writes, which Anthropic bills above the input price, are shown
// apart: in the table's token line and in their own CSV column.
func TestReport_CacheWrites(t *testing.T) {
	rep := &Report{Turns: []*Turn{{Session: "s", Turn: 1, Usage: usage.Tokens{Requests: 2, Input: 9000, Cached: 4000, CacheWrite: 3000, Output: 50}}}}
	rep.Summary.Usage = rep.Turns[0].Usage
	var tbl bytes.Buffer
	require.NoError(t, rep.Write(&tbl, FormatTable))
	assert.Contains(t, tbl.String(), "input 9000 (4000 cached, 0.0%; 3000 written to the cache), output 50")
	var cs bytes.Buffer
	require.NoError(t, rep.Write(&cs, FormatCSV))
	rows, err := csv.NewReader(&cs).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, "cache_write_input_tokens", rows[0][len(rows[0])-1])
	assert.Equal(t, "3000", rows[1][len(rows[1])-1])
}

// A subagent run is a turn of its own, linked to its prompt turn by number
// and agent call, counted apart from the prompt turn (whose guard counted
// each agent call once), and replayed by the what-if like any turn — also
// when two runs' records interleave.
func TestCollect_SubagentRunsAreTurns(t *testing.T) {
	dataDir := t.TempDir()
	st, err := store.Open(dataDir, store.Options{})
	require.NoError(t, err)
	w, err := st.Create(store.SessionMeta{ID: "sessS", Cwd: "/w", CreatedAt: t0})
	require.NoError(t, err)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	sub := func(parent string, calls ...store.ToolCall) store.Record {
		return store.Record{T: at(time.Second), Kind: store.KindToolCalls, Parent: parent, ToolCalls: calls}
	}
	recs := []store.Record{
		{T: at(0), Kind: store.KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("go")}},
		{T: at(0), Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("p1", "agent", `{"prompt":"a"}`), tc("p2", "agent", `{"prompt":"b"}`)}},
		{T: at(time.Second), Kind: store.KindAgentStart, Parent: "p1", Agent: &store.AgentRun{Type: "Explore"}},
		{T: at(2 * time.Second), Kind: store.KindAgentStart, Parent: "p2", Agent: &store.AgentRun{Type: "general-purpose"}},
	}
	// p1 reads one file 101 times; p2 reads 60 distinct files; interleaved.
	for i := range 101 {
		recs = append(recs, sub("p1", tc(fmt.Sprintf("s1_%d", i), "read_file", `{"p":"same"}`)))
		if i < 60 {
			recs = append(recs, sub("p2", tc(fmt.Sprintf("s2_%d", i), "read_file", fmt.Sprintf(`{"p":%d}`, i))))
		}
	}
	recs = append(recs,
		store.Record{T: at(5 * time.Second), Kind: store.KindAgentEnd, Parent: "p2", Agent: &store.AgentRun{StopReason: acp.StopEndTurn}},
		store.Record{T: at(6 * time.Second), Kind: store.KindLoopStop, Parent: "p1", Loop: &store.LoopStop{LoopType: "turn_tool_call_cap", CapReason: "stuck", ToolCalls: 101}},
		store.Record{T: at(7 * time.Second), Kind: store.KindAgentEnd, Parent: "p1", Agent: &store.AgentRun{Error: "stopped by its loop protection"}},
		store.Record{T: at(8 * time.Second), Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("p3", "glob", `{}`)}},
		store.Record{T: at(9 * time.Second), Kind: store.KindTurnEnd, StopReason: acp.StopEndTurn},
		// Turn 2: a run that never ended (acpd stopped).
		store.Record{T: at(20 * time.Second), Kind: store.KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("again")}},
		store.Record{T: at(20 * time.Second), Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{tc("q1", "agent", `{}`)}},
		store.Record{T: at(21 * time.Second), Kind: store.KindAgentStart, Parent: "q1", Agent: &store.AgentRun{Type: "Explore"}},
		sub("q1", tc("t1", "glob", `{}`)),
	)
	for _, r := range recs {
		require.NoError(t, w.Append(r))
	}
	require.NoError(t, w.Close())

	rep, err := Collect(Options{DataDir: dataDir})
	require.NoError(t, err)
	type row struct {
		label, agent, parent, outcome string
		calls, maxRep                 int
	}
	var got []row
	for _, tr := range rep.Turns {
		got = append(got, row{tr.Label(), tr.Agent, tr.ParentToolCallID, tr.OutcomeText(), tr.ToolCalls, tr.MaxRepeat})
	}
	assert.Equal(t, []row{
		{"1", "", "", "end_turn", 3, 1},
		{"1.1", "Explore", "p1", "turn_tool_call_cap/stuck", 101, 101},
		{"1.2", "general-purpose", "p2", "end_turn", 60, 1},
		{"2", "", "", "incomplete", 1, 1},
		{"2.1", "Explore", "q1", "incomplete", 1, 1},
	}, got)
	assert.Equal(t, 6*time.Second, rep.Turns[1].Duration)
	assert.Equal(t, 5, rep.Summary.Turns)

	// Replayed under the settings the runs had, nothing changes; under a
	// hard cap of 50 the 60-call run would have stopped.
	rep, err = Collect(Options{DataDir: dataDir, WhatIf: &Settings{Cap: loopdetect.Cap{Max: 100}, SkipLoopDetection: true}})
	require.NoError(t, err)
	assert.Zero(t, rep.Summary.WhatIf.Changed)
	rep, err = Collect(Options{DataDir: dataDir, WhatIf: &Settings{Cap: loopdetect.Cap{Max: 50, Explicit: true}, SkipLoopDetection: true}})
	require.NoError(t, err)
	changed := map[string]string{}
	for _, tr := range rep.Turns {
		if tr.WhatIf != nil {
			changed[tr.Label()] = tr.WhatIf.Outcome() + fmt.Sprint(" at ", tr.WhatIf.AtCall)
		}
	}
	assert.Equal(t, map[string]string{"1.1": "turn_tool_call_cap/explicit at 51", "1.2": "turn_tool_call_cap/explicit at 51"}, changed)
	var out bytes.Buffer
	require.NoError(t, rep.Write(&out, FormatTable))
	assert.Contains(t, out.String(), "sessS turn 1.2: end_turn -> turn_tool_call_cap/explicit at call 51")
}

// TestCollect_GuardOfAcpdCountedOnce: acpd guard -- acpd, both keeping
// their transcripts in one data folder, records the turn twice (the
// guard's copy names the inner acpd's session); it is counted once, from
// acpd's own transcript. A guarded session of another agent still counts.
func TestCollect_GuardOfAcpdCountedOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	own, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	guard, err := store.Open(filepath.Join(dir, store.GuardDir), store.Options{})
	require.NoError(t, err)
	turn := func(w *store.Writer) {
		t.Helper()
		require.NoError(t, w.Append(store.Record{Kind: store.KindUser, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}}))
		require.NoError(t, w.Append(store.Record{Kind: store.KindToolCalls, ToolCalls: []store.ToolCall{{ID: "c1", Name: "glob", Arguments: json.RawMessage(`{"pattern":"*"}`)}}}))
		require.NoError(t, w.EndTurn(acp.StopEndTurn, ""))
		require.NoError(t, w.Close())
	}
	w, err := own.Create(store.SessionMeta{Cwd: "/w"})
	require.NoError(t, err)
	ownID := w.ID()
	turn(w)
	w, err = guard.Create(store.SessionMeta{Cwd: "/w", Agent: "acpd", AgentSessionID: ownID})
	require.NoError(t, err)
	turn(w)
	w, err = guard.Create(store.SessionMeta{Cwd: "/w", Agent: "other-agent", AgentSessionID: "S1"})
	require.NoError(t, err)
	turn(w)

	rep, err := Collect(Options{DataDir: dir})
	require.NoError(t, err)
	var agents []string
	for _, tr := range rep.Turns {
		agents = append(agents, tr.AgentName())
	}
	assert.ElementsMatch(t, []string{"acpd", "other-agent"}, agents)
	assert.Equal(t, ownID, rep.Turns[slices.IndexFunc(rep.Turns, func(tr *Turn) bool { return tr.AgentName() == "acpd" })].Session)
}
