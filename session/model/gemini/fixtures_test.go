package gemini

import (
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

// The recorded streams of ../../../shared/fixtures/gemini-sse, copied into
// testdata, each checked against its .expected.json.

type expected struct {
	ResponseID    *string `json:"response_id"`
	ModelVersion  *string `json:"model_version"`
	Text          string  `json:"text"`
	ThoughtText   string  `json:"thought_text"`
	FunctionCalls []struct {
		ID        *string         `json:"id"`
		Name      string          `json:"name"`
		Args      json.RawMessage `json:"args"`
		Signature *string         `json:"thoughtSignature"`
	} `json:"function_calls"`
	Signatures []struct {
		Chunk     int    `json:"chunk"`
		Part      int    `json:"part"`
		On        string `json:"on"`
		Signature string `json:"signature"`
	} `json:"thought_signatures"`
	FinishReason  string          `json:"finish_reason"`
	FinishMessage string          `json:"finish_message"`
	Usage         json.RawMessage `json:"usage"`
	UsageChunks   int             `json:"usage_chunks"`
}

// fixtureChunks splits a fixture into its data events: SSE, or the chunks
// of a gemini-cli recorded response (SDK objects, one data event each).
func fixtureChunks(t testing.TB, name string, b []byte) [][]byte {
	if strings.HasSuffix(name, ".responses.jsonl") {
		var rec struct {
			Response []json.RawMessage `json:"response"`
		}
		require.NoError(t, json.Unmarshal(b, &rec))
		out := make([][]byte, len(rec.Response))
		for i, c := range rec.Response {
			out[i] = c
		}
		return out
	}
	var out [][]byte
	r := sse.NewReader(bytes.NewReader(b))
	defer r.Release()
	for {
		_, data, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, bytes.Clone(data))
	}
}

func decodeAll(chunks [][]byte) (*Result, []model.Event, error) {
	d := NewDecoder()
	var streamed []model.Event
	for _, c := range chunks {
		evs, err := d.Feed(c)
		if err != nil {
			return nil, streamed, err
		}
		streamed = append(streamed, evs...)
	}
	res, err := d.Finish()
	return res, streamed, err
}

