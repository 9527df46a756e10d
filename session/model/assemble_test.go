package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// render is the compact form the .want.json files use for one event.
func render(ev Event) string {
	switch ev.Kind {
	case EventText:
		return "text:" + ev.Text
	case EventReasoning:
		return "reasoning:" + ev.Text
	case EventToolCall:
		tc := ev.ToolCall
		if tc.Invalid != "" {
			return fmt.Sprintf("invalid:%s|%s|%s|%s", tc.ID, tc.Name, tc.Arguments, tc.Invalid)
		}
		return fmt.Sprintf("call:%s|%s|%s", tc.ID, tc.Name, tc.Arguments)
	case EventUsage:
		return fmt.Sprintf("usage:%d/%d/%d", ev.Usage.PromptTokens, ev.Usage.CompletionTokens, ev.Usage.TotalTokens)
	case EventFinish:
		return "finish:" + ev.FinishReason
	case EventRetry:
		return "retry:" + ev.RetryErr.Error()
	}
	return fmt.Sprintf("unknown kind %d", ev.Kind)
}

// assembleBody runs an SSE body through a fresh Assembler.
func assembleBody(t testing.TB, body []byte) (got []string, err error) {
	t.Helper()
	err = streamSSE(bytes.NewReader(body), NewAssembler(nil), func() {}, func(ev Event) bool {
		got = append(got, render(ev))
		return true
	})
	if err != nil {
		got = append(got, "error:"+err.Error())
	}
	return got, err
}

