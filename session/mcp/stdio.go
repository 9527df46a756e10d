package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine bounds one line a stdio server writes (the SDK's own bound).
const maxLine = sdk.DefaultMaxLineLength

// stdioTransport runs a stdio server and connects the SDK to it through
// sdk.IOTransport. It is the SDK's CommandTransport but for one thing: the
// SDK reads the child's stdout as a stream of JSON values, so a line that
// is not one whole JSON value (a truncated message, a startup banner, a
// log line) leaves it waiting for the rest, and the call in flight hangs
// until it is cancelled. Here every line is checked before the SDK sees
// it, and a broken line ends the connection with what the server sent
// (the server is then restarted once, like a server that died).
type stdioTransport struct {
	cmd  *exec.Cmd
	stop time.Duration
}

func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	r := &lineReader{r: bufio.NewReaderSize(stdout, 64<<10), closer: stdout}
	w := &stopOnClose{WriteCloser: stdin, cmd: t.cmd, grace: t.stop}
	return (&sdk.IOTransport{Reader: r, Writer: w}).Connect(ctx)
}

// lineReader passes a stdio server's output on line by line, each line
// checked to be one whole JSON value of at most maxLine bytes.
type lineReader struct {
	r       *bufio.Reader
	closer  io.Closer
	pending []byte
	line    []byte
}

func (l *lineReader) Read(p []byte) (int, error) {
	for len(l.pending) == 0 {
		line, err := l.readLine()
		if len(line) > 0 {
			if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 && !json.Valid(trimmed) {
				return 0, badLine(trimmed)
			}
			l.pending = line
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	return n, nil
}

// readLine reads through the next newline (or to the end of the output).
func (l *lineReader) readLine() ([]byte, error) {
	l.line = l.line[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(l.line)+len(chunk) > maxLine {
			return nil, fmt.Errorf("the server sent a line longer than %d MiB", maxLine>>20)
		}
		l.line = append(l.line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return l.line, err
	}
}

// badLine says what a line that is not JSON held.
func badLine(line []byte) error {
	if line[0] != '{' && line[0] != '[' {
		const show = 80
		s := string(line)
		if len(s) > show {
			s = s[:show] + "…"
		}
		return fmt.Errorf("the server sent %q, not a JSON-RPC message", s)
	}
	var v any
	err := json.Unmarshal(line, &v)
	return fmt.Errorf("the server sent invalid JSON: %v", err)
}

func (l *lineReader) Close() error { return l.closer.Close() }

// stopOnClose is a stdio server's stdin; closing it stops the server as
// MCP asks: stdin closed, then SIGTERM after the grace period, then
// SIGKILL after another. Close returns the server's exit status.
type stopOnClose struct {
	io.WriteCloser
	cmd   *exec.Cmd
	grace time.Duration

	once sync.Once
	err  error
}

func (s *stopOnClose) Close() error {
	s.once.Do(func() {
		_ = s.WriteCloser.Close()
		exited := make(chan error, 1)
		go func() { exited <- s.cmd.Wait() }()
		for _, kill := range []bool{false, true} {
			select {
			case s.err = <-exited:
				return
			case <-time.After(s.grace):
			}
			if kill {
				_ = s.cmd.Process.Kill()
			} else {
				_ = s.cmd.Process.Signal(syscall.SIGTERM)
			}
		}
		s.err = <-exited
	})
	return s.err
}
