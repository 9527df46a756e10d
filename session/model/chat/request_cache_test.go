package chat

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
)

// The cached encoding of a growing conversation is byte-identical to encoding
// it from scratch, including calls without ids and edited messages.
func TestBuildRequest_MessageCache(t *testing.T) {
	cache := &model.Cache{}
	msgs := []model.Message{{Role: model.RoleUser, Content: "hi <there> & \u2028"}}
	grow := []model.Message{
		{Role: model.RoleAssistant, Content: "a", ToolCalls: []model.ToolCall{{Name: "read_file", Arguments: json.RawMessage(`{ "b":1, "a" : 2 }`)}, {ID: "x", Name: "t", Arguments: json.RawMessage(`{}`)}}},
		{Role: model.RoleTool, Content: "r1"},
		{Role: model.RoleTool, ToolCallID: "x", Content: "r2"},
		{Role: model.RoleUser, Content: "again", Images: []model.Image{{MimeType: "image/png", Data: "AAAA"}}},
		{Role: model.RoleAssistant, Reasoning: "hmm"},
	}
	for i := 0; i <= len(grow); i++ {
		req := model.Request{Model: "m", System: "sys", Messages: msgs, Tools: []model.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{"type":"object"}`)}}, Cache: cache}
		got, err := buildRequestBytes(req)
		require.NoError(t, err)
		req.Cache = nil
		want, err := buildRequestBytes(req)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		require.True(t, json.Valid(got))
		if i < len(grow) {
			msgs = append(msgs, grow[i])
		}
	}
	// An edited earlier message is re-encoded, not served from the cache.
	edited := append([]model.Message(nil), msgs...)
	edited[0].Content = "changed"
	got, err := buildRequestBytes(model.Request{Messages: edited, Cache: cache})
	require.NoError(t, err)
	want, err := buildRequestBytes(model.Request{Messages: edited})
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

// requireCachedEqual builds req with and without the cache and requires
// the same bytes.
func requireCachedEqual(t *testing.T, cache *model.Cache, msgs []model.Message) {
	t.Helper()
	got, err := buildRequestBytes(model.Request{Model: "m", Messages: msgs, Cache: cache})
	require.NoError(t, err)
	want, err := buildRequestBytes(model.Request{Model: "m", Messages: msgs})
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

// The cache must not trust the caller's memory: a slice truncated and
// appended to again rewrites the backing array the cache last saw, and
// nested slices can be edited in place.
func TestBuildRequest_MessageCacheEdits(t *testing.T) {
	t.Parallel()
	call := func(id, args string) model.ToolCall {
		return model.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(args)}
	}
	tests := []struct {
		name string
		// edit changes the conversation after a first cached request and
		// returns what the second request sends.
		edit func(msgs []model.Message) []model.Message
	}{
		{"truncate and re-append on the same array", func(msgs []model.Message) []model.Message {
			return append(msgs[:1], model.Message{Role: model.RoleUser, Content: "rewritten"})
		}},
		{"field edited in place", func(msgs []model.Message) []model.Message {
			msgs[1].Content = "edited"
			return msgs
		}},
		{"tool call replaced in place", func(msgs []model.Message) []model.Message {
			msgs[1].ToolCalls[0] = call("c1", `{"path":"other"}`)
			return msgs
		}},
		{"arguments bytes edited in place", func(msgs []model.Message) []model.Message {
			copy(msgs[1].ToolCalls[0].Arguments, `{"path":"b"}`)
			return msgs
		}},
		{"image replaced in place", func(msgs []model.Message) []model.Message {
			msgs[0].Images[0].Data = "BBBB"
			return msgs
		}},
		{"shrunk to a prefix", func(msgs []model.Message) []model.Message { return msgs[:1] }},
		{"id-less results renumbered after an earlier insertion", func(msgs []model.Message) []model.Message {
			return append([]model.Message{{Role: model.RoleUser, Content: "first"}}, msgs...)
		}},
		{"reasoning appears earlier, so later tool calls carry the field", func(msgs []model.Message) []model.Message {
			msgs[0].Content = "x"
			return append([]model.Message{{Role: model.RoleAssistant, Reasoning: "r", Content: "a"}}, msgs...)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msgs := make([]model.Message, 0, 8)
			msgs = append(msgs,
				model.Message{Role: model.RoleUser, Content: "look", Images: []model.Image{{MimeType: "image/png", Data: "AAAA"}}},
				model.Message{Role: model.RoleAssistant, Content: "reading", ToolCalls: []model.ToolCall{call("c1", `{"path":"a"}`), {Name: "list"}}},
				model.Message{Role: model.RoleTool, ToolCallID: "c1", Content: "r1"},
				model.Message{Role: model.RoleTool, Content: "r2"},
			)
			cache := &model.Cache{}
			requireCachedEqual(t, cache, msgs)
			requireCachedEqual(t, cache, tt.edit(msgs))
		})
	}
}

// One cache shared by concurrent requests of different conversations never
// mixes their encodings (run with -race).
func TestBuildRequest_MessageCacheConcurrent(t *testing.T) {
	t.Parallel()
	cache := &model.Cache{}
	convs := make([][]model.Message, 4)
	for i := range convs {
		for j := range 20 {
			convs[i] = append(convs[i], model.Message{Role: model.RoleUser, Content: fmt.Sprintf("conv %d msg %d", i, j)})
		}
	}
	errs := make(chan error, len(convs))
	for _, conv := range convs {
		go func() {
			for n := 1; n <= len(conv); n++ {
				got, err := buildRequestBytes(model.Request{Messages: conv[:n], Cache: cache})
				if err != nil {
					errs <- err
					return
				}
				want, _ := buildRequestBytes(model.Request{Messages: conv[:n]})
				if string(got) != string(want) {
					errs <- fmt.Errorf("cached body differs:\n got %s\nwant %s", got, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range convs {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("concurrent requests did not finish")
		}
	}
}

func BenchmarkBuildRequest_1000Messages(b *testing.B) {
	var msgs []model.Message
	for i := range 100 {
		var calls []model.ToolCall
		for j := range 10 {
			calls = append(calls, model.ToolCall{ID: "c" + string(rune('a'+j)) + string(rune('a'+i%26)), Name: "read_file", Arguments: json.RawMessage(`{"file_path":"/w/some/file.txt"}`)})
		}
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, ToolCalls: calls})
		for j := range 10 {
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: calls[j].ID, Content: "line of text\nline of text\nline of text\n"})
		}
	}
	for _, tc := range []struct {
		name  string
		cache *model.Cache
	}{{"uncached", nil}, {"cached", &model.Cache{}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := buildRequest(model.Request{Model: "m", Messages: msgs}, messageCache(tc.cache), false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The cached head (model, limits, tool schemas) is used only while those
// fields are unchanged, and the caller may rewrite its tool schema bytes.
func TestBuildRequest_HeadCache(t *testing.T) {
	cache := &model.Cache{}
	msgs := []model.Message{{Role: model.RoleUser, Content: "hi"}}
	params := []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	t0, t1 := 0.0, 0.5
	reqs := []model.Request{
		{Model: "m", Tools: []model.ToolSpec{{Name: "t", Parameters: params}}},
		{Model: "m", Tools: []model.ToolSpec{{Name: "t", Parameters: params}}},
		{Model: "m", Tools: []model.ToolSpec{{Name: "t", Description: "d", Parameters: params}}},
		{Model: "m", Tools: []model.ToolSpec{{Name: "t", Description: "d", Parameters: params}, {Name: "u"}}},
		{Model: "m2", Tools: []model.ToolSpec{{Name: "t", Parameters: params}}},
		{Model: "m2", MaxTokens: 9, Tools: []model.ToolSpec{{Name: "t", Parameters: params}}},
		{Model: "m2", MaxTokens: 9, Temperature: &t0},
		{Model: "m2", MaxTokens: 9, Temperature: &t1},
		{Model: "m2", MaxTokens: 9},
	}
	for i, req := range reqs {
		req.Messages = msgs
		req.Cache = cache
		got, err := buildRequestBytes(req)
		require.NoError(t, err)
		req.Cache = nil
		want, err := buildRequestBytes(req)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "request %d", i)
	}
	// Schema bytes edited in place after a request are noticed.
	req := model.Request{Model: "m", Messages: msgs, Tools: []model.ToolSpec{{Name: "t", Parameters: params}}, Cache: cache}
	_, err := buildRequestBytes(req)
	require.NoError(t, err)
	copy(params[len(`{"type":"object","properties":{"a":{"type":"`):], "number")
	got, err := buildRequestBytes(req)
	require.NoError(t, err)
	require.Contains(t, string(got), `"type":"number"`)
	// A bad schema is reported even right after a good head was cached.
	_, err = buildRequestBytes(model.Request{Model: "m", Messages: msgs, Tools: []model.ToolSpec{{Name: "t", Parameters: []byte(`{`)}}, Cache: cache})
	require.ErrorContains(t, err, "tools[0].parameters")
}
