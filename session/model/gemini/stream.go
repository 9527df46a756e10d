package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/acpd/acpd/session/model"
)

// Provider is the name stream errors carry; Protocol tags the thinking
// blocks this protocol alone replays.
const (
	Provider = "gemini"
	Protocol = "gemini"
)

// StreamError is a chunk the client cannot read: bad JSON, or a part
// without a field it needs. It names the chunk and the field.
type StreamError struct {
	Chunk int    // 0-based index of the data event
	Field string // JSON path of the offending field, "" for the whole chunk
	Msg   string
}

func (e *StreamError) Error() string {
	s := fmt.Sprintf("%s stream: chunk %d", Provider, e.Chunk)
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Msg
}

// Decode targets of a GenerateContentResponse. Pointers tell an absent
// field from an empty one.
type wireChunk struct {
	Candidates     []wireCandidate `json:"candidates"`
	UsageMetadata  json.RawMessage `json:"usageMetadata"`
	ModelVersion   string          `json:"modelVersion"`
	ResponseID     string          `json:"responseId"`
	PromptFeedback *struct {
		BlockReason        string `json:"blockReason"`
		BlockReasonMessage string `json:"blockReasonMessage"`
	} `json:"promptFeedback"`
	// An error can arrive in place of a chunk.
	Error *wireError `json:"error"`
}

