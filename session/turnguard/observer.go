package turnguard

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/loopdetect"
)

// This file is the guard's view of another agent's tool calls: ACP
// tool_call and tool_call_update notifications and permission requests as
// an observer between editor and agent sees them, turned into the (tool
// name, input) calls the Guard counts. What each agent sends differs
// (guard.md §2): some send the input with the first frame, some an empty or
// partial one first and the full one later, some never send one, some ask
// permission for a call they never announced. The rules:
//
//   - A call is its toolCallId; every frame is an upsert. It is counted once,
//     when first seen.
//   - Its key is final at the first of: a frame whose status says it runs or
//     ran (in_progress, completed, failed) — an agent only runs a call whose
//     input is complete; the permission request for it — the last moment
//     the guard can still refuse the call, so the decision is made there; or
//     the end of the turn. Until then a later non-empty rawInput replaces
//     the one held (an empty {} never replaces anything), so an empty or
//     partial first input gives way to the full one.
//   - The key is (tool name, input): the name from the standard `name`
//     field, else _meta's toolName, claudeCode.toolName or
//     goose.toolCall.toolName, else a tool name the id is built from
//     (`read_file__call_1`, `read_file-1712345678901-0`), else the title's
//     first word; the input is rawInput with volatile per-call fields
//     dropped, or, for a call that never showed an input, its kind,
//     locations and title.
//
// Which input members are volatile, and why, is in volatile.go.

// Frame is what one message says about a tool call: a tool_call or
// tool_call_update update, or the toolCall of a permission request. Raw
// fields are nil when absent.
type Frame struct {
	ToolCallID string
	Name       string // the standard name field, when the agent sends it
	Title      string
	Kind       string
	Status     string
	RawInput   json.RawMessage
	Locations  json.RawMessage
	Meta       json.RawMessage
	// Content and RawOutput are what the frame says the call returned.
	Content   json.RawMessage
	RawOutput json.RawMessage
	// Permission marks the toolCall of a session/request_permission.
	Permission bool
}

// Tool-call statuses (ACP ToolCallStatus).
const (
	statusPending    = "pending"
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusFailed     = "failed"
)

// Call is one observed tool call.
type Call struct {
	ID string
	// Name, Input and Key are set once the key is final: Input is exactly
	// what Key hashes (loopdetect.ToolCallRepeatKeyJSON(Name, Input)), so a
	// transcript that keeps Name and Input lets `acpd stats` rebuild Key.
	Name  string
	Input json.RawMessage
	Key   string
	Final bool
	// Rejected marks a call whose permission the editor refused or
	// cancelled: its failure is the user's answer, not the tool's.
	Rejected bool

	name, metaName, title, kind string
	input, locations            json.RawMessage
	ended                       bool
	// content and output are the latest non-empty content and rawOutput
	// the frames carried, until Result digests them.
	content, output json.RawMessage
}

// Event is what one frame changed.
type Event struct {
	Call *Call
	// New: the call was first seen; count it (Guard.RecordCall).
	New bool
	// Final: its key just became final (Guard.RecordKey).
	Final bool
	// Ended is "completed" or "failed" the first time the call reaches one.
	Ended string
}

// Observer keys one turn's tool calls. It is used from one goroutine.
type Observer struct {
	calls map[string]*Call
	order []*Call // first-seen order, from the first not yet released by Ready
	keyer loopdetect.RepeatKeyer
	// Now is the clock volatile stamps are compared with (nil: time.Now);
	// tests replaying recorded frames set the time they were recorded.
	Now func() time.Time
}

func (o *Observer) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// NewObserver returns an empty observer for one turn.
func NewObserver() *Observer {
	return &Observer{calls: map[string]*Call{}}
}

// Get returns the call with id, nil when unseen.
func (o *Observer) Get(id string) *Call { return o.calls[id] }

