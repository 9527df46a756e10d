package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/chat"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/model/scripttest"
)

func newProvider(srv *modeltest.Server, maxRetries int, sl *scripttest.Sleeps) *chat.Client {
	return chat.New(chat.Options{BaseURL: srv.BaseURL(), APIKey: "sk-test", HTTPOptions: model.HTTPOptions{MaxRetries: maxRetries, BackoffBase: 100 * time.Millisecond, BackoffCap: time.Second, Rand: rand.New(rand.NewPCG(1, 2)), Sleep: sl.Sleep}})
}

// collect drains a stream, merging adjacent text deltas for readability.
func collect(t *testing.T, seq func(func(model.Event, error) bool)) (evs []model.Event, err error) {
	t.Helper()
	for ev, e := range seq {
		if e != nil {
			return evs, e
		}
		if n := len(evs); n > 0 && ev.Kind == model.EventText && evs[n-1].Kind == model.EventText {
			evs[n-1].Text += ev.Text
			continue
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func call(id, name, args string) model.Event {
	return model.Event{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}}
}

func text(s string) model.Event { return model.Event{Kind: model.EventText, Text: s} }

func finish(r string) model.Event { return model.Event{Kind: model.EventFinish, FinishReason: r} }

func TestOpenAI_StreamAndRequest(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{
		Reasoning: "thinking hard",
		Text:      "Let me look at both files.",
		ToolCalls: []modeltest.ToolCall{
			{ID: "call_a", Name: "read_file", Arguments: `{"path": "a.go"}`},
			{ID: "call_b", Name: "read_file", Arguments: `{"path":"b.go","limit":10}`},
		},
		Usage: &model.Usage{PromptTokens: 12, CompletionTokens: 30, TotalTokens: 42},
	})
	sl := &scripttest.Sleeps{}
	temp := 0.2
	req := model.Request{
		Model:  "qwen3-max",
		System: "You are a coder.",
		Messages: []model.Message{
			{Role: model.RoleUser, Content: "look at this", Images: []model.Image{{MimeType: "image/png", Data: "iVBORw0KGgo="}}},
			{Role: model.RoleAssistant, Reasoning: "plan", ToolCalls: []model.ToolCall{
				{ID: "", Name: "glob", Arguments: json.RawMessage(`{ "pattern": "*.go" }`)},
				{ID: "call_z", Name: "grep", Arguments: json.RawMessage(`"{bad"`), Invalid: "arguments are truncated JSON"},
			}},
			{Role: model.RoleTool, Content: "a.go\nb.go"},
			{Role: model.RoleTool, ToolCallID: "call_z", Content: "error: bad arguments"},
		},
		Tools: []model.ToolSpec{
			{Name: "read_file", Description: "Read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "list", Description: "No params"},
		},
		MaxTokens:   512,
		Temperature: &temp,
	}
	evs, err := collect(t, newProvider(srv, 0, sl).Stream(t.Context(), req))
	require.NoError(t, err)
	want := []model.Event{
		{Kind: model.EventReasoning, Text: "thinki"}, {Kind: model.EventReasoning, Text: "ng har"}, {Kind: model.EventReasoning, Text: "d"},
		text("Let me look at both files."),
		call("call_a", "read_file", `{"path":"a.go"}`),
		call("call_b", "read_file", `{"path":"b.go","limit":10}`),
		{Kind: model.EventUsage, Usage: model.Usage{PromptTokens: 12, CompletionTokens: 30, TotalTokens: 42}},
		finish("tool_calls"),
	}
	assert.Equal(t, want, evs)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	got := reqs[0]
	assert.Equal(t, "Bearer sk-test", got.Header.Get("Authorization"))
	assert.JSONEq(t, `{
		"model": "qwen3-max",
		"stream": true,
		"stream_options": {"include_usage": true},
		"max_tokens": 512,
		"temperature": 0.2,
		"messages": [
			{"role": "system", "content": "You are a coder."},
			{"role": "user", "content": [
				{"type": "text", "text": "look at this"},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
			]},
			{"role": "assistant", "content": "", "reasoning_content": "plan", "tool_calls": [
				{"id": "call_1_0", "type": "function", "function": {"name": "glob", "arguments": "{\"pattern\":\"*.go\"}"}},
				{"id": "call_z", "type": "function", "function": {"name": "grep", "arguments": "{bad"}}
			]},
			{"role": "tool", "tool_call_id": "call_1_0", "content": "a.go\nb.go"},
			{"role": "tool", "tool_call_id": "call_z", "content": "error: bad arguments"}
		],
		"tools": [
			{"type": "function", "function": {"name": "read_file", "description": "Read a file",
				"parameters": {"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}},
			{"type": "function", "function": {"name": "list", "description": "No params",
				"parameters": {"type":"object","properties":{}}}}
		]
	}`, string(got.Body))
}

func TestOpenAI_RequestOmitsEmptyToolsAndNullsToolOnlyContent(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Text: "ok"})
	_, err := collect(t, newProvider(srv, 0, &scripttest.Sleeps{}).Stream(t.Context(), model.Request{
		Model: "m",
		Messages: []model.Message{
			{Role: model.RoleUser, Content: "hi"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "list"}}},
			{Role: model.RoleTool, ToolCallID: "c1", Content: "[]"},
		},
	}))
	require.NoError(t, err)
	body := string(srv.Requests()[0].Body)
	assert.NotContains(t, body, `"tools"`)
	assert.Contains(t, body, `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"list","arguments":"{}"}}]}`)
}

