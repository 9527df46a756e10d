// Package geminitest is a scripted Gemini API server on loopback for tests:
// POST …/models/{model}:streamGenerateContent?alt=sse answers each request
// with the next scripted response as a real stream (CRLF-framed data
// events, each a whole GenerateContentResponse with running usage), and
// checks each request the way Gemini 3 does: the first function call of
// every step of the current turn must carry the thoughtSignature it was
// issued with (or Google's documented skip value), a step's function
// responses must match its calls in number, and a request larger than the
// window (SetTokenLimit) gets the real "input token count exceeds" 400.
package geminitest

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

// SkipSignature is the documented value that stands in for a signature.
const SkipSignature = "skip_thought_signature_validator"

// Call is a scripted function call. ID "" makes one up (unless the
// response is NoIDs); Arguments is the JSON object text ("" sends {}).
type Call struct {
	ID        string
	Name      string
	Arguments string
}

// Usage is a scripted usage report; zero fields are filled from the
// server's count.
type Usage struct {
	Prompt, Cached, Candidates, Thoughts int
}

// Response is one scripted reply: thought parts (Thought), text (Text),
// then function calls, the last chunk with finishReason STOP. Like Gemini 3
// it signs the first function call of the response, or, without calls, a
// trailing empty text part.
type Response struct {
	Thought string
	Text    string
	Calls   []Call
	Usage   *Usage
	// NoIDs sends calls without ids (Gemini 2.5); Unsigned sends no
	// signatures.
	NoIDs, Unsigned bool
	// FinishReason overrides STOP ("MAX_TOKENS", "MALFORMED_FUNCTION_CALL",
	// "SAFETY").
	FinishReason string

	// Status other than 0 or 200 answers with Google's error body:
	// ErrorMessage and ErrorStatus (e.g. "RESOURCE_EXHAUSTED"); RetryDelay
	// (e.g. "3s") adds a RetryInfo detail, RetryAfter a header.
	Status       int
	ErrorMessage string
	ErrorStatus  string
	RetryDelay   string
	RetryAfter   string
	// StreamError sends an error object as a chunk after the text.
	StreamError bool
	// CutAfter > 0 drops the connection after that many chunks.
	CutAfter int
	Hang     bool // block after the chunks written until the client goes away
	Delay    time.Duration
	Raw      string // written verbatim as the body
	// Match serves this response only to a request whose first user text
	// contains Match (its own queue, in the order added).
	Match string
}

// FromScript converts one model-script line (model.NewScript's format).
func FromScript(sr model.ScriptResponse) Response {
	r := Response{Thought: sr.Reasoning, Text: sr.Text, Match: sr.Match}
	if sr.Error != "" {
		r.StreamError, r.ErrorMessage = true, sr.Error
	}
	for _, c := range sr.ToolCalls {
		args := strings.TrimSpace(string(c.Arguments))
		var s string
		if strings.HasPrefix(args, `"`) && json.Unmarshal(c.Arguments, &s) == nil {
			args = s
		}
		r.Calls = append(r.Calls, Call{ID: c.ID, Name: c.Name, Arguments: args})
	}
	return r
}

// Request is a request the server received.
type Request struct {
	Header http.Header     `json:"-"`
	Body   json.RawMessage `json:"-"`
	Model  string          `json:"-"` // from the path

	Contents          []Content       `json:"contents"`
	SystemInstruction *Content        `json:"systemInstruction"`
	Tools             json.RawMessage `json:"tools"`
	ToolConfig        json.RawMessage `json:"toolConfig"`
	GenerationConfig  *struct {
		MaxOutputTokens int             `json:"maxOutputTokens"`
		Temperature     *float64        `json:"temperature"`
		ThinkingConfig  json.RawMessage `json:"thinkingConfig"`
	} `json:"generationConfig"`

	Tokens   int    `json:"-"`
	Rejected string `json:"-"` // the refusal's message; "" when served
}

// Content is one turn of a request.
type Content struct {
	Role  string `json:"role"`
	Parts []Part `json:"parts"`
}

