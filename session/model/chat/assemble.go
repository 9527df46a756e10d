package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	segjson "github.com/segmentio/encoding/json"

	"github.com/acpd/acpd/session/model"
)

// Assembler turns the chunks of one streamed chat completion into Events.
// It is pure (no I/O, no goroutines) and holds per-stream state, so use a
// fresh one per attempt: a parser shared by two streams mixes their calls
// (qwen-code's did, when two subagents streamed at once).
//
// Text and reasoning deltas come out of Feed as they arrive; tool calls,
// usage and the finish reason come out of Finish, tool calls in index order.
type Assembler struct {
	logger *slog.Logger
	events []model.Event

	content, reasoning textChannel
	sawReasoning       bool
	// details are the reasoning_details items, merged by index.
	details []map[string]json.RawMessage

	slots      map[int]*slot
	idSlot     map[string]int
	remap      map[int]int // provider index -> slot, after a collision
	lastOpened *slot
	seq        int

	finish    string
	sawFinish bool
	usage     *model.Usage
	err       error

	// Decode targets reused by every Feed: the decoder fills preallocated
	// slices in place, where it would otherwise allocate room for ten
	// choices and ten calls per chunk. Feed resets them before each chunk.
	chunk   wireChunk
	choice1 [1]wireChoice
	call1   [1]wireToolDelta
	fn1     wireFunction
	// fresh decodes every chunk into new targets (a test's reference).
	fresh bool
}

// NewAssembler returns an Assembler for one stream; logger may be nil.
func NewAssembler(logger *slog.Logger) *Assembler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Assembler{
		logger: logger,
		slots:  map[int]*slot{},
		idSlot: map[string]int{},
		remap:  map[int]int{},
	}
}

// Permissive decode targets: pointers tell absent and null from "".
type wireChunk struct {
	Error   json.RawMessage `json:"error"`
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	// Timings is llama.cpp's; cache_n is the prompt tokens it reused.
	Timings *struct {
		CacheN *int `json:"cache_n"`
	} `json:"timings"`
}

type wireChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"` // absent and {} mean the same
	FinishReason *string   `json:"finish_reason"`
	// Usage inside the choice: Kimi's final chunk puts it here.
	Usage *wireUsage `json:"usage"`
}

type wireDelta struct {
	Content          *string         `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	ToolCalls        []wireToolDelta `json:"tool_calls"`
	// ReasoningDetails is OpenRouter's thinking as the model produced it
	// (text with signatures, encrypted blocks, summaries): pieces of items
	// that must go back whole for a tool loop with thinking to work.
	ReasoningDetails []map[string]json.RawMessage `json:"reasoning_details"`
}

type wireToolDelta struct {
	Index    *int          `json:"index"`
	ID       *string       `json:"id"`
	Function *wireFunction `json:"function"`
	// ExtraContent is Gemini's OpenAI-compatible endpoint's
	// {"google":{"thought_signature":…}}: Gemini 3 refuses the next request
	// unless the call goes back with it.
	ExtraContent json.RawMessage `json:"extra_content"`
}

type wireFunction struct {
	Name      *string  `json:"name"`
	Arguments wireArgs `json:"arguments"`
}

// wireArgs is a fragment of arguments. Normally a string; null (DashScope's
// trailing fragment) leaves it empty, and an object is taken as JSON text.
type wireArgs []byte

func (w *wireArgs) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) == 0 || b[0] == 'n':
		*w = nil
	case b[0] == '"':
		// Fast path: no escapes, so the text is between the quotes.
		if inner := b[1 : len(b)-1]; bytes.IndexByte(inner, '\\') < 0 {
			*w = append((*w)[:0], inner...)
			return nil
		}
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*w = []byte(s)
	default:
		*w = append((*w)[:0], b...)
	}
	return nil
}

// wireUsage is every usage shape seen from OpenAI-compatible servers; the
// model package's README lists which provider sends which field.
type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// input_tokens/output_tokens: the Responses-API names some gateways use.
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`

	PromptDetails *wireDetails `json:"prompt_tokens_details"`
	InputDetails  *wireDetails `json:"input_tokens_details"`
	// CachedTokens at the top of usage: Moonshot/Kimi, some Qwen models.
	CachedTokens *int `json:"cached_tokens"`
	// PromptCacheHitTokens: DeepSeek.
	PromptCacheHitTokens *int `json:"prompt_cache_hit_tokens"`
	// CacheReadInputTokens: Anthropic-compatible gateways (LiteLLM, Bedrock).
	CacheReadInputTokens *int `json:"cache_read_input_tokens"`

	CompletionDetails *wireDetails `json:"completion_tokens_details"`
	OutputDetails     *wireDetails `json:"output_tokens_details"`
	ReasoningTokens   *int         `json:"reasoning_tokens"`
}