func TestOpenAI_BadRequestNamesField(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t)
	tests := []struct {
		name  string
		req   model.Request
		field string
	}{
		{"tool params", model.Request{Tools: []model.ToolSpec{{Name: "x", Parameters: json.RawMessage(`{`)}}}, "tools[0].parameters"},
		{"tool name", model.Request{Tools: []model.ToolSpec{{}}}, "tools[0].name"},
		{"role", model.Request{Messages: []model.Message{{Role: "boss"}}}, "messages[0].role"},
		{"orphan tool result", model.Request{Messages: []model.Message{{Role: model.RoleTool}}}, "messages[0].toolCallId"},
		{"image", model.Request{Messages: []model.Message{{Role: model.RoleUser, Images: []model.Image{{}}}}}, "messages[0].images[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := collect(t, newProvider(srv, 0, &scripttest.Sleeps{}).Stream(t.Context(), tt.req))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
	assert.Zero(t, srv.Served())
}

// A 429's Retry-After, in seconds or as an HTTP date, replaces the
// backoff (capped at 10 minutes); an unusable one falls back to it.
func TestOpenAI_429RetryAfterThenSuccess(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		retryAfter string
		min, max   time.Duration
	}{
		{"3", 3 * time.Second, 3 * time.Second},
		{"0.25", 250 * time.Millisecond, 250 * time.Millisecond},
		{now.Add(30 * time.Second).UTC().Format(http.TimeFormat), 25 * time.Second, 30 * time.Second},
		{now.Add(time.Hour).UTC().Format(http.TimeFormat), 10 * time.Minute, 10 * time.Minute},
		{"86400", 10 * time.Minute, 10 * time.Minute},
		// Backoff instead: attempt n (from 0) waits in [step/2, step] with
		// step = 100ms << n, so attempts 5 and 6 wait 1.6-3.2s and 3.2-6.4s.
		{now.Add(-time.Minute).UTC().Format(http.TimeFormat), 1600 * time.Millisecond, 3200 * time.Millisecond},
		{"soon", 3200 * time.Millisecond, 6400 * time.Millisecond},
	}
	var script []modeltest.Response
	for _, tt := range tests {
		script = append(script, modeltest.Response{Status: http.StatusTooManyRequests, RetryAfter: tt.retryAfter, ErrorMessage: "slow down"})
	}
	srv := modeltest.NewServer(t, append(script, modeltest.Response{Text: "finally"})...)
	sl := &scripttest.Sleeps{}
	p := chat.New(chat.Options{BaseURL: srv.BaseURL(), HTTPOptions: model.HTTPOptions{MaxRetries: len(tests), BackoffBase: 100 * time.Millisecond, BackoffCap: time.Hour, Sleep: sl.Sleep}})
	evs, err := collect(t, p.Stream(t.Context(), model.Request{Model: "m"}))
	require.NoError(t, err)
	assert.Equal(t, []model.Event{text("finally"), finish("stop")}, evs, "no retry marker: nothing was yielded before")
	d := sl.Got()
	require.Len(t, d, len(tests))
	for i, tt := range tests {
		assert.GreaterOrEqual(t, d[i], tt.min, "Retry-After %q", tt.retryAfter)
		assert.LessOrEqual(t, d[i], tt.max, "Retry-After %q", tt.retryAfter)
	}
	assert.Equal(t, len(tests)+1, srv.Served())
}

