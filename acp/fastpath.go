package acp

import (
	"encoding/json"
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

// appendJSONString appends s as a JSON string. Plain printable ASCII is
// copied directly; any other string is left to encoding/json, which handles
// escapes, invalid UTF-8 and U+2028/U+2029.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
