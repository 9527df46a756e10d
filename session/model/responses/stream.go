package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/acpd/acpd/session/model"
)

// Provider is the name stream errors carry; Protocol tags the thinking
// blocks this protocol alone replays.
const (
	Provider = "openai-responses"
	Protocol = "responses"
)

// finalCodes are failures reported inside a stream that the same request
// cannot get past: they are given the 400 status they would have had before
// the stream, so they are not retried (and an overflow compacts at once).
// Built on first use: a package-level map is built by package
// initialization, on every start of acpd.
var finalCodes = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"context_length_exceeded":   true,
		"invalid_prompt":            true,
		"insufficient_quota":        true,
		"invalid_encrypted_content": true,
		"invalid_request_error":     true,
	}
})

func inStream(e *model.APIError) *model.APIError {
	if finalCodes()[e.Code] || finalCodes()[e.Type] {
		e.Status = http.StatusBadRequest
	}
	return e
}

// StreamError is a stream the client cannot read: bad JSON, or an event
// without a field it needs. It names the event and the field.
type StreamError struct {
	Event int    // 0-based index of the data event
	Type  string // the event's type, "" when it had none
	Field string // JSON path of the offending field, "" for the whole event
	Msg   string
}

func (e *StreamError) Error() string {
	var b strings.Builder
	b.WriteString(Provider + " stream: event ")
	fmt.Fprint(&b, e.Event)
	if e.Type != "" {
		b.WriteString(" (" + e.Type + ")")
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Decode targets. Pointers tell an absent field from an empty one.
type wireEvent struct {
	Type         string          `json:"type"`
	Delta        *string         `json:"delta"`
	OutputIndex  *int            `json:"output_index"`
	SummaryIndex *int            `json:"summary_index"`
	ItemID       string          `json:"item_id"`
	Arguments    *string         `json:"arguments"`
	Item         json.RawMessage `json:"item"`
	Response     json.RawMessage `json:"response"`
	// An `error` event nests its object under "error" (the real API since
	// late 2025) or puts code and message at the top (earlier and in
	// compatible servers).
	Error   json.RawMessage `json:"error"`
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

type wireResponse struct {
	ID                string            `json:"id"`
	Model             string            `json:"model"`
	Status            string            `json:"status"`
	Output            []json.RawMessage `json:"output"`
	Usage             *wireUsage        `json:"usage"`
	Error             *wireError        `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

type wireError struct {
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

type wireUsage struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	TotalTokens        int `json:"total_tokens"`
	InputTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

type wireItem struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	Role      string  `json:"role"`
	CallID    string  `json:"call_id"`
	Name      string  `json:"name"`
	Arguments *string `json:"arguments"`
	Summary   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"summary"`
	EncryptedContent *string `json:"encrypted_content"`
	Content          []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
}

// Call is one function call of a response.
type Call struct {
	ItemID    string // fc_…: the output item's id
	CallID    string // call_…: what the function_call_output answers
	Name      string
	Arguments string // the arguments text as the model wrote it
	Status    string
}

// Reasoning is one reasoning item of a response. Raw is the item exactly as
// the final response listed it: the request sends it back unchanged, since
// its encrypted_content is what lets the model continue its reasoning.
type Reasoning struct {
	ID        string
	Summary   []string
	Encrypted string // "" when the request did not include it
	Raw       json.RawMessage
}

// Result is what a finished stream derived.
type Result struct {
	ResponseID string
	Model      string
	// Status is the final response's: "completed", "incomplete" or "failed".
	Status string
	// Terminal is the event type that ended the stream.
	Terminal   string
	Text       string
	Summary    []string // reasoning summary parts, in order
	Calls      []Call
	Reasoning  []Reasoning
	Usage      *wireUsage
	Incomplete string // incomplete_details.reason
	// Err is the failure the stream reported (an `error` event or
	// response.failed); Finish also returns it.
	Err *model.APIError
	// Errors are the `error` events, in order.
	Errors []*model.APIError
}

// item is an output item being streamed.
type item struct {
	index int
	typ   string
	id    string
	done  json.RawMessage // the item of output_item.done
	args  strings.Builder
}

// Decoder assembles one Responses stream. It is pure (no I/O) and serves one
// attempt: Feed each data event, then Finish.
type Decoder struct {
	n         int // data events fed
	items     []*item
	text      strings.Builder
	summary   []string
	summaryAt int // summary_index of the part being streamed, -1 before any
	resp      *wireResponse
	terminal  string
	errs      []*model.APIError
	events    []model.Event
}

// NewDecoder returns a Decoder for one stream.
func NewDecoder() *Decoder { return &Decoder{summaryAt: -1} }

func (d *Decoder) fail(typ, field, format string, args ...any) error {
	return &StreamError{Event: d.n - 1, Type: typ, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Feed takes one data event and returns the deltas it carried: text as
// EventText, reasoning summaries and reasoning text as EventReasoning.
// Events after the terminal one are an error.
func (d *Decoder) Feed(data []byte) ([]model.Event, error) {
	d.n++
	d.events = d.events[:0]
	var ev wireEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, d.fail("", "", "not a JSON object: %v", err)
	}
	if ev.Type == "" {
		return nil, d.fail("", "type", "missing")
	}
	if d.terminal != "" {
		return nil, d.fail(ev.Type, "", "event after %s", d.terminal)
	}
	switch ev.Type {
	case "response.output_text.delta", "response.refusal.delta":
		if ev.Delta == nil {
			return nil, d.fail(ev.Type, "delta", "missing")
		}
		d.text.WriteString(*ev.Delta)
		d.emit(model.EventText, *ev.Delta)
	case "response.reasoning_summary_text.delta":
		if ev.Delta == nil {
			return nil, d.fail(ev.Type, "delta", "missing")
		}
		at := 0
		if ev.SummaryIndex != nil {
			at = *ev.SummaryIndex
		}
		delta := *ev.Delta
		if at != d.summaryAt || len(d.summary) == 0 {
			// A new summary part: parts are paragraphs of their own, and the
			// client shows them as one stream of thought.
			if len(d.summary) > 0 {
				delta = "\n\n" + delta
			}
			d.summary = append(d.summary, "")
			d.summaryAt = at
		}
		d.summary[len(d.summary)-1] += *ev.Delta
		d.emit(model.EventReasoning, delta)
	case "response.reasoning_text.delta":
		// Raw reasoning (open-weight models behind vLLM, Ollama, LM Studio).
		if ev.Delta == nil {
			return nil, d.fail(ev.Type, "delta", "missing")
		}
		d.emit(model.EventReasoning, *ev.Delta)
	case "response.output_item.added":
		var it wireItem
		if err := decodeItem(ev.Item, &it); err != nil {
			return nil, d.fail(ev.Type, "item", "%v", err)
		}
		idx := len(d.items)
		if ev.OutputIndex != nil {
			idx = *ev.OutputIndex
		}
		d.items = append(d.items, &item{index: idx, typ: it.Type, id: it.ID})
	case "response.function_call_arguments.delta":
		if ev.Delta == nil {
			return nil, d.fail(ev.Type, "delta", "missing")
		}
		it := d.find(ev.ItemID, ev.OutputIndex)
		if it == nil {
			return nil, d.fail(ev.Type, "item_id", "no output item %q was added", ev.ItemID)
		}
		it.args.WriteString(*ev.Delta)
	case "response.output_item.done":
		var it wireItem
		if err := decodeItem(ev.Item, &it); err != nil {
			return nil, d.fail(ev.Type, "item", "%v", err)
		}
		cur := d.find(it.ID, ev.OutputIndex)
		if cur == nil {
			idx := len(d.items)
			if ev.OutputIndex != nil {
				idx = *ev.OutputIndex
			}
			cur = &item{index: idx, typ: it.Type, id: it.ID}
			d.items = append(d.items, cur)
		}
		cur.done = slices.Clone(ev.Item)
	case "response.completed", "response.incomplete", "response.failed":
		var r wireResponse
		if len(ev.Response) == 0 {
			return nil, d.fail(ev.Type, "response", "missing")
		}
		if err := json.Unmarshal(ev.Response, &r); err != nil {
			return nil, d.fail(ev.Type, "response", "%v", err)
		}
		for i, raw := range r.Output {
			var it wireItem
			if err := decodeItem(raw, &it); err != nil {
				return nil, d.fail(ev.Type, fmt.Sprintf("response.output[%d]", i), "%v", err)
			}
		}
		d.resp, d.terminal = &r, ev.Type
	case "error":
		e := &model.APIError{Status: http.StatusOK, Body: string(data)}
		var inner wireError
		if len(ev.Error) > 0 && ev.Error[0] == '{' && json.Unmarshal(ev.Error, &inner) == nil {
			e.Message, e.Type, e.Code = inner.Message, inner.Type, code(inner.Code)
		} else {
			e.Message, e.Code = ev.Message, code(ev.Code)
		}
		if e.Message == "" {
			e.Message = "the model server reported an error without a message"
		}
		d.errs = append(d.errs, inStream(e))
	}
	// Other events (created, in_progress, content_part.*, *.done, web
	// search progress, …) carry nothing the result needs.
	return d.events, nil
}

func (d *Decoder) emit(kind model.EventKind, text string) {
	if text != "" {
		d.events = append(d.events, model.Event{Kind: kind, Text: text})
	}
}

// find is the streamed item with id, or else at output index idx.
func (d *Decoder) find(id string, idx *int) *item {
	for _, it := range d.items {
		if id != "" && it.id == id {
			return it
		}
	}
	if idx != nil {
		for _, it := range d.items {
			if it.index == *idx {
				return it
			}
		}
	}
	return nil
}

// decodeItem checks an output item's shape: an object with a type, and the
// fields its type needs.
func decodeItem(raw json.RawMessage, it *wireItem) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return fmt.Errorf("missing")
	}
	if err := json.Unmarshal(raw, it); err != nil {
		return err
	}
	if it.Type == "" {
		return fmt.Errorf("type: missing")
	}
	return nil
}

func code(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Finish ends the stream: the result, built from the terminal response's
// output (the final items; the streamed ones only when it listed none), and
// the error the stream reported, if any. A stream without a terminal event
// was cut off.
func (d *Decoder) Finish() (*Result, error) {
	res := &Result{Terminal: d.terminal, Errors: d.errs, Text: d.text.String(), Summary: d.summary}
	if d.resp == nil {
		if len(d.errs) > 0 {
			res.Err = d.errs[len(d.errs)-1]
			return res, res.Err
		}
		return res, fmt.Errorf("%s stream: %w (no response.completed after %d events)", Provider, model.ErrTruncated, d.n)
	}
	r := d.resp
	res.ResponseID, res.Model, res.Status, res.Usage = r.ID, r.Model, r.Status, r.Usage
	if r.IncompleteDetails != nil {
		res.Incomplete = r.IncompleteDetails.Reason
	}
	out := r.Output
	if len(out) == 0 {
		// Some compatible servers list the items only as they stream.
		sorted := slices.Clone(d.items)
		slices.SortStableFunc(sorted, func(a, b *item) int { return a.index - b.index })
		for _, it := range sorted {
			if it.done != nil {
				out = append(out, it.done)
			}
		}
	}
	var text strings.Builder
	var summary []string
	for i, raw := range out {
		var it wireItem
		_ = json.Unmarshal(raw, &it) // checked when fed
		field := fmt.Sprintf("response.output[%d]", i)
		switch it.Type {
		case "function_call":
			if it.CallID == "" {
				return res, &StreamError{Event: d.n - 1, Type: d.terminal, Field: field + ".call_id", Msg: "missing"}
			}
			if it.Name == "" {
				return res, &StreamError{Event: d.n - 1, Type: d.terminal, Field: field + ".name", Msg: "missing"}
			}
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			} else if s := d.find(it.ID, nil); s != nil {
				args = s.args.String()
			}
			res.Calls = append(res.Calls, Call{ItemID: it.ID, CallID: it.CallID, Name: it.Name, Arguments: args, Status: it.Status})
		case "reasoning":
			if it.ID == "" {
				return res, &StreamError{Event: d.n - 1, Type: d.terminal, Field: field + ".id", Msg: "missing"}
			}
			rs := Reasoning{ID: it.ID, Raw: compact(raw)}
			for _, s := range it.Summary {
				rs.Summary = append(rs.Summary, s.Text)
				summary = append(summary, s.Text)
			}
			if it.EncryptedContent != nil {
				rs.Encrypted = *it.EncryptedContent
			}
			res.Reasoning = append(res.Reasoning, rs)
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					text.WriteString(c.Text)
				case "refusal":
					text.WriteString(c.Refusal)
				}
			}
		}
	}
	if len(r.Output) > 0 {
		res.Text = text.String()
		res.Summary = summary
	}
	if d.terminal == "response.failed" || r.Status == "failed" {
		e := &model.APIError{Status: http.StatusOK, Message: "the model server reported the response as failed"}
		if r.Error != nil {
			e.Message, e.Type, e.Code = r.Error.Message, r.Error.Type, code(r.Error.Code)
		} else if len(d.errs) > 0 {
			e = d.errs[len(d.errs)-1]
		}
		if e.Message == "" && len(d.errs) > 0 {
			e.Message = d.errs[len(d.errs)-1].Message
		}
		res.Err = inStream(e)
		return res, res.Err
	}
	return res, nil
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return slices.Clone(raw)
	}
	return b.Bytes()
}

