package headless

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/acpd/acpd/acp"
)

// Input formats (--input-format).
const (
	InputText       = "text"
	InputStreamJSON = "stream-json"
)

// MaxInputLine bounds one line of stream-json input: a message with an
// image in it is large, but a line that never ends is a mistake, not a
// message.
const MaxInputLine = 16 << 20

// Input reads stream-json input: one JSON object a line, each a user
// message. The shape is the one Claude Code's --input-format stream-json
// takes, {"type":"user","message":{"role":"user","content":…}}, and its
// shorter form {"type":"user","content":…}; content is a string or an
// array of ACP content blocks (a text block is the same in both
// protocols). Other fields (session_id, parent_tool_use_id) are ignored:
// a run has one session. Blank lines are skipped.
type Input struct {
	r    *bufio.Reader
	line int
}

// NewInput reads stream-json lines from r.
func NewInput(r io.Reader) *Input {
	return &Input{r: bufio.NewReaderSize(r, 64<<10)}
}

// LineError is a malformed input line: which line, which field, why.
type LineError struct {
	Line  int
	Field string // "" when the line is not a JSON object at all
	Msg   string
}

func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("input line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("input line %d: %s: %s", e.Line, e.Field, e.Msg)
}

// Next returns the next message and its line number: io.EOF at the end, a
// *LineError for a malformed line (the line after it is read by the next
// call), another error when reading fails.
func (in *Input) Next() (int, []acp.ContentBlock, error) {
	for {
		b, err := in.readLine()
		if len(b) == 0 && err != nil {
			return in.line, nil, err
		}
		in.line++
		if errors.Is(err, errLongLine) {
			return in.line, nil, &LineError{Line: in.line, Msg: fmt.Sprintf("longer than %d MiB", MaxInputLine>>20)}
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		blocks, lerr := ParseInputLine(in.line, b)
		if lerr != nil {
			return in.line, nil, lerr
		}
		return in.line, blocks, nil
	}
}

var errLongLine = errors.New("line too long")

// readLine reads one line without its newline; a line past MaxInputLine is
// skipped to its end and reported as errLongLine.
func (in *Input) readLine() ([]byte, error) {
	var buf []byte
	for {
		frag, err := in.r.ReadSlice('\n')
		if len(buf)+len(frag) > MaxInputLine {
			buf = nil
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = in.r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return []byte{'\n'}, errLongLine
		}
		buf = append(buf, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil {
			return buf[:len(buf)-1], nil
		}
		return buf, err
	}
}

// inputLine is one line of stream-json input.
type inputLine struct {
	Type    *string         `json:"type"`
	Content json.RawMessage `json:"content"`
	Message *struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// ParseInputLine reads line n of stream-json input into the message's
// content blocks; its errors name the line and the field.
func ParseInputLine(n int, b []byte) ([]acp.ContentBlock, error) {
	bad := func(field, msg string) error { return &LineError{Line: n, Field: field, Msg: msg} }
	if len(b) == 0 || b[0] != '{' {
		return nil, bad("", `not a JSON object: each line is {"type":"user","message":{"role":"user","content":…}} or {"type":"user","content":…}`)
	}
	var l inputLine
	if err := json.Unmarshal(b, &l); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, bad(te.Field, fmt.Sprintf("must be a %s, not %s", jsonKind(te.Type.Kind().String()), te.Value))
		}
		return nil, bad("", "not valid JSON: "+err.Error())
	}
	switch {
	case l.Type == nil:
		return nil, bad("type", `missing: it is "user"`)
	case *l.Type != "user":
		return nil, bad("type", fmt.Sprintf("%q is not accepted: the one type is \"user\"", *l.Type))
	}
	field, raw := "content", l.Content
	if l.Message != nil {
		if len(l.Content) > 0 {
			return nil, bad("content", "give the content in message.content or in content, not both")
		}
		if l.Message.Role != "" && l.Message.Role != "user" {
			return nil, bad("message.role", fmt.Sprintf("%q is not accepted: the one role is \"user\"", l.Message.Role))
		}
		field, raw = "message.content", l.Message.Content
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, bad(field, "missing: a string or an array of content blocks")
	}
	var blocks []acp.ContentBlock
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, bad(field, err.Error())
		}
		if strings.TrimSpace(s) == "" {
			return nil, bad(field, "empty")
		}
		blocks = []acp.ContentBlock{acp.TextBlock(s)}
	case '[':
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return nil, bad(field, "not an array of content blocks: "+err.Error())
		}
		if len(blocks) == 0 {
			return nil, bad(field, "empty")
		}
		// The blocks are checked as a prompt's are, the errors renamed
		// to the line's field.
		if err := (&acp.SteeringRequest{SessionID: "input", Prompt: blocks}).Validate(); err != nil {
			f, msg := "", err.Error()
			var ae *acp.Error
			if errors.As(err, &ae) {
				f, _ = ae.Data.(map[string]any)["field"].(string)
				msg = ae.Message
			}
			rename := func(s string) string { return strings.ReplaceAll(s, "prompt", field) }
			return nil, bad(rename(f), rename(msg))
		}
		for i, blk := range blocks {
			if blk.Type == acp.ContentText && strings.TrimSpace(blk.Text) == "" && len(blocks) == 1 {
				return nil, bad(fmt.Sprintf("%s[%d].text", field, i), "empty")
			}
		}
	default:
		return nil, bad(field, "must be a string or an array of content blocks")
	}
	return blocks, nil
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "slice", "array":
		return "array"
	case "struct", "map", "ptr":
		return "object"
	}
	return k
}

// BlocksText is the text of blocks.
func BlocksText(blocks []acp.ContentBlock) string {
	var sb strings.Builder
	for _, b := range blocks {
		if b.Type == acp.ContentText {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}
