// Package client is the editor side of an ACP connection: JSON-RPC 2.0 over
// newline-delimited JSON, the requests an editor sends (initialize,
// session/new, session/load, session/prompt, cancellation) and the
// dispatch of what the agent sends back (session/update notifications,
// permission requests). `acpd run` drives its in-process agent through it,
// and the tests of `acpd guard` drive the guard with it as an editor would.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acpd/acpd/acp"
)

// Handler receives what the agent sends. Calls come one at a time, in wire
// order, on the connection's read loop: a Handler must not block on the
// connection it serves.
type Handler interface {
	// Update receives the params of a session/update.
	Update(params json.RawMessage)
	// Permission answers a session/request_permission.
	Permission(params json.RawMessage) *acp.RequestPermissionResponse
}

// Eliciter is implemented by a Handler that answers elicitation/create;
// without it the request is answered "method not found". A non-nil error
// is sent as the request's error.
type Eliciter interface {
	Elicit(params json.RawMessage) (*acp.CreateElicitationResponse, *jsonrpc2.Error)
}

// Conn is one editor-side connection.
type Conn struct {
	rpc *jsonrpc2.Conn

	// mu guards closed and the Add of replies, so Close's Wait never races
	// a late Add.
	mu      sync.Mutex
	closed  bool
	replies sync.WaitGroup
}

// NewConn starts a connection over stream (the agent's stdout to read, its
// stdin to write). Agent requests other than session/update,
// session/request_permission and (for an Eliciter) elicitation/create are
// answered "method not found".
func NewConn(ctx context.Context, stream io.ReadWriteCloser, h Handler, logger *slog.Logger) *Conn {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Conn{}
	rpcLog := slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	c.rpc = jsonrpc2.NewConn(context.WithoutCancel(ctx), jsonrpc2.NewPlainObjectStream(stream),
		dispatcher{c: c, h: h}, jsonrpc2.SetLogger(rpcLog))
	return c
}

// dispatcher is the jsonrpc2.Handler: it hands messages to the Handler and
// writes the answers.
type dispatcher struct {
	c *Conn
	h Handler
}

func (d dispatcher) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	switch req.Method {
	case acp.MethodSessionUpdate:
		if !req.Notif {
			d.c.reply(ctx, conn, req.ID, struct{}{})
		}
		d.h.Update(params)
	case acp.MethodSessionRequestPermission:
		if req.Notif {
			return
		}
		d.c.reply(ctx, conn, req.ID, d.h.Permission(params))
	case acp.MethodElicitationCreate:
		if req.Notif {
			return
		}
		e, ok := d.h.(Eliciter)
		if !ok {
			d.c.replyError(ctx, conn, req.ID, &jsonrpc2.Error{Code: acp.CodeMethodNotFound, Message: "Method not found: " + req.Method})
			return
		}
		if r, err := e.Elicit(params); err != nil {
			d.c.replyError(ctx, conn, req.ID, err)
		} else {
			d.c.reply(ctx, conn, req.ID, r)
		}
	default:
		if !req.Notif {
			d.c.replyError(ctx, conn, req.ID, &jsonrpc2.Error{Code: acp.CodeMethodNotFound, Message: "Method not found: " + req.Method})
		}
	}
}

// reply answers from a goroutine: the pipes are synchronous, and a reply
// written from the read loop could wait on an agent that is itself waiting
// for us to read.
func (c *Conn) reply(ctx context.Context, conn *jsonrpc2.Conn, id jsonrpc2.ID, result any) {
	c.goReply(func() { _ = conn.Reply(context.WithoutCancel(ctx), id, result) })
}

func (c *Conn) replyError(ctx context.Context, conn *jsonrpc2.Conn, id jsonrpc2.ID, e *jsonrpc2.Error) {
	c.goReply(func() { _ = conn.ReplyWithError(context.WithoutCancel(ctx), id, e) })
}

// goReply starts a reply unless StopReplies has begun.
func (c *Conn) goReply(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.replies.Go(f)
}

// StopReplies stops answering the agent and waits for the answers already
// being written.
func (c *Conn) StopReplies() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.replies.Wait()
}

