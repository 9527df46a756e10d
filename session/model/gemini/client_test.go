package gemini

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
	"github.com/acpd/acpd/session/model/gemini/geminitest"
	"github.com/acpd/acpd/session/model/scripttest"
)

type collected struct {
	text, reasoning string
	calls           []model.ToolCall
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
		case model.EventRetry:
			c.retries++
			c.text, c.reasoning, c.calls = "", "", nil
		}
	}
	return c
}

func newClient(srv *geminitest.Server, opts Options) *Client {
	opts.BaseURL = srv.BaseURL()
	if opts.HTTPOptions.Sleep == nil {
		opts.HTTPOptions.Sleep = new(scripttest.Sleeps).Sleep
	}
	return New(opts)
}

var tools = []model.ToolSpec{
	{Name: "add", Description: "Add", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}`)},
	{Name: "multiply", Description: "Multiply"},
}

func TestClient_ParallelCallsKeepTheirSignature(t *testing.T) {
	srv := geminitest.NewServer(t,
		geminitest.Response{Thought: "Both tools at once.", Calls: []geminitest.Call{{Name: "add", Arguments: `{"a":2}`}, {Name: "multiply", Arguments: `{"a":3}`}}},
		geminitest.Response{Thought: "Now answer.", Text: "5 and 6."},
	)
	c := newClient(srv, Options{APIKey: "k", IncludeThoughts: true, ThinkingLevel: "high"})
	req := model.Request{Model: "gemini-3-pro-preview", System: "Be brief.", Tools: tools, MaxTokens: 500,
		Messages: []model.Message{{Role: model.RoleUser, Content: "Add and multiply."}}}
	first := collect(t, c, req)
	require.NoError(t, first.err)
	assert.Equal(t, "Both tools at once.", first.reasoning)
	require.Len(t, first.calls, 2)
	assert.NotEmpty(t, first.calls[0].ID)
	assert.Equal(t, "tool_calls", first.finish)
	require.NotNil(t, first.usage)
	assert.Positive(t, first.usage.ReasoningTokens)
	assert.Equal(t, first.usage.PromptTokens, srv.Requests()[0].Tokens)

	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, ToolCalls: first.calls},
		model.Message{Role: model.RoleTool, ToolCallID: first.calls[0].ID, Name: "add", Content: "5"},
		model.Message{Role: model.RoleTool, ToolCallID: first.calls[1].ID, Name: "multiply", Content: "6"})
	second := collect(t, c, req)
	require.NoError(t, second.err)
	assert.Equal(t, "5 and 6.", second.text)
	assert.Equal(t, "stop", second.finish)

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	r := reqs[1]
	assert.Empty(t, r.Rejected)
	assert.Equal(t, "gemini-3-pro-preview", r.Model)
	assert.Equal(t, "k", r.Header.Get("x-goog-api-key"))
	require.Len(t, r.Contents, 3)
	assert.Equal(t, "model", r.Contents[1].Role)
	require.Len(t, r.Contents[1].Parts, 2)
	assert.NotEmpty(t, r.Contents[1].Parts[0].Signature)
	assert.Empty(t, r.Contents[1].Parts[1].Signature)
	assert.Len(t, r.Contents[2].Parts, 2, "both responses in one content")
	assert.JSONEq(t, `{"includeThoughts":true,"thinkingLevel":"high"}`, string(r.GenerationConfig.ThinkingConfig))
	assert.Equal(t, 500, r.GenerationConfig.MaxOutputTokens)
	assert.Equal(t, "Be brief.", *r.SystemInstruction.Parts[0].Text)
	assert.Contains(t, string(r.Tools), `"parametersJsonSchema":{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}`)
}

// A client that lost the signature sends Google's skip value; an altered
// one is refused, as the real API refuses it.
func TestClient_MissingSignatures(t *testing.T) {
	srv := geminitest.NewServer(t,
		geminitest.Response{Calls: []geminitest.Call{{ID: "c1", Name: "add", Arguments: `{"a":1}`}}},
		geminitest.Response{Text: "ok"},
	)
	req := model.Request{Model: "gemini-3-flash", Tools: tools, Messages: []model.Message{{Role: model.RoleUser, Content: "go"}}}
	first := collect(t, newClient(srv, Options{}), req)
	require.NoError(t, first.err)
	require.Len(t, first.calls[0].Thinking, 1)
	lost := first.calls[0]
	lost.Thinking = nil // history from another provider, or a lost signature
	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{lost}},
		model.Message{Role: model.RoleTool, ToolCallID: "c1", Content: "1"})
	got := collect(t, newClient(srv, Options{}), req)
	require.NoError(t, got.err)
	reqs := srv.Requests()
	assert.Equal(t, SkipSignature, reqs[1].Contents[1].Parts[0].Signature)
	assert.Equal(t, "add", reqs[1].Contents[2].Parts[0].FunctionResponse.Name, "the name comes from the call")

	// The raw rejection, for a request built by hand.
	body := `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"id":"c1","name":"add","args":{"a":1}}}]},{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"add","response":{"output":"1"}}}]}]}`
	resp, err := http.Post(srv.BaseURL()+"/models/g:streamGenerateContent?alt=sse", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, srv.Requests()[2].Rejected, "Function call is missing a thought_signature in functionCall parts")

	altered := strings.Replace(body, `"args":{"a":1}}`, `"args":{"a":1}},"thoughtSignature":"AAAA"`, 1)
	resp, err = http.Post(srv.BaseURL()+"/models/g:streamGenerateContent?alt=sse", "application/json", strings.NewReader(altered))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "Corrupted thought signature.", srv.Requests()[3].Rejected)
}

func TestClient_Retries(t *testing.T) {
	srv := geminitest.NewServer(t,
		geminitest.Response{Status: 429, ErrorMessage: "Resource has been exhausted", RetryDelay: "7s"},
		geminitest.Response{Status: 503, ErrorMessage: "The model is overloaded.", RetryAfter: "2"},
		geminitest.Response{Text: "partial text", CutAfter: 1},
		geminitest.Response{FinishReason: "MALFORMED_FUNCTION_CALL", Thought: "hm"},
		geminitest.Response{Text: "done"},
	)
	var sl scripttest.Sleeps
	c := newClient(srv, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 4, Sleep: sl.Sleep, BackoffBase: time.Millisecond, BackoffCap: 2 * time.Millisecond}})
	got := collect(t, c, model.Request{Model: "g", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.NoError(t, got.err)
	assert.Equal(t, "done", got.text)
	assert.Equal(t, 2, got.retries)
	s := sl.Got()
	require.Len(t, s, 4)
	assert.Equal(t, 7*time.Second, s[0], "RetryInfo's retryDelay")
	assert.Equal(t, 2*time.Second, s[1], "Retry-After")
}

func TestClient_RateLimitOutlastingRetries(t *testing.T) {
	srv := geminitest.NewServer(t, geminitest.Response{Status: 429}, geminitest.Response{Status: 429})
	got := collect(t, newClient(srv, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 1}}), model.Request{Model: "g", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.Error(t, got.err)
	assert.Equal(t, model.RateLimitMessage, got.err.Error())
}

func TestClient_ContextOverflow(t *testing.T) {
	srv := geminitest.NewServer(t, geminitest.Response{Text: "unused"})
	srv.SetTokenLimit(20)
	got := collect(t, newClient(srv, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 3}}), model.Request{Model: "g",
		Messages: []model.Message{{Role: model.RoleUser, Content: strings.Repeat("many words ", 40)}}})
	require.Error(t, got.err)
	assert.True(t, model.IsContextOverflow(got.err), "%v", got.err)
	assert.Len(t, srv.Requests(), 1, "an overflow is not retried")
	assert.Equal(t, srv.Requests()[0].Tokens, model.OverflowTokens(got.err))
	assert.Equal(t, 20, model.OverflowLimit(got.err))
}

func TestClient_StreamErrorAndTimeout(t *testing.T) {
	srv := geminitest.NewServer(t,
		geminitest.Response{Text: "half", StreamError: true},
		geminitest.Response{Text: "whole"},
		geminitest.Response{Text: "stalls", CutAfter: 1, Hang: true},
	)
	got := collect(t, newClient(srv, Options{HTTPOptions: model.HTTPOptions{MaxRetries: 1}}), model.Request{Model: "g", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.NoError(t, got.err)
	assert.Equal(t, "whole", got.text)
	got = collect(t, newClient(srv, Options{HTTPOptions: model.HTTPOptions{RequestTimeout: 200 * time.Millisecond}}), model.Request{Model: "g", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	assert.Contains(t, got.err.Error(), "no data from the model server")
}

func TestClient_FinishReasons(t *testing.T) {
	srv := geminitest.NewServer(t,
		geminitest.Response{Text: "cut", FinishReason: "MAX_TOKENS"},
		geminitest.Response{Text: "no", FinishReason: "SAFETY"},
	)
	c := newClient(srv, Options{})
	req := model.Request{Model: "g", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}
	assert.Equal(t, "length", collect(t, c, req).finish)
	assert.Equal(t, "content_filter", collect(t, c, req).finish)
}

func TestAPIRoot(t *testing.T) {
	assert.Equal(t, DefaultBaseURL, APIRoot(""))
	assert.Equal(t, "https://generativelanguage.googleapis.com/v1beta", APIRoot("https://generativelanguage.googleapis.com"))
	assert.Equal(t, "http://h/v1", APIRoot("http://h/v1/"))
	assert.Equal(t, "https://x/v1beta1/projects/p/locations/l/publishers/google", APIRoot("https://x/v1beta1/projects/p/locations/l/publishers/google"))
}

func TestBuildRequest_BadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		req  model.Request
		want string
	}{
		"no model":      {model.Request{}, "model: required"},
		"negative max":  {model.Request{Model: "m", MaxTokens: -1}, "maxTokens"},
		"nameless tool": {model.Request{Model: "m", Tools: []model.ToolSpec{{}}}, "tools[0].name"},
		"bad schema":    {model.Request{Model: "m", Tools: []model.ToolSpec{{Name: "x", Parameters: json.RawMessage(`{`)}}}, "tools[0].parameters"},
		"nameless call": {model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "a"}}}}}, "messages[0].toolCalls[0].name"},
		"orphan result": {model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleTool, Content: "x"}}}, "messages[0].name"},
		"unknown role":  {model.Request{Model: "m", Messages: []model.Message{{Role: "bot"}}}, "messages[0].role"},
		"bad image":     {model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Images: []model.Image{{Data: "x"}}}}}, "messages[0].images[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := buildRequest(tc.req, buildInput{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// An invalid call's text goes back inside an object (args must be one).
func TestBuildRequest_InvalidArgumentsWrapped(t *testing.T) {
	b, err := buildRequest(model.Request{Model: "m", Messages: []model.Message{
		{Role: model.RoleUser, Content: "go"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{Name: "x", Arguments: json.RawMessage(`"{\"a\":"`), Invalid: "truncated"}}},
		{Role: model.RoleTool, Content: "error: invalid"},
	}}, buildInput{})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"args":{"invalid_arguments":"{\"a\":"}`)
	assert.Contains(t, string(b), `"thoughtSignature":"`+SkipSignature+`"`)
}