// Observe folds one frame in. Frames without a toolCallId are ignored: they
// cannot be told apart.
func (o *Observer) Observe(f Frame) Event {
	if f.ToolCallID == "" {
		return Event{}
	}
	c := o.calls[f.ToolCallID]
	ev := Event{}
	if c == nil {
		c = &Call{ID: f.ToolCallID}
		o.calls[f.ToolCallID] = c
		o.order = append(o.order, c)
		ev.New = true
	}
	ev.Call = c
	if !c.Final {
		if f.Name != "" {
			c.name = f.Name
		}
		if n := metaToolName(f.Meta); n != "" {
			c.metaName = n
		}
		if f.Title != "" {
			c.title = f.Title
		}
		if f.Kind != "" {
			c.kind = f.Kind
		}
		if len(f.Locations) > 0 && !emptyJSON(f.Locations) {
			c.locations = bytes.Clone(f.Locations)
		}
		if !emptyJSON(f.RawInput) {
			c.input = bytes.Clone(f.RawInput)
		}
		if f.Permission || (f.Status != "" && f.Status != statusPending) {
			o.finalize(c)
			ev.Final = true
		}
	}
	if !c.ended {
		if !emptyJSON(f.Content) {
			c.content = bytes.Clone(f.Content)
		}
		if !emptyJSON(f.RawOutput) {
			c.output = bytes.Clone(f.RawOutput)
		}
	}
	if !c.ended && (f.Status == statusCompleted || f.Status == statusFailed) {
		c.ended = true
		ev.Ended = f.Status
	}
	return ev
}

// FinalizeAll makes every open key final (the turn ended or stopped) and
// returns the calls it finalized.
func (o *Observer) FinalizeAll() []*Call {
	var out []*Call
	for _, c := range o.order {
		if !c.Final {
			o.finalize(c)
			out = append(out, c)
		}
	}
	return out
}

// Finalize makes c's key final now, with the input it has; false when it
// already was.
func (o *Observer) Finalize(c *Call) bool {
	if c.Final {
		return false
	}
	o.finalize(c)
	return true
}

// HasInput reports whether a call not yet final has seen a non-empty
// rawInput (an empty {} placeholder does not count).
func (c *Call) HasInput() bool { return len(c.input) > 0 }

// Shown is what the call's frames showed so far: its title, ACP kind,
// latest raw input and locations, and its latest rawOutput, else content,
// until Result digests them (what `acpd guard`'s hooks are told of
// another agent's call).
func (c *Call) Shown() (title, kind string, input, locations, output json.RawMessage) {
	output = c.output
	if len(output) == 0 {
		output = c.content
	}
	return c.title, c.kind, c.input, c.locations, output
}

// Ready returns the calls whose keys are final, in first-seen order, that
// it has not returned before; it stops at the first call still open, so a
// transcript records calls in the order they were counted.
func (o *Observer) Ready() []*Call {
	n := 0
	for n < len(o.order) && o.order[n].Final {
		n++
	}
	out := o.order[:n:n]
	o.order = o.order[n:]
	return out
}

func (o *Observer) finalize(c *Call) {
	c.Final = true
	c.Name = c.toolName()
	if len(c.input) > 0 {
		c.Input = dropVolatile(c.input, c.ID, o.now())
	} else {
		c.Input = fallbackInput(c.kind, c.locations, c.title)
	}
	k, err := o.keyer.KeyJSON(c.Name, c.Input)
	if err != nil {
		// Not JSON after all: key the text, kept as a JSON string, as the
		// daemon keys arguments it cannot parse.
		c.Input, _ = json.Marshal(string(c.Input))
		k, _ = o.keyer.KeyJSON(c.Name, c.Input)
	}
	c.Key = k
	c.input, c.locations = nil, nil
}

