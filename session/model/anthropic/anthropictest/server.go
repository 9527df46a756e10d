// Package anthropictest is a scripted Anthropic Messages API server on
// loopback for tests and benchmarks. It streams scripted answers as the
// real API does (message_start, content blocks with their deltas, ping,
// message_delta, message_stop), and it rejects, with the real API's error
// bodies, what the real one rejects: a thinking block whose signature is
// missing or altered or whose conversation changed since it was produced
// (preserved thinking), a tool loop continued with thinking on but without
// the thinking block, tool results that answer no call, more than four
// cache_control breakpoints, empty text, a request past the model's window.
// It caches only at cache_control breakpoints, each looking back 20 blocks,
// above a minimum length, and bills cache writes at 1.25× and reads at 0.1×
// the input price.
package anthropictest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/acpd/acpd/session/model/scripttest"
)

// ToolCall is a scripted tool_use block; Arguments is its input JSON ("" is
// {}).
type ToolCall struct {
	ID, Name, Arguments string
}

// Response is one scripted answer.
type Response struct {
	// Thinking, when the request turned thinking on, is streamed as a
	// signed thinking block before the text and calls; Redacted adds a
	// redacted_thinking block after it. With thinking off neither is sent,
	// as the API does.
	Thinking  string
	Redacted  bool
	Text      string
	ToolCalls []ToolCall
	// StopReason defaults to tool_use with calls, else end_turn.
	StopReason string

	// Status other than 0 or 200 answers with an error body of ErrorType
	// (default by status) and ErrorMessage; RetryAfter sets the header.
	Status       int
	ErrorType    string
	ErrorMessage string
	RetryAfter   string
	// StreamError sends an in-stream error event of this type after the
	// text (overloaded_error), and ends the stream.
	StreamError string
	// CutAfter > 0 drops the connection after that many events.
	CutAfter int
	// Match serves this response only to a request whose first user text
	// contains it (a subagent's conversation), in its own queue.
	Match string
}

