package responses

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/sse"
)

// The recorded streams of ../../../shared/fixtures/openai-responses-sse,
// copied into testdata, each checked against its .expected.json.

type expected struct {
	ResponseID    string   `json:"response_id"`
	Model         string   `json:"model"`
	Status        string   `json:"status"`
	TerminalEvent string   `json:"terminal_event"`
	Text          string   `json:"text"`
	Summary       []string `json:"reasoning_summary"`
	FunctionCalls []struct {
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
	} `json:"function_calls"`
	ReasoningItems []struct {
		ID          string   `json:"id"`
		Summary     []string `json:"summary"`
		Encrypted   *string  `json:"encrypted_content"`
		InCompleted *string  `json:"encrypted_content_in_response_completed"`
	} `json:"reasoning_items"`
	Usage             json.RawMessage `json:"usage"`
	IncompleteDetails json.RawMessage `json:"incomplete_details"`
	Error             *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Errors []json.RawMessage `json:"errors"`
}

// fixtureEvents splits a fixture into its data events: SSE, or one JSON
// event per line (.chunks.txt).
func fixtureEvents(t testing.TB, name string, b []byte) [][]byte {
	var out [][]byte
	if strings.HasSuffix(name, ".chunks.txt") {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				out = append(out, bytes.Clone(line))
			}
		}
		require.NoError(t, sc.Err())
		return out
	}
	r := sse.NewReader(bytes.NewReader(b))
	defer r.Release()
	for {
		_, data, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if ev := r.Name(); ev != "" {
			var typ struct{ Type string }
			require.NoError(t, json.Unmarshal(data, &typ))
			require.Equal(t, ev, typ.Type, "event name and type agree")
		}
		out = append(out, bytes.Clone(data))
	}
}

func decodeAll(evs [][]byte) (*Result, []model.Event, error) {
	d := NewDecoder()
	var streamed []model.Event
	for _, e := range evs {
		got, err := d.Feed(e)
		if err != nil {
			return nil, streamed, err
		}
		streamed = append(streamed, got...)
	}
	res, err := d.Finish()
	return res, streamed, err
}

func fixtures(t *testing.T) []string {
	var names []string
	for _, pat := range []string{"testdata/*.sse", "testdata/*.chunks.txt"} {
		m, err := filepath.Glob(pat)
		require.NoError(t, err)
		names = append(names, m...)
	}
	require.Len(t, names, 10)
	return names
}

func TestDecoder_PublicFixtures(t *testing.T) {
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			var want expected
			b, err := os.ReadFile(path + ".expected.json")
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &want))

			res, streamed, err := decodeAll(fixtureEvents(t, path, raw))
			if want.Error != nil {
				var ae *model.APIError
				require.ErrorAs(t, err, &ae)
				assert.Equal(t, want.Error.Code, ae.Code)
				assert.Equal(t, want.Error.Message, ae.Message)
			} else {
				require.NoError(t, err)
			}
			require.NotNil(t, res)
			assert.Equal(t, want.ResponseID, res.ResponseID)
			assert.Equal(t, want.Model, res.Model)
			assert.Equal(t, want.Status, res.Status)
			assert.Equal(t, want.TerminalEvent, res.Terminal)
			assert.Equal(t, want.Text, res.Text)
			assert.Equal(t, len(want.Errors), len(res.Errors))
			if len(want.Summary) == 0 {
				assert.Empty(t, res.Summary)
			} else {
				assert.Equal(t, want.Summary, res.Summary)
			}

			var text, thought strings.Builder
			for _, ev := range streamed {
				switch ev.Kind {
				case model.EventText:
					text.WriteString(ev.Text)
				case model.EventReasoning:
					thought.WriteString(ev.Text)
				}
			}
			assert.Equal(t, want.Text, text.String(), "streamed text")
			assert.Equal(t, strings.Join(want.Summary, "\n\n"), thought.String(), "streamed reasoning")

			require.Len(t, res.Calls, len(want.FunctionCalls))
			for i, c := range want.FunctionCalls {
				assert.Equal(t, c.ID, res.Calls[i].ItemID)
				assert.Equal(t, c.CallID, res.Calls[i].CallID)
				assert.Equal(t, c.Name, res.Calls[i].Name)
				assert.Equal(t, c.Arguments, res.Calls[i].Arguments)
				assert.Equal(t, c.Status, res.Calls[i].Status)
			}
			require.Len(t, res.Reasoning, len(want.ReasoningItems))
			for i, r := range want.ReasoningItems {
				got := res.Reasoning[i]
				assert.Equal(t, r.ID, got.ID)
				if len(r.Summary) == 0 {
					assert.Empty(t, got.Summary)
				} else {
					assert.Equal(t, r.Summary, got.Summary)
				}
				// The completed response's ciphertext is kept (the item
				// as the final response lists it), never the one of
				// output_item.added.
				wantEnc := ""
				if r.InCompleted != nil {
					wantEnc = *r.InCompleted
				}
				assert.Equal(t, wantEnc, got.Encrypted)
				var item map[string]any
				require.NoError(t, json.Unmarshal(got.Raw, &item))
				assert.Equal(t, "reasoning", item["type"])
				assert.Equal(t, r.ID, item["id"])
			}

			if string(want.Usage) == "null" {
				assert.Nil(t, res.Usage)
			} else {
				gotUsage, err := json.Marshal(res.Usage)
				require.NoError(t, err)
				assert.JSONEq(t, string(want.Usage), string(gotUsage))
			}
			if string(want.IncompleteDetails) == "null" {
				assert.Empty(t, res.Incomplete)
			}

			if err == nil {
				evs := res.Events()
				last := evs[len(evs)-1]
				require.Equal(t, model.EventFinish, last.Kind)
				if len(want.FunctionCalls) > 0 {
					assert.Equal(t, "tool_calls", last.FinishReason)
				} else {
					assert.Equal(t, "stop", last.FinishReason)
				}
			}
		})
	}
}