type wireError struct {
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Status  string          `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		RetryDelay string `json:"retryDelay"`
	} `json:"details"`
}

type wireCandidate struct {
	Content *struct {
		Role  string            `json:"role"`
		Parts []json.RawMessage `json:"parts"`
	} `json:"content"`
	FinishReason  string `json:"finishReason"`
	FinishMessage string `json:"finishMessage"`
	Index         int    `json:"index"`
}

type wirePart struct {
	Text             *string       `json:"text"`
	Thought          bool          `json:"thought"`
	ThoughtSignature string        `json:"thoughtSignature"`
	FunctionCall     *wireFuncCall `json:"functionCall"`
}

type wireFuncCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Usage is usageMetadata: running totals, repeated in every chunk.
type Usage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

// Part is one part of the model's turn as it goes back in the next
// request: text merged across chunks, a thought signature kept on the part
// that carried it.
type Part struct {
	Text         string
	Thought      bool
	Signature    string
	FunctionCall *Call // set for a function call part
}

// Call is one function call. Args is the object the model sent.
type Call struct {
	ID        string // "" from Gemini 2.5, which gives none
	Name      string
	Args      json.RawMessage
	Signature string
}

// Signature is one thoughtSignature and the kind of part it rode on:
// "functionCall", "text", "empty_text" or "thought".
type Signature struct {
	Chunk, Part int
	On          string
	Value       string
}

// Result is what a finished stream derived.
type Result struct {
	ResponseID, ModelVersion string
	Text, Thought            string
	Parts                    []Part
	Calls                    []Call
	Signatures               []Signature
	FinishReason             string
	FinishMessage            string
	Usage                    *Usage
	UsageRaw                 json.RawMessage // the last usageMetadata as sent
	UsageChunks              int
}

// Decoder assembles one Gemini stream. It is pure (no I/O) and serves one
// attempt: Feed each data event, then Finish.
type Decoder struct {
	n      int
	res    Result
	text   strings.Builder
	though strings.Builder
	events []model.Event
}

// NewDecoder returns a Decoder for one stream.
func NewDecoder() *Decoder { return &Decoder{} }

func (d *Decoder) fail(field, format string, args ...any) error {
	return &StreamError{Chunk: d.n - 1, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Feed takes one data event (a whole GenerateContentResponse) and returns
// the deltas it carried: text as EventText, thought parts as
// EventReasoning. Function calls arrive whole and come out of Finish.
func (d *Decoder) Feed(data []byte) ([]model.Event, error) {
	d.n++
	d.events = d.events[:0]
	var ch wireChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return nil, d.fail("", "not a GenerateContentResponse: %v", err)
	}
	if ch.Error != nil {
		return nil, streamAPIError(ch.Error, data)
	}
	if ch.ResponseID != "" {
		d.res.ResponseID = ch.ResponseID
	}
	if ch.ModelVersion != "" {
		d.res.ModelVersion = ch.ModelVersion
	}
	if len(ch.UsageMetadata) > 0 && !bytes.Equal(ch.UsageMetadata, []byte("null")) {
		var u Usage
		if err := json.Unmarshal(ch.UsageMetadata, &u); err != nil {
			return nil, d.fail("usageMetadata", "%v", err)
		}
		// Running totals: the last chunk's count is the response's.
		d.res.Usage, d.res.UsageRaw = &u, bytes.Clone(ch.UsageMetadata)
		d.res.UsageChunks++
	}
	if len(ch.Candidates) == 0 && ch.PromptFeedback != nil && ch.PromptFeedback.BlockReason != "" {
		msg := "the prompt was blocked (" + ch.PromptFeedback.BlockReason + ")"
		if ch.PromptFeedback.BlockReasonMessage != "" {
			msg += ": " + ch.PromptFeedback.BlockReasonMessage
		}
		// The same prompt is blocked again: not retried.
		return nil, &model.APIError{Status: http.StatusBadRequest, Message: Provider + ": " + msg, Code: "PROMPT_BLOCKED", Body: string(data)}
	}
	for ci, c := range ch.Candidates {
		if c.Index != 0 {
			continue // one candidate is asked for; others are not ours
		}
		if c.FinishReason != "" {
			d.res.FinishReason = c.FinishReason
		}
		if c.FinishMessage != "" {
			d.res.FinishMessage = c.FinishMessage
		}
		if c.Content == nil {
			continue
		}
		for pi, raw := range c.Content.Parts {
			field := fmt.Sprintf("candidates[%d].content.parts[%d]", ci, pi)
			if err := d.part(raw, field, pi); err != nil {
				return nil, err
			}
		}
	}
	return d.events, nil
}

func (d *Decoder) part(raw json.RawMessage, field string, pi int) error {
	var p wirePart
	if err := json.Unmarshal(raw, &p); err != nil {
		return d.fail(field, "%v", err)
	}
	chunk := d.n - 1
	switch {
	case p.FunctionCall != nil:
		fc := p.FunctionCall
		if fc.Name == "" {
			return d.fail(field+".functionCall.name", "missing")
		}
		args := bytes.TrimSpace(fc.Args)
		if len(args) == 0 || bytes.Equal(args, []byte("null")) {
			args = []byte("{}")
		}
		if args[0] != '{' {
			return d.fail(field+".functionCall.args", "not an object")
		}
		call := Call{ID: fc.ID, Name: fc.Name, Args: compact(args), Signature: p.ThoughtSignature}
		d.res.Calls = append(d.res.Calls, call)
		d.res.Parts = append(d.res.Parts, Part{FunctionCall: &call, Signature: p.ThoughtSignature})
		if p.ThoughtSignature != "" {
			d.res.Signatures = append(d.res.Signatures, Signature{Chunk: chunk, Part: pi, On: "functionCall", Value: p.ThoughtSignature})
		}
	case p.Text != nil:
		text := *p.Text
		if p.Thought {
			d.though.WriteString(text)
			d.emit(model.EventReasoning, text)
		} else {
			d.text.WriteString(text)
			d.emit(model.EventText, text)
		}
		if p.ThoughtSignature != "" {
			on := "text"
			switch {
			case p.Thought:
				on = "thought"
			case text == "":
				on = "empty_text"
			}
			d.res.Signatures = append(d.res.Signatures, Signature{Chunk: chunk, Part: pi, On: on, Value: p.ThoughtSignature})
		}
		d.addText(text, p.Thought, p.ThoughtSignature)
	default:
		if p.ThoughtSignature != "" {
			// A signature on a part of a kind this client does not send
			// (inline data, executable code): kept on an empty text part,
			// where Gemini accepts one.
			d.res.Signatures = append(d.res.Signatures, Signature{Chunk: chunk, Part: pi, On: "other", Value: p.ThoughtSignature})
			d.addText("", false, p.ThoughtSignature)
		}
	}
	return nil
}

// addText merges text into the last part when both are text of the same
// kind and neither carries a signature: the signed part stays as it came.
func (d *Decoder) addText(text string, thought bool, sig string) {
	if n := len(d.res.Parts); n > 0 && sig == "" {
		last := &d.res.Parts[n-1]
		if last.FunctionCall == nil && last.Thought == thought && last.Signature == "" {
			last.Text += text
			return
		}
	}
	if text == "" && sig == "" {
		return
	}
	d.res.Parts = append(d.res.Parts, Part{Text: text, Thought: thought, Signature: sig})
}

func (d *Decoder) emit(kind model.EventKind, text string) {
	if text != "" {
		d.events = append(d.events, model.Event{Kind: kind, Text: text})
	}
}

func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return bytes.Clone(raw)
	}
	return b.Bytes()
}

// Finish ends the stream. A stream that never gave a finish reason was cut
// off; the finish reasons that mean the model's call could not be used
// (MALFORMED_FUNCTION_CALL and its kin) are errors the client retries.
func (d *Decoder) Finish() (*Result, error) {
	res := d.res
	res.Text, res.Thought = d.text.String(), d.though.String()
	if res.FinishReason == "" {
		return &res, fmt.Errorf("%s stream: %w (no finishReason after %d chunks)", Provider, model.ErrTruncated, d.n)
	}
	switch res.FinishReason {
	case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS":
		msg := fmt.Sprintf("%s: the model's function call could not be used (finishReason %s)", Provider, res.FinishReason)
		if res.FinishMessage != "" {
			msg += ": " + res.FinishMessage
		}
		return &res, &model.APIError{Status: http.StatusOK, Message: msg, Code: res.FinishReason}
	}
	return &res, nil
}

// Events turns a finished result into the events that follow the deltas:
// the text parts' signatures as one EventThinking block (when a text part
// carried one), the function calls in order, each with its signature, the
// usage, and the finish reason.
func (r *Result) Events() []model.Event {
	var out []model.Event
	var text []textPart
	signed := false
	for _, p := range r.Parts {
		if p.FunctionCall == nil && !p.Thought {
			text = append(text, textPart{Text: p.Text, Signature: p.Signature})
			signed = signed || p.Signature != ""
		}
	}
	if signed {
		raw, _ := json.Marshal(text)
		out = append(out, model.Event{Kind: model.EventThinking, Thinking: model.Thinking{Protocol: Protocol, Type: typeTextParts, Raw: raw}})
	}
	for _, c := range r.Calls {
		tc := model.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Args}
		if c.Signature != "" {
			tc.Thinking = []model.Thinking{{Protocol: Protocol, Type: typeSignature, Signature: c.Signature}}
		}
		out = append(out, model.Event{Kind: model.EventToolCall, ToolCall: tc})
	}
	if u := r.Usage; u != nil {
		// Gemini counts thoughts apart from the candidates; the neutral
		// usage counts reasoning as part of the completion.
		mu := model.Usage{
			PromptTokens:     u.PromptTokenCount + u.ToolUsePromptTokenCount,
			CompletionTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
			ReasoningTokens:  u.ThoughtsTokenCount,
			CachedTokens:     u.CachedContentTokenCount,
			TotalTokens:      u.TotalTokenCount,
		}
		mu.CachedTokens = min(mu.CachedTokens, mu.PromptTokens)
		if mu.TotalTokens == 0 {
			mu.TotalTokens = mu.PromptTokens + mu.CompletionTokens
		}
		out = append(out, model.Event{Kind: model.EventUsage, Usage: mu})
	}
	return append(out, model.Event{Kind: model.EventFinish, FinishReason: r.finishReason()})
}

func (r *Result) finishReason() string {
	if len(r.Calls) > 0 {
		// A call ends with STOP: tool use is told by the parts.
		return "tool_calls"
	}
	switch r.FinishReason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE", "IMAGE_SAFETY":
		return "content_filter"
	}
	return "stop"
}

// streamAPIError is an error object sent in place of a chunk. Errors the
// same request cannot get past are given the 4xx status they would have had
// before the stream, so they are not retried (and an overflow compacts at
// once); the others keep 200, an in-stream failure, and are retried.
func streamAPIError(w *wireError, body []byte) *model.APIError {
	e := &model.APIError{Status: http.StatusOK, Message: w.Message, Type: w.Status, Code: errCode(w), Body: string(body), RetryAfter: retryDelay(w)}
	switch w.Status {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "NOT_FOUND":
		e.Status = http.StatusBadRequest
	case "PERMISSION_DENIED", "UNAUTHENTICATED":
		e.Status = http.StatusForbidden
	}
	if e.Message == "" {
		e.Message = Provider + ": the server reported an error without a message"
	}
	return e
}

// errCode is the error's status name (INVALID_ARGUMENT), else its number.
func errCode(w *wireError) string {
	if w.Status != "" {
		return w.Status
	}
	return strings.Trim(string(bytes.TrimSpace(w.Code)), `"`)
}
