// Package proxy relays an ACP connection between an editor and an agent:
// newline-delimited JSON-RPC 2.0 in both directions, each line passed on
// byte for byte unless a hook drops or replaces it. It knows nothing of
// ACP's methods; it splits each line's envelope (id, method, params, result,
// error) so hooks can look, tracks the editor's requests still waiting for
// an answer, and lets its owner send lines of its own to either side. ids
// are never rewritten: the proxy originates no requests, so the ids both
// sides chose stay unique.
package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// Side names an end of the relay.
type Side int

// The two sides.
const (
	Editor Side = iota // the client: our stdin and stdout
	Agent              // the agent process: its stdout and stdin
)

func (s Side) String() string {
	if s == Editor {
		return "editor"
	}
	return "agent"
}

// Kind is what a line holds.
type Kind int

// Message kinds. Other covers lines that are not a JSON-RPC object the
// scanner can place (blank lines, invalid JSON, batches): they are relayed
// untouched and the receiving side answers them as it sees fit.
const (
	Other Kind = iota
	Request
	Notification
	Response
)

// Message is one line as a hook sees it. Its byte slices point into the
// proxy's read buffer and are valid only during the hook call; a hook that
// keeps any of them must copy.
type Message struct {
	From Side
	Kind Kind
	Line []byte // the whole line, without the newline
	// ID is the raw id (nil when absent), Method the decoded method name.
	ID     []byte
	Method string
	// Params, Result and Error are the raw members, nil when absent.
	Params, Result, Error []byte
}

// parse fills m's envelope from m.Line.
func (m *Message) parse() {
	m.Kind, m.ID, m.Method, m.Params, m.Result, m.Error = Other, nil, "", nil, nil, nil
	var hasMethod, hasResult bool
	ok := members(m.Line, func(k, v []byte) bool {
		switch {
		case keyIs(k, "id"):
			m.ID = v
		case keyIs(k, "method"):
			m.Method, hasMethod = String(v), true
		case keyIs(k, "params"):
			m.Params = v
		case keyIs(k, "result"):
			m.Result, hasResult = v, true
		case keyIs(k, "error"):
			m.Error = v
		}
		return true
	})
	switch {
	case !ok:
	case hasMethod && m.ID != nil:
		m.Kind = Request
	case hasMethod:
		m.Kind = Notification
	case m.ID != nil && (hasResult || m.Error != nil):
		m.Kind = Response
	}
}

// Action is a hook's decision about a line.
type Action int

// Actions.
const (
	Forward Action = iota // pass the line on unchanged
	Drop                  // swallow it
	Replace               // pass on Verdict.Line instead
)

// Verdict is what a hook returns.
type Verdict struct {
	Action Action
	Line   []byte // for Replace: the line to send, without the newline
}

// Hooks see every line. FromEditor runs on the editor-to-agent goroutine
// and FromAgent on the agent-to-editor one, each in wire order; the two run
// concurrently. A hook may call Proxy.Send (to either side), but must not
// block on the side it is relaying from.
type Hooks interface {
	FromEditor(m *Message) Verdict
	FromAgent(m *Message) Verdict
}

// Options tune a Proxy. The zero value is usable.
type Options struct {
	// MaxInspectBytes bounds the lines hooks see (default 64 MiB, the
	// bound of a line acpd itself reads over ACP). A longer line is relayed
	// as it streams in, in pieces, without a hook: memory stays bounded
	// whatever an agent or an editor sends.
	MaxInspectBytes int
	Logger          *slog.Logger
}

// Proxy relays one connection.
type Proxy struct {
	hooks Hooks
	opts  Options
	log   *slog.Logger

	in  [2]io.Reader // in[Editor] is read from the editor
	out [2]io.Writer // out[Agent] writes to the agent
	wmu [2]sync.Mutex

	// mu guards pending: the editor's requests, by IDKey, that have not
	// been answered on the editor's side yet, with their raw ids.
	mu      sync.Mutex
	pending map[string][]byte
	order   []string // pending keys in arrival order (answered ones lazily skipped)

	queue [2]outQueue
}

