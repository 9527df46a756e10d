package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// expected is the part of a fixture's .expected.json the parser's events
// are checked against.
type expected struct {
	Content []struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
		Data      string `json:"data"`
	} `json:"content"`
	Text      string `json:"text"`
	Thinking  string `json:"thinking"`
	ToolCalls []struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments_parsed"`
	} `json:"tool_calls"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		Input   int `json:"input_tokens"`
		Output  int `json:"output_tokens"`
		Write   int `json:"cache_creation_input_tokens"`
		Read    int `json:"cache_read_input_tokens"`
		Details *struct {
			Thinking int `json:"thinking_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

// result is what one stream produced.
type result struct {
	text, reasoning string
	thinking        []model.Thinking
	calls           []model.ToolCall
	usage           *model.Usage
	finish          string
}

func parse(body []byte) (result, error) {
	var r result
	err := Read(bytes.NewReader(body), func(ev model.Event) bool {
		switch ev.Kind {
		case model.EventText:
			r.text += ev.Text
		case model.EventReasoning:
			r.reasoning += ev.Text
		case model.EventThinking:
			r.thinking = append(r.thinking, ev.Thinking)
		case model.EventToolCall:
			r.calls = append(r.calls, ev.ToolCall)
		case model.EventUsage:
			u := ev.Usage
			r.usage = &u
		case model.EventFinish:
			r.finish = ev.FinishReason
		}
		return true
	})
	return r, err
}

// fixtureBody reads a fixture as an SSE body: .sse files are the HTTP body
// byte for byte; .chunks.txt holds one event's JSON per line, framed here.
func fixtureBody(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if !strings.HasSuffix(path, ".chunks.txt") {
		return b
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			fmt.Fprintf(&out, "data: %s\n\n", line)
		}
	}
	require.NoError(t, sc.Err())
	return out.Bytes()
}

func fixtures(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"testdata/fixtures/*.sse", "testdata/fixtures/*.chunks.txt"} {
		m, err := filepath.Glob(pat)
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.Len(t, files, 10)
	return files
}

// Every recorded stream is parsed to its derived result: text, thinking
// text and signatures, redacted data, tool calls, the stop reason, and the
// usage (input_tokens counts only uncached input, so the prompt is its sum
// with the cache writes and reads).
func TestParser_PublicFixtures(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			var want expected
			b, err := os.ReadFile(f + ".expected.json")
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &want))

			got, err := parse(fixtureBody(t, f))
			require.NoError(t, err)
			assert.Equal(t, want.Text, got.text)
			assert.Equal(t, want.Thinking, got.reasoning)

			var blocks []model.Thinking
			for _, c := range want.Content {
				switch c.Type {
				case "thinking":
					blocks = append(blocks, model.Thinking{Protocol: Protocol, Type: "thinking", Text: c.Thinking, Signature: c.Signature})
				case "redacted_thinking":
					blocks = append(blocks, model.Thinking{Protocol: Protocol, Type: "redacted_thinking", Data: c.Data})
				}
			}
			assert.Equal(t, blocks, got.thinking)

			require.Len(t, got.calls, len(want.ToolCalls))
			for i, c := range want.ToolCalls {
				assert.Equal(t, c.ID, got.calls[i].ID)
				assert.Equal(t, c.Name, got.calls[i].Name)
				assert.JSONEq(t, string(c.Arguments), string(got.calls[i].Arguments))
				assert.Empty(t, got.calls[i].Invalid)
			}

			in := want.Usage.Input + want.Usage.Write + want.Usage.Read
			wantUsage := model.Usage{PromptTokens: in, CompletionTokens: want.Usage.Output, TotalTokens: in + want.Usage.Output,
				CachedTokens: want.Usage.Read, CacheWriteTokens: want.Usage.Write}
			if want.Usage.Details != nil {
				wantUsage.ReasoningTokens = want.Usage.Details.Thinking
			}
			require.NotNil(t, got.usage)
			assert.Equal(t, wantUsage, *got.usage)
			assert.Equal(t, finishReason(want.StopReason, len(want.ToolCalls)), got.finish)
		})
	}
}

