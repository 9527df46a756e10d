// Package modeltest is a scripted OpenAI-compatible chat-completions server
// on loopback for tests and benchmarks: it serves scripted responses as
// real SSE streams (text in several deltas, tool-call arguments in
// fragments), records the requests it receives, and injects faults.
package modeltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/scripttest"
)

// ToolCall is a scripted tool call. Arguments is the JSON text streamed as
// the arguments string (it may be deliberately invalid); "" sends "{}".
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Response is one scripted reply; the zero fault fields give a normal stream.
type Response struct {
	Text      string
	Reasoning string
	ToolCalls []ToolCall
	Finish    string       // default: "tool_calls" with calls, else "stop"
	Usage     *model.Usage // sent as a separate choices:[] chunk

	// Status other than 0 or 200 replies with a JSON error body instead.
	Status int
	// ErrorMessage is the message of that error body, or, on a 200, an
	// error object sent mid-stream after the text.
	ErrorMessage string
	RetryAfter   string        // Retry-After header value, e.g. "2"
	Delay        time.Duration // wait before the response headers
	// CutAfter > 0 drops the connection after that many data events.
	CutAfter int
	// Hang blocks after the events written (or after CutAfter events)
	// until the client goes away.
	Hang       bool
	OmitFinish bool // send no finish_reason
	// WholeArguments sends each call's arguments in one chunk (as Gemini and
	// some routers do) instead of 8-byte fragments.
	WholeArguments bool
	OmitDone       bool // end the body without data: [DONE]
	// Raw, when set, is written verbatim as the SSE body.
	Raw string
	// Match, when set, serves this response only to a request whose first
	// user message contains Match (a subagent's conversation starts with
	// its prompt): responses with the same Match form their own queue, in
	// the order added, apart from the main script.
	Match string
}

// FromScript converts one model-script line.
func FromScript(sr model.ScriptResponse) Response {
	r := Response{Text: sr.Text, Reasoning: sr.Reasoning, Finish: sr.Finish, Usage: sr.Usage, ErrorMessage: sr.Error, Match: sr.Match}
	for _, c := range sr.ToolCalls {
		args := strings.TrimSpace(string(c.Arguments))
		var s string
		if strings.HasPrefix(args, `"`) && json.Unmarshal(c.Arguments, &s) == nil {
			args = s
		}
		r.ToolCalls = append(r.ToolCalls, ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
	}
	return r
}

// LoadScript reads a model-script JSONL file (the format of model.NewScript).
func LoadScript(path string) ([]Response, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load model script: %w", err)
	}
	srs, err := model.ParseScript(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]Response, len(srs))
	for i, sr := range srs {
		out[i] = FromScript(sr)
	}
	return out, nil
}

