package anthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/acpd/acpd/session/model"
)

// Wire shapes of a Messages request.
type wireRequest struct {
	Model        string         `json:"model"`
	MaxTokens    int            `json:"max_tokens"`
	System       []contentBlock `json:"system,omitempty"`
	Messages     []wireMsg      `json:"messages"`
	Tools        []wireTool     `json:"tools,omitempty"`
	ToolChoice   *toolChoice    `json:"tool_choice,omitempty"`
	Stream       bool           `json:"stream"`
	Thinking     *thinkingParam `json:"thinking,omitempty"`
	OutputConfig *outputConfig  `json:"output_config,omitempty"`
	Temperature  *float64       `json:"temperature,omitempty"`
}

// toolChoice is {"type":"none"} for a request that offers the tools but
// takes no call (model.Request.NoToolUse); nil leaves the default, auto.
type toolChoice struct {
	Type string `json:"type"`
}

type thinkingParam struct {
	Type         string `json:"type"` // "enabled", "adaptive"
	BudgetTokens int    `json:"budget_tokens,omitempty"`
}

type outputConfig struct {
	Effort string `json:"effort"`
}

type wireMsg struct {
	Role    string         `json:"role"`
	Content []contentBlock `json:"content"`
}

type wireTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

// contentBlock is the union of the block shapes acpd sends.
type contentBlock struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// image
	Source *imageSource `json:"source,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`
	// thinking (the text is always sent, even empty) and redacted_thinking
	Thinking  *string `json:"thinking,omitempty"`
	Signature string  `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`

	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"` // base64
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

// maxBreakpoints is the API's limit on cache_control blocks per request.
const maxBreakpoints = 4

// lookBack is how many blocks before a breakpoint the API looks for a
// cached prefix.
const lookBack = 20

// body is an encoded request. digest is the prefix digest through its last
// message: the Prefix of the thinking blocks its answer brings.
type body struct {
	b      []byte
	digest string
}

func (b body) reader() io.Reader { return bytes.NewReader(b.b) }

// convState is what the protocol keeps per conversation (in model.Cache):
// where the last request's final breakpoint was, so the next request marks
// it again when the conversation has grown past the look-back since.
type convState struct {
	mu     sync.Mutex
	digest string // prefix digest through the marked message
	index  int    // its index in Messages
	// result: the last request ended with tool results. conts and ends
	// count, over the conversation, how often the answer to such a request
	// called tools again (the results are read again by the next request)
	// or ended the turn (the session may then compact them away).
	result      bool
	conts, ends int
}

type cacheKey struct{}

func state(c *model.Cache) *convState {
	if v := c.Load(cacheKey{}, func() any { return new(convState) }); v != nil {
		return v.(*convState)
	}
	return nil
}

// converted is one neutral message as wire content, before merging.
type converted struct {
	role   string
	blocks []contentBlock
	// digest chains the prefix through this message.
	digest string
}

// build encodes req. The thinking blocks of assistant messages are sent
// back unmodified and before the text and tool calls they preceded; a block
// whose recorded prefix no longer matches (the history before it was
// compacted or edited, the system prompt or tools changed) is dropped, as
// the API would reject it.
func (c *Client) build(req model.Request) (body, error) {
	if req.MaxTokens < 0 {
		return body{}, fmt.Errorf("maxTokens: must not be negative, got %d", req.MaxTokens)
	}
	m := c.opts.Models[req.Model]
	out := wireRequest{Model: req.Model, Stream: true, Temperature: req.Temperature}
	out.MaxTokens = req.MaxTokens
	explicitMax := out.MaxTokens > 0
	if out.MaxTokens == 0 {
		out.MaxTokens = m.MaxTokens
	}
	if out.MaxTokens == 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	if req.System != "" {
		out.System = []contentBlock{{Type: "text", Text: req.System}}
	}
	for i, t := range req.Tools {
		params, err := t.Schema(i)
		if err != nil {
			return body{}, err
		}
		out.Tools = append(out.Tools, wireTool{Name: t.Name, Description: t.Description, InputSchema: params})
	}
	if req.NoToolUse && len(out.Tools) > 0 {
		out.ToolChoice = &toolChoice{Type: "none"}
	}

	// The digest chain starts from the system prompt and tools: a block
	// produced under other ones is bound to a different conversation.
	h := sha256.New()
	head, _ := json.Marshal(struct {
		S []contentBlock `json:"s"`
		T []wireTool     `json:"t"`
	}{out.System, out.Tools})
	h.Write(head)
	digest := hex.EncodeToString(h.Sum(nil))

	conv := make([]converted, 0, len(req.Messages))
	ids := toolIDs{}
	for i, msg := range req.Messages {
		cv, err := convert(msg, i, digest, ids)
		if err != nil {
			return body{}, err
		}
		enc, err := json.Marshal(cv.blocks)
		if err != nil {
			return body{}, fmt.Errorf("messages[%d]: %w", i, err)
		}
		sum := sha256.Sum256(append([]byte(digest+cv.role), enc...))
		digest = hex.EncodeToString(sum[:])
		cv.digest = digest
		conv = append(conv, cv)
	}
	final := digest

	if err := c.thinking(&out, m, req, conv, explicitMax); err != nil {
		return body{}, err
	}
	st := state(req.Cache)
	if c.opts.CacheControl != "off" {
		markBreakpoints(&out, conv, req.CacheHints.Stable, st)
	}
	out.Messages = merge(conv)
	b, err := json.Marshal(out)
	if err != nil {
		return body{}, err
	}
	return body{b: b, digest: final}, nil
}