// The mapping of stop reasons, pinned on the fixtures that have them.
func TestParser_FixtureFinishReasons(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"01-anthropic-text-usage.sse":                       "stop",
		"03-anthropic-parallel-tool-use.sse":                "tool_calls",
		"08-anthropic-refusal-stop-details.sse":             "content_filter",
		"10-anthropic-tool-use-no-args.chunks.txt":          "tool_calls",
		"04-anthropic-thinking-signature-then-tool-use.sse": "tool_calls",
	}
	for name, fr := range want {
		got, err := parse(fixtureBody(t, "testdata/fixtures/"+name))
		require.NoError(t, err, name)
		assert.Equal(t, fr, got.finish, name)
	}
	got, err := parse(fixtureBody(t, "testdata/fixtures/10-anthropic-tool-use-no-args.chunks.txt"))
	require.NoError(t, err)
	assert.Equal(t, `{}`, string(got.calls[0].Arguments), "an empty input_json_delta is a call without arguments")
}

// Every fixture cut short, at about a hundred points before its
// message_delta (which carries the stop reason and the final usage), is an
// error: never a panic, never a silently shorter answer. A stream cut
// after the stop reason but before message_stop is complete in substance
// and accepted, as the chat path accepts a stream without [DONE].
func TestParser_TruncatedFixtures(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures(t) {
		body := fixtureBody(t, f)
		end := bytes.LastIndex(body, []byte(`"message_delta"`))
		require.Positive(t, end, f)
		for cut := 0; cut < end; cut += max(1, len(body)/97) {
			_, err := parse(body[:cut])
			if !assert.Error(t, err, "%s cut at %d", filepath.Base(f), cut) {
				continue
			}
			assert.Contains(t, err.Error(), "anthropic", "%s cut at %d: the error names the protocol", filepath.Base(f), cut)
		}
	}
}

