package model

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cached encoding of a growing conversation is byte-identical to encoding
// it from scratch, including calls without ids and edited messages.
func TestBuildRequest_MessageCache(t *testing.T) {
	cache := &MessageCache{}
	msgs := []Message{{Role: RoleUser, Content: "hi <there> & \u2028"}}
	grow := []Message{
		{Role: RoleAssistant, Content: "a", ToolCalls: []ToolCall{{Name: "read_file", Arguments: json.RawMessage(`{ "b":1, "a" : 2 }`)}, {ID: "x", Name: "t", Arguments: json.RawMessage(`{}`)}}},
		{Role: RoleTool, Content: "r1"},
		{Role: RoleTool, ToolCallID: "x", Content: "r2"},
		{Role: RoleUser, Content: "again", Images: []Image{{MimeType: "image/png", Data: "AAAA"}}},
		{Role: RoleAssistant, Reasoning: "hmm"},
	}
	for i := 0; i <= len(grow); i++ {
		req := Request{Model: "m", System: "sys", Messages: msgs, Tools: []ToolSpec{{Name: "t", Parameters: json.RawMessage(`{"type":"object"}`)}}, Cache: cache}
		got, err := buildRequest(req)
		require.NoError(t, err)
		req.Cache = nil
		want, err := buildRequest(req)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		require.True(t, json.Valid(got))
		if i < len(grow) {
			msgs = append(msgs, grow[i])
		}
	}
	// An edited earlier message is re-encoded, not served from the cache.
	edited := append([]Message(nil), msgs...)
	edited[0].Content = "changed"
	got, err := buildRequest(Request{Messages: edited, Cache: cache})
	require.NoError(t, err)
	want, err := buildRequest(Request{Messages: edited})
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

func BenchmarkBuildRequest_1000Messages(b *testing.B) {
	var msgs []Message
	for i := range 100 {
		var calls []ToolCall
		for j := range 10 {
			calls = append(calls, ToolCall{ID: "c" + string(rune('a'+j)) + string(rune('a'+i%26)), Name: "read_file", Arguments: json.RawMessage(`{"file_path":"/w/some/file.txt"}`)})
		}
		msgs = append(msgs, Message{Role: RoleAssistant, ToolCalls: calls})
		for j := range 10 {
			msgs = append(msgs, Message{Role: RoleTool, ToolCallID: calls[j].ID, Content: "line of text\nline of text\nline of text\n"})
		}
	}
	for _, tc := range []struct {
		name  string
		cache *MessageCache
	}{{"uncached", nil}, {"cached", &MessageCache{}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := buildRequest(Request{Model: "m", Messages: msgs, Cache: tc.cache}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