func TestOpenAI_500ThenSuccessUsesJitteredBackoff(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t,
		modeltest.Response{Status: http.StatusInternalServerError},
		modeltest.Response{Status: http.StatusBadGateway},
		modeltest.Response{Status: http.StatusServiceUnavailable},
		modeltest.Response{Text: "ok"},
	)
	sl := &scripttest.Sleeps{}
	evs, err := collect(t, newProvider(srv, 5, sl).Stream(t.Context(), model.Request{Model: "m"}))
	require.NoError(t, err)
	assert.Equal(t, []model.Event{text("ok"), finish("stop")}, evs)
	d := sl.Got()
	require.Len(t, d, 3)
	// base 100ms doubling: each wait lies in [step/2, step].
	for i, step := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		assert.GreaterOrEqual(t, d[i], step/2, "attempt %d", i)
		assert.LessOrEqual(t, d[i], step, "attempt %d", i)
	}
}

func TestOpenAI_CutMidStreamRetriesAndDiscards(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t,
		modeltest.Response{
			Text:      "First attempt text",
			ToolCalls: []modeltest.ToolCall{{ID: "call_old", Name: "shell", Arguments: `{"cmd":"rm -rf /tmp/x"}`}},
			CutAfter:  7, // role + 4 text deltas + opener + one args fragment
		},
		modeltest.Response{
			Text:      "Second",
			ToolCalls: []modeltest.ToolCall{{ID: "call_new", Name: "read_file", Arguments: `{"path":"x"}`}},
		},
	)
	sl := &scripttest.Sleeps{}
	evs, err := collect(t, newProvider(srv, 2, sl).Stream(t.Context(), model.Request{Model: "m"}))
	require.NoError(t, err)
	require.Len(t, evs, 5)
	assert.Equal(t, text("First attempt text"), evs[0])
	assert.Equal(t, model.EventRetry, evs[1].Kind)
	require.Error(t, evs[1].RetryErr)
	assert.Equal(t, []model.Event{text("Second"), call("call_new", "read_file", `{"path":"x"}`), finish("tool_calls")}, evs[2:])
	assert.Len(t, sl.Got(), 1)
}

