package responses

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/responses/responsestest"
	"github.com/acpd/acpd/session/model/scripttest"
)

type collected struct {
	text, reasoning string
	calls           []model.ToolCall
	thinking        []model.Thinking
	usage           *model.Usage
	finish          string
	retries         int
	err             error
}

func collect(t *testing.T, p model.Provider, req model.Request) collected {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c collected
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			c.err = err
			break
		}
		switch ev.Kind {
		case model.EventText:
			c.text += ev.Text
		case model.EventReasoning:
			c.reasoning += ev.Text
		case model.EventToolCall:
			c.calls = append(c.calls, ev.ToolCall)
		case model.EventUsage:
			u := ev.Usage
			c.usage = &u
		case model.EventFinish:
			c.finish = ev.FinishReason
		case model.EventThinking:
			c.thinking = append(c.thinking, ev.Thinking)
		case model.EventRetry:
			c.retries++
			c.text, c.reasoning, c.calls, c.thinking = "", "", nil, nil
		}
	}
	return c
}

var weather = []model.ToolSpec{{Name: "weather", Description: "Get the weather", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}}}`)}}

func newClient(srv *responsestest.Server, opts Options) *Client {
	opts.BaseURL = srv.BaseURL()
	if opts.HTTPOptions.Sleep == nil {
		opts.HTTPOptions.Sleep = new(scripttest.Sleeps).Sleep
	}
	return New(opts)
}

func TestClient_ToolLoopSendsReasoningBack(t *testing.T) {
	srv := responsestest.NewServer(t,
		responsestest.Response{Reasoning: "The user wants the weather; call the tool.", Calls: []responsestest.Call{{ID: "call_A", Name: "weather", Arguments: `{"location":"Florence"}`}}},
		responsestest.Response{Reasoning: "It is hot.", Text: "It is 40 °C in Florence."},
	)
	c := newClient(srv, Options{APIKey: "sk-test", ReasoningEffort: "medium"})
	req := model.Request{Model: "gpt-5", System: "Be brief.", Tools: weather, MaxTokens: 1000, CacheHints: model.CacheHints{Key: "session-1"},
		Messages: []model.Message{{Role: model.RoleUser, Content: "Weather in Florence?"}}}

	first := collect(t, c, req)
	require.NoError(t, first.err)
	assert.Equal(t, "The user wants the weather; call the tool.", first.reasoning)
	require.Len(t, first.calls, 1)
	assert.Equal(t, model.ToolCall{ID: "call_A", Name: "weather", Arguments: json.RawMessage(`{"location":"Florence"}`)}, first.calls[0])
	assert.Equal(t, "tool_calls", first.finish)
	require.NotNil(t, first.usage)
	assert.Positive(t, first.usage.PromptTokens)
	assert.Positive(t, first.usage.ReasoningTokens)

	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, Reasoning: first.reasoning, Thinking: first.thinking, ToolCalls: first.calls},
		model.Message{Role: model.RoleTool, ToolCallID: "call_A", Name: "weather", Content: "40 C"})
	second := collect(t, c, req)
	require.NoError(t, second.err)
	assert.Equal(t, "It is 40 °C in Florence.", second.text)
	assert.Equal(t, "stop", second.finish)

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		assert.Empty(t, r.Rejected)
		assert.Equal(t, "gpt-5", r.Model)
		assert.Equal(t, "Be brief.", r.Instructions)
		require.NotNil(t, r.Store)
		assert.False(t, *r.Store)
		assert.Equal(t, []string{"reasoning.encrypted_content"}, r.Include)
		assert.True(t, r.Stream)
		assert.Equal(t, 1000, r.MaxOutputTokens)
		assert.JSONEq(t, `{"effort":"medium","summary":"auto"}`, string(r.Reasoning))
		assert.Equal(t, "Bearer sk-test", r.Header.Get("Authorization"))
		require.Len(t, r.Tools, 1)
		assert.Equal(t, "function", r.Tools[0].Type)
	}
	assert.Equal(t, "session-1", reqs[0].PromptCacheKey)
	assert.Equal(t, "session-1", reqs[1].PromptCacheKey, "one cache key per conversation")
	var types []string
	for _, it := range reqs[1].Input {
		types = append(types, it.Type)
	}
	assert.Equal(t, []string{"message", "reasoning", "function_call", "function_call_output"}, types)
	assert.NotNil(t, reqs[1].Input[1].EncryptedContent)
}

// The server refuses what the real API refuses; the client surfaces the
// provider's message and does not retry a 400.
func TestClient_UnreturnedReasoningIsRefused(t *testing.T) {
	srv := responsestest.NewServer(t,
		responsestest.Response{Reasoning: "Think.", Calls: []responsestest.Call{{ID: "call_B", Name: "weather"}}},
		responsestest.Response{Text: "unused"},
	)
	req := model.Request{Model: "gpt-5", Tools: weather, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}
	first := collect(t, newClient(srv, Options{}), req)
	require.NoError(t, first.err)
	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, ToolCalls: first.calls},
		model.Message{Role: model.RoleTool, ToolCallID: "call_B", Content: "ok"})
	// Without the reasoning item (the Thinking block dropped).
	require.Len(t, first.thinking, 1)
	second := collect(t, newClient(srv, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 3}}), req)
	var ae *model.APIError
	require.ErrorAs(t, second.err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.Status)
	assert.Contains(t, ae.Message, "was provided without its required 'reasoning' item: 'rs_")
	assert.Len(t, srv.Requests(), 2, "a 400 is not retried")
}

func TestClient_RetriesHonourRetryAfter(t *testing.T) {
	srv := responsestest.NewServer(t,
		responsestest.Response{Status: 429, ErrorMessage: "Rate limit reached", ErrorCode: "rate_limit_exceeded", RetryAfter: "7"},
		responsestest.Response{Status: 503, ErrorMessage: "overloaded"},
		responsestest.Response{Text: "partial", CutAfter: 6},
		responsestest.Response{Text: "done"},
	)
	var sl scripttest.Sleeps
	c := newClient(srv, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 3, Sleep: sl.Sleep, BackoffBase: time.Millisecond, BackoffCap: 4 * time.Millisecond}})
	got := collect(t, c, model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.NoError(t, got.err)
	assert.Equal(t, "done", got.text)
	assert.Equal(t, 1, got.retries, "the cut attempt had streamed text")
	s := sl.Got()
	require.Len(t, s, 3)
	assert.Equal(t, 7*time.Second, s[0])
	assert.LessOrEqual(t, s[1], 2*time.Millisecond)
}

func TestClient_RateLimitOutlastingRetries(t *testing.T) {
	srv := responsestest.NewServer(t,
		responsestest.Response{Status: 429, ErrorMessage: "Rate limit reached"},
		responsestest.Response{Status: 429, ErrorMessage: "Rate limit reached"},
	)
	got := collect(t, newClient(srv, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 1}}), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.Error(t, got.err)
	assert.Equal(t, model.RateLimitMessage, got.err.Error())
}

func TestClient_ContextOverflowIsRecognised(t *testing.T) {
	srv := responsestest.NewServer(t, responsestest.Response{Text: "unused"})
	srv.SetTokenLimit(10)
	got := collect(t, newClient(srv, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 3}}), model.Request{Model: "m",
		Messages: []model.Message{{Role: model.RoleUser, Content: strings.Repeat("long text ", 50)}}})
	require.Error(t, got.err)
	assert.True(t, model.IsContextOverflow(got.err), "%v", got.err)
	assert.Len(t, srv.Requests(), 1)
	assert.Equal(t, "Your input exceeds the context window of this model. Please adjust your input and try again.", got.err.Error())

	// The same refusal inside a stream (error, then response.failed).
	srv2 := responsestest.NewServer(t, responsestest.Response{Fail: true, ErrorCode: "context_length_exceeded",
		ErrorMessage: "Your input exceeds the context window of this model. Please adjust your input and try again."})
	got = collect(t, newClient(srv2, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 3}}), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	assert.True(t, model.IsContextOverflow(got.err), "%v", got.err)
	assert.Len(t, srv2.Requests(), 1, "an overflow is not retried")
}

func TestClient_FailedStreamIsRetried(t *testing.T) {
	srv := responsestest.NewServer(t,
		responsestest.Response{Text: "half", Fail: true, ErrorMessage: "The server had an error"},
		responsestest.Response{Text: "whole"},
	)
	got := collect(t, newClient(srv, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 2}}), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.NoError(t, got.err)
	assert.Equal(t, "whole", got.text)
	assert.Equal(t, 1, got.retries)
}

func TestClient_IdleTimeout(t *testing.T) {
	srv := responsestest.NewServer(t, responsestest.Response{Text: "stalls", CutAfter: 3, Hang: true})
	got := collect(t, newClient(srv, Options{HTTPOptions: model.HTTPOptions{RequestTimeout: 200 * time.Millisecond}}), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.Error(t, got.err)
	assert.Contains(t, got.err.Error(), "no data from the model server")
}

func TestClient_IncompleteIsLength(t *testing.T) {
	srv := responsestest.NewServer(t, responsestest.Response{Text: "cut off", Incomplete: "max_output_tokens"})
	got := collect(t, newClient(srv, Options{}), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.NoError(t, got.err)
	assert.Equal(t, "length", got.finish)
}

func TestBuildRequest_BadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		req  model.Request
		want string
	}{
		"no model":       {model.Request{}, "model: required"},
		"negative max":   {model.Request{Model: "m", MaxTokens: -1}, "maxTokens"},
		"nameless tool":  {model.Request{Model: "m", Tools: []model.ToolSpec{{}}}, "tools[0].name"},
		"bad schema":     {model.Request{Model: "m", Tools: []model.ToolSpec{{Name: "x", Parameters: json.RawMessage(`{`)}}}, "tools[0].parameters"},
		"nameless call":  {model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "a"}}}}}, "messages[0].toolCalls[0].name"},
		"orphan result":  {model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleTool, Content: "x"}}}, "messages[0].toolCallId"},
		"unknown role":   {model.Request{Model: "m", Messages: []model.Message{{Role: "bot"}}}, "messages[0].role"},
		"image w/o type": {model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Images: []model.Image{{Data: "x"}}}}}, "messages[0].images[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := buildRequest(tc.req, buildInput{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestBuildRequest_MissingIDsArePaired(t *testing.T) {
	b, err := buildRequest(model.Request{Model: "m", Messages: []model.Message{
		{Role: model.RoleUser, Content: "go", Images: []model.Image{{MimeType: "image/png", Data: "AAAA"}}},
		{Role: model.RoleAssistant, Content: "two calls", ToolCalls: []model.ToolCall{{Name: "a"}, {Name: "b", Arguments: json.RawMessage(`{ "x" : 1 }`)}}},
		{Role: model.RoleTool, Content: "ra"},
		{Role: model.RoleTool, Content: "rb"},
	}}, buildInput{})
	require.NoError(t, err)
	var body struct {
		Input []map[string]any `json:"input"`
	}
	require.NoError(t, json.Unmarshal(b, &body))
	require.Len(t, body.Input, 6)
	assert.Equal(t, []any{
		map[string]any{"type": "input_text", "text": "go"},
		map[string]any{"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
	}, body.Input[0]["content"])
	assert.Equal(t, "assistant", body.Input[1]["role"])
	assert.Equal(t, "call_1_0", body.Input[2]["call_id"])
	assert.Equal(t, "{}", body.Input[2]["arguments"])
	assert.Equal(t, `{"x":1}`, body.Input[3]["arguments"])
	assert.Equal(t, "call_1_0", body.Input[4]["call_id"])
	assert.Equal(t, "call_1_1", body.Input[5]["call_id"])
}

func TestClient_ThinkingLevels(t *testing.T) {
	srv := responsestest.NewServer(t)
	srv.SetResponder(func(responsestest.Request) (responsestest.Response, bool) {
		return responsestest.Response{Text: "ok"}, true
	})
	c := newClient(srv, Options{Models: map[string]Model{"gpt-5": {DefaultLevel: "high", MaxTokens: 777}}})
	for _, tc := range []struct{ level, model, want string }{
		{"", "gpt-5", `{"effort":"high","summary":"auto"}`},
		{"low", "gpt-5", `{"effort":"low","summary":"auto"}`},
		{"off", "gpt-5", ``},
		{"", "o4-mini", `{"summary":"auto"}`},
		{"", "gpt-4o", ``},
	} {
		got := collect(t, c, model.Request{Model: tc.model, ThinkingLevel: tc.level, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
		require.NoError(t, got.err)
		reqs := srv.Requests()
		last := reqs[len(reqs)-1]
		if tc.want == "" {
			assert.Empty(t, last.Reasoning, "%s on %s", tc.level, tc.model)
		} else {
			assert.JSONEq(t, tc.want, string(last.Reasoning), "%s on %s", tc.level, tc.model)
		}
	}
	assert.Equal(t, 777, srv.Requests()[0].MaxOutputTokens, "the model's default max tokens")
}
