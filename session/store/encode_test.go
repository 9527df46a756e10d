package store

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
)

// TestEncode_MatchesMarshal: the hand-written tool record encoding is
// byte for byte json.Marshal's, and every other record goes through it.
func TestEncode_MatchesMarshal(t *testing.T) {
	strs := []string{"", "plain", "multi\nline\ttext\r\n", `q"b\s`, "<&>", "héllo ✓", "bad \xff", "\u2028", "\x00\b\f"}
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func() string { return strs[rng.IntN(len(strs))] }
	line := 3
	raws := []json.RawMessage{nil, json.RawMessage(`{ "a" : [1, 2] }`), json.RawMessage(`{"h":"<x>"}`), json.RawMessage(`"s"`)}
	times := []time.Time{time.Date(2026, 11, 30, 6, 0, 0, 123456789, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := range 2000 {
		var content []acp.ToolCallContent
		for range rng.IntN(3) {
			if rng.IntN(2) == 0 {
				content = append(content, acp.TextContent(pick()))
			} else {
				old := pick()
				content = append(content, acp.DiffContent(pick(), &old, pick()))
			}
		}
		var locs []acp.ToolCallLocation
		for range rng.IntN(3) {
			l := acp.ToolCallLocation{Path: pick()}
			if rng.IntN(2) == 0 {
				l.Line = &line
			}
			locs = append(locs, l)
		}
		rec := Record{V: Version, T: times[rng.IntN(len(times))], Kind: []Kind{KindToolCall, KindToolResult}[rng.IntN(2)], Tool: &ToolCallRecord{
			ToolCallID: pick(), Name: pick(), Title: pick(), Kind: acp.ToolKind(pick()), Status: acp.ToolCallStatus(pick()),
			Locations: locs, RawInput: raws[rng.IntN(len(raws))], RawOutput: raws[rng.IntN(len(raws))], Content: content, ModelText: pick(), ResultHash: pick(),
		}}
		if rng.IntN(3) == 0 {
			rec.Parent = pick() // a subagent run's record: still the fast path
		}
		if rng.IntN(4) == 0 {
			rec.Tool.Decisions = []Decision{{By: pick(), Verdict: "deny", Reason: pick()}, {By: "user", Verdict: "allow", After: true, Context: pick()}}
		}
		switch rng.IntN(4) {
		case 0:
			rec.Text = "not tool-only" // takes the generic path
		case 1:
			rec.Usage = &Usage{TotalTokens: 1}
		}
		want, wantErr := json.Marshal(&rec)
		got, err := rec.encode([]byte("junk")[:0])
		if wantErr != nil { // year 10001
			require.Error(t, err, "case %d", i)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "case %d", i)
	}
	// Invalid raw JSON is an error on both paths.
	bad := Record{V: Version, T: times[0], Kind: KindToolCall, Tool: &ToolCallRecord{ToolCallID: "c", RawInput: json.RawMessage(`{"x`)}}
	_, err := bad.encode(nil)
	require.Error(t, err)
}
