package acptest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// RawClient drives an agent over its stdin/stdout one line at a time, for
// malformed-input and process tests. It reads stdout only when asked, so an
// agent that is not read from really sees a blocked pipe.
type RawClient struct {
	w     io.WriteCloser
	lines chan rawLine
	stop  chan struct{}
}

type rawLine struct {
	b   []byte
	err error
}

// NewRawClient wraps an agent's stdin (w) and stdout (r).
func NewRawClient(w io.WriteCloser, r io.Reader) *RawClient {
	rc := &RawClient{w: w, lines: make(chan rawLine), stop: make(chan struct{})}
	go func() {
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			b, err := br.ReadBytes('\n')
			if len(b) > 0 && b[len(b)-1] == '\n' {
				b = b[:len(b)-1]
			}
			if err != nil && len(b) == 0 {
				select {
				case rc.lines <- rawLine{err: err}:
				case <-rc.stop:
				}
				return
			}
			select {
			case rc.lines <- rawLine{b: b}:
			case <-rc.stop:
				return
			}
		}
	}()
	return rc
}

// Send writes s plus a newline.
func (rc *RawClient) Send(s string) error {
	_, err := io.WriteString(rc.w, s+"\n")
	return err
}

// ErrTimeout is returned by Next when no line arrives in time.
var ErrTimeout = errors.New("acptest: timed out waiting for a line")

// Next returns the next line the agent wrote, or ErrTimeout, or the read
// error (io.EOF when the agent closed stdout).
func (rc *RawClient) Next(timeout time.Duration) ([]byte, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l := <-rc.lines:
		return l.b, l.err
	case <-t.C:
		return nil, ErrTimeout
	}
}

// NextMessage decodes the next line into a generic message.
func (rc *RawClient) NextMessage(timeout time.Duration) (Message, error) {
	b, err := rc.Next(timeout)
	if err != nil {
		return Message{}, err
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return Message{}, fmt.Errorf("agent wrote invalid JSON %q: %w", truncate(b), err)
	}
	m.Raw = b
	return m, nil
}

// CloseStdin closes the agent's stdin (EOF) and stops the reader.
func (rc *RawClient) CloseStdin() error {
	err := rc.w.Close()
	return err
}

// Stop ends the background reader; call it when done with the client.
func (rc *RawClient) Stop() {
	select {
	case <-rc.stop:
	default:
		close(rc.stop)
	}
}

// Message is a decoded JSON-RPC message as written by the agent.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	Raw []byte `json:"-"`
}
