package stats

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/store"
)

// The loop corpus (testdata/loop-corpus.json): turns shaped on real tool
// output — verification cycles, polling, flaky re-runs, a long exploration,
// stuck loops (same call and result; same failure with different timings,
// tmp paths, pids, ids and colour; two states alternating) and a runaway
// that varies its arguments — each labelled productive or stuck, recorded
// as the daemon records a turn with its cap off (every call, its result
// and the result's digest), and replayed through the what-if path under
// every setting.
type corpusTurn struct {
	Name    string         `json:"name"`
	Class   string         `json:"class"`
	Label   string         `json:"label"`
	Note    string         `json:"note"`
	Batches [][]corpusCall `json:"batches"`
}

type corpusCall struct {
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args"`
	Result string          `json:"result"`
	Failed bool            `json:"failed"`
}

// corpusSettings are the four settings the corpus is replayed under.
var corpusSettings = []struct {
	name string
	cap  loopdetect.Cap
}{
	{"calls/stop", loopdetect.DefaultCap()},
	{"results/stop", loopdetect.Cap{Max: 100, Signal: loopdetect.SignalResults}},
	{"calls/warn", loopdetect.Cap{Max: 100, Recovery: loopdetect.RecoveryWarn}},
	{"results/warn", loopdetect.Cap{Max: 100, Signal: loopdetect.SignalResults, Recovery: loopdetect.RecoveryWarn}},
}

// writeCorpus records every corpus turn as a session of its own in a
// fresh data folder and returns the folder and the turns by session id.
func writeCorpus(t *testing.T) (string, map[string]corpusTurn) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "loop-corpus.json"))
	require.NoError(t, err)
	var c struct{ Turns []corpusTurn }
	require.NoError(t, json.Unmarshal(b, &c))
	require.NotEmpty(t, c.Turns)
	return writeTurns(t, c.Turns)
}

// writeTurns records turns as writeCorpus does, each a session of its own.
func writeTurns(t *testing.T, turns []corpusTurn) (string, map[string]corpusTurn) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	bySession := map[string]corpusTurn{}
	for _, ct := range turns {
		w, err := st.Create(store.SessionMeta{Cwd: "/w"})
		require.NoError(t, err)
		bySession[w.ID()] = ct
		require.NoError(t, w.Append(store.Record{Kind: store.KindUser, Prompt: []acp.ContentBlock{acp.TextBlock(ct.Note)}}))
		n := 0
		for _, batch := range ct.Batches {
			var calls []store.ToolCall
			for _, cl := range batch {
				n++
				calls = append(calls, store.ToolCall{ID: fmt.Sprintf("call_%d", n), Name: cl.Name, Arguments: cl.Args})
			}
			require.NoError(t, w.Append(store.Record{Kind: store.KindToolCalls, ToolCalls: calls}))
			for i, cl := range batch {
				status := acp.StatusCompleted
				if cl.Failed {
					status = acp.StatusFailed
				}
				require.NoError(t, w.Append(store.Record{Kind: store.KindToolResult, Tool: &store.ToolCallRecord{
					ToolCallID: calls[i].ID, Name: cl.Name, Status: status, ModelText: cl.Result,
					ResultHash: loopdetect.FormatResultHash(loopdetect.ResultHash(cl.Failed, cl.Result))}}))
			}
		}
		require.NoError(t, w.EndTurn(acp.StopEndTurn, ""))
		require.NoError(t, w.Close())
	}
	return dir, bySession
}

// verdict is what one setting does with one corpus turn.
type verdict struct {
	outcome string // stopped, warned, finished
	at      int    // the call it stops at (0: none)
	reason  string
}

// TestLoopCorpus replays the corpus under every setting: with "results" no
// productive turn is stopped before the backstop, and every stuck one is
// stopped no more than 6 calls later than the default stops it; the
// default is the reference (it stops the productive long turns too). It
// prints the table docs/loop-protection.md shows.
func TestLoopCorpus(t *testing.T) {
	t.Parallel()
	dir, turns := writeCorpus(t)
	got := map[string]map[string]verdict{} // class -> setting -> verdict
	for _, s := range corpusSettings {
		rep, err := Collect(Options{DataDir: dir, WhatIf: &Settings{Cap: s.cap, SkipLoopDetection: true}, Workers: 1})
		require.NoError(t, err)
		require.Len(t, rep.Turns, len(turns))
		for _, tr := range rep.Turns {
			ct := turns[tr.Session]
			v := verdict{outcome: tr.Replay}
			if c := tr.WhatIf; c != nil && c.Stops {
				v.at, v.reason = c.AtCall, c.CapReason
				assert.NotContains(t, c.Why, "replayed as calls", "the corpus has its digests")
			}
			if got[ct.Class] == nil {
				got[ct.Class] = map[string]verdict{}
			}
			got[ct.Class][s.name] = v
		}
	}
	var table strings.Builder
	table.WriteString("| Turn (label, calls) |")
	for _, s := range corpusSettings {
		fmt.Fprintf(&table, " %s |", s.name)
	}
	table.WriteString("\n|---|---|---|---|---|\n")
	for _, ct := range sortedCorpus(turns) {
		n := 0
		for _, b := range ct.Batches {
			n += len(b)
		}
		fmt.Fprintf(&table, "| %s (%s, %d) |", ct.Class, ct.Label, n)
		row := got[ct.Class]
		for _, s := range corpusSettings {
			v := row[s.name]
			cell := v.outcome
			if v.at > 0 {
				cell = fmt.Sprintf("%s at %d (%s)", v.outcome, v.at, v.reason)
			}
			fmt.Fprintf(&table, " %s |", cell)
		}
		table.WriteString("\n")

		def := row["calls/stop"]
		for _, s := range []string{"results/stop", "results/warn"} {
			v := row[s]
			switch ct.Label {
			case "productive":
				if v.outcome == ReplayStopped {
					assert.Equal(t, string(loopdetect.CapBackstop), v.reason, "%s under %s: a productive turn stopped before the backstop", ct.Name, s)
				}
			case "stuck":
				require.Equal(t, ReplayStopped, def.outcome, "%s: the default stops it", ct.Name)
				require.Equal(t, ReplayStopped, v.outcome, "%s under %s", ct.Name, s)
				assert.LessOrEqual(t, v.at, def.at+loopdetect.GlobalDuplicateThreshold, "%s under %s: at most 6 calls later", ct.Name, s)
			}
		}
		if ct.Label == "stuck" {
			assert.Equal(t, ReplayStopped, row["calls/warn"].outcome, ct.Name)
		}
	}
	t.Logf("corpus replay:\n%s", table.String())
	// The reference stops the long productive turns that repeat a call:
	// what the result signal is for.
	assert.Equal(t, ReplayStopped, got["verification cycle"]["calls/stop"].outcome)
	assert.Equal(t, ReplayStopped, got["polling"]["calls/stop"].outcome)
	assert.Equal(t, ReplayFinished, got["verification cycle"]["results/stop"].outcome)
	assert.Equal(t, ReplayFinished, got["polling"]["results/stop"].outcome)
	if os.Getenv("LOOP_CORPUS_TABLE") != "" {
		require.NoError(t, os.WriteFile(os.Getenv("LOOP_CORPUS_TABLE"), []byte(table.String()), 0o644))
	}
}

