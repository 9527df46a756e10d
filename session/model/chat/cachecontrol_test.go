package chat_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/chat"
	"github.com/acpd/acpd/session/model/modeltest"
)

func TestCacheMarkers_ByProvider(t *testing.T) {
	for _, tc := range []struct {
		mode, base, model string
		want              bool
	}{
		{"on", "https://api.openai.com/v1", "gpt-4o", true},
		{"off", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen3-max", false},
		{"auto", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen3-max", true},
		{"auto", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "qwen3-coder-plus", true},
		{"auto", "https://token-plan.cn-beijing.maas.aliyuncs.com/compatible-mode/v1", "qwen3-max", true},
		{"", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen3-max", true},
		{"auto", "https://openrouter.ai/api/v1", "anthropic/claude-sonnet-4", true},
		{"auto", "https://openrouter.ai/api/v1", "some/claude-3.7-sonnet-finetune", true},
		{"auto", "https://openrouter.ai/api/v1", "qwen/qwen3-coder", false},
		{"auto", "https://api.openai.com/v1", "gpt-4o", false},
		{"auto", "https://api.deepseek.com", "deepseek-chat", false},
		{"auto", "http://127.0.0.1:8080/v1", "claude-sonnet-4", false},
		{"auto", "https://evil.example/dashscope.aliyuncs.com", "qwen3-max", false},
		{"auto", "::not a url", "claude", false},
	} {
		assert.Equal(t, tc.want, chat.CacheMarkers(tc.mode, tc.base, tc.model), "%s %s %s", tc.mode, tc.base, tc.model)
	}
}

// With markers on, the system message, the last tool and the last message
// carry cache_control, and nothing else; the message that was last in the
// previous request is sent plain again (the encodings the MessageCache
// keeps are never marked). Off, nothing is marked.
func TestCacheMarkers_OnTheWire(t *testing.T) {
	srv := modeltest.NewServer(t, modeltest.Response{Text: "a"}, modeltest.Response{Text: "b"}, modeltest.Response{Text: "c"})
	tools := []model.ToolSpec{
		{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "glob", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	cache := &model.Cache{}
	send := func(mode string, msgs []model.Message) {
		p := chat.New(chat.Options{BaseURL: srv.BaseURL(), CacheControl: mode})
		for _, err := range p.Stream(t.Context(), model.Request{Model: "m", System: "sys", Tools: tools, Messages: msgs, Cache: cache}) {
			require.NoError(t, err)
		}
	}
	msgs := []model.Message{{Role: model.RoleUser, Content: "first"}}
	send("on", msgs)
	msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: "a"}, model.Message{Role: model.RoleUser, Content: "second"})
	send("on", msgs)
	send("off", msgs)
	reqs := srv.Requests()
	require.Len(t, reqs, 3)

	type part struct {
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	marker := `{"type":"ephemeral"}`
	for i, r := range reqs[:2] {
		assert.Equal(t, 3, bytes.Count(r.Body, []byte(`"cache_control"`)), "request %d: three markers", i)
		var sys []part
		require.NoError(t, json.Unmarshal(r.Messages[0].Content, &sys), "request %d: the system message as parts", i)
		assert.JSONEq(t, marker, string(sys[0].CacheControl))
		assert.Equal(t, "sys", r.Messages[0].Text())
		var last []part
		require.NoError(t, json.Unmarshal(r.Messages[len(r.Messages)-1].Content, &last))
		assert.JSONEq(t, marker, string(last[0].CacheControl))
		var raw struct {
			Tools []struct {
				CacheControl json.RawMessage `json:"cache_control"`
			} `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &raw))
		assert.Nil(t, raw.Tools[0].CacheControl)
		assert.JSONEq(t, marker, string(raw.Tools[1].CacheControl), "the last tool")
	}
	assert.JSONEq(t, `"first"`, string(reqs[1].Messages[1].Content), "the previous last message is plain again")
	assert.Equal(t, "second", reqs[1].Messages[3].Text())
	assert.NotContains(t, string(reqs[2].Body), "cache_control", "off: no markers")
	assert.JSONEq(t, `"second"`, string(reqs[2].Messages[3].Content))
	assert.Empty(t, reqs[0].Header.Get("X-DashScope-CacheControl"), "only DashScope gets the header")
}