// Every mid-stream failure form of spec §4.2 after some output is retried:
// the consumer sees the partial text, then EventRetry carrying the
// provider's message, then only the second attempt.
func TestOpenAI_MidStreamErrorsAreRetried(t *testing.T) {
	t.Parallel()
	const partial = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}` + "\n\n"
	tests := []struct {
		name, body, msg string
	}{
		{"openai/vllm error object", partial + `data: {"error":{"message":"stream failed after output","type":"server_error","param":null,"code":null}}` + "\n\ndata: [DONE]\n\n",
			"stream failed after output"},
		{"openrouter error with finish error", partial + `data: {"id":"x","error":{"code":"server_error","message":"Provider disconnected"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}` + "\n\ndata: [DONE]\n\n",
			"Provider disconnected"},
		{"dashscope error_finish", partial + `data: {"choices":[{"index":0,"delta":{"content":"Throttling: TPM(1/1)"},"finish_reason":"error_finish"}]}` + "\n\ndata: [DONE]\n\n",
			"Throttling: TPM(1/1)"},
		{"llama.cpp error field", partial + `error: {"code":500,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}` + "\n\ndata: [DONE]\n\n",
			"the request exceeds the available context size"},
		{"ollama bare error line", partial + `{"error":"an error was encountered while running the model"}` + "\n",
			model.ErrTruncated.Error()},
		{"done without finish", partial + "data: [DONE]\n\n", model.ErrTruncated.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(t, modeltest.Response{Raw: tt.body}, modeltest.Response{Text: "Hi again"})
			sl := &scripttest.Sleeps{}
			evs, err := collect(t, newProvider(srv, 1, sl).Stream(t.Context(), model.Request{Model: "m"}))
			require.NoError(t, err)
			require.Len(t, evs, 4)
			assert.Equal(t, text("Hello"), evs[0])
			assert.Equal(t, model.EventRetry, evs[1].Kind)
			assert.EqualError(t, evs[1].RetryErr, tt.msg)
			assert.Equal(t, []model.Event{text("Hi again"), finish("stop")}, evs[2:])
			assert.Len(t, sl.Got(), 1)
		})
	}
}

// Once retries are spent, a mid-stream error is returned as the provider
// said it (a 200-status APIError), after the partial output.
func TestOpenAI_MidStreamErrorExhausted(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Text: "Hello", ErrorMessage: "stream failed after output"})
	evs, err := collect(t, newProvider(srv, 0, &scripttest.Sleeps{}).Stream(t.Context(), model.Request{Model: "m"}))
	require.Error(t, err)
	assert.Equal(t, []model.Event{text("Hello")}, evs)
	assert.EqualError(t, err, "stream failed after output")
	var ae *model.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusOK, ae.Status)
}

func TestOpenAI_NonRetryable4xxSurfacesProviderMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		msg    string
	}{
		{"401", http.StatusUnauthorized, "Incorrect API key provided: sk-***"},
		{"400 dashscope loop guard", http.StatusBadRequest, "<400> InternalError.Algo.InvalidParameter: Repetitive tool calls detected in the conversation history."},
		{"403", http.StatusForbidden, "forbidden"},
		{"400 deepseek reasoning_content", http.StatusBadRequest, "The reasoning_content in the thinking mode must be passed back to the API."},
		{"404 ollama model", http.StatusNotFound, `model "qwen9" not found, try pulling it first`},
		{"422", http.StatusUnprocessableEntity, "Unprocessable: messages[1].content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(t, modeltest.Response{Status: tt.status, ErrorMessage: tt.msg}, modeltest.Response{Text: "never"})
			sl := &scripttest.Sleeps{}
			_, err := collect(t, newProvider(srv, 3, sl).Stream(t.Context(), model.Request{Model: "m"}))
			require.Error(t, err)
			assert.Equal(t, tt.msg, err.Error())
			var ae *model.APIError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, tt.status, ae.Status)
			assert.False(t, ae.Retryable())
			assert.Equal(t, 1, srv.Served())
			assert.Empty(t, sl.Got())
		})
	}
}

func TestOpenAI_429ExhaustedUsesQwenMessage(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile("testdata/fixtures/15-openrouter-http-429.json")
	require.NoError(t, err)
	var hits int
	var mu sync.Mutex
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(body)
	}))
	t.Cleanup(hs.Close)
	sl := &scripttest.Sleeps{}
	p := chat.New(chat.Options{BaseURL: hs.URL, HTTPOptions: model.HTTPOptions{MaxRetries: 2, Sleep: sl.Sleep}})
	_, err = collect(t, p.Stream(t.Context(), model.Request{Model: "m"}))
	require.Error(t, err)
	assert.Equal(t, model.RateLimitMessage, err.Error())
	var ae *model.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusTooManyRequests, ae.Status)
	assert.Equal(t, "429", ae.Code, "OpenRouter sends a numeric code")
	assert.Contains(t, ae.Body, "limited to 1 requests per minute")
	mu.Lock()
	assert.Equal(t, 3, hits)
	mu.Unlock()
	assert.Len(t, sl.Got(), 2)
}

func TestOpenAI_ConnectionErrorIsRetried(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	sl := &scripttest.Sleeps{}
	p := chat.New(chat.Options{BaseURL: "http://" + addr + "/v1", HTTPOptions: model.HTTPOptions{MaxRetries: 2, Sleep: sl.Sleep}})
	_, err = collect(t, p.Stream(t.Context(), model.Request{Model: "m"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "model request")
	assert.Len(t, sl.Got(), 2)
}

// abortServer answers every request by hanging, either before the
// response headers or after one text chunk, until the client goes away. It
// reports each request's arrival on arrived and the moment it sees the
// client's connection close on closed.
func abortServer(t *testing.T, midStream bool) (url string, arrived, closed <-chan time.Time) {
	t.Helper()
	arr, clo := make(chan time.Time, 8), make(chan time.Time, 8)
	stop := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if midStream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"partial"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		arr <- time.Now()
		select {
		case <-r.Context().Done():
			clo <- time.Now()
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		hs.Close()
	})
	return hs.URL + "/v1", arr, clo
}

// Cancellation must abort the HTTP request promptly (the issue asks for
// 100 ms). The proof that it was aborted, not merely abandoned, is the
// server seeing the connection close; the bound is generous so a loaded
// machine running -race cannot flake it, and the measured figures are
// logged.
func TestOpenAI_CancelAbortsRequest(t *testing.T) {
	t.Parallel()
	const bound = 2 * time.Second
	for _, midStream := range []bool{false, true} {
		name := "waiting for headers"
		if midStream {
			name = "mid-stream"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url, arrived, closed := abortServer(t, midStream)
			p := chat.New(chat.Options{BaseURL: url, HTTPOptions: model.HTTPOptions{MaxRetries: 3, Sleep: (&scripttest.Sleeps{}).Sleep}})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			texts := make(chan string, 8)
			done := make(chan error, 1)
			go func() {
				var last error
				for ev, err := range p.Stream(ctx, model.Request{Model: "m"}) {
					if err != nil {
						last = err
						break
					}
					texts <- ev.Text
				}
				done <- last
			}()
			select {
			case <-arrived:
			case <-time.After(30 * time.Second):
				t.Fatal("request never reached the server")
			}
			if midStream {
				select {
				case txt := <-texts:
					assert.Equal(t, "partial", txt)
				case <-time.After(30 * time.Second):
					t.Fatal("no text before cancel")
				}
			}
			cancelled := time.Now()
			cancel()
			select {
			case err := <-done:
				assert.ErrorIs(t, err, context.Canceled)
				t.Logf("stream returned %v after cancel", time.Since(cancelled))
			case <-time.After(bound):
				t.Fatalf("stream did not return within %v of cancellation", bound)
			}
			select {
			case at := <-closed:
				t.Logf("server saw the connection close %v after cancel", at.Sub(cancelled))
				assert.Less(t, at.Sub(cancelled), bound)
			case <-time.After(bound):
				t.Fatalf("server did not see the request aborted within %v", bound)
			}
			select {
			case <-arrived:
				t.Fatal("a cancelled request was retried")
			default:
			}
		})
	}
}

// A refused connection is retried, and the retry reaches the server once
// it is up (here: started on the same port during the backoff wait).
func TestOpenAI_ConnectionRefusedThenServerUp(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"up"}}]}`+"\n\n"+
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(hs.Close)
	var waits []time.Duration
	var listenErr error
	sleep := func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d) // Stream calls Sleep from one goroutine
		if len(waits) == 1 {
			l2, err := net.Listen("tcp", addr)
			if err != nil {
				listenErr = err
				return err
			}
			_ = hs.Listener.Close()
			hs.Listener = l2
			hs.Start()
		}
		return ctx.Err()
	}
	p := chat.New(chat.Options{BaseURL: "http://" + addr + "/v1", HTTPOptions: model.HTTPOptions{MaxRetries: 2, Sleep: sleep}})
	evs, err := collect(t, p.Stream(t.Context(), model.Request{Model: "m"}))
	if listenErr != nil {
		t.Skipf("port %s was taken before it could be reused: %v", addr, listenErr)
	}
	require.NoError(t, err)
	assert.Equal(t, []model.Event{text("up"), finish("stop")}, evs, "nothing was yielded before, so no retry marker")
	assert.Len(t, waits, 1)
}

