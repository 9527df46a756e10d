package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/model/sse"
)

// Protocol is the name the Messages API's thinking blocks are tagged with.
const Protocol = "anthropic"

// Wire shapes of the stream (docs: "Streaming Messages"). Pointers tell an
// absent count from zero: message_delta repeats only some.
type wireEvent struct {
	Type         string       `json:"type"`
	Index        *int         `json:"index"`
	Message      *wireMessage `json:"message"`
	ContentBlock *wireBlock   `json:"content_block"`
	Delta        *wireDelta   `json:"delta"`
	Usage        *wireUsage   `json:"usage"`
}

type wireMessage struct {
	ID    string     `json:"id"`
	Model string     `json:"model"`
	Usage *wireUsage `json:"usage"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

type wireDelta struct {
	Type        string  `json:"type"`
	Text        string  `json:"text"`
	PartialJSON string  `json:"partial_json"`
	Thinking    string  `json:"thinking"`
	Signature   string  `json:"signature"`
	StopReason  *string `json:"stop_reason"`
}

type wireUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens *int `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// block is one content block being streamed.
type block struct {
	typ      string
	id, name string
	json     bytes.Buffer // tool_use: the joined input_json_delta fragments
	input    json.RawMessage
	text     strings.Builder // thinking text
	sig      strings.Builder // signature_delta fragments, concatenated
	data     string          // redacted_thinking
	stopped  bool
}

// Parser turns the events of one Messages stream into model events. It is
// pure and per stream: make a new one per attempt.
type Parser struct {
	blocks  map[int]*block
	started bool
	stopped bool // message_stop seen
	stop    string
	calls   int
	usage   usageTotals
	out     []model.Event
}

// usageTotals keeps the latest value of each count: message_delta's counts
// are cumulative, and some endpoints send the real input and cache
// numbers only there, so a later value replaces an earlier one.
type usageTotals struct {
	seen                              bool
	input, output, write, read, think int
}

func (u *usageTotals) take(w *wireUsage) {
	if w == nil {
		return
	}
	u.seen = true
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&u.input, w.InputTokens)
	set(&u.output, w.OutputTokens)
	set(&u.write, w.CacheCreationInputTokens)
	set(&u.read, w.CacheReadInputTokens)
	if w.OutputTokensDetails != nil {
		set(&u.think, w.OutputTokensDetails.ThinkingTokens)
	}
}

// usage is the neutral form: input_tokens counts only the uncached input,
// so the whole prompt is its sum with the cache writes and reads.
func (u usageTotals) usage() model.Usage {
	in, out := max(u.input, 0)+max(u.write, 0)+max(u.read, 0), max(u.output, 0)
	return model.Usage{
		PromptTokens: in, CompletionTokens: out, TotalTokens: in + out,
		CachedTokens: max(u.read, 0), CacheWriteTokens: max(u.write, 0),
		ReasoningTokens: min(max(u.think, 0), out),
	}
}

// NewParser returns a Parser for one stream.
func NewParser() *Parser { return &Parser{blocks: map[int]*block{}} }

// errorf is a malformed-stream error naming the protocol and the field.
func errorf(format string, args ...any) error {
	return fmt.Errorf("anthropic stream: "+format, args...)
}