// Events turns a finished result into the events that follow the deltas:
// the tool calls in output order, the usage, and the finish reason
// ("tool_calls", "stop", "length" or "content_filter").
func (r *Result) Events() []model.Event {
	var out []model.Event
	for _, c := range r.Calls {
		args, invalid := normalizeArgs(c.Arguments)
		out = append(out, model.Event{Kind: model.EventToolCall, ToolCall: model.ToolCall{
			ID: c.CallID, Name: c.Name, Arguments: args, Invalid: invalid,
		}})
	}
	if u := r.Usage; u != nil {
		mu := model.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
		if u.InputTokensDetails != nil {
			mu.CachedTokens = min(u.InputTokensDetails.CachedTokens, u.InputTokens)
		}
		if u.OutputTokensDetails != nil {
			mu.ReasoningTokens = min(u.OutputTokensDetails.ReasoningTokens, u.OutputTokens)
		}
		if mu.TotalTokens == 0 {
			mu.TotalTokens = mu.PromptTokens + mu.CompletionTokens
		}
		out = append(out, model.Event{Kind: model.EventUsage, Usage: mu})
	}
	return append(out, model.Event{Kind: model.EventFinish, FinishReason: r.finishReason()})
}

func (r *Result) finishReason() string {
	switch {
	case len(r.Calls) > 0:
		return "tool_calls"
	case r.Status == "incomplete" && r.Incomplete == "content_filter":
		return "content_filter"
	case r.Status == "incomplete":
		return "length"
	}
	return "stop"
}

// normalizeArgs makes a call's arguments text the JSON object a tool takes:
// blank is {}, valid JSON is compacted, anything else is kept as a JSON
// string with the reason it is invalid, so the turn reports it to the model.
func normalizeArgs(s string) (json.RawMessage, string) {
	t := strings.TrimSpace(s)
	if t == "" || t == "null" {
		return json.RawMessage("{}"), ""
	}
	if !json.Valid([]byte(t)) {
		b, _ := json.Marshal(s)
		return b, "arguments are not valid JSON"
	}
	if t[0] != '{' {
		b, _ := json.Marshal(s)
		return b, "arguments are not a JSON object"
	}
	return compact(json.RawMessage(t)), ""
}
