package httptransport

import (
	"bytes"
	"encoding/json"
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

// envelope is the part of a JSON-RPC message the transport reads to route
// it. Raw fields keep whatever JSON they hold, so any object decodes.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

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

// parseMessage reads the routing fields of one compact JSON line. It fails
// only when the line is not a JSON object.
func parseMessage(line []byte) (message, error) {
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return message{}, err
	}
	m := message{id: string(env.ID)}
	if env.Method != nil {
		m.hasMethod = true
		_ = json.Unmarshal(env.Method, &m.method)
		m.sessionID = sessionIDIn(env.Params)
	} else {
		m.resultSID = sessionIDIn(env.Result)
		m.isError = env.Error != nil && string(env.Error) != "null"
	}
	return m, nil
}

// sessionIDIn returns the string sessionId member of a JSON object, or "".
func sessionIDIn(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var v struct {
		SessionID json.RawMessage `json:"sessionId"`
	}
	if json.Unmarshal(raw, &v) != nil || len(v.SessionID) == 0 || v.SessionID[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(v.SessionID, &s) != nil {
		return ""
	}
	return s
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