// Mutated fixtures: each kind of damage gives an error that names what is
// wrong, or is tolerated when the API says it must be (unknown events),
// and never panics.
func TestParser_MutatedFixtures(t *testing.T) {
	t.Parallel()
	thinking := fixtureBody(t, "testdata/fixtures/04-anthropic-thinking-signature-then-tool-use.sse")
	tests := []struct {
		name    string
		mutate  func([]byte) []byte
		wantErr string // "" = parses
		check   func(*testing.T, result)
	}{
		{"signature removed", func(b []byte) []byte {
			return regexpReplace(b, `"signature_delta","signature":"[^"]*"`, `"signature_delta","signature":""`)
		}, "thinking block without a signature", nil},
		{"a delta for a block never started", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"type":"content_block_delta","index":1`), []byte(`"type":"content_block_delta","index":7`), 1)
		}, "index 7: no such block was started", nil},
		{"index missing", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"type":"content_block_stop","index":0`), []byte(`"type":"content_block_stop"`), 1)
		}, "content_block_stop: field index missing", nil},
		{"thinking delta in a tool block", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"index":1,"delta":{"type":"input_json_delta"`), []byte(`"index":1,"delta":{"type":"thinking_delta"`), 1)
		}, "thinking_delta in a tool_use block", nil},
		{"not JSON", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`{"type":"content_block_stop"`), []byte(`{"type":"content_block_stop"}}}`), 1)
		}, "event is not JSON", nil},
		{"unknown event type", func(b []byte) []byte {
			return bytes.Replace(b, []byte("event: ping\ndata: {\"type\": \"ping\"}"), []byte("event: future\ndata: {\"type\": \"future_event\",\"x\":[1]}"), 1)
		}, "", nil},
		{"in-stream overloaded error", func(b []byte) []byte {
			return bytes.Replace(b, []byte("event: ping\ndata: {\"type\": \"ping\"}"),
				[]byte(`event: error`+"\n"+`data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), 1)
		}, "Overloaded", nil},
		{"tool input cut mid-JSON", func(b []byte) []byte {
			return regexpReplace(b, `"partial_json":"\\"}"`, `"partial_json":""`)
		}, "", func(t *testing.T, r result) {
			require.Len(t, r.calls, 1)
			assert.Contains(t, r.calls[0].Invalid, "truncated", "a cut input is an invalid call, never a guessed one")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := tt.mutate(bytes.Clone(thinking))
			require.NotEqual(t, thinking, m, "the mutation applied")
			got, err := parse(m)
			if tt.wantErr == "" {
				require.NoError(t, err)
				if tt.check != nil {
					tt.check(t, got)
				}
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
	// An in-stream error is an APIError inside a 200 stream: retried.
	_, err := parse([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	var ae *model.APIError
	require.True(t, errors.As(err, &ae))
	assert.Equal(t, 200, ae.Status)
	assert.Equal(t, "overloaded_error", ae.Type)
	assert.True(t, ae.Retryable())
}

func regexpReplace(b []byte, pat, repl string) []byte {
	return regexp.MustCompile(pat).ReplaceAll(b, []byte(repl))
}

// FuzzParser: no input panics, and every call the parser yields has
// JSON arguments.
func FuzzParser(f *testing.F) {
	files, _ := filepath.Glob("testdata/fixtures/*.sse")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = Read(bytes.NewReader(body), func(ev model.Event) bool {
			if ev.Kind == model.EventToolCall && !json.Valid(ev.ToolCall.Arguments) {
				t.Fatalf("invalid arguments %q", ev.ToolCall.Arguments)
			}
			return true
		})
	})
}

// The recorded follow-up request of the thinking fixture is what the
// client sends after that stream: the assistant turn goes back as the
// stream gave it (the thinking text and its signature byte for byte, then
// the tool_use with its parsed input), followed by the tool's result under
// the same id.
func TestParser_FollowupRequest(t *testing.T) {
	t.Parallel()
	const name = "testdata/fixtures/04-anthropic-thinking-signature-then-tool-use"
	got, err := parse(fixtureBody(t, name+".sse"))
	require.NoError(t, err)
	raw, err := os.ReadFile(name + ".followup.request.json")
	require.NoError(t, err)
	var want struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
		System []struct {
			Text string `json:"text"`
		} `json:"system"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Len(t, want.Messages, 3)
	require.Len(t, got.calls, 1)

	req := model.Request{Model: want.Model, System: want.System[0].Text, ThinkingLevel: "medium",
		Tools: []model.ToolSpec{{Name: want.Tools[0].Name, Description: want.Tools[0].Description, Parameters: want.Tools[0].InputSchema}},
		Messages: []model.Message{
			{Role: model.RoleUser, Content: "What's the weather in Florence, Italy?"},
			{Role: model.RoleAssistant, Content: got.text, Reasoning: got.reasoning, Thinking: got.thinking, ToolCalls: got.calls},
			{Role: model.RoleTool, ToolCallID: got.calls[0].ID, Content: "40 C"},
		}}
	c := New(Options{CacheControl: "off", Models: map[string]Model{want.Model: {Thinking: ThinkingBudget}}})
	b, err := c.build(req)
	require.NoError(t, err)
	var sent struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(b.b, &sent))
	require.Len(t, sent.Messages, 3)
	for i := range 2 {
		assert.Equal(t, want.Messages[i].Role, sent.Messages[i].Role)
		require.Len(t, sent.Messages[i].Content, len(want.Messages[i].Content), "message %d", i)
		for j := range want.Messages[i].Content {
			assert.JSONEq(t, string(want.Messages[i].Content[j]), string(sent.Messages[i].Content[j]), "message %d block %d", i, j)
		}
	}
	// The result: acpd sends its text as a string, the recording as one
	// text block; the API takes both. The id pairs it with the call.
	var wr, sr struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
	}
	require.NoError(t, json.Unmarshal(want.Messages[2].Content[0], &wr))
	require.NoError(t, json.Unmarshal(sent.Messages[2].Content[0], &sr))
	assert.Equal(t, wr, sr)
}