type wireDetails struct {
	CachedTokens    *int `json:"cached_tokens"`
	ReasoningTokens *int `json:"reasoning_tokens"`
}

// usage converts a wire usage; cacheN is llama.cpp's timings.cache_n.
func (w *wireUsage) usage(cacheN *int) *model.Usage {
	u := &model.Usage{PromptTokens: w.PromptTokens, CompletionTokens: w.CompletionTokens, TotalTokens: w.TotalTokens}
	if u.PromptTokens == 0 {
		u.PromptTokens = w.InputTokens
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens = w.OutputTokens
	}
	first := func(ps ...*int) int {
		for _, p := range ps {
			if p != nil && *p > 0 {
				return *p
			}
		}
		return 0
	}
	detail := func(d *wireDetails, reasoning bool) *int {
		switch {
		case d == nil:
			return nil
		case reasoning:
			return d.ReasoningTokens
		}
		return d.CachedTokens
	}
	u.CachedTokens = first(detail(w.PromptDetails, false), w.CacheReadInputTokens, w.PromptCacheHitTokens,
		w.CachedTokens, detail(w.InputDetails, false), cacheN)
	u.ReasoningTokens = first(detail(w.CompletionDetails, true), detail(w.OutputDetails, true), w.ReasoningTokens)
	// Parts never exceed their whole (a provider counting cached tokens
	// apart from prompt_tokens, as Anthropic's own API does, is read as if
	// they were included: the cached count is the trustworthy one).
	if u.CachedTokens > u.PromptTokens {
		u.PromptTokens = u.CachedTokens
	}
	if u.CompletionTokens > 0 {
		u.ReasoningTokens = min(u.ReasoningTokens, u.CompletionTokens)
	}
	return u
}

// Feed processes the JSON payload of one SSE data event. The returned
// events (text and reasoning deltas) are valid until the next call. An
// error means the stream failed; it is sticky and Finish returns it too.
func (a *Assembler) Feed(data []byte) ([]model.Event, error) {
	a.events = a.events[:0]
	if a.err != nil {
		return nil, a.err
	}
	if err := checkDepth(data); err != nil {
		a.err = fmt.Errorf("decode stream chunk: %w", err)
		return nil, a.err
	}
	c := a.scratch()
	if err := segjson.Unmarshal(data, c); err != nil {
		a.err = fmt.Errorf("decode stream chunk: %w", err)
		return nil, a.err
	}
	if msg, typ, code, ok := model.ParseErrorObject(c.Error); ok {
		if msg == "" {
			msg = "model stream failed: " + string(bytes.TrimSpace(c.Error))
		}
		a.err = &model.APIError{Status: 200, Message: msg, Type: typ, Code: code, Body: string(c.Error)}
		return nil, a.err
	}
	var cacheN *int
	if c.Timings != nil {
		cacheN = c.Timings.CacheN
	}
	if c.Usage != nil {
		a.usage = c.Usage.usage(cacheN)
	}
	for i := range c.Choices {
		if u := c.Choices[i].Usage; u != nil && c.Choices[i].Index == 0 && c.Usage == nil {
			a.usage = u.usage(cacheN)
		}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // n>1 is never requested; extra choices are noise
		}
		if err := a.choice(ch); err != nil {
			a.err = err
			return nil, err
		}
	}
	return a.events, nil
}

