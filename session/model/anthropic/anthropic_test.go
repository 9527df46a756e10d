package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/anthropic"
	"github.com/acpd/acpd/session/model/anthropic/anthropictest"
	"github.com/acpd/acpd/session/model/scripttest"
)

const sonnet = "claude-sonnet-4-5"

func client(srv *anthropictest.Server, sl *scripttest.Sleeps, retries int) *anthropic.Client {
	return anthropic.New(anthropic.Options{
		BaseURL: srv.URL, APIKey: "sk-ant-test",
		HTTPOptions: model.HTTPOptions{MaxRetries: retries, Sleep: sl.Sleep, BackoffBase: 100 * time.Millisecond},
		Models:      map[string]anthropic.Model{sonnet: {Thinking: anthropic.ThinkingBudget, DefaultLevel: "medium"}},
	})
}

// response is one streamed answer, collected.
type response struct {
	text, reasoning string
	thinking        []model.Thinking
	calls           []model.ToolCall
	usage           model.Usage
	finish          string
	retries         int
}

func run(t *testing.T, p model.Provider, req model.Request) (response, error) {
	t.Helper()
	var r response
	for ev, err := range p.Stream(t.Context(), req) {
		if err != nil {
			return r, err
		}
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
			r.usage = ev.Usage
		case model.EventFinish:
			r.finish = ev.FinishReason
		case model.EventRetry:
			r.retries++
			r = response{retries: r.retries}
		}
	}
	return r, nil
}

// assistant is the history entry of a response, as the session keeps it.
func (r response) assistant() model.Message {
	return model.Message{Role: model.RoleAssistant, Content: r.text, Reasoning: r.reasoning, Thinking: r.thinking, ToolCalls: r.calls}
}

func toolResult(id, content string) model.Message {
	return model.Message{Role: model.RoleTool, ToolCallID: id, Content: content}
}

var tools = []model.ToolSpec{{Name: "read_file", Description: "Read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}

// A three-step tool loop with thinking on: each answer's signed thinking
// goes back unmodified before its tool call, the server (which rejects a
// missing or altered signature and a tool loop without the thinking)
// accepts every request, and the turn ends end_turn.
func TestClient_ThinkingToolLoop(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t,
		anthropictest.Response{Thinking: "I should read a.go first.", ToolCalls: []anthropictest.ToolCall{{ID: "toolu_1", Name: "read_file", Arguments: `{"path":"a.go"}`}}},
		anthropictest.Response{Thinking: "Now b.go.", Redacted: true, Text: "Reading b.", ToolCalls: []anthropictest.ToolCall{{ID: "toolu_2", Name: "read_file", Arguments: `{"path":"b.go"}`}}},
		anthropictest.Response{Thinking: "Both read.", Text: "Done: both files are fine."},
	)
	p := client(srv, &scripttest.Sleeps{}, 0)
	msgs := []model.Message{{Role: model.RoleUser, Content: "Check a.go and b.go."}}
	var last response
	for step := range 3 {
		r, err := run(t, p, model.Request{Model: sonnet, System: "You are acpd.", Messages: msgs, Tools: tools, Temperature: new(0.2)})
		require.NoError(t, err, "step %d", step)
		require.NotEmpty(t, r.thinking, "step %d", step)
		assert.NotEmpty(t, r.reasoning, "the thinking text streams as reasoning")
		msgs = append(msgs, r.assistant())
		for _, c := range r.calls {
			msgs = append(msgs, toolResult(c.ID, "package x // "+string(c.Arguments)))
		}
		last = r
	}
	assert.Equal(t, "stop", last.finish)
	assert.Equal(t, "Done: both files are fine.", last.text)
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		assert.Empty(t, r.Rejected, "request %d", i)
		assert.True(t, r.ThinkingOn(), "request %d", i)
		assert.Equal(t, 8192, r.Thinking.BudgetTokens, "medium")
		assert.Greater(t, r.MaxTokens, r.Thinking.BudgetTokens)
		assert.Nil(t, r.Temperature, "no temperature with thinking")
		assert.Equal(t, "sk-ant-test", r.Header.Get("x-api-key"))
		assert.Equal(t, anthropic.APIVersion, r.Header.Get("anthropic-version"))
	}
	// The second request sends the first answer's block back first.
	second := reqs[1].Messages[1]
	require.Equal(t, "assistant", second.Role)
	assert.Equal(t, "thinking", second.Content[0].Type)
	assert.Equal(t, "I should read a.go first.", *second.Content[0].Thinking)
	assert.Equal(t, "tool_use", second.Content[1].Type)
	third := reqs[2].Messages[3]
	assert.Equal(t, []string{"thinking", "redacted_thinking", "text", "tool_use"}, blockTypes(third))
}

