package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// render is the compact form the .want.json files use for one event.
func render(ev model.Event) string { return ev.String() }

// assembleBody runs an SSE body through a fresh Assembler.
func assembleBody(t testing.TB, body []byte) (got []string, err error) {
	t.Helper()
	err = streamSSE(bytes.NewReader(body), NewAssembler(nil), func(ev model.Event) bool {
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
			var ae *model.APIError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, tt.status, ae.Status)
			assert.Equal(t, tt.finish, ae.FinishReason)
			assert.True(t, ae.Retryable())
		})
	}
	body, err := os.ReadFile("testdata/transcripts/16-eof-without-finish.sse")
	require.NoError(t, err)
	_, err = assembleBody(t, body)
	require.ErrorIs(t, err, model.ErrTruncated)
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

// TestAssembler_QwenParserVectors replays spec Appendix A.1, the vectors
// transcribed from qwen-code's streamingToolCallParser tests, each step fed
// as one chunk and the stream finished with finish_reason "tool_calls".
// Names start with the vector number; "acpd:" marks a deliberate
// difference from qwen-code (README, Spec coverage). finish is the
// expected finish reason when it is not the default ("tool_calls" with
// calls, "stop" without).
func TestAssembler_QwenParserVectors(t *testing.T) {
	t.Parallel()
	const truncated = "arguments are truncated JSON (the output was cut off)"
	tests := []struct {
		name   string
		steps  []step
		want   []string
		finish string
	}{
		{"01 single complete fragment", []step{{0, `{"key": "value"}`, "call_1", "test_function"}},
			[]string{`call:call_1|test_function|{"key":"value"}`}, ""},
		{"02 accumulate", []step{{0, `{"key":`, "call_1", "test_function"}, {0, ` "val`, "", ""}, {0, `ue"}`, "", ""}},
			[]string{`call:call_1|test_function|{"key":"value"}`}, ""},
		{"03 nested objects", []step{{0, `{"outer": {"inner":`, "call_1", "test_function"}, {0, ` "value"}}`, "", ""}},
			[]string{`call:call_1|test_function|{"outer":{"inner":"value"}}`}, ""},
		{"04 nested arrays", []step{{0, `{"arr": [1, [2,`, "call_1", "test_function"}, {0, ` 3]]}`, "", ""}},
			[]string{`call:call_1|test_function|{"arr":[1,[2,3]]}`}, ""},
		{"05 braces in strings", []step{{0, `{"code": "if (x) { return [1, 2]; }"}`, "call_1", "test_function"}},
			[]string{`call:call_1|test_function|{"code":"if (x) { return [1, 2]; }"}`}, ""},
		{"06 escaped quote split", []step{{0, `{"text": "Say \"Hello`, "call_1", "test_function"}, {0, `\" to me"}`, "", ""}},
			[]string{`call:call_1|test_function|{"text":"Say \"Hello\" to me"}`}, ""},
		{"07 escaped backslashes", []step{{0, `{"path": "C:\\Users\\test"}`, "call_1", "test_function"}},
			[]string{`call:call_1|test_function|{"path":"C:\\Users\\test"}`}, ""},
		{"08 unicode", []step{{0, `{"emoji": "🚀", "chinese": "你好"}`, "call_1", "function1"}},
			[]string{`call:call_1|function1|{"emoji":"🚀","chinese":"你好"}`}, ""},
		{"09 whitespace first", []step{{0, "  \n\t  ", "call_1", "function1"}, {0, `{"key": "value"}`, "", ""}},
			[]string{`call:call_1|function1|{"key":"value"}`}, ""},
		{"10 structural only", []step{{0, "{", "call_1", "function1"}, {0, "}", "", ""}},
			[]string{`call:call_1|function1|{}`}, ""},
		{"11 openai fragmenting", []step{{0, `{"`, "call_1", "get_weather"}, {0, "query", "", ""}, {0, `": "`, "", ""},
			{0, "What is", "", ""}, {0, " the weather", "", ""}, {0, " in Paris", "", ""}, {0, `?"}`, "", ""}},
			[]string{`call:call_1|get_weather|{"query":"What is the weather in Paris?"}`}, ""},
		{"12 acpd: truncated string not auto-closed", []step{{0, `{"text": "unclosed`, "call_1", "test_function"}},
			[]string{`invalid:call_1|test_function|"{\"text\": \"unclosed"|` + truncated}, "length"},
		{"13 acpd: malformed JSON not repaired", []step{{0, `{"valid": "data", "invalid": }`, "call_1", "function1"}},
			[]string{`invalid:call_1|function1|"{\"valid\": \"data\", \"invalid\": }"|arguments are not valid JSON: invalid character '}' looking for beginning of value`}, ""},
		{"14 acpd: nameless call emitted as invalid", []step{{0, `{"param": "value"}`, "call_1", ""}},
			[]string{`invalid:call_1||{"param":"value"}|missing function name`}, ""},
		{"15 no-arg call", []step{{0, "", "call_1", "function1"}},
			[]string{`call:call_1|function1|{}`}, ""},
		{"16 whitespace-only arguments", []step{{0, "   ", "call_1", "function1"}},
			[]string{`call:call_1|function1|{}`}, ""},
		{"17 null arguments", []step{{0, "null", "call_1", "function1"}},
			[]string{`call:call_1|function1|{}`}, ""},
		{"18 acpd: array arguments invalid", []step{{0, "[1,2,3]", "call_1", "function1"}},
			[]string{`invalid:call_1|function1|"[1,2,3]"|arguments are a JSON array, not an object`}, ""},
		{"19 parallel calls", []step{{0, `{"param1": "value1"}`, "call_1", "function1"}, {1, `{"param2": "value2"}`, "call_2", "function2"}},
			[]string{`call:call_1|function1|{"param1":"value1"}`, `call:call_2|function2|{"param2":"value2"}`}, ""},
		{"20 interleaved", []step{{0, `{"param1":`, "call_1", "function1"}, {1, `{"param2":`, "call_2", "function2"}, {0, ` "value1"}`, "", ""}, {1, ` "value2"}`, "", ""}},
			[]string{`call:call_1|function1|{"param1":"value1"}`, `call:call_2|function2|{"param2":"value2"}`}, ""},
		{"21 canonical opener", []step{{0, "", "call_1", "function1"}, {0, `{"x":`, "", ""}, {0, "1}", "", ""}},
			[]string{`call:call_1|function1|{"x":1}`}, ""},
		{"22 index reused after completion relocates", []step{{0, `{"param1": "value1"}`, "call_1", "function1"}, {0, `{"param2":`, "call_2", "function2"}, {0, ` "value2"}`, "", ""}},
			[]string{`call:call_1|function1|{"param1":"value1"}`, `call:call_2|function2|{"param2":"value2"}`}, ""},
		{"23 no-arg call not overwritten", []step{{0, "", "call_1", "no_arg_function"}, {0, `{"param": "value"}`, "call_2", "function2"}},
			[]string{`call:call_1|no_arg_function|{}`, `call:call_2|function2|{"param":"value"}`}, ""},
		{"24 relocation past no-arg slots", []step{{0, "", "call_a", "no_arg_a"}, {1, "", "call_b", "no_arg_b"}, {0, `{"x": 1}`, "call_c", "fn_c"}},
			[]string{`call:call_a|no_arg_a|{}`, `call:call_b|no_arg_b|{}`, `call:call_c|fn_c|{"x":1}`}, ""},
		{"25 continuation to most recent incomplete", []step{{0, `{"key":`, "call_1", "function1"}, {1, "", "call_2", "no_arg_function"}, {2, `{"x": 1}`, "call_3", "function3"}, {2, `"value"}`, "", ""}},
			[]string{`call:call_1|function1|{"key":"value"}`, `call:call_2|no_arg_function|{}`, `call:call_3|function3|{"x":1}`}, ""},
		{"26 replay of completed id ignored", []step{{0, `{"param1": "value1"}`, "call_1", "function1"}, {0, `{"param2": "value2"}`, "call_1", "function2"}},
			[]string{`call:call_1|function1|{"param1":"value1"}`}, ""},
		{"27 replayed no-arg opener", []step{{0, "", "call_1", "list_sessions"}, {0, "", "call_1", "different_function"}},
			[]string{`call:call_1|list_sessions|{}`}, ""},
		{"28 metadata-only replay", []step{{0, `{"file_path": "a.ts"}`, "call_1", "read_file"}, {0, "", "call_1", "shell"}},
			[]string{`call:call_1|read_file|{"file_path":"a.ts"}`}, ""},
		{"29 same id on every fragment", []step{{0, "", "call_1", "function1"}, {0, `{"text":"hello`, "call_1", ""}, {0, " ", "call_1", ""}, {0, `world"}`, "call_1", ""}},
			[]string{`call:call_1|function1|{"text":"hello world"}`}, ""},
		{"30 identical replay", []step{{0, `{"cmd":"echo hi"}`, "dup_id_0001", "shell"}, {0, `{"cmd":"echo hi"}`, "dup_id_0001", "shell"}},
			[]string{`call:dup_id_0001|shell|{"cmd":"echo hi"}`}, ""},
		{"31 name trimmed", []step{{0, "{}", "call_1", " read_file "}},
			[]string{`call:call_1|read_file|{}`}, ""},
		{"32 first name wins", []step{{0, `{"file_path":`, "call_1", "read_file"}, {0, `"a.ts"}`, "call_1", "shell"}},
			[]string{`call:call_1|read_file|{"file_path":"a.ts"}`}, ""},
		{"33 name after args without id", []step{{1, `{"path":"a.ts"}`, "", ""}, {1, "", "", "read_file"}, {1, "", "", "read_file"}},
			[]string{`call:|read_file|{"path":"a.ts"}`}, ""},
		{"34 name after args with id", []step{{2, `{"path":"a.ts"}`, "call_2", ""}, {2, "", "call_2", "read_file"}, {2, "", "call_2", "read_file"}},
			[]string{`call:call_2|read_file|{"path":"a.ts"}`}, ""},
		{"35 id first, name with first args", []step{{0, "", "call_123", ""}, {0, `{"param":`, "", "my_function"}},
			[]string{`invalid:call_123|my_function|"{\"param\":"|` + truncated}, "length"},
		{"36 late id adopts remapped slot", []step{{0, `{"first":true}`, "call_1", "function1"}, {0, `{"second":true}`, "", "function2"}, {0, "", "call_2", ""}},
			[]string{`call:call_1|function1|{"first":true}`, `call:call_2|function2|{"second":true}`}, ""},
		{"37 colliding empty opener", []step{{0, `{"a":1}`, "call_1", "function1"}, {0, "", "call_2", "function2"}, {0, `{"b":2}`, "", ""}},
			[]string{`call:call_1|function1|{"a":1}`, `call:call_2|function2|{"b":2}`}, ""},
		{"38 colliding content-bearing opener", []step{{0, `{"a":1}`, "call_1", "function1"}, {0, `{"b":`, "call_2", "function2"}, {0, "2}", "", ""}},
			[]string{`call:call_1|function1|{"a":1}`, `call:call_2|function2|{"b":2}`}, ""},
		{"39 third id does not hijack", []step{{0, `{"a":1}`, "call_1", "function1"}, {0, "", "call_2", "function2"}, {0, `{"b":2}`, "", ""}, {0, `{"c":3}`, "call_3", "function3"}},
			[]string{`call:call_1|function1|{"a":1}`, `call:call_2|function2|{"b":2}`, `call:call_3|function3|{"c":3}`}, ""},
		{"40 rapid switching", []step{{0, `{"step1":`, "call_1", "function1"}, {0, ` "done"}`, "call_1", "function1"}, {0, `{"step2":`, "call_2", "function2"}, {0, ` "done"}`, "call_2", "function2"}},
			[]string{`call:call_1|function1|{"step1":"done"}`, `call:call_2|function2|{"step2":"done"}`}, ""},
		{"41 new id over incomplete takes over", []step{{0, `{"incomplete":`, "call_1", "function1"}, {0, ` "completed"}`, "call_2", "function2"}},
			[]string{`call:call_2|function2|{"incomplete":"completed"}`}, ""},
		{"42 acpd: unsafe index treated as missing", []step{{9007199254740992, "   ", "", ""}}, nil, ""},
		{"42 acpd: negative index continues the last call", []step{{0, `{"a":`, "call_1", "f"}, {-5, "1}", "", ""}},
			[]string{`call:call_1|f|{"a":1}`}, ""},
		{"42 acpd: negative index with a new id opens a call", []step{{0, `{"a":1}`, "call_1", "f"}, {-5, `{"b":2}`, "call_2", "g"}},
			[]string{`call:call_1|f|{"a":1}`, `call:call_2|g|{"b":2}`}, ""},
		{"42 acpd: index -1 is 0 (AWS Bedrock)", []step{{-1, `{"a":`, "call_1", "f"}, {0, "1}", "", ""}},
			[]string{`call:call_1|f|{"a":1}`}, ""},
		{"42 acpd: index reuse at MaxInt does not wrap", []step{{math.MaxInt, `{"a":1}`, "c1", "f1"}, {math.MaxInt, `{"b":2}`, "c2", "f2"}, {math.MaxInt, `{"c":3}`, "c3", "f3"}},
			[]string{`call:c1|f1|{"a":1}`, `call:c2|f2|{"b":2}`, `call:c3|f3|{"c":3}`}, ""},
		{"43 phantom", []step{{0, "", "", ""}}, nil, ""},
		{"44 id without name is nameless", []step{{0, "", "call_1", ""}},
			[]string{`invalid:call_1||{}|missing function name`}, ""},
		{"45 truncation: unclosed brace", []step{{0, `{"file_path": "/path/to/file.cpp"`, "call_1", "write_file"}},
			[]string{`invalid:call_1|write_file|"{\"file_path\": \"/path/to/file.cpp\""|` + truncated}, "length"},
		{"46 truncation: inside string", []step{{0, `{"file_path": "/tmp/test.txt"`, "call_1", "write_file"}, {0, `, "content": "some text`, "", ""}},
			[]string{`invalid:call_1|write_file|"{\"file_path\": \"/tmp/test.txt\", \"content\": \"some text"|` + truncated}, "length"},
		{"47 nameless incomplete JSON is not truncation", []step{{0, `{"key": "incomplete`, "", ""}},
			[]string{`invalid:||"{\"key\": \"incomplete"|missing function name`}, ""},
		{"48 empty arguments valid", []step{{0, "", "call_1", "read_file"}},
			[]string{`call:call_1|read_file|{}`}, ""},
		{"49 acpd: blank arguments are a no-arg call", []step{{0, "   ", "call_1", "read_file"}},
			[]string{`call:call_1|read_file|{}`}, ""},
		{"50 object arguments valid", []step{{0, `{"path":"a.ts"}`, "call_1", "read_file"}},
			[]string{`call:call_1|read_file|{"path":"a.ts"}`}, ""},
		{"51 {bad} invalid", []step{{0, "{bad}", "call_1", "read_file"}},
			[]string{`invalid:call_1|read_file|"{bad}"|arguments are not valid JSON: invalid character 'b' looking for beginning of object key string`}, ""},
		{"52 acpd: null arguments are a no-arg call", []step{{0, "null", "call_1", "read_file"}},
			[]string{`call:call_1|read_file|{}`}, ""},
		{"53 [] invalid", []step{{0, "[]", "call_1", "read_file"}},
			[]string{`invalid:call_1|read_file|"[]"|arguments are a JSON array, not an object`}, ""},
		{"54 42 invalid", []step{{0, "42", "call_1", "read_file"}},
			[]string{`invalid:call_1|read_file|"42"|arguments are a JSON number, not an object`}, ""},
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
			finish := ""
			for _, ev := range evs {
				switch ev.Kind {
				case model.EventToolCall:
					got = append(got, render(ev))
				case model.EventFinish:
					finish = ev.FinishReason
				}
			}
			assert.Equal(t, tt.want, got)
			want := tt.finish
			if want == "" {
				want = "stop"
				if len(tt.want) > 0 {
					want = "tool_calls"
				}
			}
			assert.Equal(t, want, finish)
		})
	}
}