// Result digests what an ended call returned for the result signal
// (loopdetect.ResultHash): the text of its content (text blocks, and a
// diff's path and new text), else its rawOutput with volatile members
// dropped as from an input. ok is false when the agent reported neither
// (a terminal's output stays with the editor). It frees what it read.
func (o *Observer) Result(c *Call, failed bool) (h uint64, ok bool) {
	text, ok := resultText(c.content)
	if !ok && len(c.output) > 0 {
		text, ok = string(dropVolatileOutput(c.output, c.ID, o.now())), true
	}
	c.content, c.output = nil, nil
	if !ok {
		return 0, false
	}
	return loopdetect.ResultHash(failed, text), true
}

// resultText is the text of ACP tool-call content; ok is false when it
// holds none (only terminals, or nothing).
func resultText(content json.RawMessage) (string, bool) {
	if len(content) == 0 {
		return "", false
	}
	var blocks []struct {
		Type    string `json:"type"`
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Path    string `json:"path"`
		NewText string `json:"newText"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return string(content), true
	}
	var b strings.Builder
	ok := false
	for _, bl := range blocks {
		switch bl.Type {
		case "content":
			if bl.Content.Type == "text" {
				b.WriteString(bl.Content.Text)
			} else {
				b.WriteString(bl.Content.Type)
			}
			ok = true
		case "diff":
			b.WriteString(bl.Path)
			b.WriteByte('\n')
			b.WriteString(bl.NewText)
			ok = true
		}
		b.WriteByte('\n')
	}
	return b.String(), ok
}

// ToolName is the call's tool name: Name once final, else the name the
// frames seen so far give.
func (c *Call) ToolName() string {
	if c.Final {
		return c.Name
	}
	return c.toolName()
}

// toolName picks the call's tool name by the rules above.
func (c *Call) toolName() string {
	switch {
	case c.name != "":
		return c.name
	case c.metaName != "":
		return c.metaName
	}
	if n := idToolName(c.ID); n != "" {
		return n
	}
	if w, _, _ := strings.Cut(strings.TrimSpace(c.title), " "); w != "" {
		return strings.TrimSuffix(w, ":")
	}
	if c.kind != "" {
		return c.kind
	}
	return UnknownTool
}

// metaToolName reads the tool name agents put in _meta.
func metaToolName(meta json.RawMessage) string {
	if len(meta) == 0 || !bytes.Contains(meta, []byte("oolName")) {
		return ""
	}
	var m struct {
		ToolName   string `json:"toolName"`
		ClaudeCode struct {
			ToolName string `json:"toolName"`
		} `json:"claudeCode"`
		Goose struct {
			ToolCall struct {
				ToolName string `json:"toolName"`
			} `json:"toolCall"`
		} `json:"goose"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return ""
	}
	switch {
	case m.ToolName != "":
		return m.ToolName
	case m.ClaudeCode.ToolName != "":
		return m.ClaudeCode.ToolName
	}
	return m.Goose.ToolCall.ToolName
}

// idNamed matches the ids agents build from the tool name: Gemini CLI's
// `<tool>-<ms>-<n>` and `<tool>__<model's call id>`.
var idNamed = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_.]*?)(?:-\d{10,}-\d+|__.+)$`) })

func idToolName(id string) string {
	if m := idNamed().FindStringSubmatch(id); m != nil {
		return m[1]
	}
	return ""
}

// emptyJSON reports whether raw is absent or an empty value: null, {}, [],
// "".
func emptyJSON(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" || string(b) == `""` {
		return true
	}
	if len(b) >= 2 && (b[0] == '{' && b[len(b)-1] == '}' || b[0] == '[' && b[len(b)-1] == ']') {
		return len(bytes.TrimSpace(b[1:len(b)-1])) == 0
	}
	return false
}

// fallbackInput is the input of a call that never showed one: what the
// editor is shown of it.
func fallbackInput(kind string, locations json.RawMessage, title string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"kind":`)
	k, _ := json.Marshal(kind)
	b.Write(k)
	if len(locations) > 0 && json.Valid(locations) {
		b.WriteString(`,"locations":`)
		b.Write(locations)
	}
	b.WriteString(`,"title":`)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(title)
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return append(out, '}')
}
