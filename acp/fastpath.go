package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// appendTextChunk encodes the common streaming notification (a text chunk
// without annotations or _meta) by hand; it reports false for anything else,
// which then takes the generic json.Marshal path. The output is equivalent
// JSON (checked by TestAppendTextChunk_MatchesMarshal).
func appendTextChunk(b []byte, n *SessionNotification) ([]byte, bool) {
	u := &n.Update
	switch u.Kind {
	case UpdateAgentMessageChunk, UpdateAgentThoughtChunk, UpdateUserMessageChunk:
	default:
		return b, false
	}
	c := u.Content
	if c == nil || c.Type != ContentText || len(c.Annotations) > 0 || len(c.Meta) > 0 || len(u.Meta) > 0 || len(n.Meta) > 0 {
		return b, false
	}
	b = append(b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`...)
	b = appendJSONString(b, n.SessionID)
	b = append(b, `,"update":{"sessionUpdate":"`...)
	b = append(b, u.Kind...)
	b = append(b, `","content":{"type":"text","text":`...)
	b = appendJSONString(b, c.Text)
	b = append(b, '}')
	if u.MessageID != "" {
		b = append(b, `,"messageId":`...)
		b = appendJSONString(b, u.MessageID)
	}
	return append(b, "}}}"...), true
}

// AppendJSONString appends s as a JSON string, byte for byte as
// encoding/json writes it (see appendJSONString).
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s) }

// AppendToolCallContents appends cs as a JSON array, exactly as
// json.Marshal(cs) writes it (cs not nil), without encoding/json's second
// pass over each element's output.
func AppendToolCallContents(b []byte, cs []ToolCallContent) ([]byte, error) {
	var err error
	b = append(b, '[')
	for i := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendToolCallContent(b, &cs[i]); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// AppendToolCallLocations appends ls as a JSON array, exactly as
// json.Marshal(ls) writes it (ls not nil).
func AppendToolCallLocations(b []byte, ls []ToolCallLocation) []byte {
	b = append(b, '[')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"path":`...)
		b = appendJSONString(b, l.Path)
		if l.Line != nil {
			b = append(b, `,"line":`...)
			b = strconv.AppendInt(b, int64(*l.Line), 10)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// AppendJSONValue appends v as encoding/json writes it as a struct field:
// a json.RawMessage compacted (and checked), anything else marshalled.
func AppendJSONValue(b []byte, v any) ([]byte, error) { return appendAny(b, v) }

// appendJSONString appends s as a JSON string, byte for byte as
// encoding/json writes it: HTML-safe (<, >, & escaped), control characters
// escaped, invalid UTF-8 replaced by U+FFFD, and U+2028/U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default: // other control characters and <, >, &
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// The encoders below write the tool-call frames (every call sends two or
// three, and the transcript records two) without encoding/json's reflection
// and its re-validation of each nested MarshalJSON's output. They produce
// exactly what encoding/json produces (TestFastEncoders_MatchMarshal and
// FuzzAppendJSONString); anything unusual goes through encoding/json.

// appendContentBlock appends b's JSON.
func appendContentBlock(out []byte, b *ContentBlock) ([]byte, error) {
	if b.Type == ContentText && len(b.Annotations) == 0 && len(b.Meta) == 0 {
		out = append(out, `{"type":"text","text":`...)
		out = appendJSONString(out, b.Text)
		return append(out, '}'), nil
	}
	j, err := b.marshalVariant()
	if err != nil {
		return out, err
	}
	return append(out, j...), nil
}

// appendToolCallContent appends c's JSON.
func appendToolCallContent(out []byte, c *ToolCallContent) ([]byte, error) {
	switch c.Type {
	case ToolContentContent:
		if c.Content == nil {
			return out, fmt.Errorf("acp: tool call content without content")
		}
		out = append(out, `{"type":"content","content":`...)
		out, err := appendContentBlock(out, c.Content)
		if err != nil {
			return out, err
		}
		return append(out, '}'), nil
	case ToolContentDiff:
		out = append(out, `{"type":"diff","path":`...)
		out = appendJSONString(out, c.Path)
		if c.OldText != nil {
			out = append(out, `,"oldText":`...)
			out = appendJSONString(out, *c.OldText)
		}
		out = append(out, `,"newText":`...)
		if c.NewText != nil {
			out = appendJSONString(out, *c.NewText)
		} else {
			out = append(out, `""`...)
		}
		return append(out, '}'), nil
	case ToolContentTerminal:
		out = append(out, `{"type":"terminal","terminalId":`...)
		out = appendJSONString(out, c.TerminalID)
		return append(out, '}'), nil
	default:
		return out, fmt.Errorf("acp: unknown tool call content type %q", c.Type)
	}
}

// toolCallFields are the fields ToolCall and ToolCallUpdate share, in their
// declaration order; title is written by the caller's rules.
type toolCallFields struct {
	kind      string
	id        string
	title     *string
	name      string
	toolKind  ToolKind
	status    ToolCallStatus
	content   []ToolCallContent
	locations []ToolCallLocation
	rawInput  any
	rawOutput any
	meta      Meta
}

// appendToolCallUpdate appends a tool_call or tool_call_update update
// object, sessionUpdate first.
func appendToolCallUpdate(out []byte, f *toolCallFields) ([]byte, error) {
	var err error
	out = append(out, `{"sessionUpdate":`...)
	out = appendJSONString(out, f.kind)
	out = append(out, `,"toolCallId":`...)
	out = appendJSONString(out, f.id)
	if f.title != nil {
		out = append(out, `,"title":`...)
		out = appendJSONString(out, *f.title)
	}
	if f.name != "" {
		out = append(out, `,"name":`...)
		out = appendJSONString(out, f.name)
	}
	if f.toolKind != "" {
		out = append(out, `,"kind":`...)
		out = appendJSONString(out, string(f.toolKind))
	}
	if f.status != "" {
		out = append(out, `,"status":`...)
		out = appendJSONString(out, string(f.status))
	}
	if len(f.content) > 0 {
		out = append(out, `,"content":`...)
		if out, err = AppendToolCallContents(out, f.content); err != nil {
			return out, err
		}
	}
	if len(f.locations) > 0 {
		out = append(out, `,"locations":`...)
		out = AppendToolCallLocations(out, f.locations)
	}
	if f.rawInput != nil {
		out = append(out, `,"rawInput":`...)
		if out, err = appendAny(out, f.rawInput); err != nil {
			return out, err
		}
	}
	if f.rawOutput != nil {
		out = append(out, `,"rawOutput":`...)
		if out, err = appendAny(out, f.rawOutput); err != nil {
			return out, err
		}
	}
	if len(f.meta) > 0 {
		out = append(out, `,"_meta":`...)
		if out, err = appendAny(out, f.meta); err != nil {
			return out, err
		}
	}
	return append(out, '}'), nil
}

// appendAny appends v as encoding/json would inside a struct: raw JSON
// compacted (and checked), anything else marshalled.
func appendAny(out []byte, v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if raw == nil {
			return append(out, "null"...), nil
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return out, err
		}
		if !needsHTMLEscape(buf.Bytes()) {
			return append(out, buf.Bytes()...), nil
		}
	}
	j, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	return append(out, j...), nil
}

// needsHTMLEscape reports bytes that encoding/json escapes inside raw JSON
// it re-emits (<, >, & and the UTF-8 encodings of U+2028/U+2029).
func needsHTMLEscape(b []byte) bool {
	return bytes.ContainsAny(b, "<>&\u2028\u2029")
}