// Part is one part of a turn.
type Part struct {
	Text         *string `json:"text"`
	Thought      bool    `json:"thought"`
	Signature    string  `json:"thoughtSignature"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
	InlineData *struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	} `json:"inlineData"`
}

// Server is the scripted Gemini server.
type Server struct {
	URL string

	closing <-chan struct{}

	mu     sync.Mutex
	script scripttest.Script[Request, Response]
	limit  int
	// signed maps the key of each signed call issued (callKey) to its
	// signature.
	signed map[string]string
	seq    int
	models []string // served by GET …/models
}

// NewServer starts a server on 127.0.0.1 serving responses in order; it is
// closed when the test ends.
func NewServer(t testing.TB, responses ...Response) *Server {
	t.Helper()
	s := &Server{signed: map[string]string{}}
	s.Add(responses...)
	s.URL, s.closing = scripttest.Listen(t, s.handle)
	return s
}

// BaseURL is the API root with its version (…/v1beta).
func (s *Server) BaseURL() string { return s.URL + "/v1beta" }

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

// SetModels sets the model ids GET …/models lists, as Gemini does
// ({"models":[{"name":"models/ID",…}]}); none by default.
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append([]string(nil), ids...)
}

// SetTokenLimit refuses a request counted above limit with Gemini's 400;
// 0 turns it off.
func (s *Server) SetTokenLimit(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = limit
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
// the system instruction and every part's text, call and response, 4 per
// content, 258 per inline image, and the tools' JSON.
func CountTokens(req Request) int {
	chars, n := 0, 0
	add := func(c Content) {
		n += 4
		for _, p := range c.Parts {
			if p.Text != nil {
				chars += len(*p.Text)
			}
			if p.FunctionCall != nil {
				chars += len(p.FunctionCall.Name) + len(p.FunctionCall.Args)
			}
			if p.FunctionResponse != nil {
				chars += len(p.FunctionResponse.Name) + len(p.FunctionResponse.Response)
			}
			if p.InlineData != nil {
				n += 258
			}
		}
	}
	if req.SystemInstruction != nil {
		add(*req.SystemInstruction)
	}
	for _, c := range req.Contents {
		add(c)
	}
	return n + tok(chars+len(req.Tools))
}

func tok(n int) int { return (n*2 + 6) / 7 }

// googleError is the API's error body.
func googleError(code int, status, msg, retryDelay string) []byte {
	e := map[string]any{"code": code, "message": msg, "status": status}
	if retryDelay != "" {
		e["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retryDelay}}
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return b
}

func writeJSON(w http.ResponseWriter, status int, body []byte, retryAfter string) {
	scripttest.WriteJSON(w, status, "application/json; charset=UTF-8", body, retryAfter)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		// Google serves the list under one version only: a doubled one
		// (…/v1beta/v1beta/models) is a 404 there too.
		if r.URL.Path != "/v1beta/models" && r.URL.Path != "/v1/models" {
			writeJSON(w, http.StatusNotFound, googleError(404, "NOT_FOUND", "geminitest: the model list is GET /v1beta/models or /v1/models, not "+r.URL.Path, ""), "")
			return
		}
		s.mu.Lock()
		list := []map[string]any{}
		for _, id := range s.models {
			list = append(list, map[string]any{"name": "models/" + id, "displayName": id,
				"supportedGenerationMethods": []string{"generateContent", "streamGenerateContent"}})
		}
		s.mu.Unlock()
		b, _ := json.Marshal(map[string]any{"models": list})
		writeJSON(w, http.StatusOK, b, "")
		return
	}
	name, ok := strings.CutSuffix(r.URL.Path, ":streamGenerateContent")
	_, model, found := strings.Cut(name, "/models/")
	if r.Method != http.MethodPost || !ok || !found || model == "" {
		writeJSON(w, http.StatusNotFound, googleError(404, "NOT_FOUND", "geminitest: only POST …/models/{model}:streamGenerateContent is served, not "+r.Method+" "+r.URL.Path, ""), "")
		return
	}
	if r.URL.Query().Get("alt") != "sse" {
		writeJSON(w, http.StatusBadRequest, googleError(400, "INVALID_ARGUMENT", "geminitest: only alt=sse streams are served", ""), "")
		return
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		writeJSON(w, http.StatusBadRequest, googleError(400, "INVALID_ARGUMENT", "read body: "+err.Error(), ""), "")
		return
	}
	var req Request
	if err := json.Unmarshal(body.Bytes(), &req); err != nil {
		writeJSON(w, http.StatusBadRequest, googleError(400, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error(), ""), "")
		return
	}
	req.Header, req.Body, req.Model = r.Header.Clone(), json.RawMessage(body.Bytes()), model
	req.Tokens = CountTokens(req)

	s.mu.Lock()
	refusal := s.check(req)
	if refusal != "" {
		req.Rejected = refusal
		s.script.Record(req)
		s.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, googleError(400, "INVALID_ARGUMENT", refusal, ""), "")
		return
	}
	s.script.Record(req)
	s.mu.Unlock()

	resp, ok, exhausted := s.script.Next(req, firstUserText(req))
	if !ok {
		writeJSON(w, http.StatusBadRequest, googleError(400, "INVALID_ARGUMENT", "geminitest: script exhausted after "+exhausted, ""), "")
		return
	}
	s.serve(w, r, req, resp)
}

func firstUserText(req Request) string {
	for _, c := range req.Contents {
		if c.Role != "user" {
			continue
		}
		for _, p := range c.Parts {
			if p.Text != nil {
				return *p.Text
			}
		}
	}
	return ""
}

// callKey identifies a call: its id when it has one, else its name and
// arguments.
func callKey(id, name string, args []byte) string {
	if id != "" {
		return "id:" + id
	}
	var b bytes.Buffer
	if json.Compact(&b, args) != nil || b.Len() == 0 {
		b.Reset()
		b.WriteString("{}")
	}
	return "call:" + name + ":" + b.String()
}

// check validates req as Gemini 3 does; it returns the refusal's message,
// "" when the request is served. Called with s.mu held.
func (s *Server) check(req Request) string {
	if len(req.Contents) == 0 {
		return "* GenerateContentRequest.contents: contents is not specified"
	}
	// The current turn starts after the last user content with text: only
	// its steps' signatures are enforced, as Gemini 3 does.
	current := 0
	for i, c := range req.Contents {
		switch c.Role {
		case "user", "model":
		default:
			return fmt.Sprintf("Please use a valid role: user, model. (contents[%d].role %q)", i, c.Role)
		}
		if len(c.Parts) == 0 {
			return fmt.Sprintf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i)
		}
		if c.Role == "user" {
			for _, p := range c.Parts {
				if p.Text != nil || p.InlineData != nil {
					current = i + 1
					break
				}
			}
		}
	}
	position := 0 // parts counted across the request, as the real message does
	for i, c := range req.Contents {
		calls := 0
		first := true
		for _, p := range c.Parts {
			position++
			if p.FunctionCall == nil {
				continue
			}
			calls++
			if c.Role != "model" {
				return fmt.Sprintf("* GenerateContentRequest.contents[%d]: a function call must come from the model", i)
			}
			// A call issued without an id comes back with the client's own:
			// it is known by its name and arguments then.
			want, issued := s.signed[callKey(p.FunctionCall.ID, p.FunctionCall.Name, p.FunctionCall.Args)]
			if !issued {
				want, issued = s.signed[callKey("", p.FunctionCall.Name, p.FunctionCall.Args)]
			}
			switch {
			case p.Signature == SkipSignature:
			case p.Signature != "" && issued && p.Signature != want:
				return "Corrupted thought signature."
			case p.Signature != "" && !issued:
				if _, err := base64.StdEncoding.DecodeString(p.Signature); err != nil {
					return "Corrupted thought signature."
				}
			case p.Signature == "" && first && i >= current:
				return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", p.FunctionCall.Name, position)
			}
			first = false
		}
		if calls > 0 {
			responses := 0
			if i+1 < len(req.Contents) {
				for _, p := range req.Contents[i+1].Parts {
					if p.FunctionResponse != nil {
						responses++
					}
				}
			}
			if i+1 < len(req.Contents) && responses != calls {
				return "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
			}
		}
	}
	if s.limit > 0 && req.Tokens > s.limit {
		return fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", req.Tokens, s.limit)
	}
	return ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, req Request, resp Response) {
	if !scripttest.Wait(r, s.closing, resp.Delay) {
		return
	}
	if resp.Status != 0 && resp.Status != http.StatusOK {
		msg, status := resp.ErrorMessage, resp.ErrorStatus
		if msg == "" {
			msg = http.StatusText(resp.Status)
		}
		if status == "" {
			status = map[int]string{429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED"}[resp.Status]
		}
		writeJSON(w, resp.Status, googleError(resp.Status, status, msg, resp.RetryDelay), resp.RetryAfter)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	var events [][]byte
	if resp.Raw == "" { // a raw body issues no signatures
		events = s.chunks(req, resp)
	}
	scripttest.Stream(w, r, s.closing, scripttest.Faults{Raw: resp.Raw, CutAfter: resp.CutAfter, Hang: resp.Hang}, events)
}

// chunks renders resp as Gemini streams it, and registers the signatures
// it issues.
func (s *Server) chunks(req Request, resp Response) [][]byte {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	u := Usage{Prompt: req.Tokens}
	if resp.Usage != nil {
		u = *resp.Usage
		if u.Prompt == 0 {
			u.Prompt = req.Tokens
		}
	}
	thoughts := u.Thoughts
	if thoughts == 0 {
		thoughts = tok(len(resp.Thought))
	}
	candidates := 0
	var out [][]byte
	emit := func(parts []map[string]any, finish string) {
		usage := map[string]any{"promptTokenCount": u.Prompt, "totalTokenCount": u.Prompt + candidates + thoughts,
			"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": u.Prompt}}}
		if candidates > 0 {
			usage["candidatesTokenCount"] = candidates
		}
		if thoughts > 0 {
			usage["thoughtsTokenCount"] = thoughts
		}
		if u.Cached > 0 {
			usage["cachedContentTokenCount"] = u.Cached
		}
		cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
		if finish != "" {
			cand["finishReason"] = finish
		}
		b, _ := json.Marshal(map[string]any{"candidates": []any{cand}, "usageMetadata": usage,
			"modelVersion": req.Model, "responseId": fmt.Sprintf("geminitest%04d", n)})
		out = append(out, []byte("data: "+string(b)+"\r\n\r\n"))
	}
	sign := func(what string) string {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%d|%s", n, what)))
		return base64.StdEncoding.EncodeToString(append(sum[:], sum[:8]...))
	}
	for _, p := range scripttest.Split(resp.Thought, 24) {
		emit([]map[string]any{{"text": p, "thought": true}}, "")
	}
	for _, p := range scripttest.Split(resp.Text, 16) {
		candidates += tok(len(p))
		emit([]map[string]any{{"text": p}}, "")
	}
	if resp.StreamError {
		msg := resp.ErrorMessage
		if msg == "" {
			msg = "An internal error has occurred."
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 500, "message": msg, "status": "INTERNAL"}})
		return append(out, []byte("data: "+string(b)+"\r\n\r\n"))
	}
	finish := resp.FinishReason
	if finish == "" {
		finish = "STOP"
	}
	for i, c := range resp.Calls {
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		fc := map[string]any{"name": c.Name, "args": json.RawMessage(args)}
		id := c.ID
		if id == "" && !resp.NoIDs {
			id = fmt.Sprintf("gt%04d%c", n, 'a'+i%26)
		}
		if id != "" {
			fc["id"] = id
		}
		part := map[string]any{"functionCall": fc}
		if i == 0 && !resp.Unsigned {
			sig := sign(c.Name)
			part["thoughtSignature"] = sig
			s.mu.Lock()
			s.signed[callKey(id, c.Name, []byte(args))] = sig
			s.mu.Unlock()
		}
		candidates += tok(len(c.Name) + len(args))
		last := ""
		if i == len(resp.Calls)-1 {
			last = finish
		}
		emit([]map[string]any{part}, last)
	}
	if len(resp.Calls) == 0 {
		part := map[string]any{"text": ""}
		if !resp.Unsigned {
			part["thoughtSignature"] = sign("text")
		}
		emit([]map[string]any{part}, finish)
	}
	return out
}