// scratch resets the reused decode targets. An absent "function" decodes
// as the empty fn1, which fragment treats exactly like an absent one.
func (a *Assembler) scratch() *wireChunk {
	if a.fresh {
		return new(wireChunk)
	}
	a.fn1.Name, a.fn1.Arguments = nil, a.fn1.Arguments[:0]
	a.call1[0] = wireToolDelta{Function: &a.fn1}
	a.choice1[0] = wireChoice{Delta: wireDelta{ToolCalls: a.call1[:0]}}
	a.chunk = wireChunk{Choices: a.choice1[:0]}
	return &a.chunk
}

// FeedError processes an SSE event that is an error by framing (the
// `error:` field of old llama.cpp builds, or `event: error`).
func (a *Assembler) FeedError(data []byte) error {
	if a.err != nil {
		return a.err
	}
	msg, typ, code, ok := model.ParseErrorObject(data)
	if !ok || msg == "" {
		var w struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(data, &w) == nil {
			msg, typ, code, ok = model.ParseErrorObject(w.Error)
		}
	}
	if !ok || msg == "" {
		msg = "model stream failed: " + strings.TrimSpace(string(data))
	}
	a.err = &model.APIError{Status: 200, Message: msg, Type: typ, Code: code, Body: string(data)}
	return a.err
}

func (a *Assembler) choice(ch *wireChoice) error {
	if ch.FinishReason != nil {
		switch fr := *ch.FinishReason; fr {
		case "":
		case "error", "error_finish":
			// DashScope puts the error text (e.g. TPM throttling) in the content.
			msg := ""
			if ch.Delta.Content != nil {
				msg = strings.TrimSpace(*ch.Delta.Content)
			}
			if msg == "" {
				msg = fmt.Sprintf("model stream failed (finish_reason %q)", fr)
			}
			return &model.APIError{Status: 200, Message: msg, FinishReason: fr}
		default:
			// Later finish chunks (OpenRouter sends two) just restate it.
			a.finish, a.sawFinish = fr, true
		}
	}
	d := &ch.Delta
	r := d.ReasoningContent
	if r == nil || *r == "" {
		r = d.Reasoning
	}
	if r != nil {
		if s := a.reasoning.normalize(*r); s != "" {
			a.sawReasoning = true
			a.events = append(a.events, model.Event{Kind: model.EventReasoning, Text: s})
		}
	}
	for _, d := range d.ReasoningDetails {
		a.detail(d)
	}
	if d.Content != nil {
		if s := a.content.normalize(*d.Content); s != "" {
			a.events = append(a.events, model.Event{Kind: model.EventText, Text: s})
		}
	}
	for i := range d.ToolCalls {
		a.fragment(&d.ToolCalls[i])
	}
	return nil
}

// textChannel undoes DashScope's cumulative deltas (each delta repeating
// the whole text so far), with qwen-code's rules: a chunk that extends what
// was emitted yields only the new suffix; an exact repeat enters cumulative
// mode only from 64 bytes (short repeats such as "ha","ha" are real text);
// in cumulative mode a rewind is dropped and a divergent chunk leaves the
// mode. Outside cumulative mode the baseline is capped at 1 KiB.
type textChannel struct {
	baseline   string
	total      int // bytes emitted so far
	cumulative bool
}

const (
	cumulativeRepeatMin = 64
	cumulativeWindow    = 1024
)

