package model

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"sync"
)

// ErrScriptExhausted is returned (wrapped, with the count) once every
// response of a model script has been served.
var ErrScriptExhausted = errors.New("model script exhausted")

// ScriptResponse is one line of a model script (JSONL):
//
//	{"text": "…", "reasoning": "…", "toolCalls": [{"id": "…", "name": "…", "arguments": {…}}], "finish": "…", "usage": {"promptTokens": 1}}
//
// arguments may also be a string holding JSON (kept verbatim, so a script
// can feed the model's invalid arguments to the turn).
type ScriptResponse struct {
	Text      string           `json:"text,omitempty"`
	Reasoning string           `json:"reasoning,omitempty"`
	ToolCalls []ScriptToolCall `json:"toolCalls,omitempty"`
	// Finish defaults to "tool_calls" when there are calls, else "stop".
	Finish string `json:"finish,omitempty"`
	Usage  *Usage `json:"usage,omitempty"` // keys promptTokens, completionTokens, totalTokens
	// Error makes this response fail with the message, after its text.
	Error string `json:"error,omitempty"`
	// Match, when set, serves this response only to a request whose first
	// user message contains Match: a subagent's conversation starts with
	// its prompt, so a script keys a subagent's responses on text of that
	// prompt. Responses with the same Match form their own queue, in file
	// order; the others answer every other request.
	Match string `json:"match,omitempty"`
}

// FirstUserText is the text of the first user message of msgs: what a
// script's Match is looked for in.
func FirstUserText(msgs []Message) string {
	for _, m := range msgs {
		if m.Role == RoleUser {
			return m.Content
		}
	}
	return ""
}

// ScriptQueues are a script's responses of type T: the main queue, and a
// queue of its own for each Match text, each served in the order added.
// The zero value is empty and ready; callers serialise access.
type ScriptQueues[T any] struct {
	main  scriptQueue[T]
	keys  []string // Match texts, in the order first added
	keyed map[string]*scriptQueue[T]
}

type scriptQueue[T any] struct {
	items []T
	next  int
}

// Add appends v to the queue of match ("" is the main queue).
func (q *ScriptQueues[T]) Add(match string, v T) {
	if match == "" {
		q.main.items = append(q.main.items, v)
		return
	}
	k := q.keyed[match]
	if k == nil {
		if q.keyed == nil {
			q.keyed = map[string]*scriptQueue[T]{}
		}
		k = &scriptQueue[T]{}
		q.keyed[match] = k
		q.keys = append(q.keys, match)
	}
	k.items = append(k.items, v)
}

// Keyed reports whether any response has a Match: only then does Next
// need the request's first user message.
func (q *ScriptQueues[T]) Keyed() bool { return len(q.keys) > 0 }

// Next takes the next response for a request whose first user message is
// first: from the queue of the first Match text it contains, else from the
// main queue. Without one left, ok is false and exhausted says which queue
// ran out after how many responses ("2 responses matching \"X\"").
func (q *ScriptQueues[T]) Next(first string) (v T, ok bool, exhausted string) {
	from, what := &q.main, "responses"
	for _, k := range q.keys {
		if strings.Contains(first, k) {
			from, what = q.keyed[k], fmt.Sprintf("responses matching %q", k)
			break
		}
	}
	if from.next >= len(from.items) {
		return v, false, fmt.Sprintf("%d %s", len(from.items), what)
	}
	from.next++
	return from.items[from.next-1], true, ""
}

// Served is how many responses of match's queue ("" the main one) were
// taken.
func (q *ScriptQueues[T]) Served(match string) int {
	if match == "" {
		return q.main.next
	}
	if k := q.keyed[match]; k != nil {
		return k.next
	}
	return 0
}

// Remaining is how many responses are left in all queues.
func (q *ScriptQueues[T]) Remaining() int {
	n := len(q.main.items) - q.main.next
	for _, k := range q.keyed {
		n += len(k.items) - k.next
	}
	return n
}

