package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// inbound is the part of a message that bypasses jsonrpc2: the raw params
// (so they are decoded once, by DecodeParams) and the original id. The
// stream sets it in ReadObject and the handler takes it in Handle; jsonrpc2
// calls both on its single read goroutine, one message at a time.
type inbound struct {
	token  string          // internal id handed to jsonrpc2 ("" for notifications)
	key    string          // canonical id for $/cancel_request matching
	params json.RawMessage // nil when absent
}

// tokenPrefix marks the internal string ids that replace every inbound
// request id. jsonrpc2 v0.2.3 cannot represent negative or huge integer ids
// (it casts through uint64), so the original bytes are kept in Conn.ids and
// spliced back into the response.
const tokenPrefix = "acpd-in-"

// lineStream is the jsonrpc2.ObjectStream: one JSON object per line, a size
// cap, and error replies for lines jsonrpc2 would otherwise die on.
type lineStream struct {
	c   *Conn
	br  *bufio.Reader
	r   io.Reader
	w   io.Writer
	max int

	wmu sync.Mutex // guards w; innermost lock, held for one Write

	cur inbound // read goroutine only

	eofOnce sync.Once
	eof     chan struct{} // closed when the reader hit EOF or a read error
	readErr error         // set before eof is closed

	closeOnce sync.Once
	closed    chan struct{}
}

func newLineStream(c *Conn, r io.Reader, w io.Writer, max int) *lineStream {
	return &lineStream{
		c: c, r: r, w: w, max: max,
		br:     bufio.NewReaderSize(r, 64<<10),
		eof:    make(chan struct{}),
		closed: make(chan struct{}),
	}
}

// errLineTooLong is returned by readLine for a line over the cap; the line
// has been consumed and discarded.
var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline. A line longer than
// max is skipped chunk by chunk, so it is never held in memory whole.
func (s *lineStream) readLine() ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := s.br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > s.max+1 { // +1: the newline itself
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, errLineTooLong
			}
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0 && !tooLong:
			return line, nil // last line without newline; EOF comes next call
		case err == io.EOF && tooLong:
			return nil, errLineTooLong
		default:
			return nil, err
		}
	}
}

// ReadObject reads lines until one is a message jsonrpc2 can handle and
// decodes a normalised form of it into v. Bad lines are answered here and
// skipped. On EOF it does not return at once: it reports EOF to Serve and
// blocks until the stream is closed, so jsonrpc2 keeps the connection open
// while cancelled requests are still being answered.
func (s *lineStream) ReadObject(v any) error {
	for {
		line, err := s.readLine()
		if errors.Is(err, errLineTooLong) {
			s.c.log.Warn("discarded oversized line", "max_bytes", s.max)
			s.writeError(nil, ErrInvalidRequest(fmt.Sprintf("message exceeds the maximum line size of %d bytes", s.max)))
			continue
		}
		if err != nil {
			s.eofOnce.Do(func() {
				s.readErr = err
				close(s.eof)
			})
			<-s.closed
			return err
		}
		if s.c.opts.Trace {
			s.c.log.Debug("acp recv", "message", tracedLine(line))
		}
		norm := s.classify(line)
		if norm == nil {
			continue
		}
		if err := json.Unmarshal(norm, v); err != nil {
			// Unreachable by construction; never let it kill the connection.
			s.c.log.Error("normalised message rejected by jsonrpc2", "err", err)
			s.c.dropToken(s.cur.token)
			continue
		}
		return nil
	}
}

// classify validates one line. It answers invalid messages itself and returns
// nil for them; otherwise it returns a normalised message for jsonrpc2.
func (s *lineStream) classify(line []byte) []byte {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	// One Unmarshal both validates and splits the envelope; a type error
	// means valid JSON that is not an object.
	var env map[string]json.RawMessage
	if err := json.Unmarshal(line, &env); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case !errors.As(err, &te):
			s.writeError(nil, ErrParse("invalid JSON"))
		case line[0] == '[':
			s.writeError(nil, ErrInvalidRequest("batch requests are not supported"))
		default:
			s.writeError(nil, ErrInvalidRequest("message must be a JSON object"))
		}
		return nil
	}
	if env == nil { // the line was `null`
		s.writeError(nil, ErrInvalidRequest("message must be a JSON object"))
		return nil
	}
	idRaw, hasID := env["id"]
	methodRaw, hasMethod := env["method"]
	result, hasResult := env["result"]
	errRaw, hasError := env["error"]
	var idKeyStr string
	idOK := false
	if hasID {
		idKeyStr, idOK = idKey(idRaw)
	}
	replyID := json.RawMessage(nil) // null unless the id is usable
	if idOK {
		replyID = idRaw
	}
	if hasID && !idOK {
		s.writeError(nil, ErrInvalidRequest("id must be a string, an integer or null"))
		return nil
	}

	if !hasMethod {
		if !hasResult && !hasError {
			if hasID {
				s.writeError(replyID, ErrInvalidRequest("message has neither method nor result/error"))
			} else {
				s.writeError(nil, ErrInvalidRequest("message has neither method nor id"))
			}
			return nil
		}
		return s.normaliseResponse(idRaw, hasID, result, hasResult, errRaw, hasError)
	}

	if jr, ok := env["jsonrpc"]; !ok || string(bytes.TrimSpace(jr)) != `"2.0"` {
		s.writeError(replyIDIf(hasID, replyID), ErrInvalidRequest(`jsonrpc must be "2.0"`))
		return nil
	}
	var method string
	if err := json.Unmarshal(methodRaw, &method); err != nil || method == "" {
		s.writeError(replyIDIf(hasID, replyID), ErrInvalidRequest("method must be a non-empty string"))
		return nil
	}
	if hasResult || hasError {
		s.writeError(replyIDIf(hasID, replyID), ErrInvalidRequest("a request must not carry result or error"))
		return nil
	}
	mq, _ := json.Marshal(method)
	params := env["params"]
	if !hasID {
		s.cur = inbound{params: params}
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%s}`, mq)
	}
	token := s.c.registerID(idRaw, idKeyStr)
	s.cur = inbound{token: token, key: idKeyStr, params: params}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%q,"method":%s}`, token, mq)
}

