package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRun_DoctorWithABrokenConfig: doctor reports a config file it cannot
// load as its first check, naming file:line:col, skips the checks that need
// the configuration, and exits 1 — it does not stop at the error as the
// other commands do (exit 2), since diagnosing is its job.
func TestRun_DoctorWithABrokenConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, want string }{
		{"syntax", "[model\nname = \"x\"\n", ":1:7: syntax error"},
		{"out of range", "[model]\ncompactThreshold = 1.5\n", ":2:20: model.compactThreshold: must be greater than 0 and at most 1, got 1.5"},
		{"bad endpoint", "[telemetry]\nendpoint = \"ftp://c\"\n", ":2:12: telemetry.endpoint: must be an http or https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(t)
			path := sb.file(t, "acpd.toml", tc.file)
			r := sb.run(t, nil, "doctor", "--config", path)
			assert.Equal(t, exitError, r.code, r.stderr)
			assert.Contains(t, r.stdout, "FAIL  configuration  "+path+tc.want)
			assert.Contains(t, r.stdout, "skip  data folder")
			assert.Contains(t, r.stderr, "acpd doctor: some checks failed")
		})
	}
}

// TestRun_StatsBadInput: every mistake on stats's command line is an error
// naming the flag (exit 2), a data folder that is not there is an error
// naming session.dataDir (exit 1), and nothing is printed to stdout then.
func TestRun_StatsBadInput(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	data := filepath.Join(sb.dir, "data")
	require.NoError(t, os.MkdirAll(filepath.Join(data, "sessions"), 0o755))
	sb.file(t, "data/sessions/abc.jsonl", `{"v":1,"t":"2026-11-30T09:00:00Z","kind":"user","prom`)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"since a word", []string{"--since", "yesterday"}, exitUsage, `acpd stats: --since: want an RFC 3339 time, YYYY-MM-DD, or an age such as 36h or 7d, got "yesterday"`},
		{"since negative", []string{"--since", "-3h"}, exitUsage, `--since: want`},
		{"since empty day count", []string{"--since", "d"}, exitUsage, `--since: want`},
		{"format", []string{"--output-format", "xml"}, exitUsage, `acpd stats: invalid argument "xml" for "-o, --output-format" flag: must be table, json or csv; see 'acpd stats --help'`},
		{"format by its old name", []string{"--format", "xml"}, exitUsage, `acpd stats: invalid argument "xml" for "--format" flag: must be table, json or csv`},
		{"session unknown", []string{"--session", "abc,nope"}, exitUsage, `acpd stats: --session: no session "nope" in ` + data},
		{"session not an id", []string{"--session", "../x"}, exitUsage, `acpd stats: --session: `},
		{"missing data folder", []string{"--data-dir", filepath.Join(sb.dir, "typo")}, exitError, "acpd stats: session.dataDir: "},
		{"data folder a file", []string{"--data-dir", filepath.Join(data, "sessions", "abc.jsonl")}, exitError, "is not a folder"},
		{"stuck window negative", []string{"--stuck-window", "-1"}, exitUsage, "model.stuckWindow: must be at least 0, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"stats", "--data-dir", data}, tc.args...)
			r := sb.run(t, nil, args...)
			assert.Equal(t, tc.code, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.want)
			assert.Empty(t, r.stdout)
		})
	}
	// A torn only record: zero turns, one line skipped, exit 0.
	r := sb.run(t, nil, "stats", "--data-dir", data, "--format", "json")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"skippedLines": 1`)
}

// parseSince never wraps a long age around into the future.
func TestParseSince_Edges(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	got, err := parseSince("99999999d", now)
	require.NoError(t, err)
	assert.True(t, got.IsZero(), "an age past a Duration's range means every turn, got %v", got)
	got, err = parseSince("106751d", now)
	require.NoError(t, err)
	assert.True(t, got.Before(now) && got.Year() < 1800, "%v", got)
	got, err = parseSince("0d", now)
	require.NoError(t, err)
	assert.Equal(t, now, got)
	for _, bad := range []string{"", "d", "-1d", "1.5d", "9999999999999h", "tomorrow", "2026-13-01"} {
		_, err := parseSince(bad, now)
		assert.Error(t, err, bad)
	}
}