func TestOpenAI_CancelDuringBackoff(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Status: http.StatusTooManyRequests, RetryAfter: "600"})
	ctx, cancel := context.WithCancel(t.Context())
	p := chat.New(chat.Options{BaseURL: srv.BaseURL(), HTTPOptions: model.HTTPOptions{MaxRetries: 1}}) // real timer
	done := make(chan error, 1)
	go func() {
		_, err := collect(t, p.Stream(ctx, model.Request{Model: "m"}))
		done <- err
	}()
	// The request is on record once the 429 has been written; the client
	// is then about to wait 600 s.
	require.Eventually(t, func() bool { return srv.Served() == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Second):
		t.Fatal("backoff wait ignored cancellation")
	}
}

func TestOpenAI_IdleTimeout(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Text: "x", CutAfter: 1, Hang: true})
	p := chat.New(chat.Options{BaseURL: srv.BaseURL(), HTTPOptions: model.HTTPOptions{RequestTimeout: 50 * time.Millisecond}})
	_, err := collect(t, p.Stream(t.Context(), model.Request{Model: "m"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no data from the model server")
	assert.False(t, errors.Is(err, context.Canceled))
}

func TestOpenAI_ConsumerStopsEarly(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Text: "a long answer in many deltas"})
	n := 0
	for range newProvider(srv, 0, &scripttest.Sleeps{}).Stream(t.Context(), model.Request{Model: "m"}) {
		n++
		break
	}
	assert.Equal(t, 1, n)
}

func TestOpenAI_MissingBaseURL(t *testing.T) {
	t.Parallel()
	_, err := collect(t, chat.New(chat.Options{}).Stream(t.Context(), model.Request{}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "baseUrl")
}