// sortedCorpus is the corpus in file order (productive first).
func sortedCorpus(map[string]corpusTurn) []corpusTurn {
	b, _ := os.ReadFile(filepath.Join("testdata", "loop-corpus.json"))
	var c struct{ Turns []corpusTurn }
	_ = json.Unmarshal(b, &c)
	return c.Turns
}

// TestWhatIf_Warned: a turn whose stuck signal fires once past the soft
// cap and never again is what --loop-recovery warn warns and lets finish:
// its verdict is "warned", with the call it warned at, and the summary
// counts it apart from the stopped and finished turns. Under "stop" the
// same turn is stopped at that call.
func TestWhatIf_Warned(t *testing.T) {
	t.Parallel()
	read := func(path, result string) corpusCall {
		return corpusCall{Name: "read_file", Args: json.RawMessage(fmt.Sprintf(`{"file_path":%q}`, path)), Result: result}
	}
	// Six reads of one file, then 100 of distinct ones: call 101 crosses
	// the soft cap with the first key at 6, and no later call repeats it.
	var once [][]corpusCall
	for range 6 {
		once = append(once, []corpusCall{read("/w/status", "same")})
	}
	for i := range 100 {
		once = append(once, []corpusCall{read(fmt.Sprintf("/w/f%d", i), fmt.Sprintf("file %d", i))})
	}
	// The same, then the first file once more: the second firing.
	twice := append(append([][]corpusCall{}, once...), []corpusCall{read("/w/status", "same")})
	dir, turns := writeTurns(t, []corpusTurn{{Name: "once", Batches: once}, {Name: "twice", Batches: twice}})
	for _, tt := range []struct {
		recovery         loopdetect.LoopRecovery
		once, twice      string
		warned, finished int
	}{
		{loopdetect.RecoveryWarn, ReplayWarned, ReplayStopped, 1, 0},
		{loopdetect.RecoveryStop, ReplayStopped, ReplayStopped, 0, 0},
	} {
		rep, err := Collect(Options{DataDir: dir, WhatIf: &Settings{
			Cap: loopdetect.Cap{Max: 100, Recovery: tt.recovery}, SkipLoopDetection: true}, Workers: 1})
		require.NoError(t, err)
		require.Len(t, rep.Turns, 2)
		for _, tr := range rep.Turns {
			name := turns[tr.Session].Name
			want := map[string]string{"once": tt.once, "twice": tt.twice}[name]
			assert.Equal(t, want, tr.Replay, "%s under %s", name, tt.recovery)
			require.NotNil(t, tr.WhatIf, name)
			if tt.recovery == loopdetect.RecoveryWarn {
				assert.Equal(t, 101, tr.WhatIf.WarnedAt, "%s: warned at the call crossing the soft cap", name)
			}
			switch {
			case tr.Replay == ReplayWarned:
				assert.False(t, tr.WhatIf.Stops)
				assert.Equal(t, "warns, continues", tr.WhatIf.Outcome())
			case name == "twice" && tt.recovery == loopdetect.RecoveryWarn:
				assert.Equal(t, 107, tr.WhatIf.AtCall, "stopped at the second firing")
				assert.Equal(t, string(loopdetect.CapStuckAfterWarning), tr.WhatIf.CapReason)
			default:
				assert.Equal(t, 101, tr.WhatIf.AtCall)
				assert.Equal(t, string(loopdetect.CapStuck), tr.WhatIf.CapReason)
			}
		}
		wi := rep.Summary.WhatIf
		require.NotNil(t, wi)
		assert.Equal(t, []int{2 - tt.warned, tt.warned, tt.finished}, []int{wi.Stopped, wi.Warned, wi.Finished}, "%s", tt.recovery)
		var out strings.Builder
		require.NoError(t, rep.Write(&out, "table"))
		assert.Contains(t, out.String(), fmt.Sprintf("replayed: %d stopped, %d warned and went on, %d finished as recorded",
			2-tt.warned, tt.warned, tt.finished))
	}
}