// TestDecoder_MutatedFixtures cuts every fixture short and corrupts each of
// its events in turn: the decoder returns an error naming the provider (and
// the field, where one is at fault), never panics, and a cut stream is
// reported as cut.
func TestDecoder_MutatedFixtures(t *testing.T) {
	for _, path := range fixtures(t) {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		evs := fixtureEvents(t, path, raw)
		t.Run(filepath.Base(path), func(t *testing.T) {
			// Truncated before the terminal event.
			_, _, err := decodeAll(evs[:len(evs)-1])
			if !strings.Contains(path, "error-then-failed") {
				require.Error(t, err)
				assert.ErrorIs(t, err, model.ErrTruncated)
				assert.Contains(t, err.Error(), Provider)
			}
			// Events cut in half: bad JSON, named. Every event of the
			// short streams; of the long ones (hundreds of deltas) up to 20
			// spread over the stream, each kind among them.
			for _, i := range sample(len(evs), 20) {
				cut := slicesConcat(evs[:i], [][]byte{evs[i][:len(evs[i])/2]}, evs[i+1:])
				_, _, err := decodeAll(cut)
				require.Error(t, err, "event %d cut", i)
				var se *StreamError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, i, se.Event)
				assert.Contains(t, err.Error(), Provider+" stream: event")
			}
			// Fields a client depends on removed from the terminal event.
			last := string(evs[len(evs)-1])
			for _, field := range []string{`"call_id":`, `"type":"reasoning","id":`} {
				at := strings.Index(last, `"output":[`)
				if at < 0 || !strings.Contains(last[at:], field) {
					continue
				}
				mut := last[:at] + strings.Replace(last[at:], field, `"x`+field[1:], 1)
				_, _, err := decodeAll(slicesConcat(evs[:len(evs)-1], [][]byte{[]byte(mut)}))
				require.Error(t, err, field)
				assert.Contains(t, err.Error(), "response.output[")
			}
		})
	}
}

// sample is up to n indexes spread evenly over 0..total-1, first and last
// included.
func sample(total, n int) []int {
	if total <= n {
		out := make([]int, total)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, n)
	for k := 0; k < n; k++ {
		out = append(out, k*(total-1)/(n-1))
	}
	return out
}

func slicesConcat(parts ...[][]byte) [][]byte {
	var out [][]byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// FuzzDecoder feeds arbitrary events: no panic, and an error or a result.
func FuzzDecoder(f *testing.F) {
	for _, name := range []string{"02-responses-gpt-4o-function-call.sse", "06-responses-gpt-5-reasoning-then-parallel-calls.sse", "09-responses-error-then-failed.chunks.txt"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got []model.Event
		_ = read(bytes.NewReader(body), func(ev model.Event) bool {
			got = append(got, ev)
			return true
		})
	})
}