// Block is a content block of a request.
type Block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      json.RawMessage `json:"content,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	Thinking     *string         `json:"thinking,omitempty"`
	Signature    *string         `json:"signature,omitempty"`
	Data         string          `json:"data,omitempty"`
	Source       json.RawMessage `json:"source,omitempty"`
	CacheControl *struct {
		Type string `json:"type"`
		TTL  string `json:"ttl,omitempty"`
	} `json:"cache_control,omitempty"`
}

// ResultText is a tool_result's content as text.
func (b Block) ResultText() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var parts []Block
	_ = json.Unmarshal(b.Content, &parts)
	var out strings.Builder
	for _, p := range parts {
		out.WriteString(p.Text)
	}
	return out.String()
}

// Message is one request message.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// UnmarshalJSON accepts content as a string or as blocks.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	var s string
	if json.Unmarshal(raw.Content, &s) == nil {
		m.Content = []Block{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(raw.Content, &m.Content)
}

// Text is the message's text blocks and tool results joined.
func (m Message) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		switch c.Type {
		case "text":
			b.WriteString(c.Text)
		case "tool_result":
			b.WriteString(c.ResultText())
		}
	}
	return b.String()
}

// Tool is one offered tool.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *struct {
		Type string `json:"type"`
	} `json:"cache_control,omitempty"`
}

// Request is a request the server received.
type Request struct {
	Header    http.Header     `json:"-"`
	Body      json.RawMessage `json:"-"`
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    []Block         `json:"-"`
	RawSystem json.RawMessage `json:"system"`
	Messages  []Message       `json:"messages"`
	Tools     []Tool          `json:"tools"`
	Stream    bool            `json:"stream"`
	Thinking  *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	OutputConfig *struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
	Temperature *float64 `json:"temperature"`

	// Tokens is the request's input as the server counted it; Input,
	// CacheWrite and CacheRead split it as billed.
	Tokens, Input, CacheWrite, CacheRead int `json:"-"`
	// Output is the answer's tokens.
	Output int `json:"-"`
	// Refused: answered with the prompt-too-long 400. Rejected: answered
	// with another 400, whose message it holds.
	Refused  bool   `json:"-"`
	Rejected string `json:"-"`
}

// SystemText is the system prompt's text.
func (r Request) SystemText() string {
	var b strings.Builder
	for _, s := range r.System {
		b.WriteString(s.Text)
	}
	return b.String()
}

// FirstUserText is the first user message's text.
func (r Request) FirstUserText() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Text()
		}
	}
	return ""
}

// ThinkingOn reports whether the request turned thinking on.
func (r Request) ThinkingOn() bool {
	return r.Thinking != nil && (r.Thinking.Type == "enabled" || r.Thinking.Type == "adaptive")
}

// Server is the scripted Messages API server. Point a client at URL.
type Server struct {
	URL string

	key []byte // signs thinking blocks

	mu       sync.Mutex
	script   scripttest.Script[Request, Response]
	limit    int
	minCache int
	apiKey   string
	cache    map[string]bool // prefix digests cached at breakpoints
	n        int
	models   []string // listed by GET /v1/models
}

// SetModels sets the model ids GET /v1/models lists.
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append([]string(nil), ids...)
}

// serveModels answers GET /v1/models as the API does.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	apiKey := s.apiKey
	data := make([]map[string]string, 0, len(s.models))
	for _, id := range s.models {
		data = append(data, map[string]string{"type": "model", "id": id, "display_name": id})
	}
	s.mu.Unlock()
	if apiKey != "" && r.Header.Get("x-api-key") != apiKey {
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "has_more": false})
}

// NewServer starts a server on loopback serving responses in order; it is
// closed when the test ends. Caching starts at 1,024 tokens (Claude Sonnet
// and Opus) unless SetMinCacheTokens says otherwise.
func NewServer(t testing.TB, responses ...Response) *Server {
	t.Helper()
	s := &Server{key: []byte("anthropictest signing key"), minCache: 1024, cache: map[string]bool{}}
	s.Add(responses...)
	// Nothing here hangs, so the end-of-test channel is not needed.
	s.URL, _ = scripttest.Listen(t, s.handle)
	return s
}

// Add appends responses to the script.
func (s *Server) Add(rs ...Response) {
	for _, r := range rs {
		s.script.Add(r.Match, r)
	}
}

// SetResponder installs f, asked first for every valid request.
func (s *Server) SetResponder(f func(Request) (Response, bool)) {
	s.script.SetResponder(f)
}

// SetTokenLimit makes the model's window limit tokens (0: none).
func (s *Server) SetTokenLimit(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = limit
}

// SetMinCacheTokens sets the shortest prefix the server caches.
func (s *Server) SetMinCacheTokens(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.minCache = n
}

// SetAPIKey makes the server demand x-api-key: key.
func (s *Server) SetAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	return s.script.Requests()
}

// Remaining is how many scripted responses are left.
func (s *Server) Remaining() int {
	return s.script.Remaining()
}

// Bill is what the accepted requests cost, in tokens.
type Bill struct {
	Requests                     int
	Input, CacheWrite, CacheRead int
	Output                       int
	// FullPriceEquivalent is the input bill at the input price: uncached
	// input, cache writes at 1.25× and reads at 0.1× (output left out).
	FullPriceEquivalent int
}

// Bill sums the requests the server answered.
func (s *Server) Bill() Bill {
	var b Bill
	for _, r := range s.Requests() {
		if r.Refused || r.Rejected != "" {
			continue
		}
		b.Requests++
		b.Input += r.Input
		b.CacheWrite += r.CacheWrite
		b.CacheRead += r.CacheRead
		b.Output += r.Output
	}
	b.FullPriceEquivalent = b.Input + (b.CacheWrite*5+3)/4 + (b.CacheRead+5)/10
	return b
}

// Tok is the server's tokenizer: about 3.5 bytes a token, as the chat
// server in modeltest counts, so the two protocols' bills compare.
func Tok(n int) int { return (n*2 + 6) / 7 }

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		s.serveModels(w, r)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		writeError(w, http.StatusNotFound, "not_found_error", "anthropictest: only POST /v1/messages and GET /v1/models are served", "")
		return
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "read body: "+err.Error(), "")
		return
	}
	req := Request{Header: r.Header.Clone(), Body: json.RawMessage(buf.Bytes())}
	s.mu.Lock()
	apiKey := s.apiKey
	s.mu.Unlock()
	if apiKey != "" && r.Header.Get("x-api-key") != apiKey {
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		s.reject(w, req, "anthropic-version: header is required")
		return
	}
	if err := json.Unmarshal(req.Body, &req); err != nil {
		s.reject(w, req, "There was an error parsing the body: "+err.Error())
		return
	}
	if err := decodeSystem(&req); err != nil {
		s.reject(w, req, err.Error())
		return
	}
	req.Header, req.Body = r.Header.Clone(), json.RawMessage(buf.Bytes())
	p, msg := s.check(&req)
	if msg != "" {
		s.reject(w, req, msg)
		return
	}
	s.mu.Lock()
	limit := s.limit
	s.mu.Unlock()
	req.Tokens = p.total()
	if limit > 0 && req.Tokens > limit {
		req.Refused = true
		s.record(req)
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("prompt is too long: %d tokens > %d maximum", req.Tokens, limit), "")
		return
	}
	s.bill(&req, p)

	resp, ok, exhausted := s.script.Next(req, req.FirstUserText())
	if !ok {
		s.reject(w, req, "anthropictest: script exhausted after "+exhausted)
		return
	}
	if resp.Status != 0 && resp.Status != http.StatusOK {
		req.Rejected = fmt.Sprintf("scripted HTTP %d", resp.Status)
		s.record(req)
		typ := resp.ErrorType
		if typ == "" {
			typ = errorType(resp.Status)
		}
		writeError(w, resp.Status, typ, resp.ErrorMessage, resp.RetryAfter)
		return
	}
	s.stream(w, &req, p, resp)
}

func (s *Server) record(req Request) {
	s.script.Record(req)
}

// reject answers 400 invalid_request_error with msg, as the API words it.
func (s *Server) reject(w http.ResponseWriter, req Request, msg string) {
	req.Rejected = msg
	s.record(req)
	writeError(w, http.StatusBadRequest, "invalid_request_error", msg, "")
}

func errorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	case http.StatusBadRequest:
		return "invalid_request_error"
	}
	return "api_error"
}

// writeError writes the API's error body.
func writeError(w http.ResponseWriter, status int, typ, msg, retryAfter string) {
	b, _ := json.Marshal(map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": typ, "message": msg},
		"request_id": "req_anthropictest",
	})
	scripttest.WriteJSON(w, status, "application/json", b, retryAfter)
}

func decodeSystem(req *Request) error {
	raw := bytes.TrimSpace(req.RawSystem)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		req.System = []Block{{Type: "text", Text: s}}
		return nil
	}
	if err := json.Unmarshal(raw, &req.System); err != nil {
		return fmt.Errorf("system: Input should be a valid string or list of text blocks")
	}
	for i, b := range req.System {
		if b.Type != "text" {
			return fmt.Errorf("system.%d.type: Input should be 'text'", i)
		}
	}
	return nil
}

// prompt is a request laid out as the API caches it: tools, then system
// blocks, then every message's blocks, each with its running prefix digest
// and cumulative token count.
type prompt struct {
	digests     []string // digest through block i
	cum         []int    // tokens through block i
	breakpoints []int    // block indexes with cache_control
	// msgStart[i] is the index of message i's first block.
	msgStart []int
}

func (p prompt) total() int {
	if len(p.cum) == 0 {
		return 0
	}
	return p.cum[len(p.cum)-1]
}

// canon is a block's bytes as the cache and the signatures see it: its
// JSON without cache_control.
func canon(v any) []byte {
	b, _ := json.Marshal(v)
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	delete(m, "cache_control")
	out, _ := json.Marshal(m) // map keys sorted: one form per block
	return out
}

func blockTokens(b Block) int {
	switch b.Type {
	case "text":
		return Tok(len(b.Text))
	case "tool_use":
		return 8 + Tok(len(b.ID)+len(b.Name)+len(b.Input))
	case "tool_result":
		return 4 + Tok(len(b.ToolUseID)+len(b.ResultText()))
	case "thinking":
		if b.Thinking != nil {
			return Tok(len(*b.Thinking))
		}
	case "redacted_thinking":
		return Tok(len(b.Data))
	case "image":
		return 1600
	}
	return 0
}

// check validates req as the API does and lays it out.
func (s *Server) check(req *Request) (prompt, string) {
	var p prompt
	if req.Model == "" {
		return p, "model: Field required"
	}
	if req.MaxTokens <= 0 {
		return p, "max_tokens: Field required"
	}
	if len(req.Messages) == 0 {
		return p, "messages: at least one message is required"
	}
	if req.Messages[0].Role != "user" {
		return p, `messages: first message must use the "user" role`
	}
	if req.ThinkingOn() {
		if req.Thinking.Type == "enabled" {
			if req.Thinking.BudgetTokens < 1024 {
				return p, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
			}
			if req.MaxTokens <= req.Thinking.BudgetTokens {
				return p, "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"
			}
		}
		if req.Temperature != nil && *req.Temperature != 1 {
			return p, "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
		}
	}
	h := sha256.New()
	tokens := 0
	add := func(tag string, v any, n int, marked bool) {
		h.Write([]byte(tag))
		h.Write(canon(v))
		tokens += n
		p.digests = append(p.digests, hex.EncodeToString(h.Sum(nil)))
		p.cum = append(p.cum, tokens)
		if marked {
			p.breakpoints = append(p.breakpoints, len(p.cum)-1)
		}
	}
	for i, t := range req.Tools {
		if t.Name == "" {
			return p, fmt.Sprintf("tools.%d.name: Field required", i)
		}
		add("tool", t, Tok(len(canon(t))), t.CacheControl != nil)
	}
	for _, b := range req.System {
		if b.Text == "" {
			return p, "system: text content blocks must be non-empty"
		}
		add("system", b, Tok(len(b.Text)), b.CacheControl != nil)
	}
	// headDigest is what a thinking block's conversation starts from.
	var prevCalls map[string]bool
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return p, fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i > 0 && req.Messages[i-1].Role == m.Role {
			return p, fmt.Sprintf("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", m.Role)
		}
		if len(m.Content) == 0 {
			return p, fmt.Sprintf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		// The prefix a thinking block in this message is bound to.
		before := hex.EncodeToString(h.Sum(nil))
		p.msgStart = append(p.msgStart, len(p.cum))
		calls := map[string]bool{}
		seenOther := false
		for j, b := range m.Content {
			at := fmt.Sprintf("messages.%d.content.%d", i, j)
			switch b.Type {
			case "text":
				if b.Text == "" {
					return p, "messages: text content blocks must be non-empty"
				}
				seenOther = true
			case "image":
				seenOther = true
			case "tool_use":
				if m.Role != "assistant" {
					return p, at + ": tool_use blocks are only allowed in assistant messages"
				}
				if b.ID == "" || b.Name == "" {
					return p, at + ": tool_use blocks need an id and a name"
				}
				var obj map[string]any
				if json.Unmarshal(b.Input, &obj) != nil {
					return p, at + ".input: Input should be a valid dictionary"
				}
				calls[b.ID] = true
			case "tool_result":
				if m.Role != "user" {
					return p, at + ": tool_result blocks are only allowed in user messages"
				}
				if seenOther {
					return p, fmt.Sprintf("messages.%d: tool_result blocks must come first in the content of a user message", i)
				}
				if !prevCalls[b.ToolUseID] {
					return p, fmt.Sprintf("%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", at, b.ToolUseID)
				}
				delete(prevCalls, b.ToolUseID)
			case "thinking", "redacted_thinking":
				if m.Role != "assistant" {
					return p, at + ": thinking blocks are only allowed in assistant messages"
				}
				if b.CacheControl != nil {
					return p, at + ".cache_control: thinking blocks cannot be marked with cache_control"
				}
				if msg := s.verify(b, at, before); msg != "" {
					return p, msg
				}
			default:
				return p, fmt.Sprintf("%s.type: Input tag '%s' found using 'type' does not match any of the expected tags", at, b.Type)
			}
			add(m.Role, b, blockTokens(b)+boolInt(j == 0)*4, b.CacheControl != nil)
		}
		if m.Role == "user" && len(prevCalls) > 0 {
			return p, fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(keys(prevCalls), ", "))
		}
		if m.Role == "assistant" {
			prevCalls = calls
		} else {
			prevCalls = nil
		}
	}
	if len(p.breakpoints) > 4 {
		return p, fmt.Sprintf("A maximum of 4 blocks with cache_control may be provided. Found %d.", len(p.breakpoints))
	}
	// Continuing a tool loop with thinking on: the assistant message that
	// called the tools must start with its thinking.
	if req.ThinkingOn() && len(req.Messages) >= 2 {
		last := req.Messages[len(req.Messages)-1]
		asst := req.Messages[len(req.Messages)-2]
		if last.Role == "user" && last.Content[0].Type == "tool_result" && asst.Role == "assistant" {
			if t := asst.Content[0].Type; t != "thinking" && t != "redacted_thinking" {
				return p, fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", len(req.Messages)-2, t)
			}
		}
	}
	return p, ""
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// signed is what a signature encodes: the conversation digest the block
// was produced after, and a MAC over it and the block's content.
type signed struct {
	P string `json:"p"`
	M string `json:"m"`
}

func (s *Server) mac(prefix, content string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(prefix))
	m.Write([]byte{0})
	m.Write([]byte(content))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func (s *Server) sign(prefix, content string) string {
	b, _ := json.Marshal(signed{P: prefix, M: s.mac(prefix, content)})
	return base64.StdEncoding.EncodeToString(b)
}

// verify checks a thinking or redacted_thinking block sent back: its
// signature (the redacted data carries its own) must be the server's over
// exactly this content, and bound to the conversation it now follows.
func (s *Server) verify(b Block, at, prefix string) string {
	var token, content string
	if b.Type == "thinking" {
		if b.Signature == nil {
			return at + ".thinking.signature: Field required"
		}
		if b.Thinking == nil {
			return at + ".thinking.thinking: Field required"
		}
		token, content = *b.Signature, *b.Thinking
	} else {
		if b.Data == "" {
			return at + ".redacted_thinking.data: Field required"
		}
		token, content = b.Data, "redacted"
	}
	raw, err := base64.StdEncoding.DecodeString(token)
	var sg signed
	if err != nil || json.Unmarshal(raw, &sg) != nil || !hmac.Equal([]byte(sg.M), []byte(s.mac(sg.P, content))) {
		return at + ": Invalid `signature` in `thinking` block"
	}
	if sg.P != prefix {
		return at + ": thinking block is bound to a different conversation: the system prompt, tools or messages before it changed since it was produced. Send it back only after the same prefix, drop it, or set thinking.block_binding.prefix_mismatch_behavior to \"drop_block\""
	}
	return ""
}

// bill computes what the request reads from and writes to the cache.
func (s *Server) bill(req *Request, p prompt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	read := -1
	for _, bp := range p.breakpoints {
		for j := bp; j >= 0 && j >= bp-20; j-- {
			if s.cache[p.digests[j]] {
				read = max(read, j)
				break
			}
		}
	}
	readTokens := 0
	if read >= 0 {
		readTokens = p.cum[read]
	}
	write := 0
	last := -1
	for _, bp := range p.breakpoints {
		if p.cum[bp] >= s.minCache {
			s.cache[p.digests[bp]] = true
			last = max(last, bp)
		}
	}
	if last > read {
		write = p.cum[last] - readTokens
	}
	req.CacheRead, req.CacheWrite = readTokens, write
	req.Input = req.Tokens - readTokens - write
}

// stream answers req with resp as the API streams a message.
func (s *Server) stream(w http.ResponseWriter, req *Request, p prompt, resp Response) {
	prefix := ""
	if len(p.digests) > 0 {
		prefix = p.digests[len(p.digests)-1]
	}
	var evs []string
	ev := func(typ string, v map[string]any) {
		v["type"] = typ
		b, _ := json.Marshal(v)
		evs = append(evs, "event: "+typ+"\ndata: "+string(b)+"\n\n")
	}
	s.mu.Lock()
	s.n++
	id := fmt.Sprintf("msg_anthropictest_%d", s.n)
	s.mu.Unlock()
	out := 0
	ev("message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": req.Input, "cache_creation_input_tokens": req.CacheWrite,
			"cache_read_input_tokens": req.CacheRead, "output_tokens": 1},
	}})
	evs = append(evs, "event: ping\ndata: {\"type\": \"ping\"}\n\n")
	idx := 0
	if req.ThinkingOn() && resp.Thinking != "" {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
		for _, part := range scripttest.Split(resp.Thinking, 24) {
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "thinking_delta", "thinking": part}})
		}
		sig := s.sign(prefix, resp.Thinking)
		// The whole signature in one delta, as the API sends it: the
		// official SDKs (and Claude Code) keep the last signature_delta
		// rather than joining them, so a split one would come back invalid.
		ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "signature_delta", "signature": sig}})
		ev("content_block_stop", map[string]any{"index": idx})
		out += Tok(len(resp.Thinking))
		idx++
	}
	if req.ThinkingOn() && resp.Redacted {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "redacted_thinking", "data": s.sign(prefix, "redacted")}})
		ev("content_block_stop", map[string]any{"index": idx})
		out += 16
		idx++
	}
	if resp.Text != "" {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, part := range scripttest.Split(resp.Text, 16) {
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": part}})
		}
		ev("content_block_stop", map[string]any{"index": idx})
		out += Tok(len(resp.Text))
		idx++
	}
	if resp.StreamError != "" {
		ev("error", map[string]any{"error": map[string]any{"type": resp.StreamError, "message": "Overloaded"}})
	} else {
		for i, c := range resp.ToolCalls {
			cid := c.ID
			if cid == "" {
				cid = fmt.Sprintf("toolu_%s_%d", id, i)
			}
			args := c.Arguments
			if args == "" {
				args = "{}"
			}
			ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "tool_use", "id": cid, "name": c.Name, "input": map[string]any{}}})
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
			for _, part := range scripttest.Split(args, 8) {
				ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
			ev("content_block_stop", map[string]any{"index": idx})
			out += 8 + Tok(len(c.Name)+len(args))
			idx++
		}
		stop := resp.StopReason
		if stop == "" {
			stop = "end_turn"
			if len(resp.ToolCalls) > 0 {
				stop = "tool_use"
			}
		}
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": out}})
		ev("message_stop", map[string]any{})
	}
	req.Output = out
	s.record(*req)

	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for i, e := range evs {
		if resp.CutAfter > 0 && i >= resp.CutAfter {
			panic(http.ErrAbortHandler) // drops the connection mid-body
		}
		if _, err := w.Write([]byte(e)); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}