func blockTypes(m anthropictest.Message) []string {
	var out []string
	for _, b := range m.Content {
		out = append(out, b.Type)
	}
	return out
}

// What the server rejects, the client surfaces as the provider's message,
// not retried: an altered signature.
func TestClient_AlteredSignatureIsRejected(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t,
		anthropictest.Response{Thinking: "plan", ToolCalls: []anthropictest.ToolCall{{ID: "toolu_1", Name: "read_file"}}},
		anthropictest.Response{Text: "never"},
	)
	p := client(srv, &scripttest.Sleeps{}, 3)
	msgs := []model.Message{{Role: model.RoleUser, Content: "go"}}
	r, err := run(t, p, model.Request{Model: sonnet, Messages: msgs, Tools: tools})
	require.NoError(t, err)
	a := r.assistant()
	a.Thinking[0].Signature = "x" + a.Thinking[0].Signature[1:]
	msgs = append(msgs, a, toolResult("toolu_1", "ok"))
	_, err = run(t, p, model.Request{Model: sonnet, Messages: msgs, Tools: tools})
	var ae *model.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.Status)
	assert.Contains(t, ae.Message, "Invalid `signature` in `thinking` block")
	assert.Len(t, srv.Requests(), 2, "a 400 is not retried")
}

// A history edited before a thinking block (a compaction rewrote the
// first prompt) would bind the block to a different conversation: the
// client drops it, and as the tool loop then lacks its thinking, asks
// without thinking for that request. The server accepts it.
func TestClient_EditedPrefixDropsTheBlock(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t,
		anthropictest.Response{Thinking: "plan", ToolCalls: []anthropictest.ToolCall{{ID: "toolu_1", Name: "read_file"}}},
		anthropictest.Response{Thinking: "unused", Text: "done"},
	)
	p := client(srv, &scripttest.Sleeps{}, 0)
	msgs := []model.Message{{Role: model.RoleUser, Content: "a long first prompt"}}
	r, err := run(t, p, model.Request{Model: sonnet, Messages: msgs, Tools: tools})
	require.NoError(t, err)
	msgs = append(msgs, r.assistant(), toolResult("toolu_1", "ok"))
	msgs[0].Content = "[summary of the conversation so far]"
	r, err = run(t, p, model.Request{Model: sonnet, Messages: msgs, Tools: tools})
	require.NoError(t, err)
	assert.Equal(t, "done", r.text)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Empty(t, reqs[1].Rejected)
	assert.Equal(t, []string{"tool_use"}, blockTypes(reqs[1].Messages[1]), "the stale block is dropped")
	assert.False(t, reqs[1].ThinkingOn(), "thinking stays off until the loop ends")

	// Sent anyway (a block without its recorded prefix is not checked by
	// the client), the server refuses it as the real API's preserved
	// thinking does: what the drop avoids.
	srv.Add(anthropictest.Response{Text: "never"})
	msgs[1].Thinking[0].Prefix = ""
	_, err = run(t, p, model.Request{Model: sonnet, Messages: msgs, Tools: tools})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bound to a different conversation")
}