// ScriptToolCall is a tool call in a ScriptResponse. A missing ID is
// generated at load time as "call_<n>" (n counts calls in the file from 1).
type ScriptToolCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ToolCall converts the scripted call to what a provider yields.
func (c ScriptToolCall) ToolCall() ToolCall {
	tc := ToolCall{ID: c.ID, Name: c.Name}
	tc.Arguments, tc.Invalid, _ = NormalizeArgs(c.Arguments)
	if len(c.Arguments) > 0 && c.Arguments[0] == '"' {
		var s string
		if json.Unmarshal(c.Arguments, &s) == nil {
			tc.Arguments, tc.Invalid, _ = NormalizeArgs([]byte(s))
		}
	}
	return tc
}

// FinishReason is the finish reason the response reports.
func (r ScriptResponse) FinishReason() string {
	switch {
	case r.Finish != "":
		return r.Finish
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

// ParseScript reads a model script: one JSON object per line; blank lines
// and lines starting with '#' are skipped. Errors name the line.
func ParseScript(r io.Reader) ([]ScriptResponse, error) {
	br := bufio.NewReader(r)
	var out []ScriptResponse
	calls := 0
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read model script: %w", err)
		}
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			resp, perr := parseScriptLine(t)
			if perr != nil {
				return nil, fmt.Errorf("model script line %d: %w", n, perr)
			}
			for i := range resp.ToolCalls {
				calls++
				if resp.ToolCalls[i].ID == "" {
					resp.ToolCalls[i].ID = fmt.Sprintf("call_%d", calls)
				}
			}
			out = append(out, resp)
		}
		if err != nil {
			return out, nil
		}
	}
}

func parseScriptLine(line []byte) (ScriptResponse, error) {
	var r ScriptResponse
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, err
	}
	if dec.More() {
		return r, errors.New("more than one JSON value on the line")
	}
	for i, c := range r.ToolCalls {
		if c.Name == "" {
			return r, fmt.Errorf("toolCalls[%d].name: required", i)
		}
		if a := bytes.TrimSpace(c.Arguments); len(a) > 0 && a[0] != '{' && a[0] != '"' && !bytes.Equal(a, []byte("null")) {
			return r, fmt.Errorf("toolCalls[%d].arguments: must be an object or a string holding JSON", i)
		}
	}
	return r, nil
}

// Script is the scripted provider (provider = "script"): each Stream call,
// from any session, takes the next response of the script — of the queue
// of its Match when the request's first user message contains one.
type Script struct {
	mu        sync.Mutex
	responses ScriptQueues[ScriptResponse]
	requests  []Request
}

// NewScript loads a model script file.
func NewScript(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open model script: %w", err)
	}
	defer f.Close()
	s, err := NewScriptFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// NewScriptFromReader loads a model script from r.
func NewScriptFromReader(r io.Reader) (*Script, error) {
	rs, err := ParseScript(r)
	if err != nil {
		return nil, err
	}
	s := &Script{}
	for _, r := range rs {
		s.responses.Add(r.Match, r)
	}
	return s, nil
}

// Requests returns the requests received so far, in order.
func (s *Script) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Remaining is how many responses are left, matched ones included.
func (s *Script) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.responses.Remaining()
}

// Stream implements Provider.
func (s *Script) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(Event{}, err)
			return
		}
		s.mu.Lock()
		r, ok, exhausted := s.responses.Next(FirstUserText(req.Messages))
		if ok {
			s.requests = append(s.requests, req)
		}
		s.mu.Unlock()
		if !ok {
			yield(Event{}, fmt.Errorf("%w after %s", ErrScriptExhausted, exhausted))
			return
		}
		var evs []Event
		if r.Reasoning != "" {
			evs = append(evs, Event{Kind: EventReasoning, Text: r.Reasoning})
		}
		if r.Text != "" {
			evs = append(evs, Event{Kind: EventText, Text: r.Text})
		}
		if r.Error == "" {
			for _, c := range r.ToolCalls {
				evs = append(evs, Event{Kind: EventToolCall, ToolCall: c.ToolCall()})
			}
			if r.Usage != nil {
				evs = append(evs, Event{Kind: EventUsage, Usage: *r.Usage})
			}
			evs = append(evs, Event{Kind: EventFinish, FinishReason: r.FinishReason()})
		}
		for _, ev := range evs {
			if err := ctx.Err(); err != nil {
				yield(Event{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
		if r.Error != "" {
			yield(Event{}, errors.New(r.Error))
		}
	}
}
