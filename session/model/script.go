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

// MatchKey returns the first of keys that text contains.
func MatchKey(keys []string, text string) (string, bool) {
	for _, k := range keys {
		if strings.Contains(text, k) {
			return k, true
		}
	}
	return "", false
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
	tc.Arguments, tc.Invalid, _ = normalizeArgs(c.Arguments)
	if len(c.Arguments) > 0 && c.Arguments[0] == '"' {
		var s string
		if json.Unmarshal(c.Arguments, &s) == nil {
			tc.Arguments, tc.Invalid, _ = normalizeArgs([]byte(s))
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
	responses []ScriptResponse
	next      int
	requests  []Request
	keys      []string // Match texts, in file order
	keyed     map[string]*scriptQueue
}

type scriptQueue struct {
	responses []ScriptResponse
	next      int
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
	s := &Script{keyed: map[string]*scriptQueue{}}
	for _, r := range rs {
		if r.Match == "" {
			s.responses = append(s.responses, r)
			continue
		}
		q := s.keyed[r.Match]
		if q == nil {
			q = &scriptQueue{}
			s.keyed[r.Match] = q
			s.keys = append(s.keys, r.Match)
		}
		q.responses = append(q.responses, r)
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
	n := len(s.responses) - s.next
	for _, q := range s.keyed {
		n += len(q.responses) - q.next
	}
	return n
}

// Stream implements Provider.
func (s *Script) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(Event{}, err)
			return
		}
		s.mu.Lock()
		rs, next, what := s.responses, &s.next, "responses"
		if k, ok := MatchKey(s.keys, FirstUserText(req.Messages)); ok {
			q := s.keyed[k]
			rs, next, what = q.responses, &q.next, fmt.Sprintf("responses matching %q", k)
		}
		i := *next
		if i < len(rs) {
			*next++
			s.requests = append(s.requests, req)
		}
		s.mu.Unlock()
		if i >= len(rs) {
			yield(Event{}, fmt.Errorf("%w after %d %s", ErrScriptExhausted, len(rs), what))
			return
		}
		r := rs[i]
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