// 429 with retry-after, 529 overloaded, an in-stream overloaded error and
// a cut stream are all retried; the retry-after is honoured.
func TestClient_Retries(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t,
		anthropictest.Response{Status: http.StatusTooManyRequests, ErrorMessage: "Number of request tokens has exceeded your per-minute rate limit", RetryAfter: "7"},
		anthropictest.Response{Status: 529, ErrorMessage: "Overloaded"},
		anthropictest.Response{Text: "partial", StreamError: "overloaded_error"},
		anthropictest.Response{Text: "cut short", CutAfter: 4},
		anthropictest.Response{Text: "finally"},
	)
	sl := &scripttest.Sleeps{}
	r, err := run(t, client(srv, sl, 4), model.Request{Model: "claude-haiku-4-5", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.NoError(t, err)
	assert.Equal(t, "finally", r.text)
	assert.Equal(t, 2, r.retries, "the two attempts that yielded text are voided")
	d := sl.Got()
	require.Len(t, d, 4)
	assert.Equal(t, 7*time.Second, d[0], "retry-after honoured")

	// Out of retries, a 429 reads as the rate-limit message.
	srv2 := anthropictest.NewServer(t, anthropictest.Response{Status: http.StatusTooManyRequests, ErrorMessage: "slow down"})
	_, err = run(t, client(srv2, &scripttest.Sleeps{}, 0), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.Error(t, err)
	assert.Equal(t, model.RateLimitMessage, err.Error())
	// An authentication failure is final and verbatim.
	srv3 := anthropictest.NewServer(t)
	srv3.SetAPIKey("the-right-key")
	_, err = run(t, client(srv3, &scripttest.Sleeps{}, 3), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	var ae *model.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "authentication_error", ae.Type)
	assert.Equal(t, "invalid x-api-key", ae.Message)
}

// A request past the window gets the API's own overflow body, which the
// session recognises, with both counts.
func TestClient_OverflowIsRecognised(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t, anthropictest.Response{Text: "never"})
	srv.SetTokenLimit(100)
	_, err := run(t, client(srv, &scripttest.Sleeps{}, 3), model.Request{Model: sonnet, Messages: []model.Message{{Role: model.RoleUser, Content: strings.Repeat("long text ", 100)}}})
	require.Error(t, err)
	assert.True(t, model.IsContextOverflow(err), "%v", err)
	assert.Equal(t, 100, model.OverflowLimit(err))
	assert.Equal(t, srv.Requests()[0].Tokens, model.OverflowTokens(err))
	assert.Len(t, srv.Requests(), 1, "an overflow is not retried")
}

// The idle timeout bounds a server that never answers.
func TestClient_RequestTimeout(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); hang.Close() })
	p := anthropic.New(anthropic.Options{BaseURL: hang.URL, HTTPOptions: model.HTTPOptions{RequestTimeout: 50 * time.Millisecond}})
	_, err := run(t, p, model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "anthropic request: no data from the model server")
	assert.False(t, errors.Is(err, context.Canceled))
}