func (c *textChannel) normalize(d string) string {
	if d == "" {
		return ""
	}
	if c.baseline == "" {
		c.baseline, c.total = d, len(d)
		return d
	}
	if c.cumulative {
		switch {
		case strings.HasPrefix(d, c.baseline):
			suffix := d[len(c.baseline):]
			c.baseline, c.total = d, len(d)
			return suffix
		case strings.HasPrefix(c.baseline, d):
			return ""
		}
		c.cumulative = false
		c.baseline = d
		c.total += len(d)
		return d
	}
	if len(d) > len(c.baseline) && strings.HasPrefix(d, c.baseline) {
		from := len(c.baseline)
		if from >= cumulativeWindow && c.total > from {
			// The baseline froze at the window while text kept flowing:
			// cut from what the user actually saw.
			from = c.total
		}
		if len(d) > from {
			c.baseline, c.total, c.cumulative = d, len(d), true
			return d[from:]
		}
	}
	if d == c.baseline {
		if len(d) >= cumulativeRepeatMin {
			c.cumulative = true
			return ""
		}
		c.total += len(d)
		return d
	}
	if len(c.baseline) < cumulativeWindow {
		c.baseline += d
	}
	c.total += len(d)
	return d
}

// maxToolIndex bounds a provider's tool-call index. qwen-code rejects
// indexes beyond JavaScript's safe integers; a map keyed by index needs a
// bound too, or relocating past index MaxInt wraps to a negative slot and
// overwrites another call.
const maxToolIndex = 1 << 16

// slot is one tool call being assembled.
type slot struct {
	index    int
	seq      int
	id, name string
	args     []byte
	// JSON scanner state over args, so completeness is cheap to test.
	depth        int
	inStr, esc   bool
	nameConflict bool
	// extra is the call's extra_content, as received.
	extra json.RawMessage
}

func (s *slot) append(frag []byte) {
	s.args = append(s.args, frag...)
	for i := 0; i < len(frag); i++ {
		b := frag[i]
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case b == '\\':
				s.esc = true
			case b == '"':
				s.inStr = false
			}
			continue
		}
		switch b {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
		}
	}
}

func (s *slot) blank() bool { return len(bytes.TrimSpace(s.args)) == 0 }

// complete reports whether args already hold one whole JSON value.
func (s *slot) complete() bool {
	return s.depth == 0 && !s.inStr && !s.blank() && json.Valid(s.args)
}

func (s *slot) phantom() bool { return s.id == "" && s.name == "" && s.blank() }

func (a *Assembler) open(index int) *slot {
	a.seq++
	s := &slot{index: index, seq: a.seq}
	a.slots[index] = s
	a.lastOpened = s
	return s
}

func (a *Assembler) nextFree() int {
	next := 0
	for k := range a.slots {
		if k >= next {
			next = k + 1
		}
	}
	return next
}

// recentIncomplete is the most recently opened call whose arguments have
// started but are not yet whole.
func (a *Assembler) recentIncomplete() *slot {
	var best *slot
	for _, s := range a.slots {
		if !s.blank() && !s.complete() && (best == nil || s.seq > best.seq) {
			best = s
		}
	}
	return best
}