func TestClient_ThinkingLevels(t *testing.T) {
	c := New(Options{Models: map[string]Model{
		"gemini-2.5-pro":       {Thinking: "budget", Levels: map[string]int{"low": 2048, "high": 30000}, DefaultLevel: "high"},
		"gemini-3-pro-preview": {Thinking: "effort", DefaultLevel: "low"},
	}})
	enc := func(tc *thinkingConfig) string {
		if tc == nil {
			return "none"
		}
		b, _ := json.Marshal(tc)
		return string(b)
	}
	for _, tc := range []struct{ level, model, want string }{
		{"", "gemini-2.5-pro", `{"includeThoughts":true,"thinkingBudget":30000}`},
		{"low", "gemini-2.5-pro", `{"includeThoughts":true,"thinkingBudget":2048}`},
		{"off", "gemini-2.5-pro", `{"thinkingBudget":0}`},
		{"medium", "gemini-2.5-pro", `{"includeThoughts":true,"thinkingBudget":8192}`},
		{"", "gemini-3-pro-preview", `{"includeThoughts":true,"thinkingLevel":"low"}`},
		{"high", "gemini-3-pro-preview", `{"includeThoughts":true,"thinkingLevel":"high"}`},
		{"off", "gemini-3-pro-preview", `{"thinkingLevel":"low"}`},
		{"4096", "gemini-2.5-flash", `{"includeThoughts":true,"thinkingBudget":4096}`},
		{"", "gemini-2.5-flash", `{"includeThoughts":true}`},
		{"", "gemini-2.0-flash", "none"},
	} {
		assert.Equal(t, tc.want, enc(c.thinking(tc.level, tc.model)), "%s on %s", tc.level, tc.model)
	}
}