// Feed takes one event's data and returns the events it completes.
func (p *Parser) Feed(data []byte) ([]model.Event, error) {
	p.out = p.out[:0]
	var ev wireEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, errorf("event is not JSON: %v", err)
	}
	if p.stopped && ev.Type != "ping" && ev.Type != "error" {
		// Nothing may follow message_stop; tolerate it rather than fail
		// an answer that is complete.
		return nil, nil
	}
	switch ev.Type {
	case "ping":
	case "error":
		return nil, streamError(data)
	case "message_start":
		if ev.Message == nil {
			return nil, errorf("message_start: field message missing")
		}
		p.started = true
		p.usage.take(ev.Message.Usage)
	case "content_block_start":
		i, err := p.index(ev, "content_block_start")
		if err != nil {
			return nil, err
		}
		if ev.ContentBlock == nil {
			return nil, errorf("content_block_start index %d: field content_block missing", i)
		}
		if _, dup := p.blocks[i]; dup {
			return nil, errorf("content_block_start index %d: block already started", i)
		}
		cb := ev.ContentBlock
		b := &block{typ: cb.Type, id: cb.ID, name: cb.Name, data: cb.Data}
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				p.out = append(p.out, model.Event{Kind: model.EventText, Text: cb.Text})
			}
		case "thinking":
			b.text.WriteString(cb.Thinking)
			b.sig.WriteString(cb.Signature)
			if cb.Thinking != "" {
				p.out = append(p.out, model.Event{Kind: model.EventReasoning, Text: cb.Thinking})
			}
		case "tool_use":
			if cb.Name == "" {
				return nil, errorf("content_block_start index %d: tool_use without a name", i)
			}
			// The start carries input {} and the deltas the real input; a
			// non-empty start input stands when no delta follows.
			b.input = cb.Input
		case "redacted_thinking":
			if cb.Data == "" {
				return nil, errorf("content_block_start index %d: redacted_thinking without data", i)
			}
		}
		p.blocks[i] = b
	case "content_block_delta":
		b, i, err := p.open(ev, "content_block_delta")
		if err != nil {
			return nil, err
		}
		if ev.Delta == nil {
			return nil, errorf("content_block_delta index %d: field delta missing", i)
		}
		d := ev.Delta
		switch d.Type {
		case "text_delta":
			if b.typ != "text" {
				return nil, errorf("content_block_delta index %d: text_delta in a %s block", i, b.typ)
			}
			if d.Text != "" {
				p.out = append(p.out, model.Event{Kind: model.EventText, Text: d.Text})
			}
		case "input_json_delta":
			if b.typ != "tool_use" {
				return nil, errorf("content_block_delta index %d: input_json_delta in a %s block", i, b.typ)
			}
			b.json.WriteString(d.PartialJSON)
		case "thinking_delta":
			if b.typ != "thinking" {
				return nil, errorf("content_block_delta index %d: thinking_delta in a %s block", i, b.typ)
			}
			b.text.WriteString(d.Thinking)
			if d.Thinking != "" {
				p.out = append(p.out, model.Event{Kind: model.EventReasoning, Text: d.Thinking})
			}
		case "signature_delta":
			if b.typ != "thinking" {
				return nil, errorf("content_block_delta index %d: signature_delta in a %s block", i, b.typ)
			}
			// Concatenated, never replaced: a signature may come in parts.
			b.sig.WriteString(d.Signature)
		}
		// citations_delta and deltas of newer kinds carry nothing acpd keeps.
	case "content_block_stop":
		b, i, err := p.open(ev, "content_block_stop")
		if err != nil {
			return nil, err
		}
		b.stopped = true
		if err := p.finishBlock(i, b); err != nil {
			return nil, err
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != nil {
			p.stop = *ev.Delta.StopReason
		}
		p.usage.take(ev.Usage)
	case "message_stop":
		p.stopped = true
	}
	// Unknown event types are tolerated, as the API asks of clients.
	return p.out, nil
}

func (p *Parser) index(ev wireEvent, what string) (int, error) {
	if !p.started {
		return 0, errorf("%s before message_start", what)
	}
	if ev.Index == nil {
		return 0, errorf("%s: field index missing", what)
	}
	if *ev.Index < 0 {
		return 0, errorf("%s: index %d is negative", what, *ev.Index)
	}
	return *ev.Index, nil
}

// open returns the started, not yet stopped block of ev's index.
func (p *Parser) open(ev wireEvent, what string) (*block, int, error) {
	i, err := p.index(ev, what)
	if err != nil {
		return nil, 0, err
	}
	b := p.blocks[i]
	if b == nil {
		return nil, i, errorf("%s index %d: no such block was started", what, i)
	}
	if b.stopped {
		return nil, i, errorf("%s index %d: block already stopped", what, i)
	}
	return b, i, nil
}