// Cache breakpoints: the system prompt, the last message, and the previous
// request's last message once the conversation outgrows the look-back.
// The growing conversation is read from cache; writes are billed at 1.25×.
func TestClient_CacheBreakpoints(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t)
	srv.SetMinCacheTokens(100)
	p := client(srv, &scripttest.Sleeps{}, 0)
	sys := strings.Repeat("You are a careful coding agent. ", 40)
	cache := &model.Cache{}
	msgs := []model.Message{{Role: model.RoleUser, Content: "start"}}
	for turn := range 4 {
		var calls []anthropictest.ToolCall
		n := 2
		if turn == 2 {
			n = 12 // 24 blocks in one step: past the look-back
		}
		for i := range n {
			calls = append(calls, anthropictest.ToolCall{ID: "toolu_" + string(rune('a'+turn)) + string(rune('a'+i)), Name: "read_file"})
		}
		srv.Add(anthropictest.Response{ToolCalls: calls})
		r, err := run(t, p, model.Request{Model: "claude-haiku-4-5", System: sys, Messages: msgs, Tools: tools, Cache: cache})
		require.NoError(t, err)
		msgs = append(msgs, r.assistant())
		for _, c := range r.calls {
			msgs = append(msgs, toolResult(c.ID, strings.Repeat("file content ", 20)))
		}
	}
	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	for i, r := range reqs {
		require.Empty(t, r.Rejected, "request %d", i)
		n := 0
		for _, m := range r.Messages {
			for _, b := range m.Content {
				if b.CacheControl != nil {
					n++
				}
			}
		}
		assert.LessOrEqual(t, n+1, 4, "request %d: at most four breakpoints", i)
	}
	assert.NotNil(t, reqs[0].System[0].CacheControl, "the system prompt (and the tools before it) is a breakpoint")
	assert.Zero(t, reqs[0].CacheRead)
	assert.Positive(t, reqs[0].CacheWrite)
	for i := 1; i < 4; i++ {
		assert.Greater(t, reqs[i].CacheRead, reqs[i-1].CacheRead, "request %d reads more from cache than the one before", i)
	}
	// Request 3 follows a step of 24 blocks: without the breakpoint at the
	// previous request's end the look-back from the new end would miss it.
	assert.Equal(t, reqs[2].CacheRead+reqs[2].CacheWrite, reqs[3].CacheRead, "request 3 reads everything request 2 cached")
	b := srv.Bill()
	assert.Equal(t, b.Input+(b.CacheWrite*5+3)/4+(b.CacheRead+5)/10, b.FullPriceEquivalent)
}

