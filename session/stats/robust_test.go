package stats

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A damaged line in the middle of a transcript (a disk error, a hand edit)
// and a line far longer than the reader's buffer are skipped and counted;
// every other turn is still read, with the same figures.
func TestCollect_DamagedAndHugeLines(t *testing.T) {
	dir := transcripts(t)
	path := filepath.Join(dir, "sessions", "sessA.jsonl")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(data), "\n")
	require.Greater(t, len(lines), 4)
	// A tool_calls line cut short 8 MiB in, and a whole 8 MiB text line
	// (text is not decoded by stats at all).
	huge := `{"v":1,"t":"2026-11-30T09:00:01Z","kind":"tool_calls","tool_calls":[{"id":"h","name":"x","arguments":"` + strings.Repeat("x", 8<<20) + "\n" +
		`{"v":1,"t":"2026-11-30T09:00:01Z","kind":"text","text":"` + strings.Repeat("y", 8<<20) + "\"}\n"
	var out []string
	out = append(out, lines[:3]...)
	out = append(out, "{\"v\":1,\"kind\":\x00garbage}\n", "not json at all\n", huge, "\n", "{}\n")
	out = append(out, lines[3:]...)
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(out, "")), 0o600))

	rep, err := Collect(Options{DataDir: dir})
	require.NoError(t, err)
	var got []row
	for _, tr := range rep.Turns {
		got = append(got, rowOf(*tr))
	}
	assert.Equal(t, knownRows, got)
	assert.Equal(t, 1+4, rep.Summary.Skipped, "the torn last record, the two damaged lines, the huge cut-short tool_calls and the empty record")
}