// finishBlock emits what a stopped block completes: a tool call, or a
// thinking block to keep.
func (p *Parser) finishBlock(i int, b *block) error {
	switch b.typ {
	case "tool_use":
		raw := b.json.Bytes()
		if len(bytes.TrimSpace(raw)) == 0 && len(b.input) > 0 {
			raw = b.input
		}
		args, invalid, _ := model.NormalizeArgs(raw)
		p.calls++
		p.out = append(p.out, model.Event{Kind: model.EventToolCall, ToolCall: model.ToolCall{
			ID: b.id, Name: b.name, Arguments: args, Invalid: invalid,
		}})
	case "thinking":
		sig := b.sig.String()
		if sig == "" {
			// A thinking block without its signature cannot be sent back
			// (the API rejects it), and the tool loop would fail on the
			// next request: better to fail and retry this one.
			return errorf("content_block_stop index %d: thinking block without a signature", i)
		}
		p.out = append(p.out, model.Event{Kind: model.EventThinking, Thinking: model.Thinking{
			Protocol: Protocol, Type: "thinking", Text: b.text.String(), Signature: sig,
		}})
	case "redacted_thinking":
		p.out = append(p.out, model.Event{Kind: model.EventThinking, Thinking: model.Thinking{
			Protocol: Protocol, Type: "redacted_thinking", Data: b.data,
		}})
	}
	return nil
}

// Finish ends the stream: the usage and the finish reason, or an error when
// the stream stopped short.
func (p *Parser) Finish() ([]model.Event, error) {
	p.out = p.out[:0]
	if !p.started {
		return nil, errorf("ended before message_start")
	}
	for i, b := range p.blocks {
		if !b.stopped {
			return nil, fmt.Errorf("%w (anthropic: block %d was never stopped)", model.ErrTruncated, i)
		}
	}
	if !p.stopped && p.stop == "" {
		return nil, fmt.Errorf("%w (anthropic: no message_stop)", model.ErrTruncated)
	}
	if p.usage.seen {
		p.out = append(p.out, model.Event{Kind: model.EventUsage, Usage: p.usage.usage()})
	}
	p.out = append(p.out, model.Event{Kind: model.EventFinish, FinishReason: finishReason(p.stop, p.calls)})
	return p.out, nil
}

// finishReason maps a stop_reason onto the neutral names. Tool use is
// decided by the calls, as on every protocol.
func finishReason(stop string, calls int) string {
	switch {
	case calls > 0:
		return "tool_calls"
	case stop == "max_tokens", stop == "model_context_window_exceeded":
		return "length"
	case stop == "refusal":
		return "content_filter"
	}
	// end_turn, stop_sequence, pause_turn (server tools only, which acpd
	// never offers) and reasons of the future.
	return "stop"
}

// streamError is an in-stream `error` event as an APIError: retried like
// any failure inside a 200 stream (overloaded_error is the usual one).
func streamError(data []byte) error {
	var top struct {
		Error json.RawMessage `json:"error"`
	}
	e := &model.APIError{Status: http.StatusOK, Body: string(data)}
	if json.Unmarshal(data, &top) == nil {
		if msg, typ, code, ok := model.ParseErrorObject(top.Error); ok {
			e.Message, e.Type, e.Code = msg, typ, code
		}
	}
	if e.Message == "" {
		e.Message = "anthropic stream error: " + strings.TrimSpace(string(data))
	}
	return e
}

// Read parses one Messages SSE body, handing events to emit as they are
// known.
func Read(body io.Reader, emit func(model.Event) bool) error {
	r := sse.NewReader(body)
	defer r.Release()
	p := NewParser()
	for {
		kind, data, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch kind {
		case sse.Error:
			return streamError(data)
		case sse.Done:
			continue // not Anthropic's, but harmless from a gateway
		}
		evs, err := p.Feed(data)
		if err != nil {
			return err
		}
		if err := model.Emit(emit, evs...); err != nil {
			return err
		}
	}
	evs, err := p.Finish()
	if err != nil {
		return err
	}
	return model.Emit(emit, evs...)
}
