package model

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func drain(t *testing.T, p Provider) ([]string, error) {
	t.Helper()
	var got []string
	for ev, err := range p.Stream(t.Context(), Request{}) {
		if err != nil {
			return got, err
		}
		got = append(got, ev.String())
	}
	return got, nil
}

func TestScript_ServesInOrderThenExhausts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "script.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`# a demo
{"reasoning": "plan", "text": "Reading.", "toolCalls": [{"name": "read_file", "arguments": {"path": "a.txt"}}, {"id": "mine", "name": "glob", "arguments": "{\"pattern\": \"*\"}"}], "usage": {"promptTokens": 3, "completionTokens": 4, "totalTokens": 7}}

{"toolCalls": [{"name": "edit", "arguments": "{\"path\": "}]}
{"text": "Done.", "finish": "length"}
{"text": "Oops", "error": "upstream exploded"}
`), 0o600))
	s, err := NewScript(path)
	require.NoError(t, err)
	assert.Equal(t, 4, s.Remaining())

	tests := []struct {
		want []string
		err  string
	}{
		{want: []string{"reasoning:plan", "text:Reading.", `call:call_1|read_file|{"path":"a.txt"}`, `call:mine|glob|{"pattern":"*"}`, "usage:3/4/7", "finish:tool_calls"}},
		{want: []string{`invalid:call_3|edit|"{\"path\": "|arguments are truncated JSON (the output was cut off)`, "finish:tool_calls"}},
		{want: []string{"text:Done.", "finish:length"}},
		{want: []string{"text:Oops"}, err: "upstream exploded"},
		{err: "model script exhausted after 4 responses"},
	}
	for i, tt := range tests {
		got, err := drain(t, s)
		assert.Equal(t, tt.want, got, "response %d", i)
		if tt.err == "" {
			assert.NoError(t, err)
		} else {
			assert.EqualError(t, err, tt.err)
		}
	}
	_, err = drain(t, s)
	assert.ErrorIs(t, err, ErrScriptExhausted)
	assert.Len(t, s.Requests(), 4)
}

func TestScript_MalformedLinesNameTheLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, script, want string
	}{
		{"bad json", "{\"text\": \"a\"}\n\n{\"text\": oops}\n", "model script line 3: invalid character 'o'"},
		{"unknown field", `{"txt": "a"}`, `model script line 1: json: unknown field "txt"`},
		{"missing name", `{"toolCalls": [{"arguments": {}}]}`, "model script line 1: toolCalls[0].name: required"},
		{"array arguments", `{"toolCalls": [{"name": "x", "arguments": [1]}]}`, "model script line 1: toolCalls[0].arguments: must be an object"},
		{"two values", `{"text": "a"} {"text": "b"}`, "model script line 1: more than one JSON value"},
		{"wrong type", `{"text": 5}`, "model script line 1: json: cannot unmarshal number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewScriptFromReader(strings.NewReader(tt.script))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := NewScript(filepath.Join(t.TempDir(), "missing.jsonl"))
	require.Error(t, err)
}

func TestScript_ConcurrentStreamsEachTakeOneLine(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	const n = 50
	for i := range n {
		line, _ := json.Marshal(ScriptResponse{Text: strings.Repeat("x", i+1)})
		b.Write(line)
		b.WriteByte('\n')
	}
	s, err := NewScriptFromReader(strings.NewReader(b.String()))
	require.NoError(t, err)
	var wg sync.WaitGroup
	lengths := make(chan int, n)
	for range n {
		wg.Go(func() {
			for ev, err := range s.Stream(context.Background(), Request{}) {
				if err == nil && ev.Kind == EventText {
					lengths <- len(ev.Text)
				}
			}
		})
	}
	wg.Wait()
	close(lengths)
	seen := map[int]bool{}
	for l := range lengths {
		assert.False(t, seen[l], "line served twice")
		seen[l] = true
	}
	assert.Len(t, seen, n)
	assert.Zero(t, s.Remaining())
}

func TestScript_CancelledContext(t *testing.T) {
	t.Parallel()
	s, err := NewScriptFromReader(strings.NewReader(`{"text":"a"}`))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, err := range s.Stream(ctx, Request{}) {
		require.True(t, errors.Is(err, context.Canceled))
	}
	assert.Equal(t, 1, s.Remaining(), "a cancelled call does not consume a line")
}

// A line with "match" answers only requests whose first user message
// contains it, from a queue of its own.
func TestScript_MatchKeysSubagentRequests(t *testing.T) {
	t.Parallel()
	s, err := NewScriptFromReader(strings.NewReader(`{"text":"main"}
{"match":"Where is X?","text":"sub"}
`))
	require.NoError(t, err)
	assert.Equal(t, 2, s.Remaining())
	ask := func(first string) ([]string, error) {
		var got []string
		req := Request{Messages: []Message{{Role: RoleSystem, Content: "Where is X?"}, {Role: RoleUser, Content: first}}}
		for ev, err := range s.Stream(t.Context(), req) {
			if err != nil {
				return got, err
			}
			got = append(got, ev.String())
		}
		return got, nil
	}
	got, err := ask("Subagent task. Where is X? Report paths.")
	require.NoError(t, err)
	assert.Equal(t, []string{"text:sub", "finish:stop"}, got)
	_, err = ask("Where is X?")
	require.ErrorIs(t, err, ErrScriptExhausted)
	assert.EqualError(t, err, `model script exhausted after 1 responses matching "Where is X?"`)
	got, err = ask("hello")
	require.NoError(t, err)
	assert.Equal(t, []string{"text:main", "finish:stop"}, got)
	assert.Equal(t, 0, s.Remaining())
}
