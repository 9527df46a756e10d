package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	segjson "github.com/segmentio/encoding/json"

	"github.com/acpd/acpd/session/model"
)

// Wire shapes of a chat.completions request (spec §2).
type chatRequest struct {
	Model         string         `json:"model,omitempty"`
	Messages      []chatMessage  `json:"messages"`
	Tools         []chatTool     `json:"tools,omitempty"` // some providers reject tools:[]
	ToolChoice    string         `json:"tool_choice,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"` // DashScope refuses max_completion_tokens
	Temperature   *float64       `json:"temperature,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, null (assistant with only tool calls) or parts.
	Content          any     `json:"content"`
	ReasoningContent *string `json:"reasoning_content,omitempty"`
	// ReasoningDetails goes back exactly as OpenRouter sent it.
	ReasoningDetails json.RawMessage `json:"reasoning_details,omitempty"`
	ToolCalls        []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type         string        `json:"type"`
	Text         string        `json:"text,omitempty"`
	ImageURL     *imageURL     `json:"image_url,omitempty"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
	// ExtraContent goes back exactly as Gemini's endpoint sent it.
	ExtraContent json.RawMessage `json:"extra_content,omitempty"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a string holding JSON, not an object
}

type chatTool struct {
	Type         string        `json:"type"`
	Function     chatToolSpec  `json:"function"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type chatToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// MessageCache memoises the wire encoding of a conversation's messages. The
// whole conversation is re-sent on every model request and only grows, so a
// session keeps one cache (Request.Cache) and each request encodes only the
// messages that are new since the last one. Safe for concurrent use; the zero
// value is ready. The caller may edit, truncate or reuse its message slice
// freely between requests: the cache compares against its own copy.
type MessageCache struct {
	mu  sync.Mutex
	src []model.Message // a private deep copy: the caller's backing array may be rewritten
	// enc[i] is src[i]'s wire encoding with a leading comma, ready to be
	// laid after the message before it.
	enc [][]byte

	gen uint64 // counts stores

	headOf  headKey
	headEnc []byte // never written to once stored
}

// head returns the request's fields other than the messages, encoded by
// encode, or the encoding kept from the last request when those fields
// (model, limits, tools) are the same: the tool schemas are re-sent on every
// request and rarely change.
func (c *MessageCache) head(req model.Request, markers bool, encode func() ([]byte, error)) ([]byte, error) {
	if c == nil {
		return encode()
	}
	c.mu.Lock()
	if c.headOf.same(req) && c.headOf.markers == markers {
		h := c.headEnc
		c.mu.Unlock()
		return h, nil
	}
	c.mu.Unlock()
	h, err := encode()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.headOf, c.headEnc = newHeadKey(req), h
	c.headOf.markers = markers
	c.mu.Unlock()
	return h, nil
}

// headKey is a private copy of the fields a request head is encoded from.
type headKey struct {
	valid       bool
	markers     bool
	model       string
	maxTokens   int
	hasTemp     bool
	temperature float64
	tools       []model.ToolSpec
	noToolUse   bool
}

func newHeadKey(req model.Request) headKey {
	k := headKey{valid: true, model: req.Model, maxTokens: req.MaxTokens, tools: make([]model.ToolSpec, len(req.Tools)), noToolUse: req.NoToolUse}
	if req.Temperature != nil {
		k.hasTemp, k.temperature = true, *req.Temperature
	}
	for i, t := range req.Tools {
		t.Parameters = bytes.Clone(t.Parameters)
		k.tools[i] = t
	}
	return k
}

func (k headKey) same(req model.Request) bool {
	if !k.valid || k.model != req.Model || k.maxTokens != req.MaxTokens || k.noToolUse != req.NoToolUse ||
		k.hasTemp != (req.Temperature != nil) || (k.hasTemp && k.temperature != *req.Temperature) ||
		len(k.tools) != len(req.Tools) {
		return false
	}
	for i, t := range req.Tools {
		if k.tools[i].Name != t.Name || k.tools[i].Description != t.Description || !bytes.Equal(k.tools[i].Parameters, t.Parameters) {
			return false
		}
	}
	return true
}

// prefix returns the encodings of the longest prefix of msgs that is
// unchanged since the last store.
func (c *MessageCache) prefix(msgs []model.Message) ([][]byte, uint64) {
	if c == nil {
		return nil, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for n < len(msgs) && n < len(c.src) && model.SameMessage(c.src[n], msgs[n]) {
		n++
	}
	return c.enc[:n:n], c.gen
}

func (c *MessageCache) store(msgs []model.Message, cached, fresh [][]byte, gen uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Copy only what follows the shared prefix, so a growing conversation
	// costs only its new messages. The prefix is recounted when another
	// request stored since prefix ran (the generation moved on); msgs
	// cannot have changed in between, buildRequest holds them.
	n := len(cached)
	if gen != c.gen {
		n = 0
		for n < len(msgs) && n < len(c.src) && model.SameMessage(c.src[n], msgs[n]) {
			n++
		}
	}
	c.gen++
	src := c.src[:n]
	for _, m := range msgs[n:] {
		src = append(src, model.CloneMessage(m))
	}
	// Bodies of requests in flight share c.enc's array: its first len
	// elements are never rewritten. Appending at its end is safe; keeping
	// less than all of it starts a new array.
	enc := c.enc
	if n < len(enc) {
		enc = slices.Clip(enc[:n])
	}
	for i := n; i < len(msgs); i++ {
		if i < len(cached) {
			enc = append(enc, cached[i])
		} else {
			enc = append(enc, fresh[i-len(cached)])
		}
	}
	c.src, c.enc = src, enc
}

// buildRequest converts a Request to the wire body. Bad input is reported
// with the offending field's path. With markers, the system message, the
// last tool and the last message carry cache_control (three markers, within
// the four Anthropic allows): the provider then caches the tools and the
// system prompt, and the conversation up to the newest message, which the
// next request repeats. The markers are laid on at the end, never into the
// MessageCache's encodings: the last message is not last for long.
func buildRequest(req model.Request, cache *MessageCache, markers bool) (requestBody, error) {
	out := chatRequest{
		Model:         req.Model,
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
		MaxTokens:     req.MaxTokens,
		Temperature:   req.Temperature,
	}
	if req.MaxTokens < 0 {
		return requestBody{}, fmt.Errorf("maxTokens: must not be negative, got %d", req.MaxTokens)
	}
	// segmentio encodes about twice as fast as encoding/json, and messages
	// already sent are taken from the cache: the history is re-sent on every
	// model request.
	// Each message is encoded with a leading comma (see MessageCache).
	encode := func(cm chatMessage) ([]byte, error) {
		b, err := segjson.Marshal(cm)
		if err != nil {
			return nil, err
		}
		return append(append(make([]byte, 0, len(b)+1), ','), b...), nil
	}
	cached, gen := cache.prefix(req.Messages)
	if markers && len(cached) == len(req.Messages) && len(cached) > 0 {
		// The last message is marked, so it is encoded afresh.
		cached = cached[:len(cached)-1]
	}
	fresh := make([][]byte, 0, len(req.Messages)-len(cached))
	var lastMarked []byte // the last message's encoding with its marker
	var system []byte
	if req.System != "" {
		var content any = req.System
		if markers {
			content = []chatPart{{Type: "text", Text: req.System, CacheControl: ephemeral}}
		}
		b, err := encode(chatMessage{Role: string(model.RoleSystem), Content: content})
		if err != nil {
			return requestBody{}, err
		}
		system = b
	}
	// Calls without a provider id get call_<msg>_<n>; the tool results that
	// follow with an empty ToolCallID take those ids in order, so the pairs
	// the provider checks stay intact.
	var pending []string
	// thinking is set once an assistant message carried reasoning: the
	// provider is then a thinking model, and DeepSeek's thinking mode
	// rejects a tool-call message without reasoning_content, even "". The
	// field is never sent to a model that has not reasoned (strict servers
	// reject unknown message fields), and only depends on earlier
	// messages, so cached encodings stay valid.
	thinking := false
	for i, m := range req.Messages {
		if i < len(cached) {
			// Already encoded; keep only the bookkeeping below current.
			switch m.Role {
			case model.RoleAssistant:
				thinking = thinking || m.Reasoning != ""
				pending = pending[:0]
				for j, tc := range m.ToolCalls {
					if tc.ID == "" {
						pending = append(pending, fmt.Sprintf("call_%d_%d", i, j))
					}
				}
			case model.RoleTool:
				if m.ToolCallID == "" && len(pending) > 0 {
					pending = pending[1:]
				}
			}
			continue
		}
		field := fmt.Sprintf("messages[%d]", i)
		var cm chatMessage
		switch m.Role {
		case model.RoleSystem:
			cm = chatMessage{Role: string(model.RoleSystem), Content: m.Content}
		case model.RoleUser:
			cm = chatMessage{Role: string(model.RoleUser), Content: m.Content}
			if len(m.Images) > 0 {
				parts := make([]chatPart, 0, len(m.Images)+1)
				if m.Content != "" {
					parts = append(parts, chatPart{Type: "text", Text: m.Content})
				}
				for j, img := range m.Images {
					if img.MimeType == "" || img.Data == "" {
						return requestBody{}, fmt.Errorf("%s.images[%d]: mimeType and data are required", field, j)
					}
					parts = append(parts, chatPart{Type: "image_url", ImageURL: &imageURL{
						URL: "data:" + img.MimeType + ";base64," + img.Data,
					}})
				}
				cm.Content = parts
			}
		case model.RoleAssistant:
			cm = chatMessage{Role: string(model.RoleAssistant), ReasoningDetails: thinkingRaw(m.Thinking, TypeReasoningDetails)}
			if m.Content != "" {
				cm.Content = m.Content
			}
			thinking = thinking || m.Reasoning != ""
			// Reasoning is echoed only with tool calls (spec §6.7): the
			// model needs it to continue a turn it interrupted for tools,
			// while a finished answer's reasoning is spent tokens.
			if thinking && len(m.ToolCalls) > 0 {
				r := m.Reasoning
				cm.ReasoningContent = &r
				if m.Content == "" {
					cm.Content = "" // Ollama rejects null content next to reasoning_content
				}
			}
			pending = pending[:0]
			for j, tc := range m.ToolCalls {
				if tc.Name == "" {
					return requestBody{}, fmt.Errorf("%s.toolCalls[%d].name: required", field, j)
				}
				id := tc.ID
				if id == "" {
					id = fmt.Sprintf("call_%d_%d", i, j)
					pending = append(pending, id)
				}
				cm.ToolCalls = append(cm.ToolCalls, chatToolCall{
					ID: id, Type: "function",
					Function:     chatFunction{Name: tc.Name, Arguments: tc.ArgumentsText()},
					ExtraContent: thinkingRaw(tc.Thinking, TypeExtraContent),
				})
			}
		case model.RoleTool:
			id := m.ToolCallID
			if id == "" {
				if len(pending) == 0 {
					return requestBody{}, fmt.Errorf("%s.toolCallId: required (no preceding call without an id)", field)
				}
				id, pending = pending[0], pending[1:]
			}
			cm = chatMessage{Role: string(model.RoleTool), Content: m.Content, ToolCallID: id}
		default:
			return requestBody{}, fmt.Errorf("%s.role: unknown role %q", field, m.Role)
		}
		b, err := encode(cm)
		if err != nil {
			return requestBody{}, fmt.Errorf("%s: %w", field, err)
		}
		fresh = append(fresh, b)
		if markers && i == len(req.Messages)-1 {
			if mc := marked(cm); mc != nil {
				if lastMarked, err = encode(*mc); err != nil {
					return requestBody{}, fmt.Errorf("%s: %w", field, err)
				}
			}
		}
	}
	cache.store(req.Messages, cached, fresh, gen)
	if lastMarked != nil {
		fresh = append(fresh[:len(fresh)-1:len(fresh)-1], lastMarked)
	}
	head, err := cache.head(req, markers, func() ([]byte, error) {
		for i, t := range req.Tools {
			params, err := t.Schema(i)
			if err != nil {
				return nil, err
			}
			out.Tools = append(out.Tools, chatTool{Type: "function", Function: chatToolSpec{
				Name: t.Name, Description: t.Description, Parameters: params,
			}})
		}
		if markers && len(out.Tools) > 0 {
			out.Tools[len(out.Tools)-1].CacheControl = ephemeral
		}
		if req.NoToolUse && len(out.Tools) > 0 {
			out.ToolChoice = "none"
		}
		return segjson.Marshal(out)
	})
	if err != nil {
		return requestBody{}, err
	}
	// Splice the encoded messages in. `"messages":null` can only occur as
	// the key: inside a JSON string its quotes would be escaped.
	const hole = `"messages":null`
	at := bytes.Index(head, []byte(hole))
	if at < 0 {
		return requestBody{}, fmt.Errorf("model request: messages field missing from %s", head)
	}
	// The body is not copied together: it is sent as lists of parts, and
	// the cached encodings (immutable once stored) are shared with it. The
	// first message in the array drops its leading comma.
	first := [][]byte{head[:at], []byte(`"messages":[`)}
	switch {
	case system != nil:
		first = append(first, system[1:])
	case len(cached) > 0:
		first, cached = append(first, cached[0][1:]), cached[1:]
	case len(fresh) > 0:
		first, fresh = append(first, fresh[0][1:]), fresh[1:]
	}
	last := [][]byte{closeBracket, head[at+len(hole):]}
	body := newRequestBody(first, cached, fresh, last)
	body.markers = markers
	return body, nil
}

var closeBracket = []byte{']'}

// requestBody is a request's JSON body as lists of parts laid end to end.
// The parts are never written to, so one body serves every attempt of a
// request, and the cache's encodings are shared with it rather than copied.
type requestBody struct {
	lists [][][]byte
	size  int64
	// markers: the body carries cache_control markers.
	markers bool
}

func newRequestBody(lists ...[][]byte) requestBody {
	var n int64
	for _, l := range lists {
		for _, p := range l {
			n += int64(len(p))
		}
	}
	return requestBody{lists: lists, size: n}
}

// reader returns a fresh reader over the body.
func (b requestBody) reader() io.Reader { return &partsReader{lists: b.lists} }

// bytes returns the body in one piece.
func (b requestBody) bytes() []byte {
	out := make([]byte, 0, b.size)
	for _, l := range b.lists {
		for _, p := range l {
			out = append(out, p...)
		}
	}
	return out
}

// partsReader reads lists of parts in order without changing them.
type partsReader struct {
	lists [][][]byte
	l, p  int // current list and part
	off   int // read offset in the current part
}

// next returns the unread rest of the current part, skipping empty and
// finished parts; nil at the end.
func (r *partsReader) next() []byte {
	for r.l < len(r.lists) {
		if r.p < len(r.lists[r.l]) {
			if rest := r.lists[r.l][r.p][r.off:]; len(rest) > 0 {
				return rest
			}
			r.p, r.off = r.p+1, 0
			continue
		}
		r.l, r.p, r.off = r.l+1, 0, 0
	}
	return nil
}

func (r *partsReader) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		rest := r.next()
		if rest == nil {
			break
		}
		c := copy(b[n:], rest)
		n += c
		r.off += c
	}
	if n == 0 && len(b) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo hands w each part in turn (a bufio.Writer then coalesces them).
func (r *partsReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		rest := r.next()
		if rest == nil {
			return total, nil
		}
		n, err := w.Write(rest)
		total += int64(n)
		r.off += n
		if err != nil {
			return total, err
		}
	}
}
