package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stdioTransport speaks newline-delimited JSON-RPC with a child process
// over its stdin and stdout.
type stdioTransport struct {
	cmd  *exec.Cmd
	rpc  *rpc
	stop time.Duration

	wmu   sync.Mutex
	stdin *os.File // our end of the child's stdin; nil once closed

	exited  chan struct{} // closed when the child has been waited for
	exitErr error         // read after exited is closed
	// readDone is closed when the read loop has returned.
	readDone chan struct{}
}

// startStdio starts cmd and its read loop. The pipes are os.Pipe files of
// our own rather than exec's: exec's Wait closes the stdout pipe it made
// when the child exits, which would lose the last answers still buffered.
func startStdio(cmd *exec.Cmd, c *rpc, stop time.Duration) (*stdioTransport, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	// The child has its copies; ours would keep the pipes open forever.
	inR.Close()
	outW.Close()
	t := &stdioTransport{cmd: cmd, rpc: c, stop: stop, stdin: inW, exited: make(chan struct{}), readDone: make(chan struct{})}
	go func() {
		t.exitErr = cmd.Wait()
		close(t.exited)
		// A grandchild that inherited stdout keeps it open after the server
		// exits: stop reading after a grace period so the end is noticed.
		timer := time.NewTimer(exitReportWait)
		defer timer.Stop()
		select {
		case <-t.readDone:
		case <-timer.C:
			outR.Close()
		}
	}()
	go t.readLoop(outR)
	return t, nil
}

// readLoop hands every line to the rpc until stdout ends or the server
// breaks the protocol; either ends the connection, naming why (the child's
// exit status when it exited).
func (t *stdioTransport) readLoop(out *os.File) {
	defer close(t.readDone)
	defer out.Close()
	r := bufio.NewReaderSize(out, 64<<10)
	var err error
	for {
		var line []byte
		line, err = readLine(r, maxMessage)
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, derr := decodeMessage(line)
		if derr != nil {
			err = derr
			break
		}
		t.rpc.deliver(m)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
		// The server closed stdout: it exited or is about to. Its exit
		// status says more than "EOF".
		timer := time.NewTimer(exitReportWait)
		defer timer.Stop()
		select {
		case <-t.exited:
			if t.exitErr != nil {
				err = t.exitErr
			} else {
				err = errors.New("the server exited")
			}
		case <-timer.C:
			err = errors.New("the server closed its output")
		}
	}
	t.rpc.fail(err)
}

// readLine reads one '\n'-terminated line of at most limit bytes.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, fmt.Errorf("the server sent a message longer than %d MiB", limit>>20)
		}
		switch {
		case err == nil:
			if line == nil {
				return chunk, nil
			}
			return append(line, chunk...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, chunk...)
		default:
			if len(line)+len(chunk) > 0 && errors.Is(err, io.EOF) {
				// A last line without its newline is still a message.
				return append(line, chunk...), nil
			}
			return nil, err
		}
	}
}

func (t *stdioTransport) send(_ context.Context, data []byte, _ int64) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.stdin == nil {
		return errConnClosed
	}
	// One write per message, newline included, so messages never interleave.
	buf := make([]byte, 0, len(data)+1)
	buf = append(append(buf, data...), '\n')
	if _, err := t.stdin.Write(buf); err != nil {
		err = fmt.Errorf("%w: writing to the server: %v", errConnClosed, err)
		t.rpc.fail(err)
		return err
	}
	return nil
}

func (t *stdioTransport) initialized(string) {}

// close stops the child the way MCP asks: close its stdin and wait, then
// SIGTERM and wait, then SIGKILL.
func (t *stdioTransport) close() error {
	t.wmu.Lock()
	if t.stdin != nil {
		t.stdin.Close()
		t.stdin = nil
	}
	t.wmu.Unlock()
	wait := func() bool {
		timer := time.NewTimer(t.stop)
		defer timer.Stop()
		select {
		case <-t.exited:
			return true
		case <-timer.C:
			return false
		}
	}
	if wait() {
		return t.exitErr
	}
	if t.cmd.Process.Signal(syscall.SIGTERM) == nil && wait() {
		return t.exitErr
	}
	_ = t.cmd.Process.Kill()
	if wait() {
		return t.exitErr
	}
	return errors.New("the server did not exit after SIGKILL")
}