func fixtures(t *testing.T) []string {
	var names []string
	for _, pat := range []string{"testdata/*.sse", "testdata/*.responses.jsonl"} {
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
			b, err := os.ReadFile(path + ".expected.json")
			require.NoError(t, err)
			var want expected
			require.NoError(t, json.Unmarshal(b, &want))

			res, streamed, err := decodeAll(fixtureChunks(t, path, raw))
			if want.FinishReason == "MALFORMED_FUNCTION_CALL" {
				var ae *model.APIError
				require.ErrorAs(t, err, &ae)
				assert.Equal(t, "MALFORMED_FUNCTION_CALL", ae.Code)
				assert.Contains(t, ae.Message, Provider)
				assert.True(t, ae.Retryable(), "a malformed call is asked for again")
			} else {
				require.NoError(t, err)
			}
			require.NotNil(t, res)
			if want.ResponseID != nil {
				assert.Equal(t, *want.ResponseID, res.ResponseID)
			}
			if want.ModelVersion != nil {
				assert.Equal(t, *want.ModelVersion, res.ModelVersion)
			}
			assert.Equal(t, want.Text, res.Text)
			assert.Equal(t, want.ThoughtText, res.Thought)
			assert.Equal(t, want.FinishReason, res.FinishReason)
			assert.Equal(t, want.FinishMessage, res.FinishMessage)
			assert.Equal(t, want.UsageChunks, res.UsageChunks)
			assert.JSONEq(t, string(want.Usage), string(res.UsageRaw))

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
			assert.Equal(t, want.ThoughtText, thought.String(), "streamed thought")

			require.Len(t, res.Calls, len(want.FunctionCalls))
			for i, c := range want.FunctionCalls {
				got := res.Calls[i]
				if c.ID != nil {
					assert.Equal(t, *c.ID, got.ID)
				} else {
					assert.Empty(t, got.ID)
				}
				assert.Equal(t, c.Name, got.Name)
				assert.JSONEq(t, string(c.Args), string(got.Args))
				if c.Signature != nil {
					assert.Equal(t, *c.Signature, got.Signature)
				} else {
					assert.Empty(t, got.Signature)
				}
			}
			require.Len(t, res.Signatures, len(want.Signatures))
			for i, s := range want.Signatures {
				assert.Equal(t, s.Chunk, res.Signatures[i].Chunk)
				assert.Equal(t, s.Part, res.Signatures[i].Part)
				assert.Equal(t, s.On, res.Signatures[i].On)
				assert.Equal(t, s.Signature, res.Signatures[i].Value)
			}
			// Every signature is on a part that goes back.
			var kept []string
			for _, p := range res.Parts {
				if p.Signature != "" {
					kept = append(kept, p.Signature)
				}
			}
			assert.Len(t, kept, len(want.Signatures))

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

// TestDecoder_FollowupRequests rebuilds the recorded follow-up request of
// each fixture that has one from the decoded turn: the model turn goes back
// with its signatures exactly where they came.
func TestDecoder_FollowupRequests(t *testing.T) {
	m, err := filepath.Glob("testdata/*.followup.request.json")
	require.NoError(t, err)
	require.Len(t, m, 4)
	for _, path := range m {
		t.Run(filepath.Base(path), func(t *testing.T) {
			stream := strings.TrimSuffix(path, ".followup.request.json") + ".sse"
			raw, err := os.ReadFile(stream)
			require.NoError(t, err)
			res, streamed, err := decodeAll(fixtureChunks(t, stream, raw))
			require.NoError(t, err)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			var followup struct {
				Contents []struct {
					Role  string            `json:"role"`
					Parts []json.RawMessage `json:"parts"`
				} `json:"contents"`
			}
			require.NoError(t, json.Unmarshal(b, &followup))
			var modelTurn []json.RawMessage
			for _, c := range followup.Contents {
				if c.Role == "model" {
					modelTurn = c.Parts
				}
			}
			// The turn as the session keeps it, from the events alone.
			m := model.Message{Role: model.RoleAssistant}
			for _, ev := range streamed {
				addEvent(&m, ev)
			}
			for _, ev := range res.Events() {
				addEvent(&m, ev)
			}
			got := assistantParts(m)
			require.Len(t, got, len(modelTurn))
			for i := range got {
				gb, err := json.Marshal(got[i])
				require.NoError(t, err)
				var w, g map[string]any
				require.NoError(t, json.Unmarshal(modelTurn[i], &w))
				require.NoError(t, json.Unmarshal(gb, &g))
				// The recorded clients made up ids for 2.5's id-less calls.
				if fc, ok := w["functionCall"].(map[string]any); ok {
					if _, has := g["functionCall"].(map[string]any)["id"]; !has {
						delete(fc, "id")
					}
				}
				assert.Equal(t, w, g)
			}
		})
	}
}

// addEvent builds an assistant message from a response's events, as the
// session does.
func addEvent(m *model.Message, ev model.Event) {
	switch ev.Kind {
	case model.EventText:
		m.Content += ev.Text
	case model.EventReasoning:
		m.Reasoning += ev.Text
	case model.EventThinking:
		m.Thinking = append(m.Thinking, ev.Thinking)
	case model.EventToolCall:
		m.ToolCalls = append(m.ToolCalls, ev.ToolCall)
	}
}

// TestDecoder_MutatedFixtures truncates every fixture and corrupts each of
// its chunks in turn: an error naming the provider and the chunk, never a
// panic.
func TestDecoder_MutatedFixtures(t *testing.T) {
	for _, path := range fixtures(t) {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		chunks := fixtureChunks(t, path, raw)
		t.Run(filepath.Base(path), func(t *testing.T) {
			if len(chunks) > 1 {
				_, _, err := decodeAll(chunks[:len(chunks)-1])
				require.Error(t, err)
				assert.ErrorIs(t, err, model.ErrTruncated)
				assert.Contains(t, err.Error(), Provider)
			}
			for i := range chunks {
				cut := append(append(append([][]byte{}, chunks[:i]...), chunks[i][:len(chunks[i])/2]), chunks[i+1:]...)
				_, _, err := decodeAll(cut)
				require.Error(t, err, "chunk %d cut", i)
				var se *StreamError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, i, se.Chunk)
				assert.Contains(t, err.Error(), Provider+" stream: chunk")
			}
			for i, c := range chunks {
				for from, to := range map[string]string{`"name"`: `"nom"`, `"args"`: `"args":"x","y"`} {
					if !bytes.Contains(c, []byte(`"functionCall"`)) || !bytes.Contains(c, []byte(from)) {
						continue
					}
					mut := bytes.Replace(c, []byte(from), []byte(to), 1)
					chs := append(append(append([][]byte{}, chunks[:i]...), mut), chunks[i+1:]...)
					_, _, err := decodeAll(chs)
					require.Error(t, err, "%s in chunk %d", from, i)
					assert.Contains(t, err.Error(), ".functionCall.")
				}
			}
		})
	}
}

func FuzzDecoder(f *testing.F) {
	for _, name := range []string{"04-gemini-3-parallel-functioncalls-ids.sse", "06-gemini-3-text-signature-on-empty-last-part.sse"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m := model.Message{Role: model.RoleAssistant}
		_ = read(bytes.NewReader(body), func(ev model.Event) bool {
			addEvent(&m, ev)
			return true
		})
		_, _ = buildRequest(model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "q"}, m}}, buildInput{})
	})
}