// choiceChunk wraps one streamed choice (delta and finish_reason, as the
// spec's converter vectors give them) in a chunk.
func choiceChunk(t *testing.T, choice string) []byte {
	t.Helper()
	var c map[string]any
	require.NoError(t, json.Unmarshal([]byte(choice), &c))
	c["index"] = 0
	b, err := json.Marshal(map[string]any{"id": "chatcmpl-v", "object": "chat.completion.chunk", "choices": []any{c}})
	require.NoError(t, err)
	return b
}

// feedAll runs chunks through a fresh Assembler and renders every event.
func feedAll(t *testing.T, chunks [][]byte) ([]string, error) {
	t.Helper()
	a := NewAssembler(nil)
	var got []string
	for _, c := range chunks {
		evs, err := a.Feed(c)
		if err != nil {
			return got, err
		}
		for _, ev := range evs {
			got = append(got, render(ev))
		}
	}
	evs, err := a.Finish()
	for _, ev := range evs {
		got = append(got, render(ev))
	}
	return got, err
}

// TestAssembler_QwenConverterVectors replays spec Appendix A.2 (1-9; 10 is
// TestAssembler_SeparateStreams). qwen-code throws MALFORMED_TOOL_CALL
// where acpd emits an invalid call that the turn answers with an error
// (the model can correct itself, and the invalid-params guard counts it).
func TestAssembler_QwenConverterVectors(t *testing.T) {
	t.Parallel()
	const truncatedCall = `invalid:call_1|write_file|"{\"file_path\": \"/tmp/test.cpp\""|arguments are truncated JSON (the output was cut off)`
	truncatedOpener := `{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"file_path\": \"/tmp/test.cpp\""}}]}}`
	tests := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"1 no-arg call with arguments empty", []string{
			`{"delta":{"tool_calls":[{"index":0,"id":"call_noargs","type":"function","function":{"name":"list_sessions","arguments":""}}]}}`,
			`{"delta":{},"finish_reason":"tool_calls"}`,
		}, []string{`call:call_noargs|list_sessions|{}`, "finish:tool_calls"}},
		{"2 phantom slot beside a real call", []string{
			`{"delta":{"tool_calls":[{"index":0,"id":"call_edit","type":"function","function":{"name":"edit","arguments":""}},{"index":1,"type":"function","function":{}}]}}`,
			`{"delta":{},"finish_reason":"tool_calls"}`,
		}, []string{`call:call_edit|edit|{}`, "finish:tool_calls"}},
		{"3 acpd: only a phantom slot is a text answer", []string{
			`{"delta":{"content":"fallback text","tool_calls":[{"index":0,"type":"function","function":{}}]}}`,
			`{"delta":{},"finish_reason":"tool_calls"}`,
		}, []string{"text:fallback text", "finish:stop"}},
		{"4 acpd: nameless call with finish stop is an invalid call, text not held back", []string{
			`{"delta":{"reasoning_content":"failed reasoning","content":"failed visible content","tool_calls":[{"index":0,"id":"call_without_name","type":"function","function":{"arguments":""}}]}}`,
			`{"delta":{},"finish_reason":"stop"}`,
		}, []string{"reasoning:failed reasoning", "text:failed visible content", `invalid:call_without_name||{}|missing function name`, "finish:tool_calls"}},
		{"5 acpd: nameless arguments without id are an invalid call", []string{
			`{"delta":{"tool_calls":[{"index":0,"type":"function","function":{"arguments":"{\"path\":\"/tmp/file\"}"}}]}}`,
			`{"delta":{},"finish_reason":"tool_calls"}`,
		}, []string{`invalid:||{"path":"/tmp/file"}|missing function name`, "finish:tool_calls"}},
		{"6 acpd: truncated JSON with stop is length, call not repaired", []string{truncatedOpener, `{"delta":{},"finish_reason":"stop"}`},
			[]string{truncatedCall, "finish:length"}},
		{"7 acpd: truncated JSON with tool_calls is length, call not repaired", []string{truncatedOpener, `{"delta":{},"finish_reason":"tool_calls"}`},
			[]string{truncatedCall, "finish:length"}},
		{"8 acpd: truncated JSON with length is length, call not repaired", []string{truncatedOpener, `{"delta":{},"finish_reason":"length"}`},
			[]string{truncatedCall, "finish:length"}},
		{"9 complete JSON with stop: tool_calls (Gemini's STOP)", []string{
			`{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"file_path\": \"/tmp/test.cpp\", \"content\": \"hello\"}"}}]}}`,
			`{"delta":{},"finish_reason":"stop"}`,
		}, []string{`call:call_1|write_file|{"file_path":"/tmp/test.cpp","content":"hello"}`, "finish:tool_calls"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var chunks [][]byte
			for _, c := range tt.chunks {
				chunks = append(chunks, choiceChunk(t, c))
			}
			got, err := feedAll(t, chunks)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestAssembler_SeparateStreams is spec A.2 vector 10 (two subagents
// streaming at once, which mixed their calls in qwen-code's shared parser):
// two streams fed alternately, each through its own Assembler, with the
// same index and name, stay apart.
func TestAssembler_SeparateStreams(t *testing.T) {
	t.Parallel()
	opener := func(id, path string) []byte {
		return chunkFor(step{0, `{"file_path":"` + path, id, "read_file"})
	}
	cont := func(tail string) []byte { return chunkFor(step{0, tail + `"}`, "", ""}) }
	finish := []byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
	a, b := NewAssembler(nil), NewAssembler(nil)
	for _, f := range []struct {
		asm  *Assembler
		data []byte
	}{{a, opener("call_A", "/a")}, {b, opener("call_B", "/b")}, {a, cont("/x.ts")}, {b, cont("/y.ts")}, {a, finish}, {b, finish}} {
		_, err := f.asm.Feed(f.data)
		require.NoError(t, err)
	}
	for _, c := range []struct {
		asm  *Assembler
		want string
	}{{a, `call:call_A|read_file|{"file_path":"/a/x.ts"}`}, {b, `call:call_B|read_file|{"file_path":"/b/y.ts"}`}} {
		evs, err := c.asm.Finish()
		require.NoError(t, err)
		require.Len(t, evs, 2)
		assert.Equal(t, c.want, render(evs[0]))
	}
}

// TestAssembler_QwenTextDeltaVectors replays spec Appendix A.3 through the
// Assembler: each input is one chunk's delta, and each output what that
// chunk emitted ("" for nothing), as text: or reasoning: events.
func TestAssembler_QwenTextDeltaVectors(t *testing.T) {
	t.Parallel()
	a63 := strings.Repeat("A", 63)
	a64 := strings.Repeat("A", 64)
	long := "The following section starts with more than enough text for cumulative-mode detection."
	flow := "Here is a Flowchart Syntax Reference:"
	content := func(in ...string) []map[string]string {
		var out []map[string]string
		for _, s := range in {
			out = append(out, map[string]string{"content": s})
		}
		return out
	}
	prefixed := func(p string, in ...string) []string {
		var out []string
		for _, s := range in {
			if s != "" {
				s = p + s
			}
			out = append(out, s)
		}
		return out
	}
	text := func(in ...string) []string { return prefixed("text:", in...) }
	tests := []struct {
		name   string
		deltas []map[string]string
		want   []string
	}{
		{"1 cumulative content to suffixes",
			content("Here", flow, flow+"\n| `flowchart TD` | Direction |", flow+"\n| `flowchart TD` | Direction |\n| `A[Text]` | Node |"),
			text("Here", " is a Flowchart Syntax Reference:", "\n| `flowchart TD` | Direction |", "\n| `A[Text]` | Node |")},
		{"2 exact repeat of 64+ suppressed", content(long, long), text(long, "")},
		{"3 short exact repeats pass", content("ha", "ha"), text("ha", "ha")},
		{"4 63-char repeat passes, then extension", content(a63, a63, a63+" extra"), text(a63, a63, " extra")},
		{"5 64-char repeat enters cumulative", content(a64, a64, a64+" and more"), text(a64, "", " and more")},
		{"6 duplicate import line kept", content("import { foo } from './module';", "import { foo } from './module';", "\nconst x = 1;"),
			text("import { foo } from './module';", "import { foo } from './module';", "\nconst x = 1;")},
		{"7 cumulative rewind suppressed", content("Hello", "Hello World", "Hello", "Hello World!"), text("Hello", " World", "", "!")},
		{"8 exit cumulative on divergence, re-enter", content("Step one is to gather inputs.", "Step one is to gather inputs.\nStep two is to validate them.", "Brand new unrelated message.", "Brand new unrelated message. And more."),
			text("Step one is to gather inputs.", "\nStep two is to validate them.", "Brand new unrelated message.", " And more.")},
		{"9 short repeat does not poison baseline", content("Hi", "Hi", "Hi there, how are you today?"), text("Hi", "Hi", " there, how are you today?")},
		{"10 reasoning_content normalised on its own", []map[string]string{
			{"reasoning_content": "Let me think"},
			{"reasoning_content": "Let me think about the request carefully."},
			{"reasoning_content": "Let me think about the request carefully.\nFirst, identify the table format."},
		}, prefixed("reasoning:", "Let me think", " about the request carefully.", "\nFirst, identify the table format.")},
		{"11 interleaved channels keep separate state", []map[string]string{
			{"reasoning_content": "Let me think about this carefully."},
			{"content": "Here"},
			{"reasoning_content": "Let me think about this carefully.\nStep two."},
			{"content": "Here is the answer."},
		}, []string{"reasoning:Let me think about this carefully.", "text:Here", "reasoning:\nStep two.", "text: is the answer."}},
		{"acpd: reasoning under the name reasoning shares the channel", []map[string]string{
			{"reasoning": "Let me think"}, {"reasoning": "Let me think harder."},
		}, prefixed("reasoning:", "Let me think", " harder.")},
		{"acpd: incremental stays incremental", content("Hel", "lo", " wor", "ld"), text("Hel", "lo", " wor", "ld")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := NewAssembler(nil)
			var got []string
			for _, d := range tt.deltas {
				b, err := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": d}}})
				require.NoError(t, err)
				evs, err := a.Feed(b)
				require.NoError(t, err)
				require.LessOrEqual(t, len(evs), 1)
				out := ""
				if len(evs) == 1 {
					out = render(evs[0])
				}
				got = append(got, out)
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

// A chunk nested millions of levels deep (within the stream reader's
// bound) is a decode error, not a crash: segmentio's decoder would
// overflow the goroutine stack, a fatal error no recover catches. Strings
// holding brackets do not count.
func TestAssembler_DeepNesting(t *testing.T) {
	n := 7 << 20
	deep := `{"choices":[{"delta":{"extra_content":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}]}`
	a := NewAssembler(nil)
	_, err := a.Feed([]byte(deep))
	require.ErrorContains(t, err, "nested deeper than 10000 levels")

	a = NewAssembler(nil)
	_, err = a.Feed([]byte(`{"choices":[{"delta":{"content":"` + strings.Repeat("[{\\\"", 20000) + `"}}]}`))
	require.NoError(t, err)
}