// Request is a request the server received, decoded.
type Request struct {
	Header        http.Header     `json:"-"`
	Body          json.RawMessage `json:"-"`
	Model         string          `json:"model"`
	Messages      []Message       `json:"messages"`
	Tools         []Tool          `json:"tools"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens   int      `json:"max_tokens"`
	Temperature *float64 `json:"temperature"`

	// Tokens is the request's size as the server counted it (CountTokens);
	// 0 unless SetTokenLimit, SetReportUsage or SetPrefixCache enabled
	// counting.
	Tokens int `json:"-"`
	// Cached is the part of Tokens served from the simulated prefix cache
	// (SetPrefixCache): what repeats the previous request's prefix.
	Cached int `json:"-"`
	// Refused is set when the request was answered with the
	// context_length_exceeded 400 (it was larger than the token limit).
	Refused bool `json:"-"`
}

// Message is one request message.
type Message struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// Text is the message's text: the content string, or its text parts joined.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts) // not parts: no text
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// firstUserText is the text of the request's first user message, where a
// response's Match is looked for.
func (r Request) firstUserText() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Text()
		}
	}
	return ""
}

// Tool is one offered tool.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Server is the scripted model server. URL is its root; point a provider
// at BaseURL().
type Server struct {
	URL string

	closing <-chan struct{}

	mu sync.Mutex
	// responses are the script, each rendered as SSE events ahead of time:
	// the main queue and one per Match text.
	responses model.ScriptQueues[scripted]
	requests  []Request
	models    []string // served by GET …/models

	// tokenLimit > 0 refuses larger requests as OpenAI does; count makes
	// every request counted and every response report usage.
	tokenLimit int
	count      bool
	responder  func(Request) (Response, bool)

	// prefixCache simulates a provider's prompt cache; prev is the last
	// request as cache units.
	prefixCache bool
	prev        []cacheUnit
}

// SetTokenLimit makes the server a model with a context window of limit
// tokens: a request counted (CountTokens) above it is answered with
// OpenAI's real 400 context_length_exceeded body and uses no scripted
// response. It also turns on SetReportUsage. 0 turns the limit off.
func (s *Server) SetTokenLimit(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenLimit = limit
	if limit > 0 {
		s.count = true
	}
}

// SetReportUsage makes every streamed response without a scripted Usage
// report the request's counted prompt_tokens and its completion's tokens.
func (s *Server) SetReportUsage(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count = on
}

// SetPrefixCache makes the server simulate a provider's prefix cache, as
// OpenAI, DeepSeek, DashScope and Anthropic bill it: a request's cached
// tokens are the part of it that repeats the previous request's prefix
// (tool schemas, then messages in order; the first message that differs
// counts as far as its text is the same), reported in usage as
// prompt_tokens_details.cached_tokens and kept in Request.Cached. It turns
// on SetReportUsage.
func (s *Server) SetPrefixCache(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prefixCache, s.prev = on, nil
	if on {
		s.count = true
	}
}

// cacheUnit is one part of a prompt as the simulated cache compares it.
type cacheUnit struct {
	key        string // the unit's whole content
	role, text string // a message's role and text, for a partial match
	tokens     int
}

// cacheUnits lays a request out as a provider's prompt: the tool schemas,
// then each message (the system message first).
func cacheUnits(req Request) []cacheUnit {
	out := make([]cacheUnit, 0, len(req.Messages)+1)
	if len(req.Tools) > 0 {
		b, _ := json.Marshal(req.Tools)
		out = append(out, cacheUnit{key: string(b), tokens: toolsTokens(req.Tools)})
	}
	for _, m := range req.Messages {
		b, _ := json.Marshal(m)
		out = append(out, cacheUnit{key: string(b), role: m.Role, text: m.Text(), tokens: messageTokens(m)})
	}
	return out
}

// cachedPrefix is how many tokens of cur repeat prev's prefix.
func cachedPrefix(prev, cur []cacheUnit) int {
	n := 0
	for i, u := range cur {
		if i >= len(prev) {
			break
		}
		if u.key == prev[i].key {
			n += u.tokens
			continue
		}
		// The first unit that differs is cached as far as its text is the
		// same (a provider caches token blocks, not whole messages).
		if u.role != prev[i].role {
			break
		}
		a, b := u.text, prev[i].text
		k := 0
		for k < len(a) && k < len(b) && a[k] == b[k] {
			k++
		}
		n += min(tok(k), u.tokens)
		break
	}
	return n
}

// SetResponder installs f, asked first for every request (decoded): when it
// returns true its response is served and the script is not advanced. Tests
// use it for requests they cannot place in the script, such as a
// compaction's summary request.
func (s *Server) SetResponder(f func(Request) (Response, bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = f
}

// CountTokens is the server's tokenizer: about 3.5 characters a token over
// every message's text, reasoning, tool-call names and arguments and tool
// call ids, 4 tokens of framing per message and 8 per call, 1,600 per image,
// and the tool schemas' JSON. Real tokenizers count code and JSON denser
// than the 4 characters a token clients estimate, so this one does too.
func CountTokens(req Request) int {
	n := 0
	for _, m := range req.Messages {
		n += messageTokens(m)
	}
	return n + toolsTokens(req.Tools)
}

// tok is the server tokenizer's count of n bytes.
func tok(n int) int { return (n*2 + 6) / 7 }

func messageTokens(m Message) int {
	chars := len(m.Text()) + len(m.ToolCallID)
	if m.ReasoningContent != nil {
		chars += len(*m.ReasoningContent)
	}
	n := 4 + 1600*bytes.Count(m.Content, []byte(`"image_url"`))
	for _, c := range m.ToolCalls {
		chars += len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
		n += 8
	}
	return n + tok(chars)
}

func toolsTokens(tools []Tool) int {
	if len(tools) == 0 {
		return 0
	}
	b, _ := json.Marshal(tools)
	return tok(len(b))
}

// contextLengthExceeded is OpenAI's body for a request over the window.
func contextLengthExceeded(limit, n int) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", limit, n),
		"type":    "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
	}})
	return b
}

// scripted is a response and its SSE events.
type scripted struct {
	resp   Response
	frames [][]byte
}

// NewServer starts a server on loopback that serves responses in order,
// one per chat-completions request; it is closed when the test ends.
func NewServer(t testing.TB, responses ...Response) *Server {
	t.Helper()
	s := &Server{}
	s.Add(responses...)
	url, closing := scripttest.Listen(t, s.handle)
	// Under mu, which handle takes before reading closing: a request may
	// come from another process, which the race detector cannot see.
	s.mu.Lock()
	s.URL, s.closing = url, closing
	s.mu.Unlock()
	return s
}

// BaseURL is the OpenAI-style base URL (…/v1).
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Add appends responses to the script: to the main script, or a response
// with Match to that text's own queue.
func (s *Server) Add(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		s.responses.Add(r.Match, scripted{r, frames(r)})
	}
}

// ServedMatching is how many responses of match's queue have been used.
func (s *Server) ServedMatching(match string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.responses.Served(match)
}

// SetModels sets the model ids GET …/models lists (none by default).
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append([]string(nil), ids...)
}

// serveModels answers GET …/models with an OpenAI-style model list.
func (s *Server) serveModels(w http.ResponseWriter) {
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	s.mu.Lock()
	list := struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{Object: "list", Data: []entry{}}
	for _, id := range s.models {
		list.Data = append(list.Data, entry{ID: id, Object: "model", OwnedBy: "modeltest"})
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// Requests returns the chat-completions requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		// Bodies are decoded here, not while serving, so the server stays
		// cheap next to the daemon it feeds (benchmarks share the cores).
		var req Request
		if err := json.Unmarshal(r.Body, &req); err != nil {
			panic(fmt.Sprintf("modeltest: request %d is not a valid chat request: %v", i, err))
		}
		req.Header, req.Body, req.Tokens, req.Cached, req.Refused = r.Header, r.Body, r.Tokens, r.Cached, r.Refused
		out[i] = req
	}
	return out
}

// Served is how many responses of the main script (those without Match)
// have been used.
func (s *Server) Served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.responses.Served("")
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		s.serveModels(w)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		writeError(w, http.StatusNotFound, "modeltest: only POST …/chat/completions and GET …/models are served", "")
		return
	}
	var req Request
	// Sized from Content-Length up front: bodies carry the whole history and
	// grow to hundreds of KiB, and doubling into them would cost the server
	// more than the daemon spends writing them.
	body := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+bytes.MinRead))
	if _, err := body.ReadFrom(r.Body); err != nil {
		writeError(w, http.StatusBadRequest, "modeltest: read body: "+err.Error(), "")
		return
	}
	// Full validation waits for Requests(); a cheap check here keeps the
	// server from competing with the daemon it feeds for the CPU.
	if b := bytes.TrimSpace(body.Bytes()); len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		writeError(w, http.StatusBadRequest, "modeltest: body is not a JSON object", "")
		return
	}
	req.Header = r.Header.Clone()
	req.Body = json.RawMessage(body.Bytes())

	s.mu.Lock()
	limit, count, responder, prefixCache, keyed := s.tokenLimit, s.count, s.responder, s.prefixCache, s.responses.Keyed()
	s.mu.Unlock()
	var decoded Request
	if count || responder != nil || keyed {
		if err := json.Unmarshal(req.Body, &decoded); err != nil {
			writeError(w, http.StatusBadRequest, "modeltest: "+err.Error(), "")
			return
		}
		if count {
			req.Tokens = CountTokens(decoded)
		}
		decoded.Header, decoded.Body, decoded.Tokens = req.Header, req.Body, req.Tokens
	}
	if limit > 0 && req.Tokens > limit {
		req.Refused = true
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(contextLengthExceeded(limit, req.Tokens))
		return
	}
	if prefixCache {
		// A refused request is never cached.
		units := cacheUnits(decoded)
		s.mu.Lock()
		req.Cached = cachedPrefix(s.prev, units)
		s.prev = units
		s.mu.Unlock()
		decoded.Cached = req.Cached
	}
	if responder != nil {
		if resp, ok := responder(decoded); ok {
			s.mu.Lock()
			s.requests = append(s.requests, req)
			s.mu.Unlock()
			if count && resp.Usage == nil {
				resp.Usage = usageFor(req.Tokens, req.Cached, resp)
			}
			s.serve(w, r, resp, frames(resp))
			return
		}
	}

	s.mu.Lock()
	s.requests = append(s.requests, req)
	first := ""
	if keyed {
		first = decoded.firstUserText()
	}
	next, ok, exhausted := s.responses.Next(first)
	s.mu.Unlock()
	if !ok {
		// 400 so that clients do not retry into the same wall.
		writeError(w, http.StatusBadRequest, "modeltest: script exhausted after "+exhausted, "")
		return
	}
	resp, evs := next.resp, next.frames
	if count && resp.Usage == nil {
		resp.Usage = usageFor(req.Tokens, req.Cached, resp)
		evs = frames(resp)
	}
	s.serve(w, r, resp, evs)
}

// usageFor is the usage a counting server reports for resp.
func usageFor(prompt, cached int, resp Response) *model.Usage {
	out := len(resp.Text) + len(resp.Reasoning)
	for _, c := range resp.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	completion := tok(out)
	return &model.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		CachedTokens: cached, ReasoningTokens: tok(len(resp.Reasoning))}
}

// serve answers one request with resp (events: resp's pre-rendered frames).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, resp Response, evs [][]byte) {
	if !scripttest.Wait(r, s.closing, resp.Delay) {
		return
	}
	if resp.Status != 0 && resp.Status != http.StatusOK {
		msg := resp.ErrorMessage
		if msg == "" {
			msg = http.StatusText(resp.Status)
		}
		writeError(w, resp.Status, msg, resp.RetryAfter)
		return
	}
	s.stream(w, r, resp, evs)
}

func writeError(w http.ResponseWriter, status int, msg, retryAfter string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "modeltest_error", "param": nil, "code": status,
	}})
	scripttest.WriteJSON(w, status, "application/json", b, retryAfter)
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, resp Response, events [][]byte) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	if scripttest.Stream(w, r, s.closing, scripttest.Faults{Raw: resp.Raw, CutAfter: resp.CutAfter, Hang: resp.Hang}, events) && !resp.OmitDone {
		_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// frames renders a streamed response's data events ahead of time, so that
// serving costs the server one write and one flush per event; benchmarks
// share the cores with the daemon it feeds.
func frames(resp Response) [][]byte {
	if resp.Raw != "" || (resp.Status != 0 && resp.Status != http.StatusOK) {
		return nil
	}
	cs := chunks(resp)
	out := make([][]byte, len(cs))
	for i, c := range cs {
		out[i] = slices.Concat([]byte("data: "), c, []byte("\n\n"))
	}
	return out
}

const chunkID = "chatcmpl-modeltest"

func chunk(delta map[string]any, finish any) []byte {
	// Only the delta varies; the envelope is written by hand so the server
	// stays cheap next to the daemon it feeds.
	d, _ := json.Marshal(delta)
	f, _ := json.Marshal(finish)
	b := make([]byte, 0, len(chunkHead)+len(d)+len(f)+24)
	b = append(b, chunkHead...)
	b = append(b, d...)
	b = append(b, `,"finish_reason":`...)
	b = append(b, f...)
	return append(b, "}]}"...)
}

var chunkHead = `{"id":"` + chunkID + `","object":"chat.completion.chunk","created":0,"model":"modeltest","choices":[{"index":0,"delta":`

// chunks renders a response as the chunk sequence a real server sends.
func chunks(resp Response) [][]byte {
	out := [][]byte{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	for _, p := range scripttest.Split(resp.Reasoning, 6) {
		out = append(out, chunk(map[string]any{"reasoning_content": p}, nil))
	}
	for _, p := range scripttest.Split(resp.Text, 6) {
		out = append(out, chunk(map[string]any{"content": p}, nil))
	}
	if resp.ErrorMessage != "" {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": resp.ErrorMessage, "type": "server_error", "param": nil, "code": nil,
		}})
		return append(out, b)
	}
	for i, c := range resp.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_modeltest_%d", i)
		}
		out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": id, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""},
		}}}, nil))
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		pieces := scripttest.Split(args, 8)
		if resp.WholeArguments {
			pieces = []string{args}
		}
		for _, p := range pieces {
			out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": p},
			}}}, nil))
		}
	}
	if !resp.OmitFinish {
		finish := resp.Finish
		if finish == "" {
			finish = "stop"
			if len(resp.ToolCalls) > 0 {
				finish = "tool_calls"
			}
		}
		out = append(out, chunk(map[string]any{}, finish))
	}
	if resp.Usage != nil {
		b, _ := json.Marshal(map[string]any{
			"id": chunkID, "object": "chat.completion.chunk", "created": 0, "model": "modeltest",
			"choices": []any{},
			"usage":   wireUsage(resp.Usage),
		})
		out = append(out, b)
	}
	return out
}

// wireUsage is u as OpenAI reports it, with the cached and reasoning
// details when there are any.
func wireUsage(u *model.Usage) map[string]any {
	w := map[string]any{
		"prompt_tokens":     u.PromptTokens,
		"completion_tokens": u.CompletionTokens,
		"total_tokens":      u.TotalTokens,
	}
	if u.CachedTokens > 0 {
		w["prompt_tokens_details"] = map[string]int{"cached_tokens": u.CachedTokens}
	}
	if u.ReasoningTokens > 0 {
		w["completion_tokens_details"] = map[string]int{"reasoning_tokens": u.ReasoningTokens}
	}
	return w
}