func replyIDIf(has bool, id json.RawMessage) json.RawMessage {
	if has {
		return id
	}
	return nil
}

// normaliseResponse passes a response to one of our outbound calls on to
// jsonrpc2. Our ids are strings, so anything else cannot match and is
// dropped here (jsonrpc2 would close the connection on a negative id).
func (s *lineStream) normaliseResponse(idRaw json.RawMessage, hasID bool, result json.RawMessage, hasResult bool, errRaw json.RawMessage, hasError bool) []byte {
	var id string
	if !hasID || json.Unmarshal(idRaw, &id) != nil {
		s.c.log.Debug("ignoring response with a non-string id", "id", string(idRaw))
		return nil
	}
	qid := strconv.Quote(id)
	if hasResult && hasError {
		// Deliver it as an error so the waiting call does not hang.
		hasResult = false
	}
	if hasResult {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, qid, result)
	}
	var e struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(errRaw, &e); err != nil || string(bytes.TrimSpace(errRaw)) == "null" {
		e.Code, e.Message, e.Data = CodeInternalError, "malformed error response from client", nil
	}
	out := struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}{e.Code, e.Message, e.Data}
	eb, _ := json.Marshal(out)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":%s}`, qid, eb)
}

// writeError writes an error response directly; id nil means null.
func (s *lineStream) writeError(id json.RawMessage, e *Error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *Error          `json:"error"`
	}{"2.0", id, e})
	if err != nil {
		s.c.log.Error("marshal error response", "err", err)
		return
	}
	if err := s.writeLine(b); err != nil {
		s.c.log.Warn("write error response", "err", err)
	}
}

// WriteObject writes one message per line, restoring the client's original
// id on responses.
func (s *lineStream) WriteObject(obj any) error {
	var b []byte
	var err error
	if m, ok := obj.(json.Marshaler); ok {
		b, err = m.MarshalJSON()
	} else {
		b, err = json.Marshal(obj)
	}
	if err != nil {
		return err
	}
	const head = `{"id":"` + tokenPrefix
	if bytes.HasPrefix(b, []byte(head)) {
		end := bytes.IndexByte(b[len(`{"id":"`):], '"')
		if end < 0 {
			return fmt.Errorf("acp: malformed response id")
		}
		tok := string(b[len(`{"id":"`) : len(`{"id":"`)+end])
		raw, ok := s.c.takeID(tok)
		if !ok {
			return fmt.Errorf("acp: response for unknown request %s", tok)
		}
		rest := b[len(`{"id":"`)+end+1:]
		nb := make([]byte, 0, len(b)+len(raw))
		nb = append(nb, `{"id":`...)
		nb = append(nb, raw...)
		b = append(nb, rest...)
	}
	return s.writeLine(b)
}

func (s *lineStream) writeLine(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.c.opts.Trace {
		s.c.log.Debug("acp send", "message", tracedLine(b))
	}
	if cap(b) > len(b) {
		b = append(b, '\n')
		_, err := s.w.Write(b)
		return err
	}
	buf := make([]byte, len(b)+1)
	copy(buf, b)
	buf[len(b)] = '\n'
	_, err := s.w.Write(buf)
	return err
}

// Close unblocks ReadObject and closes the reader if it can be closed. The
// writer (stdout) is left open: the process owns it.
func (s *lineStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		if c, ok := s.r.(io.Closer); ok {
			err = c.Close()
		}
	})
	return err
}

// tracedLine is one wire line as the trace logs it: at the stream, where
// the client's own ids and the whole params are still there and every
// outbound message (responses, session/update, requests to the client)
// passes. The JSON log embeds it as JSON, the text log as its text.
type tracedLine []byte

func (l tracedLine) MarshalJSON() ([]byte, error) {
	if t := bytes.TrimSpace(l); json.Valid(t) {
		return t, nil
	}
	return json.Marshal(string(l)) // a bad line, logged as the text it was
}

func (l tracedLine) MarshalText() ([]byte, error) { return bytes.TrimSpace(l), nil }
