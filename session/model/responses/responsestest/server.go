// Package responsestest is a scripted OpenAI Responses API server on
// loopback for tests: POST …/responses answers each request with the next
// scripted response as a real event stream (the event sequence, item ids,
// sequence numbers and usage of the recorded streams in the fixtures), and
// checks each request the way the real API does for a client that keeps
// its own history (store: false): a reasoning item must come back with the
// exact encrypted_content it was issued with and before the call it
// preceded, a function_call_output must answer a call in the input, and a
// request larger than the window (SetTokenLimit) gets the real
// context_length_exceeded body.
//
// It serves the Codex CLI as well as acpd's own client (codex-acp's
// config.toml: base_url = Server.BaseURL(), wire_api = "responses").
package responsestest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/scripttest"
)

// Call is a scripted function call. ID is its call_id ("" makes one up);
// Arguments is the JSON text streamed ("" sends "{}").
type Call struct {
	ID        string
	Name      string
	Arguments string
}

// Usage is a scripted usage report; zero fields are filled from the
// server's count of the request.
type Usage struct {
	Input, Cached, Output, Reasoning int
}

// Response is one scripted reply. The zero fault fields give a normal
// stream: a reasoning item (when Reasoning is set), a message (when Text is
// set), then the function calls, then response.completed.
type Response struct {
	// Reasoning is the reasoning summary. A reasoning item is emitted when
	// it is set or Think is true; it carries encrypted_content when the
	// request included "reasoning.encrypted_content".
	Reasoning string
	Think     bool
	Text      string
	Calls     []Call
	Usage     *Usage

	// Status other than 0 or 200 answers with an error body of the real
	// API's shape: ErrorMessage, ErrorCode (e.g. "rate_limit_exceeded"),
	// ErrorType (default "invalid_request_error" for 4xx, "server_error"
	// otherwise) and a Retry-After header when RetryAfter is set.
	Status       int
	ErrorMessage string
	ErrorCode    string
	ErrorType    string
	RetryAfter   string
	// Fail makes a 200 stream fail after its text: an `error` event, then
	// response.failed (as the real API does), with ErrorMessage/ErrorCode.
	Fail bool
	// Incomplete ends the stream with response.incomplete and this reason
	// ("max_output_tokens", "content_filter").
	Incomplete string
	// CutAfter > 0 drops the connection after that many events.
	CutAfter int
	// Hang blocks after the events written until the client goes away.
	Hang  bool
	Delay time.Duration // wait before the response headers
	// Raw, when set, is written verbatim as the body.
	Raw string
	// Match, when set, serves this response only to a request whose first
	// user message contains Match (its own queue, in the order added).
	Match string
}

// FromScript converts one model-script line (model.NewScript's format):
// its reasoning becomes the summary, its calls function calls.
func FromScript(sr model.ScriptResponse) Response {
	r := Response{Reasoning: sr.Reasoning, Text: sr.Text, Match: sr.Match}
	if sr.Error != "" {
		r.Fail, r.ErrorMessage, r.ErrorCode = true, sr.Error, "server_error"
	}
	for _, c := range sr.ToolCalls {
		args := strings.TrimSpace(string(c.Arguments))
		var s string
		if strings.HasPrefix(args, `"`) && json.Unmarshal(c.Arguments, &s) == nil {
			args = s
		}
		r.Calls = append(r.Calls, Call{ID: c.ID, Name: c.Name, Arguments: args})
	}
	if sr.Usage != nil {
		r.Usage = &Usage{Input: sr.Usage.PromptTokens, Cached: sr.Usage.CachedTokens,
			Output: sr.Usage.CompletionTokens, Reasoning: sr.Usage.ReasoningTokens}
	}
	return r
}

// Request is a request the server received.
type Request struct {
	Header http.Header     `json:"-"`
	Body   json.RawMessage `json:"-"`

	Model           string          `json:"model"`
	Instructions    string          `json:"instructions"`
	Input           []Item          `json:"input"`
	Tools           []Tool          `json:"tools"`
	Stream          bool            `json:"stream"`
	Store           *bool           `json:"store"`
	Include         []string        `json:"include"`
	PromptCacheKey  string          `json:"prompt_cache_key"`
	Reasoning       json.RawMessage `json:"reasoning"`
	MaxOutputTokens int             `json:"max_output_tokens"`
	Temperature     *float64        `json:"temperature"`

	// Tokens is the request's size as the server counts it.
	Tokens int `json:"-"`
	// Rejected is the error message the request was refused with, "" when
	// it was served.
	Rejected string `json:"-"`
}

