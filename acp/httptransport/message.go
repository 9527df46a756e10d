package httptransport

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// JSON-RPC codes used in error bodies.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInternalError  = -32603
)

// message is one parsed line.
type message struct {
	method    string // "" when absent or not a string
	hasMethod bool
	id        string // the id's compact JSON; "" when absent
	sessionID string // params.sessionId (requests, notifications)
	resultSID string // result.sessionId (responses)
	isError   bool   // a response carrying error
}

// isRequest reports a message that expects a reply.
func (m *message) isRequest() bool { return m.hasMethod && m.id != "" && m.id != "null" }

// isResponse reports a reply to a request.
func (m *message) isResponse() bool { return !m.hasMethod && m.id != "" }

// errNotObject reports a line that is not a JSON object.
var errNotObject = errors.New("message must be a JSON object")

// parseMessage reads the routing fields of one line of valid JSON (the
// client's lines are compacted, which validates them, before this; the
// agent's come from acp.Conn). It scans the top level only and skips every
// other value without decoding it: a 1 MiB file in a session/update costs
// one pass, not a decode. It fails when the line is not an object and
// never reads out of bounds on anything else.
func parseMessage(line []byte) (message, error) {
	var m message
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return m, errNotObject
	}
	err := scanObject(line, i, func(key string, v []byte) {
		switch key {
		case "id":
			m.id = string(v)
		case "method":
			m.hasMethod = true
			m.method = ""
			if len(v) > 0 && v[0] == '"' {
				m.method, _ = unquote(v)
			}
		case "params":
			m.sessionID = sessionIDIn(v)
		case "result":
			m.resultSID = sessionIDIn(v)
		case "error":
			m.isError = string(v) != "null"
		}
	})
	if err != nil {
		return message{}, err
	}
	if m.hasMethod {
		m.resultSID, m.isError = "", false
	} else {
		m.sessionID = ""
	}
	return m, nil
}

// sessionIDIn returns the string sessionId member of a JSON object, or "".
func sessionIDIn(v []byte) string {
	if len(v) == 0 || v[0] != '{' {
		return ""
	}
	sid := ""
	_ = scanObject(v, 0, func(key string, val []byte) {
		if key == "sessionId" {
			sid = ""
			if len(val) > 0 && val[0] == '"' {
				sid, _ = unquote(val)
			}
		}
	})
	return sid
}

func plainASCII(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return false
		}
	}
	return true
}

var errSyntax = errors.New("malformed JSON")

// scanObject calls f for each member of the object starting at b[i] with
// the member's raw value. A key repeated is reported each time, so the
// last one wins, as encoding/json decides.
func scanObject(b []byte, i int, f func(key string, v []byte)) error {
	i++ // '{'
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return errSyntax
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] == ',' {
			i = skipWS(b, i+1)
			if i >= len(b) {
				return errSyntax
			}
		}
		if b[i] != '"' {
			return errSyntax
		}
		ke := skipString(b, i)
		if ke < 0 {
			return errSyntax
		}
		key, ok := unquote(b[i:ke])
		if !ok {
			return errSyntax
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return errSyntax
		}
		vs := skipWS(b, i+1)
		ve := skipValue(b, vs)
		if ve < 0 {
			return errSyntax
		}
		f(key, b[vs:ve])
		i = ve
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i], or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index after the value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := skipString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// unquote decodes a JSON string token; plain ASCII without escapes (every
// method and session id acpd makes) is sliced, the rest decoded as
// encoding/json does (invalid UTF-8 becomes U+FFFD, as acp.Conn sees it).
func unquote(tok []byte) (string, bool) {
	if len(tok) >= 2 && plainASCII(tok[1:len(tok)-1]) {
		return string(tok[1 : len(tok)-1]), true
	}
	var s string
	if json.Unmarshal(tok, &s) != nil {
		return "", false
	}
	return s, true
}

// validID reports a JSON-RPC id acp.Conn can echo: a string, an integer
// without leading zeros, or null. Any other id would be answered with a
// null id, so its reply could never be matched (initialize would wait
// forever, a routing entry would never be freed).
func validID(id string) bool {
	if id == "" || id == "null" || id[0] == '"' {
		return true // strings were validated by the JSON decoder
	}
	d := strings.TrimPrefix(id, "-")
	if d == "" || (len(d) > 1 && d[0] == '0') || id == "-0" {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// compactLine returns msg as one line of compact JSON. It fails on invalid
// JSON.
func compactLine(msg []byte) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(msg) + 1)
	if err := json.Compact(&b, msg); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// errorBody is a JSON-RPC error response with a null id.
func errorBody(code int, msg string) []byte {
	m, _ := json.Marshal(msg)
	return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":` + strconv.Itoa(code) + `,"message":` + string(m) + `}}`)
}

// writeError answers an HTTP request with status and a JSON-RPC error body,
// so clients that parse error bodies (the SDK keeps them as error data) see
// what went wrong.
func writeError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(code, msg))
}
