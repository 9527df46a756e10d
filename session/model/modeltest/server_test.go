package modeltest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/chat"
	"github.com/acpd/acpd/session/model/modeltest"
)

func stream(t *testing.T, srv *modeltest.Server) ([]model.Event, error) {
	t.Helper()
	p := chat.New(chat.Options{BaseURL: srv.BaseURL()})
	var evs []model.Event
	for ev, err := range p.Stream(t.Context(), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func TestServer_LoadScriptAndExhaust(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"text":"héllo wörld, split into deltas","toolCalls":[{"name":"glob","arguments":{"pattern":"**/*.go"}}]}`+"\n"), 0o600))
	rs, err := modeltest.LoadScript(path)
	require.NoError(t, err)
	srv := modeltest.NewServer(t, rs...)

	evs, err := stream(t, srv)
	require.NoError(t, err)
	var text strings.Builder
	deltas := 0
	for _, ev := range evs {
		if ev.Kind == model.EventText {
			text.WriteString(ev.Text)
			deltas++
		}
	}
	assert.Equal(t, "héllo wörld, split into deltas", text.String())
	assert.Greater(t, deltas, 3)
	require.Len(t, evs, deltas+2)
	assert.Equal(t, model.ToolCall{ID: "call_1", Name: "glob", Arguments: json.RawMessage(`{"pattern":"**/*.go"}`)}, evs[deltas].ToolCall)

	_, err = stream(t, srv)
	require.Error(t, err)
	assert.Equal(t, "modeltest: script exhausted after 1 responses", err.Error())

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "hi", reqs[0].Messages[0].Text())
	assert.True(t, reqs[0].Stream)
	require.NotNil(t, reqs[0].StreamOptions)
	assert.True(t, reqs[0].StreamOptions.IncludeUsage)
}

func TestServer_RawBodyAndUnknownPath(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Raw: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"raw\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"})
	srv.Add(modeltest.Response{Text: "added"})
	evs, err := stream(t, srv)
	require.NoError(t, err)
	assert.Equal(t, []model.Event{{Kind: model.EventText, Text: "raw"}, {Kind: model.EventFinish, FinishReason: "stop"}}, evs)
	evs, err = stream(t, srv)
	require.NoError(t, err)
	assert.Equal(t, "added", evs[0].Text)

	resp, err := http.Get(srv.URL + "/v1/embeddings")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Contains(t, string(b), "only POST")

	srv.SetModels("a", "b")
	resp2, err := http.Get(srv.URL + "/v1/models")
	require.NoError(t, err)
	defer resp2.Body.Close()
	b, _ = io.ReadAll(resp2.Body)
	assert.Equal(t, http.StatusOK, resp2.StatusCode)
	assert.JSONEq(t, `{"object":"list","data":[{"id":"a","object":"model","owned_by":"modeltest"},{"id":"b","object":"model","owned_by":"modeltest"}]}`, string(b))
}

func TestServer_OmitFinishIsATruncatedStream(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Text: "no end", OmitFinish: true, OmitDone: true})
	_, err := stream(t, srv)
	require.ErrorIs(t, err, model.ErrTruncated)
}

// The simulated prefix cache: a request's cached tokens are what repeats
// the previous request's prefix, reported as OpenAI does and read back by
// the provider.
func TestServer_PrefixCache(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Text: "a"}, modeltest.Response{Text: "b"},
		modeltest.Response{Text: "c"}, modeltest.Response{Text: "d"})
	srv.SetPrefixCache(true)
	p := chat.New(chat.Options{BaseURL: srv.BaseURL()})
	tools := []model.ToolSpec{{Name: "read_file", Description: "Reads a file.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	long := strings.Repeat("x", 7000)
	send := func(msgs ...model.Message) model.Usage {
		var u model.Usage
		for ev, err := range p.Stream(t.Context(), model.Request{Model: "m", System: "sys", Tools: tools, Messages: msgs}) {
			require.NoError(t, err)
			if ev.Kind == model.EventUsage {
				u = ev.Usage
			}
		}
		return u
	}
	first := model.Message{Role: model.RoleUser, Content: long}
	u1 := send(first)
	assert.Zero(t, u1.CachedTokens, "nothing before the first request")
	u2 := send(first, model.Message{Role: model.RoleAssistant, Content: "a"}, model.Message{Role: model.RoleUser, Content: "more"})
	assert.Equal(t, u1.PromptTokens, u2.CachedTokens, "the whole first request is the second's prefix")
	// Rewriting the first message keeps only the tools and system message,
	// plus the rewritten message's unchanged start.
	u3 := send(model.Message{Role: model.RoleUser, Content: long[:3500] + "[cut]"})
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	head := modeltest.CountTokens(modeltest.Request{Tools: reqs[0].Tools, Messages: reqs[0].Messages[:1]})
	assert.Equal(t, head+1000, u3.CachedTokens, "tools, system, and 3,500 unchanged bytes of the message (1,000 tokens)")
	for i, u := range []model.Usage{u1, u2, u3} {
		assert.Equal(t, reqs[i].Tokens, u.PromptTokens)
		assert.Equal(t, reqs[i].Cached, u.CachedTokens)
	}
	// A request refused as too long is not cached.
	srv.SetTokenLimit(1)
	_, err := stream(t, srv)
	require.Error(t, err)
	srv.SetTokenLimit(0)
	u5 := send(model.Message{Role: model.RoleUser, Content: long[:3500] + "[cut]"})
	assert.Equal(t, u5.PromptTokens, u5.CachedTokens, "the refused request did not replace the cached prefix")
}

// Responses with Match answer only the requests whose first user message
// contains it (a subagent's prompt), each Match text a queue of its own;
// the main script answers the rest, whatever the order of arrival.
func TestServer_MatchScriptsSubagentsApart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"text":"main 1"}
{"match":"find the config","text":"sub 1"}
{"text":"main 2"}
{"match":"find the config","text":"sub 2"}
`), 0o600))
	rs, err := modeltest.LoadScript(path)
	require.NoError(t, err)
	srv := modeltest.NewServer(t, rs...)
	ask := func(first string, more ...string) (string, error) {
		msgs := []model.Message{{Role: model.RoleUser, Content: first}}
		for _, m := range more {
			msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: "ok"}, model.Message{Role: model.RoleUser, Content: m})
		}
		p := chat.New(chat.Options{BaseURL: srv.BaseURL()})
		var b strings.Builder
		for ev, err := range p.Stream(t.Context(), model.Request{Model: "m", System: "find the config", Messages: msgs}) {
			if err != nil {
				return b.String(), err
			}
			b.WriteString(ev.Text)
		}
		return b.String(), nil
	}
	for _, tc := range []struct{ first, later, want string }{
		{"Please find the config of X", "", "sub 1"},
		{"hello", "find the config", "main 1"}, // only the first user message counts
		{"hello", "", "main 2"},
		{"and find the config again", "", "sub 2"},
	} {
		var more []string
		if tc.later != "" {
			more = append(more, tc.later)
		}
		got, err := ask(tc.first, more...)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
	_, err = ask("find the config")
	require.ErrorContains(t, err, `modeltest: script exhausted after 2 responses matching "find the config"`)
	assert.Equal(t, 2, srv.Served())
	assert.Equal(t, 2, srv.ServedMatching("find the config"))
}