func TestAssembler_Transcripts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/transcripts/*.sse")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 20)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sse")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(f)
			require.NoError(t, err)
			wantRaw, err := os.ReadFile(strings.TrimSuffix(f, ".sse") + ".want.json")
			require.NoError(t, err)
			var want []string
			require.NoError(t, json.Unmarshal(wantRaw, &want))
			got, _ := assembleBody(t, body)
			assert.Equal(t, want, got)
		})
	}
}

func TestAssembler_ErrorsAreTyped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		file   string
		status int
		finish string
	}{
		{"error object", "13-error-object-after-output", 200, ""},
		{"finish error", "14-openrouter-error-finish", 200, ""},
		{"error_finish", "15-dashscope-error-finish", 200, "error_finish"},
		{"sse error field", "30-llamacpp-error-field", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile("testdata/transcripts/" + tt.file + ".sse")
			require.NoError(t, err)
			_, err = assembleBody(t, body)
			var ae *APIError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, tt.status, ae.Status)
			assert.Equal(t, tt.finish, ae.FinishReason)
			assert.True(t, ae.Retryable())
		})
	}
	body, err := os.ReadFile("testdata/transcripts/16-eof-without-finish.sse")
	require.NoError(t, err)
	_, err = assembleBody(t, body)
	require.ErrorIs(t, err, ErrTruncated)
}

// step is one qwen-code parser vector step: [index, args, id, name].
type step struct {
	index    int
	args     string
	id, name string
}

func chunkFor(s step) []byte {
	f := map[string]any{"arguments": s.args}
	if s.name != "" {
		f["name"] = s.name
	}
	tc := map[string]any{"index": s.index, "function": f}
	if s.id != "" {
		tc["id"] = s.id
	}
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{tc}}}}})
	return b
}

// TestAssembler_QwenParserVectors replays vectors transcribed from
// qwen-code's streamingToolCallParser tests (spec Appendix A.1).
func TestAssembler_QwenParserVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps []step
		want  []string
	}{
		{"2 accumulate", []step{{0, `{"key":`, "call_1", "test_function"}, {0, ` "val`, "", ""}, {0, `ue"}`, "", ""}},
			[]string{`call:call_1|test_function|{"key":"value"}`}},
		{"5 braces in strings", []step{{0, `{"code": "if (x) { return [1, 2]; }"}`, "call_1", "f"}},
			[]string{`call:call_1|f|{"code":"if (x) { return [1, 2]; }"}`}},
		{"6 escaped quote split", []step{{0, `{"text": "Say \"Hello`, "call_1", "f"}, {0, `\" to me"}`, "", ""}},
			[]string{`call:call_1|f|{"text":"Say \"Hello\" to me"}`}},
		{"9 whitespace first", []step{{0, "  \n\t  ", "call_1", "f"}, {0, `{"key": "value"}`, "", ""}},
			[]string{`call:call_1|f|{"key":"value"}`}},
		{"10 structural only", []step{{0, "{", "call_1", "f"}, {0, "}", "", ""}},
			[]string{`call:call_1|f|{}`}},
		{"20 interleaved", []step{{0, `{"p1":`, "call_1", "f1"}, {1, `{"p2":`, "call_2", "f2"}, {0, ` "v1"}`, "", ""}, {1, ` "v2"}`, "", ""}},
			[]string{`call:call_1|f1|{"p1":"v1"}`, `call:call_2|f2|{"p2":"v2"}`}},
		{"21 canonical opener", []step{{0, "", "call_1", "f1"}, {0, `{"x":`, "", ""}, {0, "1}", "", ""}},
			[]string{`call:call_1|f1|{"x":1}`}},
		{"23 no-arg call not overwritten", []step{{0, "", "call_1", "no_arg"}, {0, `{"param": "value"}`, "call_2", "f2"}},
			[]string{`call:call_1|no_arg|{}`, `call:call_2|f2|{"param":"value"}`}},
		{"24 relocation past no-arg slots", []step{{0, "", "call_a", "a"}, {1, "", "call_b", "b"}, {0, `{"x": 1}`, "call_c", "c"}},
			[]string{`call:call_a|a|{}`, `call:call_b|b|{}`, `call:call_c|c|{"x":1}`}},
		{"25 continuation to most recent incomplete", []step{{0, `{"key":`, "call_1", "f1"}, {1, "", "call_2", "no_arg"}, {2, `{"x": 1}`, "call_3", "f3"}, {2, `"value"}`, "", ""}},
			[]string{`call:call_1|f1|{"key":"value"}`, `call:call_2|no_arg|{}`, `call:call_3|f3|{"x":1}`}},
		{"27 replayed no-arg opener", []step{{0, "", "call_1", "list_sessions"}, {0, "", "call_1", "different"}},
			[]string{`call:call_1|list_sessions|{}`}},
		{"28 metadata-only replay", []step{{0, `{"file_path": "a.ts"}`, "call_1", "read_file"}, {0, "", "call_1", "shell"}},
			[]string{`call:call_1|read_file|{"file_path":"a.ts"}`}},
		{"30 identical replay", []step{{0, `{"cmd":"echo hi"}`, "dup", "shell"}, {0, `{"cmd":"echo hi"}`, "dup", "shell"}},
			[]string{`call:dup|shell|{"cmd":"echo hi"}`}},
		{"31 name trimmed", []step{{0, "{}", "call_1", " read_file "}},
			[]string{`call:call_1|read_file|{}`}},
		{"32 first name wins", []step{{0, `{"file_path":`, "call_1", "read_file"}, {0, `"a.ts"}`, "call_1", "shell"}},
			[]string{`call:call_1|read_file|{"file_path":"a.ts"}`}},
		{"34 name after args with id", []step{{2, `{"path":"a.ts"}`, "call_2", ""}, {2, "", "call_2", "read_file"}, {2, "", "call_2", "read_file"}},
			[]string{`call:call_2|read_file|{"path":"a.ts"}`}},
		{"36 late id adopts remapped slot", []step{{0, `{"first":true}`, "call_1", "f1"}, {0, `{"second":true}`, "", "f2"}, {0, "", "call_2", ""}},
			[]string{`call:call_1|f1|{"first":true}`, `call:call_2|f2|{"second":true}`}},
		{"37 colliding empty opener", []step{{0, `{"a":1}`, "call_1", "f1"}, {0, "", "call_2", "f2"}, {0, `{"b":2}`, "", ""}},
			[]string{`call:call_1|f1|{"a":1}`, `call:call_2|f2|{"b":2}`}},
		{"39 third id does not hijack", []step{{0, `{"a":1}`, "call_1", "f1"}, {0, "", "call_2", "f2"}, {0, `{"b":2}`, "", ""}, {0, `{"c":3}`, "call_3", "f3"}},
			[]string{`call:call_1|f1|{"a":1}`, `call:call_2|f2|{"b":2}`, `call:call_3|f3|{"c":3}`}},
		{"40 rapid switching", []step{{0, `{"step1":`, "call_1", "f1"}, {0, ` "done"}`, "call_1", "f1"}, {0, `{"step2":`, "call_2", "f2"}, {0, ` "done"}`, "call_2", "f2"}},
			[]string{`call:call_1|f1|{"step1":"done"}`, `call:call_2|f2|{"step2":"done"}`}},
		{"41 new id over incomplete takes over", []step{{0, `{"incomplete":`, "call_1", "f1"}, {0, ` "completed"}`, "call_2", "f2"}},
			[]string{`call:call_2|f2|{"incomplete":"completed"}`}},
		{"43 phantom", []step{{0, "", "", ""}}, nil},
		{"52 null args", []step{{0, "null", "call_1", "read_file"}}, []string{`call:call_1|read_file|{}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := NewAssembler(nil)
			for _, s := range tt.steps {
				_, err := a.Feed(chunkFor(s))
				require.NoError(t, err)
			}
			_, err := a.Feed([]byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
			require.NoError(t, err)
			evs, err := a.Finish()
			require.NoError(t, err)
			var got []string
			for _, ev := range evs {
				if ev.Kind == EventToolCall {
					got = append(got, render(ev))
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestTextChannel_QwenVectors replays spec Appendix A.3 (one channel each).
func TestTextChannel_QwenVectors(t *testing.T) {
	t.Parallel()
	a63 := strings.Repeat("A", 63)
	a64 := strings.Repeat("A", 64)
	long := "The following section starts with more than enough text for cumulative-mode detection."
	tests := []struct {
		name     string
		in, want []string
	}{
		{"exact repeat >=64 suppressed", []string{long, long}, []string{long, ""}},
		{"short repeat passes", []string{"ha", "ha"}, []string{"ha", "ha"}},
		{"63 passes then extension", []string{a63, a63, a63 + " extra"}, []string{a63, a63, " extra"}},
		{"64 enters cumulative", []string{a64, a64, a64 + " and more"}, []string{a64, "", " and more"}},
		{"duplicate import kept", []string{"import { foo } from './module';", "import { foo } from './module';", "\nconst x = 1;"},
			[]string{"import { foo } from './module';", "import { foo } from './module';", "\nconst x = 1;"}},
		{"rewind", []string{"Hello", "Hello World", "Hello", "Hello World!"}, []string{"Hello", " World", "", "!"}},
		{"exit and re-enter", []string{"Step one is to gather inputs.", "Step one is to gather inputs.\nStep two is to validate them.", "Brand new unrelated message.", "Brand new unrelated message. And more."},
			[]string{"Step one is to gather inputs.", "\nStep two is to validate them.", "Brand new unrelated message.", " And more."}},
		{"short repeat keeps baseline", []string{"Hi", "Hi", "Hi there, how are you today?"}, []string{"Hi", "Hi", " there, how are you today?"}},
		{"incremental stays incremental", []string{"Hel", "lo", " wor", "ld"}, []string{"Hel", "lo", " wor", "ld"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c textChannel
			var got []string
			for _, d := range tt.in {
				got = append(got, c.normalize(d))
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestTextChannel_HybridPastWindow(t *testing.T) {
	t.Parallel()
	// 1.5 KiB of incremental text, then the provider switches to cumulative.
	var c textChannel
	var full strings.Builder
	for i := range 150 {
		d := fmt.Sprintf("chunk%04d.", i)
		full.WriteString(d)
		require.Equal(t, d, c.normalize(d))
	}
	got := c.normalize(full.String() + " tail")
	assert.Equal(t, " tail", got)
}

func TestNormalizeArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		invalid        bool
		cut            bool
	}{
		{"object", `{"a": 1}`, `{"a":1}`, false, false},
		{"empty", ``, `{}`, false, false},
		{"blank", " \n", `{}`, false, false},
		{"null", `null`, `{}`, false, false},
		{"string object", `"{\"a\":1}"`, `{"a":1}`, false, false},
		{"empty string", `""`, `{}`, false, false},
		{"duplicates", `{"a":1}{"a": 1}{"a":1}`, `{"a":1}`, false, false},
		{"different concatenation", `{"a":1}{"a":2}`, `"{\"a\":1}{\"a\":2}"`, true, false},
		{"stray closers", `{"a":[1]}]}`, `{"a":[1]}`, false, false},
		{"truncated", `{"a":"b`, `"{\"a\":\"b"`, true, true},
		{"truncated nested", `{"a":{"b":1}`, `"{\"a\":{\"b\":1}"`, true, true},
		{"syntax", `{"a": }`, `"{\"a\": }"`, true, false},
		{"number", `42`, `"42"`, true, false},
		{"bool", `true`, `"true"`, true, false},
		{"array", `[]`, `"[]"`, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, invalid, cut := normalizeArgs([]byte(tt.in))
			assert.Equal(t, tt.want, string(got))
			assert.Equal(t, tt.invalid, invalid != "", invalid)
			assert.Equal(t, tt.cut, cut)
			assert.True(t, json.Valid(got))
		})
	}
}

func TestAssembler_FeedAfterErrorIsSticky(t *testing.T) {
	t.Parallel()
	a := NewAssembler(nil)
	_, err := a.Feed([]byte(`{not json`))
	require.Error(t, err)
	_, err2 := a.Feed([]byte(`{"choices":[{"index":0,"delta":{"content":"x"}}]}`))
	assert.True(t, errors.Is(err2, err) || err2.Error() == err.Error())
	_, err3 := a.Finish()
	assert.Equal(t, err.Error(), err3.Error())
}