// toolIDs maps the session's call ids to ids the API accepts
// (^[a-zA-Z0-9_-]+$), the same way for a call and its result.
type toolIDs map[string]string

func (t toolIDs) wire(id string) string {
	if w, ok := t[id]; ok {
		return w
	}
	var b strings.Builder
	for _, r := range id {
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	w := b.String()
	if w == "" {
		w = "toolu_empty"
	}
	t[id] = w
	return w
}

// convert turns one neutral message into its role and blocks. prefix is
// the digest of everything before it, against which its thinking blocks
// are checked.
func convert(msg model.Message, i int, prefix string, ids toolIDs) (converted, error) {
	field := fmt.Sprintf("messages[%d]", i)
	switch msg.Role {
	case model.RoleUser, model.RoleSystem:
		// The API has no system role inside messages: a mid-conversation
		// system message (a compaction summary) is user text.
		var blocks []contentBlock
		if msg.Content != "" {
			blocks = append(blocks, contentBlock{Type: "text", Text: msg.Content})
		}
		for j, img := range msg.Images {
			if img.MimeType == "" || img.Data == "" {
				return converted{}, fmt.Errorf("%s.images[%d]: mimeType and data are required", field, j)
			}
			blocks = append(blocks, contentBlock{Type: "image", Source: &imageSource{Type: "base64", MediaType: img.MimeType, Data: img.Data}})
		}
		if len(blocks) == 0 {
			// Empty text blocks are refused; a placeholder keeps the turn.
			blocks = append(blocks, contentBlock{Type: "text", Text: "(empty)"})
		}
		return converted{role: "user", blocks: blocks}, nil
	case model.RoleAssistant:
		var blocks []contentBlock
		for _, th := range msg.Thinking {
			if th.Protocol != Protocol || (th.Prefix != "" && th.Prefix != prefix) {
				continue
			}
			switch th.Type {
			case "thinking":
				text := th.Text
				blocks = append(blocks, contentBlock{Type: "thinking", Thinking: &text, Signature: th.Signature})
			case "redacted_thinking":
				blocks = append(blocks, contentBlock{Type: "redacted_thinking", Data: th.Data})
			}
		}
		if msg.Content != "" {
			blocks = append(blocks, contentBlock{Type: "text", Text: msg.Content})
		}
		for j, tc := range msg.ToolCalls {
			if tc.Name == "" {
				return converted{}, fmt.Errorf("%s.toolCalls[%d].name: required", field, j)
			}
			if tc.ID == "" {
				return converted{}, fmt.Errorf("%s.toolCalls[%d].id: required", field, j)
			}
			input := tc.Arguments
			if tc.Invalid != "" || len(bytes.TrimSpace(input)) == 0 || bytes.TrimSpace(input)[0] != '{' {
				// tool_use input must be an object: an invalid call goes
				// back with its raw text under a key of its own.
				raw, _ := json.Marshal(map[string]string{"invalid_arguments": string(input)})
				input = raw
			}
			blocks = append(blocks, contentBlock{Type: "tool_use", ID: ids.wire(tc.ID), Name: tc.Name, Input: input})
		}
		if len(blocks) == 0 {
			blocks = append(blocks, contentBlock{Type: "text", Text: "(no answer)"})
		}
		return converted{role: "assistant", blocks: blocks}, nil
	case model.RoleTool:
		if msg.ToolCallID == "" {
			return converted{}, fmt.Errorf("%s.toolCallId: required", field)
		}
		content := msg.Content
		if content == "" {
			content = "(no output)"
		}
		return converted{role: "user", blocks: []contentBlock{{Type: "tool_result", ToolUseID: ids.wire(msg.ToolCallID), Content: content}}}, nil
	}
	return converted{}, fmt.Errorf("%s.role: unknown role %q", field, msg.Role)
}

// merge joins consecutive messages of one role (tool results and the user
// text after them form one user turn). Within a user turn the tool results
// come first, as the API requires.
func merge(conv []converted) []wireMsg {
	out := make([]wireMsg, 0, len(conv))
	for _, cv := range conv {
		if n := len(out); n > 0 && out[n-1].Role == cv.role {
			out[n-1].Content = append(out[n-1].Content, cv.blocks...)
			continue
		}
		out = append(out, wireMsg{Role: cv.role, Content: append([]contentBlock(nil), cv.blocks...)})
	}
	for i := range out {
		if out[i].Role != "user" {
			continue
		}
		sort.SliceStable(out[i].Content, func(a, b int) bool {
			return out[i].Content[a].Type == "tool_result" && out[i].Content[b].Type != "tool_result"
		})
	}
	return out
}

// thinking sets the request's thinking parameters from the level.
func (c *Client) thinking(out *wireRequest, m Model, req model.Request, conv []converted, explicitMax bool) error {
	level := req.ThinkingLevel
	if level == "" {
		level = m.DefaultLevel
	}
	if level == "" || level == "off" || m.Thinking == "" {
		return nil
	}
	// In a tool loop the assistant message that called the tools must
	// start with its thinking when thinking is on; one that has none (it
	// was produced with thinking off, or its block was dropped) keeps
	// thinking off until the loop ends.
	if n := lastAssistant(conv); n >= 0 && toolLoop(conv, n) && !startsWithThinking(conv[n]) {
		return nil
	}
	switch m.Thinking {
	case ThinkingAdaptive:
		if _, ok := levelValue(m, level); !ok {
			return fmt.Errorf("thinkingLevel: %q is not a level of model %s (levels: %s)", level, req.Model, strings.Join(Levels(m), ", "))
		}
		out.Thinking = &thinkingParam{Type: "adaptive"}
		out.OutputConfig = &outputConfig{Effort: level}
	case ThinkingBudget:
		budget, ok := levelValue(m, level)
		if !ok {
			return fmt.Errorf("thinkingLevel: %q is not a level of model %s (levels: %s)", level, req.Model, strings.Join(Levels(m), ", "))
		}
		if out.MaxTokens <= budget {
			if explicitMax {
				// The turn's budget left less room than the thinking
				// budget: think within it, or not at all.
				budget = out.MaxTokens - 1
			} else {
				out.MaxTokens = budget + DefaultMaxTokens
			}
		}
		if budget < 1024 {
			return nil
		}
		out.Thinking = &thinkingParam{Type: "enabled", BudgetTokens: budget}
	default:
		return fmt.Errorf("model %s: unknown thinking mode %q", req.Model, m.Thinking)
	}
	// The API accepts no other temperature with thinking on.
	out.Temperature = nil
	return nil
}

func levelValue(m Model, level string) (int, bool) {
	levels := m.Levels
	if levels == nil {
		levels = DefaultBudgets
	}
	v, ok := levels[level]
	return v, ok
}

// Levels are the thinking levels m offers, "off" first, then by budget.
func Levels(m Model) []string {
	if m.Thinking == "" {
		return nil
	}
	levels := m.Levels
	if levels == nil {
		levels = DefaultBudgets
	}
	out := make([]string, 0, len(levels)+1)
	for k := range levels {
		out = append(out, k)
	}
	sort.Slice(out, func(a, b int) bool {
		if levels[out[a]] != levels[out[b]] {
			return levels[out[a]] < levels[out[b]]
		}
		return out[a] < out[b]
	})
	return append([]string{"off"}, out...)
}

func lastAssistant(conv []converted) int {
	for i := len(conv) - 1; i >= 0; i-- {
		if conv[i].role == "assistant" {
			return i
		}
	}
	return -1
}

// toolLoop: the assistant message n called tools and only their results
// (and user text riding with them) follow.
func toolLoop(conv []converted, n int) bool {
	called := false
	for _, b := range conv[n].blocks {
		called = called || b.Type == "tool_use"
	}
	if !called || n == len(conv)-1 {
		return false
	}
	return conv[n+1].blocks[0].Type == "tool_result"
}

func startsWithThinking(cv converted) bool {
	t := cv.blocks[0].Type
	return t == "thinking" || t == "redacted_thinking"
}

// markBreakpoints places at most four cache_control breakpoints so the
// stable prefix and the growing conversation are read from cache:
//
//  1. the system prompt (with the tools before it: the cache prefix runs
//     tools → system → messages), or the last tool without one;
//  2. the end of the stable prefix the session reported (a compacted
//     history's summary), which every later request repeats;
//  3. where the previous request's last breakpoint was, when the
//     conversation has since grown past the API's 20-block look-back, so
//     that prefix is still found;
//  4. the last block of the last message: the next request repeats it.
//
// Breakpoints go on the last block of a message that may carry one (never
// thinking blocks).
//
// A cache write costs 1.25× the input price and saves 0.9× at every later
// read, so writing the newest tool results pays when the model goes on
// calling tools (the next request reads them) more than one time in five.
// In a conversation where answers to tool results mostly end the turn
// (and the session's compaction then replaces the results), the last
// breakpoint goes before the results instead, and they are billed once at
// the input price. The conversation's own record decides; until it has
// three turn ends, results are written.
func markBreakpoints(out *wireRequest, conv []converted, stable int, st *convState) {
	left := maxBreakpoints
	switch {
	case len(out.System) > 0:
		out.System[len(out.System)-1].CacheControl = ephemeral
		left--
	case len(out.Tools) > 0:
		out.Tools[len(out.Tools)-1].CacheControl = ephemeral
		left--
	}
	if len(conv) == 0 {
		return
	}
	last := len(conv) - 1
	isResult := func(i int) bool { return conv[i].role == "user" && conv[i].blocks[0].Type == "tool_result" }
	tail := last
	if st != nil {
		st.mu.Lock()
		// What the model did with the last request's results, seen in the
		// answer that follows them now.
		if st.result && st.index < last && conv[st.index].digest == st.digest && conv[st.index+1].role == "assistant" {
			if slices.ContainsFunc(conv[st.index+1].blocks, func(b contentBlock) bool { return b.Type == "tool_use" }) {
				st.conts++
			} else {
				st.ends++
			}
		}
		if isResult(last) && st.ends >= 3 && st.conts*4 < st.ends {
			for tail > 0 && isResult(tail) {
				tail--
			}
		}
		st.result = isResult(last)
		st.mu.Unlock()
	}
	marked := map[int]bool{}
	mark := func(i int) {
		if i < 0 || i > last || marked[i] || left == 0 {
			return
		}
		for j := len(conv[i].blocks) - 1; j >= 0; j-- {
			if t := conv[i].blocks[j].Type; t != "thinking" && t != "redacted_thinking" {
				conv[i].blocks[j].CacheControl = ephemeral
				marked[i] = true
				left--
				return
			}
		}
	}
	// The tail is marked first so it always gets its breakpoint.
	mark(tail)
	if stable > 0 && stable-1 < last {
		mark(stable - 1)
	}
	if st != nil {
		st.mu.Lock()
		prev, prevDigest := st.index, st.digest
		st.index, st.digest = last, conv[last].digest
		st.mu.Unlock()
		if prevDigest != "" && prev < tail && conv[prev].digest == prevDigest && blocksBetween(conv, prev, tail) >= lookBack {
			mark(prev)
		}
	}
}

// blocksBetween counts the content blocks after message a through b.
func blocksBetween(conv []converted, a, b int) int {
	n := 0
	for i := a + 1; i <= b; i++ {
		n += len(conv[i].blocks)
	}
	return n
}
