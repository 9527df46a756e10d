// Package sse reads server-sent event streams, as every model wire protocol
// acpd speaks streams its answers: OpenAI chat completions and Responses
// (`data:` only, ended by `[DONE]` or EOF), Anthropic Messages (`event:` and
// `data:`) and Gemini (`data:` lines separated by CRLF blank lines).
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxEventBytes bounds one line and one event of a stream: its `data:`
// lines together, or any other line. The largest events providers send are
// a whole tool call (Gemini sends function calls whole) and Responses'
// response.completed, which repeats the answer's items: a few MiB at most
// for a model's longest answer, so 16 MiB is generous and still bounds what
// one hostile or broken endpoint can make acpd hold (the line being
// assembled plus the event, at most twice this).
const MaxEventBytes = 16 << 20

// TooLargeError is a line or an event past the reader's bound. The rest of
// the body is not read: the answer is unusable, and retrying would only
// fetch it again.
type TooLargeError struct{ Limit int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the model server sent a stream event over %d MiB, the bound of one event; the answer was dropped", e.Limit>>20)
}

// Kind is what a dispatched server-sent event carries.
type Kind int

const (
	Data  Kind = iota + 1 // a data payload (one JSON chunk)
	Error                 // an `error:` field or `event: error` (old llama.cpp)
	Done                  // data: [DONE]
)

// Reader splits an SSE body into events. It is lenient where providers
// are sloppy: \r\n or \n endings, comments anywhere, a pending event flushed
// at EOF (llama.cpp sends [DONE] without the blank line), and long lines
// (whole tool arguments can arrive in one data line) up to MaxEventBytes.
type Reader struct {
	r        *bufio.Reader
	max      int
	line     []byte // reassembly buffer for lines longer than the bufio buffer
	data     []byte
	errData  []byte
	hasData  bool
	hasError bool
	isErrEvt bool
	event    []byte // the pending event's `event:` name
	name     []byte // the last dispatched event's name
	comments int
}

// readers recycles the 64 KiB line buffers: a turn makes one model request
// per tool round.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

func NewReader(r io.Reader) *Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return &Reader{r: br, max: MaxEventBytes}
}

// SetMax changes the bound of one line and one event (tests).
func (s *Reader) SetMax(n int) { s.max = n }

// Release returns the buffer; s and the slices it returned are then dead.
func (s *Reader) Release() {
	s.r.Reset(nil)
	readers.Put(s.r)
	s.r = nil
}

var doneMarker = []byte("[DONE]")

// Next returns the next event. The returned slice is valid until the next
// call. At the end of the body it returns io.EOF; a body cut inside a line
// still dispatches what was complete before the cut.
func (s *Reader) Next() (Kind, []byte, error) {
	for {
		line, err := s.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, nil, err
		}
		eof := err != nil
		if len(line) == 0 {
			if k, d, ok := s.dispatch(); ok {
				return k, d, nil
			}
			if eof {
				return 0, nil, io.EOF
			}
			continue
		}
		if err := s.field(line); err != nil {
			return 0, nil, err
		}
		if eof {
			if k, d, ok := s.dispatch(); ok {
				return k, d, nil
			}
			return 0, nil, io.EOF
		}
	}
}

// readLine returns one line without its terminator. At EOF it returns the
// unterminated tail (possibly empty) together with io.EOF. A line that
// would pass the bound, with the event pending before it, stops the read
// there: what is held never exceeds the bound by more than the 64 KiB of
// the buffer.
func (s *Reader) readLine() ([]byte, error) {
	b, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.line = append(s.line[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(s.line)+len(s.data)+len(s.errData) > s.max {
				return nil, &TooLargeError{Limit: s.max}
			}
			b, err = s.r.ReadSlice('\n')
			s.line = append(s.line, b...)
		}
		b = s.line
		if cap(s.line) > 1<<20 {
			s.line = nil // one long line does not pin its buffer for the rest of the stream
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{'\n'})
	b = bytes.TrimSuffix(b, []byte{'\r'})
	return b, err
}

func (s *Reader) field(line []byte) error {
	if len(line)+len(s.data)+len(s.errData) > s.max {
		return &TooLargeError{Limit: s.max}
	}
	if line[0] == ':' {
		s.comments++
		return nil
	}
	name, value, found := bytes.Cut(line, []byte{':'})
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "error":
		if s.hasError {
			s.errData = append(s.errData, '\n')
		}
		s.errData = append(s.errData, value...)
		s.hasError = true
	case "event":
		s.isErrEvt = string(value) == "error"
		s.event = append(s.event[:0], value...)
	}
	// id:, retry: and unknown fields are ignored, as the SSE spec says.
	return nil
}

func (s *Reader) dispatch() (Kind, []byte, bool) {
	s.name = append(s.name[:0], s.event...)
	defer func() {
		s.event = s.event[:0]
		s.data, s.errData = s.data[:0], s.errData[:0]
		s.hasData, s.hasError, s.isErrEvt = false, false, false
	}()
	switch {
	case s.hasError:
		return Error, s.errData, true
	case s.hasData && s.isErrEvt:
		return Error, s.data, true
	case s.hasData:
		if bytes.Equal(bytes.TrimSpace(s.data), doneMarker) {
			return Done, nil, true
		}
		return Data, s.data, true
	}
	return 0, nil, false
}

// Name is the `event:` name of the event Next last returned ("" when it had
// none). Anthropic names every event, but its data repeats the name as
// "type", which is what parsers should read; the name is for logs.
func (s *Reader) Name() string { return string(s.name) }