// fragment merges one delta.tool_calls entry (spec §6 step 4, with
// qwen-code's collision, relocation and replay rules).
func (a *Assembler) fragment(f *wireToolDelta) {
	var id, name string
	if f.ID != nil {
		id = *f.ID // "" counts as absent (DashScope continuations)
	}
	var args []byte
	if f.Function != nil {
		if f.Function.Name != nil {
			name = strings.TrimSpace(*f.Function.Name)
		}
		args = f.Function.Arguments
	}
	hasArgs := len(args) > 0

	missing := f.Index == nil
	p := 0
	if !missing {
		p = *f.Index
		switch {
		case p == -1: // AWS Bedrock sends -1 for the only call
			p = 0
		case p < 0 || p > maxToolIndex:
			// No real stream gets here; routing by id or to the last call
			// beats trusting it, and a bound keeps nextFree from overflowing.
			a.logger.Debug("tool call index out of range, treated as missing", "index", p)
			missing = true
		}
	}

	var s *slot
	if id != "" {
		if k, ok := a.idSlot[id]; ok {
			s = a.slots[k]
			if s.complete() {
				// Replay of a finished call: only a late name is news.
				if !hasArgs && s.name == "" && name != "" {
					s.name = name
				}
				return
			}
		} else if missing {
			s = a.open(a.nextFree())
		} else if r, ok := a.remap[p]; ok && a.slots[r].id == "" {
			s = a.slots[r] // a late id adopts the slot its name/args went to
		} else {
			t := p
			if r, ok := a.remap[p]; ok {
				t = r
			}
			cur := a.slots[t]
			switch {
			case cur == nil:
				s = a.open(t)
			case cur.id == "":
				s = cur
			case cur.complete() || (cur.name != "" && cur.blank()):
				// The index is reused for a new call: relocate.
				s = a.open(a.nextFree())
				a.remap[p] = s.index
			default:
				// A new id over unfinished JSON takes the slot over.
				a.logger.Debug("tool call identity conflict", "index", p, "old_id", cur.id, "new_id", id)
				delete(a.idSlot, cur.id)
				cur.id, cur.name = "", ""
				s = cur
			}
		}
		if s.id == "" {
			s.id = id
			a.idSlot[id] = s.index
		}
	} else if missing {
		s = a.lastOpened
		if s == nil {
			if !hasArgs && name == "" {
				return // nothing to attach and nothing to attach it to
			}
			s = a.open(a.nextFree())
		}
	} else {
		t := p
		if r, ok := a.remap[p]; ok {
			t = r
		}
		cur := a.slots[t]
		switch {
		case cur == nil:
			s = a.open(t)
		case !hasArgs || !cur.complete():
			s = cur
		default:
			switch inc := a.recentIncomplete(); {
			case inc != nil:
				s = inc
			case name == "" || name == cur.name:
				// More arguments for a finished call without a new
				// identity: most likely a replayed payload, which
				// normalizeArgs collapses if it is an exact repeat.
				s = cur
			default:
				s = a.open(a.nextFree())
				a.remap[p] = s.index
			}
		}
	}

	if name != "" {
		switch {
		case s.name == "":
			s.name = name
		case s.name != name && !s.nameConflict:
			s.nameConflict = true
			a.logger.Debug("tool call name conflict, keeping the first", "id", s.id, "name", s.name, "other", name)
		}
	}
	if hasArgs {
		s.append(args)
	}
	if e := bytes.TrimSpace(f.ExtraContent); len(e) > 0 && !bytes.Equal(e, []byte("null")) {
		s.extra = bytes.Clone(e)
	}
}

// detailText are the reasoning_details fields that stream in pieces: an
// item's later fragments (same index) carry more of them.
// Built on first use: a package-level map is built by package
// initialization, on every start of acpd.
var detailText = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"text": true, "summary": true, "signature": true, "data": true}
})

// detail merges one reasoning_details fragment into the items so far: a
// fragment with the index (and type) of an item extends it, its text-like
// strings concatenated, other fields taken where the item lacks them.
func (a *Assembler) detail(d map[string]json.RawMessage) {
	if len(d) == 0 {
		return
	}
	frag := make(map[string]json.RawMessage, len(d))
	for k, v := range d {
		frag[k] = bytes.Clone(v)
	}
	idx, hasIdx := frag["index"]
	for _, it := range a.details {
		if !hasIdx || !bytes.Equal(it["index"], idx) || !sameType(it["type"], frag["type"]) {
			continue
		}
		for k, v := range frag {
			old, ok := it[k]
			switch {
			case !ok || isNull(old):
				it[k] = v
			case detailText()[k] && !isNull(v):
				var x, y string
				if json.Unmarshal(old, &x) == nil && json.Unmarshal(v, &y) == nil {
					it[k], _ = json.Marshal(x + y)
				}
			}
		}
		return
	}
	a.details = append(a.details, frag)
}

func sameType(a, b json.RawMessage) bool { return a == nil || b == nil || bytes.Equal(a, b) }

func isNull(v json.RawMessage) bool { return len(v) == 0 || bytes.Equal(v, []byte("null")) }