// New returns a proxy between an editor (read editorIn, write editorOut)
// and an agent (read agentOut, write agentIn).
func New(editorIn io.Reader, editorOut io.Writer, agentOut io.Reader, agentIn io.Writer, hooks Hooks, opts Options) *Proxy {
	if opts.MaxInspectBytes <= 0 {
		opts.MaxInspectBytes = 64 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{hooks: hooks, opts: opts, log: opts.Logger, pending: map[string][]byte{}}
	p.in[Editor], p.in[Agent] = editorIn, agentOut
	p.out[Editor], p.out[Agent] = editorOut, agentIn
	return p
}

// Pump relays lines read from side from to the other side until from
// reaches EOF or ctx is done. It returns nil at EOF, else the read or
// write error.
func (p *Proxy) Pump(ctx context.Context, from Side) error {
	to := Agent
	if from == Agent {
		to = Editor
	}
	br := bufio.NewReaderSize(p.in[from], 64<<10)
	var (
		buf []byte // a line longer than br's buffer, assembled
		m   = Message{From: from}
	)
	for ctx.Err() == nil {
		chunk, err := br.ReadSlice('\n')
		line := chunk
		if errors.Is(err, bufio.ErrBufferFull) {
			buf = append(buf[:0], chunk...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) <= p.opts.MaxInspectBytes {
				chunk, err = br.ReadSlice('\n')
				buf = append(buf, chunk...)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				if werr := p.stream(to, buf, br); werr != nil {
					return werr
				}
				buf = buf[:0]
				continue
			}
			line = buf
		}
		if len(line) > 0 {
			if werr := p.relay(&m, to, line); werr != nil {
				return werr
			}
		}
		if cap(buf) > 1<<20 {
			buf = nil // one huge line does not pin its buffer
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("read from %s: %w", from, err)
		}
	}
	return ctx.Err()
}

// relay shows one line (with its newline, unless it is the last line of
// the stream) to the hook and acts on the verdict.
func (p *Proxy) relay(m *Message, to Side, line []byte) error {
	body := line
	if body[len(body)-1] == '\n' {
		body = body[:len(body)-1]
	}
	m.Line = bytes.TrimSuffix(body, []byte("\r"))
	m.parse()
	if m.From == Editor && m.Kind == Request {
		p.mu.Lock()
		k := IDKey(m.ID)
		if _, dup := p.pending[k]; !dup && k != "" {
			p.pending[k] = bytes.Clone(m.ID)
			p.order = append(p.order, k)
		}
		p.mu.Unlock()
	}
	var v Verdict
	if m.From == Editor {
		v = p.hooks.FromEditor(m)
	} else {
		v = p.hooks.FromAgent(m)
	}
	switch v.Action {
	case Drop:
		return nil
	case Replace:
		if to == Editor {
			r := Message{Line: v.Line}
			r.parse()
			if r.Kind == Response {
				p.answered(r.ID)
			}
		}
		return p.write(to, append(bytes.Clone(v.Line), '\n'))
	}
	if to == Editor && m.Kind == Response {
		p.answered(m.ID)
	}
	if body := line; body[len(body)-1] != '\n' {
		return p.write(to, append(bytes.Clone(body), '\n'))
	}
	return p.write(to, line)
}

// stream relays a line too long to inspect: what is assembled so far, then
// the rest as it is read.
func (p *Proxy) stream(to Side, head []byte, br *bufio.Reader) error {
	p.log.Warn("relaying an oversized line without inspecting it", "max_bytes", p.opts.MaxInspectBytes, "to", to.String())
	p.wmu[to].Lock()
	defer p.wmu[to].Unlock()
	if _, err := p.out[to].Write(head); err != nil {
		return fmt.Errorf("write to %s: %w", to, err)
	}
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if _, werr := p.out[to].Write(chunk); werr != nil {
				return fmt.Errorf("write to %s: %w", to, werr)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if err != nil && len(chunk) > 0 && chunk[len(chunk)-1] != '\n' {
				_, _ = p.out[to].Write([]byte{'\n'})
			}
			return nil // a read error shows on the next read
		}
	}
}

// write sends line (ending in a newline) to side in one Write.
func (p *Proxy) write(to Side, line []byte) error {
	p.wmu[to].Lock()
	defer p.wmu[to].Unlock()
	if _, err := p.out[to].Write(line); err != nil {
		return fmt.Errorf("write to %s: %w", to, err)
	}
	return nil
}

// Send queues a line of the proxy's own for side; line has no newline.
// It never blocks: a hook may send to the side it is relaying from, whose
// reader may be waiting for the hook's own goroutine. Queued lines are
// written in order, between relayed lines. A response sent to the editor
// answers its pending request.
func (p *Proxy) Send(to Side, line []byte) {
	if to == Editor {
		m := Message{Line: line}
		m.parse()
		if m.Kind == Response {
			p.answered(m.ID)
		}
	}
	b := make([]byte, 0, len(line)+1)
	b = append(append(b, line...), '\n')
	q := &p.queue[to]
	q.mu.Lock()
	q.lines = append(q.lines, b)
	if !q.running {
		q.running = true
		go p.drain(to)
	}
	q.mu.Unlock()
}

// outQueue holds one side's sent lines.
type outQueue struct {
	mu      sync.Mutex
	lines   [][]byte
	running bool          // a drain goroutine is writing
	err     error         // the first write error
	done    chan struct{} // closed and replaced whenever the queue empties
}

// drain writes queued lines until the queue is empty.
func (p *Proxy) drain(to Side) {
	q := &p.queue[to]
	for {
		q.mu.Lock()
		if len(q.lines) == 0 {
			q.running = false
			if q.done != nil {
				close(q.done)
				q.done = nil
			}
			q.mu.Unlock()
			return
		}
		b := q.lines[0]
		q.lines[0] = nil
		q.lines = q.lines[1:]
		q.mu.Unlock()
		if err := p.write(to, b); err != nil {
			q.mu.Lock()
			if q.err == nil {
				q.err = err
			}
			q.mu.Unlock()
		}
	}
}

// Flush waits until every line sent to side so far is written, or ctx is
// done. It returns the first write error to that side.
func (p *Proxy) Flush(ctx context.Context, to Side) error {
	q := &p.queue[to]
	q.mu.Lock()
	if !q.running {
		err := q.err
		q.mu.Unlock()
		return err
	}
	if q.done == nil {
		q.done = make(chan struct{})
	}
	done := q.done
	q.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

func (p *Proxy) answered(id []byte) {
	k := IDKey(id)
	if k == "" {
		return
	}
	p.mu.Lock()
	delete(p.pending, k)
	if len(p.order) > 2*len(p.pending)+64 {
		// A request that stays pending must not keep every answered key.
		n := 0
		for _, o := range p.order {
			if _, ok := p.pending[o]; ok {
				p.order[n] = o
				n++
			}
		}
		p.order = p.order[:n]
	}
	p.mu.Unlock()
}

// Pending returns the raw ids of the editor's requests not answered yet,
// oldest first.
func (p *Proxy) Pending() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out [][]byte
	seen := map[string]bool{}
	for _, k := range p.order {
		if id, ok := p.pending[k]; ok && !seen[k] {
			seen[k] = true
			out = append(out, id)
		}
	}
	return out
}
