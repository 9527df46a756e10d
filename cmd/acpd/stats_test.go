package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statsTurn is the part of `acpd stats --format json`'s turns the tests read.
type statsTurn struct {
	Session       string `json:"session"`
	Turn          int    `json:"turn"`
	ToolCalls     int    `json:"toolCalls"`
	DistinctKeys  int    `json:"distinctKeys"`
	MaxRepeat     int    `json:"maxRepeat"`
	MaxNameStreak int    `json:"maxNameStreak"`
	Outcome       string `json:"outcome"`
	LoopType      string `json:"loopType"`
	CapReason     string `json:"capReason"`
	WhatIf        *struct {
		Stops     bool   `json:"stops"`
		LoopType  string `json:"loopType"`
		CapReason string `json:"capReason"`
		AtCall    int    `json:"atCall"`
		Why       string `json:"why"`
	} `json:"whatIf"`
}

// TestStats_AgainstTheDaemon runs turns through the built binary (`acpd
// run`, the real daemon over ACP) under several loop settings, then reads
// their transcripts with `acpd stats`: the per-turn figures are the known
// ones, a what-if replay with the settings each turn ran under changes
// nothing (the replay agrees with what the daemon did), and other settings
// change exactly the turns they should.
func TestStats_AgainstTheDaemon(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	for i := range 1100 {
		require.NoError(t, os.WriteFile(filepath.Join(e.ws, fmt.Sprintf("f%d.txt", i)), []byte("x"), 0o644))
	}
	readLine := func(files ...string) string {
		var calls []string
		for _, f := range files {
			calls = append(calls, fmt.Sprintf(`{"name":"read_file","arguments":{"file_path":%q}}`, filepath.Join(e.ws, f)))
		}
		return `{"toolCalls":[` + strings.Join(calls, ",") + `]}`
	}
	script := func(name string, n int, files func(i int) []string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(readLine(files(i)...) + "\n")
		}
		b.WriteString(`{"text":"done"}` + "\n")
		p := filepath.Join(e.dir, name+".jsonl")
		require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
		return p
	}
	distinct := func(i int) []string { return []string{fmt.Sprintf("f%d.txt", i)} }
	alternating := func(i int) []string {
		if i%2 == 0 {
			return []string{"x.txt"}
		}
		return distinct(i)
	}
	spread := func(i int) []string {
		if (i+1)%50 == 0 {
			return []string{"x.txt"}
		}
		return distinct(i)
	}
	tens := func(i int) []string {
		var fs []string
		for j := range 10 {
			fs = append(fs, fmt.Sprintf("f%d.txt", (i*10+j)%1100))
		}
		return fs
	}
	type want struct{ calls, keys, maxRep int }
	runs := []struct {
		name     string
		n        int
		files    func(int) []string
		runFlags []string
		same     []string // the stats flags replaying the settings the turn ran with
		outcome  string
		facts    want
	}{
		{"alternating", 120, alternating, nil, []string{"--max-tool-calls-per-turn", "100"}, "turn_tool_call_cap/stuck", want{101, 51, 51}},
		{"hard50", 60, distinct, []string{"--max-tool-calls-per-turn", "50"}, []string{"--max-tool-calls-per-turn", "50", "--explicit"},
			"turn_tool_call_cap/explicit", want{51, 51, 1}},
		{"dup", 12, alternating, []string{"--loop-detection"}, []string{"--loop-detection"},
			"global_tool_call_duplicate", want{11, 6, 6}},
		{"spread", 300, spread, []string{"--stuck-window", "50"}, []string{"--stuck-window", "50"}, "end_turn", want{300, 295, 6}},
		{"backstop", 105, tens, nil, []string{"--max-tool-calls-per-turn", "100"}, "turn_tool_call_cap/backstop", want{1010, 1010, 1}},
		{"distinct", 150, distinct, nil, []string{"--max-tool-calls-per-turn", "100"}, "end_turn", want{150, 150, 1}},
	}
	ids := map[string]string{} // run name -> session id
	for _, r := range runs {
		args := append(e.scripted(script(r.name, r.n, r.files), "--output-format", "json"), r.runFlags...)
		o := e.run(t, "", append(args, "go")...)
		res := decodeResult(t, strings.TrimSpace(o.stdout))
		require.NotEmpty(t, res.SessionID, o.stderr)
		ids[r.name] = res.SessionID
	}
	stats := func(flags ...string) map[string]statsTurn {
		t.Helper()
		o := e.run(t, "", append([]string{"stats", "--output-format", "json"}, flags...)...)
		require.Equal(t, 0, o.code, o.stderr)
		var rep struct {
			Turns []statsTurn `json:"turns"`
		}
		require.NoError(t, json.Unmarshal([]byte(o.stdout), &rep))
		out := map[string]statsTurn{}
		for _, tr := range rep.Turns {
			out[tr.Session] = tr
		}
		return out
	}

	all := stats()
	require.Len(t, all, len(runs))
	for _, r := range runs {
		tr := all[ids[r.name]]
		outcome := tr.Outcome
		if outcome == "loop" {
			outcome = tr.LoopType
			if tr.CapReason != "" {
				outcome += "/" + tr.CapReason
			}
		}
		assert.Equal(t, r.outcome, outcome, r.name)
		assert.Equal(t, r.facts, want{tr.ToolCalls, tr.DistinctKeys, tr.MaxRepeat}, r.name)
		assert.Equal(t, tr.ToolCalls, tr.MaxNameStreak, "%s: every call is a read_file", r.name)
		assert.Equal(t, 1, tr.Turn)

		// Replaying the turn under the settings it ran with changes nothing.
		same := stats(append(r.same, "--session", ids[r.name])...)
		require.Len(t, same, 1)
		assert.Nil(t, same[ids[r.name]].WhatIf, "%s: the replay disagrees with the daemon", r.name)
	}

	type change struct {
		stops   bool
		outcome string
		at      int
	}
	changes := func(flags ...string) map[string]change {
		out := map[string]change{}
		turns := stats(flags...)
		for name, id := range ids {
			if c := turns[id].WhatIf; c != nil {
				oc := c.LoopType
				if c.CapReason != "" {
					oc += "/" + c.CapReason
				}
				out[name] = change{c.Stops, oc, c.AtCall}
			}
		}
		return out
	}
	// The reference's whole-turn signal: the spread re-runs are stuck at
	// call 300; the turns that ran under other caps or duplicate settings
	// would go on past their stops.
	assert.Equal(t, map[string]change{
		"spread": {true, "turn_tool_call_cap/stuck", 300},
		"hard50": {false, "", 51},
		"dup":    {false, "", 11},
	}, changes("--stuck-window", "0"))
	// A hard cap of 100.
	assert.Equal(t, map[string]change{
		"alternating": {true, "turn_tool_call_cap/explicit", 101},
		"hard50":      {false, "", 51},
		"dup":         {false, "", 11},
		"spread":      {true, "turn_tool_call_cap/explicit", 101},
		"backstop":    {true, "turn_tool_call_cap/explicit", 110},
		"distinct":    {true, "turn_tool_call_cap/explicit", 101},
	}, changes("--max-tool-calls-per-turn", "100", "--explicit"))

	// The table names the changed turns, the call and the reason.
	o := e.run(t, "", "stats", "--stuck-window", "0", "--session", ids["spread"])
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "1 turns would change (1 would stop, 0 would go on)")
	assert.Contains(t, o.stdout, "turn 1: end_turn -> turn_tool_call_cap/stuck at call 300: 300 calls past the soft cap of 100 with read_file repeated 6 times")

	// Bad input is a usage error naming the flag.
	for _, bad := range [][]string{{"--format", "xml"}, {"--since", "yesterday"}, {"--session", "../etc"}} {
		o := e.run(t, "", append([]string{"stats"}, bad...)...)
		assert.Equal(t, 2, o.code, "%v: %s", bad, o.stderr)
		assert.Contains(t, o.stderr, bad[0])
	}
}