// Item is one input item. Raw is the item as sent.
type Item struct {
	Raw              json.RawMessage `json:"-"`
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	EncryptedContent *string         `json:"encrypted_content"`
	Summary          []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"summary"`
}

// UnmarshalJSON keeps the raw item beside the decoded fields.
func (it *Item) UnmarshalJSON(b []byte) error {
	type plain Item
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*it = Item(p)
	it.Raw = bytes.Clone(b)
	if it.Type == "" && it.Role != "" {
		it.Type = "message" // the easy input message form
	}
	return nil
}

// Text is a message item's text: its content string, or its text parts
// joined.
func (it Item) Text() string {
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(it.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// OutputText is a function_call_output's output: the string, or the text
// parts joined.
func (it Item) OutputText() string {
	var s string
	if json.Unmarshal(it.Output, &s) == nil {
		return s
	}
	return Item{Content: it.Output}.Text()
}

// Tool is one offered tool (function tools have a name; Codex also offers
// custom and built-in ones).
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// issued is what the server handed out and expects back.
type issued struct {
	encrypted string   // the reasoning item's encrypted_content
	calls     []string // call_ids of the function calls it preceded
}

// Server is the scripted Responses server.
type Server struct {
	URL string

	closing <-chan struct{}

	mu     sync.Mutex
	script scripttest.Script[Request, Response]
	limit  int
	// reasoning holds every reasoning item issued, by id; callReasoning
	// the reasoning item ids that preceded each issued call, by call_id.
	reasoning     map[string]issued
	callReasoning map[string][]string
	lax           bool
	seq           int      // response counter, for ids
	models        []string // served by GET …/models
}

// NewServer starts a server on 127.0.0.1 serving responses in order; it is
// closed when the test ends.
func NewServer(t testing.TB, responses ...Response) *Server {
	t.Helper()
	s := &Server{reasoning: map[string]issued{}, callReasoning: map[string][]string{}}
	s.Add(responses...)
	s.URL, s.closing = scripttest.Listen(t, s.handle)
	return s
}

// BaseURL is the base URL a client appends /responses to (…/v1).
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Add appends responses to the script (a response with Match to that
// text's own queue).
func (s *Server) Add(rs ...Response) {
	for _, r := range rs {
		s.script.Add(r.Match, r)
	}
}

// SetResponder installs f, asked first for every valid request: when it
// returns true its response is served and the script is not advanced.
func (s *Server) SetResponder(f func(Request) (Response, bool)) {
	s.script.SetResponder(f)
}

// SetModels sets the model ids GET …/models lists (OpenAI's shape); none by
// default.
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append([]string(nil), ids...)
}

// SetTokenLimit refuses a request counted (CountTokens) above limit with
// the real API's 400 context_length_exceeded body; 0 turns it off.
func (s *Server) SetTokenLimit(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = limit
}

// SetLaxReasoning(true) stops requiring that a returned function call bring
// its reasoning item along (the real API requires it only when the call
// carries its fc_ item id). A reasoning item that is sent is always
// checked.
func (s *Server) SetLaxReasoning(lax bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lax = lax
}

// Requests returns the requests received so far, refused ones included.
func (s *Server) Requests() []Request {
	return s.script.Requests()
}

// Served is how many responses of the main script have been used.
func (s *Server) Served() int {
	return s.script.Served()
}

// CountTokens is the server's tokenizer: about 3.5 characters a token over
// the instructions, every item's text (encrypted reasoning excluded; its
// summary counted), 4 tokens of framing per item, and the tools' JSON.
func CountTokens(req Request) int {
	chars := len(req.Instructions)
	n := 0
	for _, it := range req.Input {
		n += 4
		switch it.Type {
		case "message":
			chars += len(it.Text())
		case "function_call":
			chars += len(it.Name) + len(it.Arguments) + len(it.CallID)
		case "function_call_output":
			chars += len(it.OutputText()) + len(it.CallID)
		case "reasoning":
			for _, p := range it.Summary {
				chars += len(p.Text)
			}
		default:
			chars += len(it.Raw)
		}
	}
	if len(req.Tools) > 0 {
		b, _ := json.Marshal(req.Tools)
		chars += len(b)
	}
	return n + tok(chars)
}

func tok(n int) int { return (n*2 + 6) / 7 }

// apiError is the real API's error body.
func apiError(msg, typ, param, code string) []byte {
	var p, c any
	if param != "" {
		p = param
	}
	if code != "" {
		c = code
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": p, "code": c}})
	return b
}

func writeJSON(w http.ResponseWriter, status int, body []byte, retryAfter string) {
	scripttest.WriteJSON(w, status, "application/json", body, retryAfter)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		s.mu.Lock()
		data := []map[string]any{}
		for _, id := range s.models {
			data = append(data, map[string]any{"id": id, "object": "model", "owned_by": "responsestest"})
		}
		s.mu.Unlock()
		b, _ := json.Marshal(map[string]any{"object": "list", "data": data})
		writeJSON(w, http.StatusOK, b, "")
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		writeJSON(w, http.StatusNotFound, apiError("responsestest: only POST …/responses is served, not "+r.Method+" "+r.URL.Path, "invalid_request_error", "", "not_found"), "")
		return
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError("read body: "+err.Error(), "invalid_request_error", "", ""), "")
		return
	}
	var req Request
	if err := json.Unmarshal(body.Bytes(), &req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError("We could not parse the JSON body of your request. ("+err.Error()+")", "invalid_request_error", "", ""), "")
		return
	}
	req.Header, req.Body = r.Header.Clone(), json.RawMessage(body.Bytes())
	req.Tokens = CountTokens(req)

	s.mu.Lock()
	status, refusal := s.check(req)
	if refusal != nil {
		var e struct {
			Error struct{ Message string }
		}
		_ = json.Unmarshal(refusal, &e)
		req.Rejected = e.Error.Message
		s.script.Record(req)
		s.mu.Unlock()
		writeJSON(w, status, refusal, "")
		return
	}
	s.script.Record(req)
	s.mu.Unlock()

	resp, ok, exhausted := s.script.Next(req, firstUserText(req))
	if !ok {
		writeJSON(w, http.StatusBadRequest, apiError("responsestest: script exhausted after "+exhausted, "invalid_request_error", "", ""), "")
		return
	}
	s.serve(w, r, req, resp)
}

func firstUserText(req Request) string {
	for _, it := range req.Input {
		if it.Type == "message" && it.Role == "user" {
			return it.Text()
		}
	}
	return ""
}

// check validates req as the real API would; it returns the status and
// body of the refusal, or a nil body. Called with s.mu held.
func (s *Server) check(req Request) (int, []byte) {
	bad := func(msg, param, code string) (int, []byte) {
		return http.StatusBadRequest, apiError(msg, "invalid_request_error", param, code)
	}
	if req.Model == "" {
		return bad("Missing required parameter: 'model'.", "model", "missing_required_parameter")
	}
	if !req.Stream {
		return bad("responsestest: only streaming requests (stream: true) are served", "stream", "")
	}
	calls := map[string]bool{}
	seen := map[string]bool{} // reasoning ids present so far
	for i, it := range req.Input {
		switch it.Type {
		case "reasoning":
			is, known := s.reasoning[it.ID]
			switch {
			case it.EncryptedContent == nil || *it.EncryptedContent == "":
				// Without the ciphertext a stateless request can only
				// refer to a stored item, and nothing is stored.
				return bad(fmt.Sprintf("Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", it.ID), "input", "")
			case !known || is.encrypted != *it.EncryptedContent:
				return bad(fmt.Sprintf("The encrypted content for item %s could not be verified. Reason: Encrypted content could not be decrypted or parsed.", it.ID), "", "invalid_encrypted_content")
			}
			j := i + 1
			for j < len(req.Input) && req.Input[j].Type == "reasoning" {
				j++
			}
			if j == len(req.Input) || (req.Input[j].Type != "function_call" && req.Input[j].Type != "message") {
				return bad(fmt.Sprintf("Item '%s' of type 'reasoning' was provided without its required following item.", it.ID), "input", "")
			}
			seen[it.ID] = true
		case "function_call":
			if it.CallID == "" {
				return bad(fmt.Sprintf("Missing required parameter: 'input[%d].call_id'.", i), fmt.Sprintf("input[%d].call_id", i), "missing_required_parameter")
			}
			if !s.lax || strings.HasPrefix(it.ID, "fc_") {
				for _, rid := range s.callReasoning[it.CallID] {
					if !seen[rid] {
						id := it.ID
						if id == "" {
							id = it.CallID
						}
						return bad(fmt.Sprintf("Item '%s' of type 'function_call' was provided without its required 'reasoning' item: '%s'.", id, rid), "input", "")
					}
				}
			}
			calls[it.CallID] = true
		case "function_call_output":
			if !calls[it.CallID] {
				return bad(fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID), "input", "")
			}
		}
	}
	if s.limit > 0 && req.Tokens > s.limit {
		return bad("Your input exceeds the context window of this model. Please adjust your input and try again.", "input", "context_length_exceeded")
	}
	return 0, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, req Request, resp Response) {
	if !scripttest.Wait(r, s.closing, resp.Delay) {
		return
	}
	if resp.Status != 0 && resp.Status != http.StatusOK {
		msg, typ := resp.ErrorMessage, resp.ErrorType
		if msg == "" {
			msg = http.StatusText(resp.Status)
		}
		if typ == "" {
			typ = "server_error"
			if resp.Status < 500 {
				typ = "invalid_request_error"
			}
		}
		writeJSON(w, resp.Status, apiError(msg, typ, "", resp.ErrorCode), resp.RetryAfter)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	var events [][]byte
	if resp.Raw == "" { // a raw body issues no reasoning items or ids
		events = s.events(req, resp)
	}
	scripttest.Stream(w, r, s.closing, scripttest.Faults{Raw: resp.Raw, CutAfter: resp.CutAfter, Hang: resp.Hang}, events)
}

// stream builds one response's events.
type stream struct {
	seq    int
	out    [][]byte
	items  []map[string]any
	respID string
	model  string
}

func (st *stream) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = st.seq
	st.seq++
	b, _ := json.Marshal(fields)
	st.out = append(st.out, []byte("event: "+typ+"\ndata: "+string(b)+"\n\n"))
}

func (st *stream) response(status string, usage, errObj, incomplete any) map[string]any {
	output := st.items
	if output == nil {
		output = []map[string]any{}
	}
	return map[string]any{
		"id": st.respID, "object": "response", "created_at": 1782321662, "status": status,
		"error": errObj, "incomplete_details": incomplete, "instructions": nil, "model": st.model,
		"output": output, "parallel_tool_calls": true, "store": false, "tool_choice": "auto",
		"tools": []any{}, "usage": usage, "metadata": map[string]any{},
	}
}

// events renders resp as the real API streams it. It registers the
// reasoning items and calls it issues, so later requests are checked
// against them.
func (s *Server) events(req Request, resp Response) [][]byte {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	st := &stream{respID: fmt.Sprintf("resp_test%04d", n), model: req.Model}
	created := st.response("in_progress", nil, nil, nil)
	created["output"] = []any{}
	st.emit("response.created", map[string]any{"response": created})
	st.emit("response.in_progress", map[string]any{"response": created})

	encrypt := false
	for _, inc := range req.Include {
		encrypt = encrypt || inc == "reasoning.encrypted_content"
	}
	var reasoningIDs []string
	if resp.Reasoning != "" || resp.Think {
		id := fmt.Sprintf("rs_test%04d", n)
		summary := []map[string]any{}
		if resp.Reasoning != "" {
			summary = append(summary, map[string]any{"type": "summary_text", "text": resp.Reasoning})
		}
		item := map[string]any{"id": id, "type": "reasoning", "summary": summary}
		added := map[string]any{"id": id, "type": "reasoning", "summary": []any{}}
		if encrypt {
			sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d", id, resp.Reasoning, n)))
			enc := "gAAAAA" + base64.RawURLEncoding.EncodeToString(bytes.Repeat(sum[:], 4))
			item["encrypted_content"] = enc
			// The real API's added item carries a different, shorter
			// ciphertext than the final one: a client must keep the final.
			added["encrypted_content"] = "gAAAAA" + base64.RawURLEncoding.EncodeToString(sum[:8])
			s.mu.Lock()
			s.reasoning[id] = issued{encrypted: enc}
			s.mu.Unlock()
			reasoningIDs = append(reasoningIDs, id)
		}
		idx := len(st.items)
		st.emit("response.output_item.added", map[string]any{"output_index": idx, "item": added})
		if resp.Reasoning != "" {
			part := map[string]any{"type": "summary_text", "text": ""}
			st.emit("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": idx, "summary_index": 0, "part": part})
			for _, p := range scripttest.Split(resp.Reasoning, 12) {
				st.emit("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": idx, "summary_index": 0, "delta": p})
			}
			st.emit("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": idx, "summary_index": 0, "text": resp.Reasoning})
			part["text"] = resp.Reasoning
			st.emit("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": idx, "summary_index": 0, "part": part})
		}
		st.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		st.items = append(st.items, item)
	}
	if resp.Text != "" {
		id := fmt.Sprintf("msg_test%04d", n)
		idx := len(st.items)
		st.emit("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
			"id": id, "type": "message", "status": "in_progress", "content": []any{}, "role": "assistant"}})
		st.emit("response.content_part.added", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "annotations": []any{}, "text": ""}})
		for _, p := range scripttest.Split(resp.Text, 8) {
			st.emit("response.output_text.delta", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "delta": p, "logprobs": []any{}})
		}
		if resp.Fail {
			return s.fail(st, resp)
		}
		st.emit("response.output_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "text": resp.Text, "logprobs": []any{}})
		part := map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": resp.Text}
		st.emit("response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "part": part})
		item := map[string]any{"id": id, "type": "message", "status": "completed", "content": []any{part}, "role": "assistant"}
		st.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		st.items = append(st.items, item)
	}
	if resp.Fail {
		return s.fail(st, resp)
	}
	for i, c := range resp.Calls {
		callID := c.ID
		if callID == "" {
			callID = fmt.Sprintf("call_test%04d_%d", n, i)
		}
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		id := fmt.Sprintf("fc_test%04d_%d", n, i)
		idx := len(st.items)
		st.emit("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
			"id": id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": callID, "name": c.Name}})
		for _, p := range scripttest.Split(args, 8) {
			st.emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": idx, "delta": p})
		}
		st.emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx, "arguments": args})
		item := map[string]any{"id": id, "type": "function_call", "status": "completed", "arguments": args, "call_id": callID, "name": c.Name}
		st.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		st.items = append(st.items, item)
		if len(reasoningIDs) > 0 {
			s.mu.Lock()
			s.callReasoning[callID] = reasoningIDs
			s.mu.Unlock()
		}
	}
	u := Usage{}
	if resp.Usage != nil {
		u = *resp.Usage
	}
	if u.Input == 0 {
		u.Input = req.Tokens
	}
	if u.Output == 0 {
		chars := len(resp.Reasoning) + len(resp.Text)
		for _, c := range resp.Calls {
			chars += len(c.Name) + len(c.Arguments)
		}
		u.Output = tok(chars)
		if u.Reasoning == 0 {
			u.Reasoning = tok(len(resp.Reasoning))
		}
	}
	usage := map[string]any{
		"input_tokens": u.Input, "input_tokens_details": map[string]any{"cached_tokens": u.Cached},
		"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning},
		"total_tokens": u.Input + u.Output,
	}
	if resp.Incomplete != "" {
		st.emit("response.incomplete", map[string]any{"response": st.response("incomplete", usage, nil, map[string]any{"reason": resp.Incomplete})})
	} else {
		st.emit("response.completed", map[string]any{"response": st.response("completed", usage, nil, nil)})
	}
	return st.out
}

// fail ends st the way the real API ends a stream that failed after it
// started: an `error` event, then response.failed.
func (s *Server) fail(st *stream, resp Response) [][]byte {
	msg, code := resp.ErrorMessage, resp.ErrorCode
	if msg == "" {
		msg = "The server had an error processing your request."
	}
	if code == "" {
		code = "server_error"
	}
	st.emit("error", map[string]any{"error": map[string]any{"type": code, "code": code, "message": msg, "param": nil}})
	st.emit("response.failed", map[string]any{"response": st.response("failed", nil, map[string]any{"code": code, "message": msg}, nil)})
	return st.out
}