// Close closes the connection; the agent sees EOF.
func (c *Conn) Close() error { return c.rpc.Close() }

// Initialize sends initialize.
func (c *Conn) Initialize(ctx context.Context, req *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	var resp acp.InitializeResponse
	if err := c.rpc.Call(ctx, acp.MethodInitialize, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// NewSession sends session/new.
func (c *Conn) NewSession(ctx context.Context, req *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	var resp acp.NewSessionResponse
	if err := c.rpc.Call(ctx, acp.MethodSessionNew, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// LoadSession sends session/load.
func (c *Conn) LoadSession(ctx context.Context, req *acp.LoadSessionRequest) (*acp.LoadSessionResponse, error) {
	var resp acp.LoadSessionResponse
	if err := c.rpc.Call(ctx, acp.MethodSessionLoad, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Prompt is a session/prompt on the wire, to wait for.
type Prompt struct {
	call jsonrpc2.Waiter
}

// StartPrompt writes a session/prompt request under id (so a later
// $/cancel_request can name it) and returns without waiting for the answer.
func (c *Conn) StartPrompt(ctx context.Context, req *acp.PromptRequest, id jsonrpc2.ID) (*Prompt, error) {
	call, err := c.rpc.DispatchCall(ctx, acp.MethodSessionPrompt, req, jsonrpc2.PickID(id))
	if err != nil {
		return nil, err
	}
	return &Prompt{call: call}, nil
}

// Wait waits for the prompt's answer. An error the agent answered is a
// *jsonrpc2.Error.
func (p *Prompt) Wait(ctx context.Context) (*acp.PromptResponse, error) {
	var resp acp.PromptResponse
	if err := p.call.Wait(ctx, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Steer sends _session/steering: a message for the running turn.
func (c *Conn) Steer(ctx context.Context, req *acp.SteeringRequest) (*acp.SteeringResponse, error) {
	var resp acp.SteeringResponse
	if err := c.rpc.Call(ctx, acp.MethodSessionSteering, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Cancel sends session/cancel for the session and $/cancel_request for the
// prompt request id: an agent may register a request before it starts its
// turn, so a session/cancel sent right after the prompt could find no turn
// to cancel; the request cancellation covers that gap.
func (c *Conn) Cancel(ctx context.Context, sessionID string, promptID jsonrpc2.ID) error {
	if err := c.rpc.Notify(ctx, acp.MethodSessionCancel, &acp.SessionIDRequest{SessionID: sessionID}); err != nil {
		return err
	}
	rid, err := json.Marshal(promptID)
	if err != nil {
		return err
	}
	return c.rpc.Notify(ctx, acp.MethodCancelRequest, &acp.CancelRequestNotification{RequestID: rid})
}

// LoopDetected reports whether an agent error carries the loop guard's data
// code LOOP_DETECTED.
func LoopDetected(e *jsonrpc2.Error) bool {
	if e == nil || e.Data == nil {
		return false
	}
	var d struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(*e.Data, &d) == nil && d.Code == "LOOP_DETECTED"
}

// ErrorKind is the data.errorKind of an agent error, "" when absent.
func ErrorKind(e *jsonrpc2.Error) string {
	if e == nil || e.Data == nil {
		return ""
	}
	var d struct {
		ErrorKind string `json:"errorKind"`
	}
	_ = json.Unmarshal(*e.Data, &d)
	return d.ErrorKind
}

// pipeEnd joins the read side of one io.Pipe and the write side of another
// into the duplex stream a connection needs.
type pipeEnd struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p pipeEnd) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeEnd) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeEnd) Close() error {
	return errors.Join(p.w.Close(), p.r.Close())
}

// Pipe returns the two ends of an in-memory, synchronous duplex stream: what
// one end writes, the other reads. Closing an end makes the other read EOF.
func Pipe() (agentEnd, clientEnd io.ReadWriteCloser) {
	toAgentR, toAgentW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	return pipeEnd{r: toAgentR, w: toClientW}, pipeEnd{r: toClientR, w: toAgentW}
}