// Thinking levels: budget mode maps the level to budget_tokens, adaptive
// mode to output_config.effort, "off" sends no thinking; an unknown level
// is an error naming the field and the levels.
func TestClient_ThinkingLevels(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t)
	p := anthropic.New(anthropic.Options{BaseURL: srv.URL, Models: map[string]anthropic.Model{
		"budget":   {Thinking: anthropic.ThinkingBudget, Levels: map[string]int{"low": 1024, "high": 32000}},
		"adaptive": {Thinking: anthropic.ThinkingAdaptive, Levels: map[string]int{"low": 0, "medium": 0, "high": 0}, DefaultLevel: "high"},
	}})
	ask := func(mdl, level string) (anthropictest.Request, error) {
		srv.Add(anthropictest.Response{Text: "ok"})
		_, err := run(t, p, model.Request{Model: mdl, ThinkingLevel: level, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
		reqs := srv.Requests()
		return reqs[len(reqs)-1], err
	}
	r, err := ask("budget", "high")
	require.NoError(t, err)
	assert.Equal(t, 32000, r.Thinking.BudgetTokens)
	assert.Greater(t, r.MaxTokens, 32000, "max_tokens raised past the budget")
	r, err = ask("budget", "")
	require.NoError(t, err)
	assert.Nil(t, r.Thinking, "no default level: no thinking")
	r, err = ask("adaptive", "")
	require.NoError(t, err)
	assert.Equal(t, "adaptive", r.Thinking.Type)
	assert.Equal(t, "high", r.OutputConfig.Effort)
	r, err = ask("adaptive", "off")
	require.NoError(t, err)
	assert.Nil(t, r.Thinking)
	_, err = run(t, p, model.Request{Model: "budget", ThinkingLevel: "medium", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `thinkingLevel: "medium" is not a level of model budget (levels: off, low, high)`)
	assert.Equal(t, []string{"off", "low", "medium", "high"}, anthropic.Levels(anthropic.Model{Thinking: anthropic.ThinkingBudget}))
}

// Bad input names the field; tool ids the API would refuse are mapped,
// call and result alike; an invalid call goes back as an object.
func TestClient_RequestShape(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t, anthropictest.Response{Text: "ok"})
	p := client(srv, &scripttest.Sleeps{}, 0)
	msgs := []model.Message{
		{Role: model.RoleUser, Content: "go", Images: []model.Image{{MimeType: "image/png", Data: "iVBORw0KGgo="}}},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "read_file-1a2b.c", Name: "read_file", Arguments: json.RawMessage(`{"path":"x"}`)},
			{ID: "call 2", Name: "shell", Arguments: json.RawMessage(`"{\"cmd\": "`), Invalid: "arguments are truncated JSON"},
		}},
		toolResult("read_file-1a2b.c", "contents"),
		toolResult("call 2", ""),
		{Role: model.RoleUser, Content: "a reminder riding with the results"},
	}
	_, err := run(t, p, model.Request{Model: "claude-haiku-4-5", Messages: msgs, Tools: tools})
	require.NoError(t, err)
	r := srv.Requests()[0]
	require.Empty(t, r.Rejected)
	require.Len(t, r.Messages, 3)
	assert.Equal(t, []string{"text", "image"}, blockTypes(r.Messages[0]))
	assert.Equal(t, "read_file-1a2b_c", r.Messages[1].Content[0].ID)
	assert.Equal(t, "call_2", r.Messages[1].Content[1].ID)
	assert.JSONEq(t, `{"invalid_arguments":"\"{\\\"cmd\\\": \""}`, string(r.Messages[1].Content[1].Input))
	assert.Equal(t, []string{"tool_result", "tool_result", "text"}, blockTypes(r.Messages[2]))
	assert.Equal(t, "read_file-1a2b_c", r.Messages[2].Content[0].ToolUseID)

	for _, tt := range []struct {
		req  model.Request
		want string
	}{
		{model.Request{Model: "m", Messages: []model.Message{{Role: "robot", Content: "x"}}}, `messages[0].role: unknown role "robot"`},
		{model.Request{Model: "m", Tools: []model.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{`)}}}, "tools[0].parameters: not valid JSON"},
		{model.Request{Model: "m", MaxTokens: -1}, "maxTokens: must not be negative"},
		{model.Request{}, "model is required"},
		{model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleTool, Content: "x"}}}, "messages[0].toolCallId: required"},
	} {
		_, err := run(t, p, tt.req)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "anthropic request: ")
		assert.Contains(t, err.Error(), tt.want)
	}
}

// Tool results are cache-written while the model goes on calling tools;
// in a conversation whose turns end after their results (and the session
// compacts them away), the last breakpoint goes before the results.
func TestClient_ResultsWrittenOnlyWhenReadAgain(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(t)
	srv.SetMinCacheTokens(1)
	p := client(srv, &scripttest.Sleeps{}, 0)
	cache := &model.Cache{}
	var msgs []model.Message
	lastMarked := func() string {
		reqs := srv.Requests()
		r := reqs[len(reqs)-1]
		for i := len(r.Messages) - 1; i >= 0; i-- {
			for _, b := range r.Messages[i].Content {
				if b.CacheControl != nil {
					return b.Type
				}
			}
		}
		return ""
	}
	for turn := range 5 {
		msgs = append(msgs, model.Message{Role: model.RoleUser, Content: "prompt " + string(rune('a'+turn))})
		srv.Add(anthropictest.Response{ToolCalls: []anthropictest.ToolCall{{ID: "toolu_" + string(rune('a'+turn)), Name: "read_file"}}},
			anthropictest.Response{Text: "summary"})
		r, err := run(t, p, model.Request{Model: "m", Messages: msgs, Tools: tools, Cache: cache})
		require.NoError(t, err)
		msgs = append(msgs, r.assistant(), toolResult(r.calls[0].ID, strings.Repeat("x", 400)))
		r, err = run(t, p, model.Request{Model: "m", Messages: msgs, Tools: tools, Cache: cache})
		require.NoError(t, err)
		if turn < 3 {
			assert.Equal(t, "tool_result", lastMarked(), "turn %d: results are written until turns are seen ending", turn)
		} else {
			assert.Equal(t, "tool_use", lastMarked(), "turn %d: results that end the turn are not written", turn)
		}
		msgs = append(msgs, r.assistant())
	}
}
