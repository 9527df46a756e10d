package gemini

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// sseReader splits a server-sent-event body into (event, data) pairs: \n or
// \r\n endings, comments skipped, lines of any length, and an event still
// pending at EOF dispatched.
type sseReader struct {
	r     *bufio.Reader
	line  []byte
	event []byte
	data  []byte
	has   bool
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next event's name ("" when the server sent none) and data,
// valid until the next call; io.EOF at the end of the body.
func (s *sseReader) next() (string, []byte, error) {
	for {
		line, err := s.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return "", nil, err
		}
		eof := err != nil
		if len(line) > 0 {
			s.field(line)
		}
		if len(line) == 0 || eof {
			if s.has {
				ev, data := string(s.event), s.data
				s.event, s.data, s.has = s.event[:0], s.data[:0], false
				return ev, data, nil
			}
			s.event = s.event[:0]
			if eof {
				return "", nil, io.EOF
			}
		}
	}
}

func (s *sseReader) readLine() ([]byte, error) {
	b, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.line = append(s.line[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = s.r.ReadSlice('\n')
			s.line = append(s.line, b...)
		}
		b = s.line
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{'\n'})
	b = bytes.TrimSuffix(b, []byte{'\r'})
	return b, err
}

func (s *sseReader) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value, _ := bytes.Cut(line, []byte{':'})
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if s.has {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.has = true
	case "event":
		s.event = append(s.event[:0], value...)
	}
}