// Finish ends the stream (at [DONE] or EOF) and returns the tool calls in
// index order, the usage (the last one reported) and the finish reason. A
// stream that never reported a finish reason is an error (ErrTruncated).
//
// The finish reason is normalised from the assembled calls, since providers
// lie: "tool_calls" whenever a call was assembled and the provider said
// stop/tool_calls, "stop" when it said tool_calls but no call came, and
// "length" when a named call's arguments were cut off mid-JSON.
func (a *Assembler) Finish() ([]model.Event, error) {
	a.events = a.events[:0]
	if a.err != nil {
		return nil, a.err
	}
	if !a.sawFinish {
		a.err = model.ErrTruncated
		return nil, a.err
	}
	if len(a.details) > 0 {
		raw, err := json.Marshal(a.details)
		if err == nil {
			if !a.sawReasoning {
				// Only the details carried the thinking: shown once whole.
				var text strings.Builder
				for _, it := range a.details {
					var t string
					if json.Unmarshal(it["text"], &t) == nil {
						text.WriteString(t)
					} else if json.Unmarshal(it["summary"], &t) == nil {
						text.WriteString(t)
					}
				}
				if text.Len() > 0 {
					a.events = append(a.events, model.Event{Kind: model.EventReasoning, Text: text.String()})
				}
			}
			a.events = append(a.events, model.Event{Kind: model.EventThinking, Thinking: model.Thinking{
				Protocol: Protocol, Type: TypeReasoningDetails, Raw: raw}})
		}
	}
	truncated := false
	calls := 0
	for _, k := range slices.Sorted(maps.Keys(a.slots)) {
		s := a.slots[k]
		if s.phantom() {
			continue
		}
		tc := model.ToolCall{ID: s.id, Name: s.name}
		if s.extra != nil {
			tc.Thinking = []model.Thinking{{Protocol: Protocol, Type: TypeExtraContent, Raw: s.extra}}
		}
		var cut bool
		tc.Arguments, tc.Invalid, cut = model.NormalizeArgs(s.args)
		if tc.Name == "" {
			// A nameless call is malformed whatever its arguments, and (as
			// in qwen-code) says nothing about the output being cut off.
			tc.Invalid, cut = "missing function name", false
		}
		truncated = truncated || cut
		if tc.Invalid != "" {
			a.logger.Warn("invalid tool call from model", "id", tc.ID, "name", tc.Name, "err", tc.Invalid)
		}
		a.events = append(a.events, model.Event{Kind: model.EventToolCall, ToolCall: tc})
		calls++
	}
	if a.usage != nil {
		a.events = append(a.events, model.Event{Kind: model.EventUsage, Usage: *a.usage})
	}
	fr := a.finish
	switch {
	case truncated:
		fr = "length"
	case calls > 0 && (fr == "stop" || fr == "function_call"):
		fr = "tool_calls"
	case calls == 0 && (fr == "tool_calls" || fr == "function_call"):
		fr = "stop"
	}
	a.events = append(a.events, model.Event{Kind: model.EventFinish, FinishReason: fr})
	return a.events, nil
}

// maxDepth is encoding/json's nesting bound, which the other protocols'
// decoders enforce themselves.
const maxDepth = 10000

// checkDepth refuses a chunk nested deeper than maxDepth, before segmentio's
// decoder sees it: that decoder recurses per level without a bound, so one
// chunk of a few million brackets (within the stream reader's 16 MiB bound)
// overflowed the stack — a fatal error that ends the process, not a panic —
// and a few hundred thousand took seconds. One pass over the bytes.
func checkDepth(data []byte) error {
	depth, inStr, esc := 0, false, false
	for _, b := range data {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case b == '\\':
				esc = true
			case b == '"':
				inStr = false
			}
		case b == '"':
			inStr = true
		case b == '[' || b == '{':
			if depth++; depth > maxDepth {
				return fmt.Errorf("nested deeper than %d levels", maxDepth)
			}
		case b == ']' || b == '}':
			depth--
		}
	}
	return nil
}
