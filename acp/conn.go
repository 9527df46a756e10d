package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// Options configure a Conn. The zero value is usable.
type Options struct {
	// Logger receives connection diagnostics; nil discards them.
	Logger *slog.Logger
	// MaxLineBytes caps one inbound message; longer lines are discarded with
	// a -32600 reply. Default 64 MiB (room for base64 images).
	MaxLineBytes int
	// MaxInFlight bounds concurrently running inbound requests. When it is
	// reached the read loop waits (backpressure on the client). Default
	// 16384, so a client may pipeline 10,000 requests without reading.
	MaxInFlight int
	// ShutdownGrace is how long Serve waits, after EOF or cancellation, for
	// cancelled requests to answer. Default 500ms.
	ShutdownGrace time.Duration
	// Trace logs every message at Debug level (params may hold file
	// contents; use only when asked).
	Trace bool
	// OnFirstReply, if set, runs once, right after the connection has
	// written its first response to a request (or failed to): the client
	// is no longer waiting for start-up, so deferred set-up can run then.
	// It runs on the goroutine that wrote the reply.
	OnFirstReply func()
}

// Conn is the agent side of one ACP connection over NDJSON. It dispatches
// client requests to an Agent and implements Client for outbound calls.
type Conn struct {
	opts   Options
	log    *slog.Logger
	stream *lineStream

	rpc   atomic.Pointer[jsonrpc2.Conn]
	agent Agent

	// baseCtx parents every request context; cancelled when Serve stops.
	baseCtx    context.Context
	baseCancel context.CancelFunc

	// mu guards ids, inflight and prompts. Never held while calling the
	// agent or writing.
	mu       sync.Mutex
	ids      map[string]json.RawMessage // token -> original id, until answered
	inflight map[string]*inflight       // token -> running request
	// prompts holds, per sessionId, a channel for each session/prompt
	// received and not yet answered on the wire; it is closed once the
	// answer is written. session/close and session/delete wait for them
	// before answering, so a client sees the cancelled prompt answer
	// first, whatever order the agent's handlers finish in.
	prompts map[string]map[string]chan struct{}
	seqIn   uint64 // guarded by mu
	closing bool   // guarded by mu: Serve is waiting for reqs
	seqOut  atomic.Uint64

	sem  chan struct{} // one slot per running request
	reqs sync.WaitGroup

	caps   atomic.Pointer[ClientCapabilities]
	served atomic.Bool
	// initialized: the first initialize has been dispatched (read
	// goroutine only).
	initialized bool

	firstReply sync.Once

	closeOnce sync.Once
	closeCh   chan struct{}
	ready     chan struct{} // closed once Serve has started the jsonrpc2 conn
}

type inflight struct {
	key    string
	cancel context.CancelFunc
}

var _ Client = (*Conn)(nil)

// NewConn returns a connection reading requests from r (stdin) and writing
// to w (stdout). Only the Conn may write to w. If r is an io.Closer it is
// closed on shutdown; w is never closed.
func NewConn(r io.Reader, w io.Writer, opts Options) *Conn {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = 64 << 20
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 16384
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 500 * time.Millisecond
	}
	c := &Conn{
		opts:     opts,
		log:      opts.Logger,
		ids:      map[string]json.RawMessage{},
		inflight: map[string]*inflight{},
		prompts:  map[string]map[string]chan struct{}{},
		sem:      make(chan struct{}, opts.MaxInFlight),
		closeCh:  make(chan struct{}),
		ready:    make(chan struct{}),
	}
	c.baseCtx, c.baseCancel = context.WithCancel(context.Background())
	c.stream = newLineStream(c, r, w, opts.MaxLineBytes)
	return c
}

// ErrNotServing is returned by Client methods called before Serve or after
// the connection has shut down.
var ErrNotServing = errors.New("acp: connection is not serving")

// Serve dispatches messages to agent until stdin reaches EOF, ctx is done or
// Close is called. It then cancels every running request (and so every turn
// derived from one), waits up to ShutdownGrace for them to answer, and
// returns. It returns nil on a clean shutdown and the read error otherwise.
func (c *Conn) Serve(ctx context.Context, agent Agent) error {
	if agent == nil {
		return errors.New("acp: Serve with nil agent")
	}
	if !c.served.CompareAndSwap(false, true) {
		return errors.New("acp: Serve called twice")
	}
	c.agent = agent
	// Tracing happens in the line stream, not with jsonrpc2's LogMessages:
	// jsonrpc2 sees the stream's stand-in ids and no params, and never the
	// notifications written around it.
	opts := []jsonrpc2.ConnOpt{jsonrpc2.SetLogger(slog.NewLogLogger(c.log.Handler(), slog.LevelDebug))}
	// The jsonrpc2 context is not ctx: since v0.2.2 it closes the connection
	// when done, and we need it open while cancelled requests answer.
	rpc := jsonrpc2.NewConn(context.Background(), c.stream, handler{c}, opts...)
	c.rpc.Store(rpc)
	close(c.ready)

	var err error
	select {
	case <-ctx.Done():
		c.log.Info("shutting down", "reason", context.Cause(ctx))
	case <-c.stream.eof:
		if !errors.Is(c.stream.readErr, io.EOF) {
			err = fmt.Errorf("acp: read: %w", c.stream.readErr)
		}
		c.log.Info("shutting down", "reason", "stdin closed")
	case <-c.closeCh:
	case <-rpc.DisconnectNotify():
	}
	c.baseCancel()
	// From here no request is added to reqs (see the handler), so the
	// wait below is not racing an Add from the read goroutine.
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.reqs.Wait(); close(done) }()
	t := time.NewTimer(c.opts.ShutdownGrace)
	select {
	case <-done:
	case <-t.C:
		c.log.Warn("requests still running at shutdown")
	}
	t.Stop()
	_ = rpc.Close()
	return err
}

// Close stops Serve. It is safe to call more than once.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closeCh) })
	return nil
}

// ClientCapabilities returns the capabilities of the last successful
// initialize; the zero value (nothing supported) before that.
func (c *Conn) ClientCapabilities() ClientCapabilities {
	if p := c.caps.Load(); p != nil {
		return *p
	}
	return ClientCapabilities{}
}

func (c *Conn) registerID(raw json.RawMessage, key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seqIn++
	tok := tokenPrefix + strconv.FormatUint(c.seqIn, 10)
	c.ids[tok] = append(json.RawMessage(nil), raw...)
	return tok
}

func (c *Conn) takeID(tok string) (json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw, ok := c.ids[tok]
	delete(c.ids, tok)
	return raw, ok
}

func (c *Conn) dropToken(tok string) {
	if tok != "" {
		c.takeID(tok)
	}
}

// handler is the jsonrpc2.Handler. It runs on the read goroutine and never
// blocks except on the in-flight bound and while initialize is answered.
type handler struct{ c *Conn }

func (h handler) Handle(_ context.Context, rpc *jsonrpc2.Conn, req *jsonrpc2.Request) {
	c := h.c
	// jsonrpc2.NewConn starts reading before Serve can store the conn, so
	// the first request may get here first; its handler's updates and
	// calls to the client need the conn already.
	c.rpc.CompareAndSwap(nil, rpc)
	in := c.stream.cur
	c.stream.cur = inbound{}
	if req.Notif {
		c.notification(req.Method, in.params)
		return
	}
	if in.token == "" || req.ID.Str != in.token {
		c.log.Error("request without a registered id", "method", req.Method)
		return
	}
	select {
	case c.sem <- struct{}{}:
	case <-c.baseCtx.Done():
		c.dropToken(in.token)
		return
	}
	ctx, cancel := context.WithCancel(c.baseCtx)
	// A prompt is registered here, on the read goroutine, so a close read
	// after it always finds it.
	var promptSession string
	var answered chan struct{}
	if req.Method == MethodSessionPrompt {
		promptSession, answered = sessionIDOf(in.params), make(chan struct{})
	}
	c.mu.Lock()
	if c.closing {
		// Serve is already waiting for the running requests: a request
		// read after that is dropped like one read after the shutdown,
		// and must not be counted while the count is being waited on.
		c.mu.Unlock()
		cancel()
		<-c.sem
		c.dropToken(in.token)
		return
	}
	c.inflight[in.token] = &inflight{key: in.key, cancel: cancel}
	if answered != nil {
		if c.prompts[promptSession] == nil {
			c.prompts[promptSession] = map[string]chan struct{}{}
		}
		c.prompts[promptSession][in.token] = answered
	}
	c.reqs.Add(1)
	c.mu.Unlock()
	run := func() {
		defer c.reqs.Done()
		defer func() { <-c.sem }()
		defer cancel()
		if answered != nil {
			defer c.promptAnswered(promptSession, in.token, answered)
		}
		c.serveRequest(ctx, rpc, in.token, req.Method, in.params)
		c.mu.Lock()
		delete(c.inflight, in.token)
		c.mu.Unlock()
	}
	if req.Method == MethodInitialize && !c.initialized {
		// The first initialize is answered on the read loop (see
		// Agent.Initialize). Only the first: stdout is still empty then,
		// as it is for the error replies the stream writes inline, so the
		// loop cannot stall on a client that is not reading; later ones
		// go to goroutines like every other request.
		c.initialized = true
		run()
		return
	}
	go run()
}

func (c *Conn) serveRequest(ctx context.Context, rpc *jsonrpc2.Conn, tok, method string, params json.RawMessage) {
	hooks := &replyHooks{}
	ctx = context.WithValue(ctx, replyHooksKey{}, hooks)
	defer hooks.run()
	if c.opts.OnFirstReply != nil {
		defer c.firstReply.Do(c.opts.OnFirstReply)
	}
	start := time.Now()
	res, err := c.dispatchSafe(ctx, method, params)
	if method == MethodSessionClose || method == MethodSessionDelete {
		c.waitPrompts(ctx, sessionIDOf(params))
	}
	id := jsonrpc2.ID{Str: tok, IsString: true}
	if err == nil {
		b, merr := json.Marshal(res)
		if merr == nil {
			if werr := rpc.Reply(context.Background(), id, json.RawMessage(b)); werr != nil {
				c.log.Warn("reply failed", "method", method, "err", werr)
				c.dropToken(tok)
			}
			c.log.Debug("request done", "method", method, "dur", time.Since(start))
			return
		}
		c.log.Error("marshal result", "method", method, "err", merr)
		err = ErrInternal("marshal result of " + method + ": " + merr.Error())
	}
	re := ToRPCError(err)
	c.log.Debug("request failed", "method", method, "code", re.Code, "err", err)
	if werr := rpc.ReplyWithError(context.Background(), id, re); werr != nil {
		c.log.Warn("error reply failed", "method", method, "err", werr)
		c.dropToken(tok)
	}
}

// sessionIDOf returns params.sessionId, or "" when absent or malformed.
func sessionIDOf(params json.RawMessage) string {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(params, &p)
	return p.SessionID
}

// promptAnswered drops a prompt whose answer is on the wire (or failed).
func (c *Conn) promptAnswered(session, tok string, answered chan struct{}) {
	c.mu.Lock()
	delete(c.prompts[session], tok)
	if len(c.prompts[session]) == 0 {
		delete(c.prompts, session)
	}
	c.mu.Unlock()
	close(answered)
}

// waitPrompts waits until every session/prompt of session received so far
// has been answered on the wire, or ctx ends (shutdown, $/cancel_request).
// ACP's session/close behaves as session/cancel first: the running prompt
// answers `cancelled`, and only then does the close answer.
func (c *Conn) waitPrompts(ctx context.Context, session string) {
	c.mu.Lock()
	var waits []chan struct{}
	for _, ch := range c.prompts[session] {
		waits = append(waits, ch)
	}
	c.mu.Unlock()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			c.log.Warn("answering session close before a running prompt", "session_id", session)
			return
		}
	}
}

// dispatchSafe turns a panic in the agent into -32603.
func (c *Conn) dispatchSafe(ctx context.Context, method string, params json.RawMessage) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("panic in request handler", "method", method, "panic", r, "stack", string(debug.Stack()))
			result, err = nil, ErrInternal(fmt.Sprintf("internal error in %s: %v", method, r))
		}
	}()
	return c.dispatch(ctx, method, params)
}

// Forker is implemented by agents that support session/fork; without it
// the method is answered -32601.
type Forker interface {
	ForkSession(ctx context.Context, req *ForkSessionRequest) (*ForkSessionResponse, error)
}

// Logouter is implemented by agents that support logout; without it logout
// is answered -32601.
type Logouter interface {
	Logout(ctx context.Context, req *LogoutRequest) (*Empty, error)
}

func (c *Conn) dispatch(ctx context.Context, method string, params json.RawMessage) (any, error) {
	a := c.agent
	switch method {
	case MethodInitialize:
		var p InitializeRequest
		if err := DecodeParams(method, params, &p); err != nil {
			return nil, err
		}
		r, err := a.Initialize(ctx, &p)
		if err == nil {
			caps := p.ClientCapabilities
			c.caps.Store(&caps)
		}
		return result(r, err)
	case MethodAuthenticate:
		return call(ctx, method, params, a.Authenticate)
	case MethodLogout:
		if l, ok := a.(Logouter); ok {
			return call(ctx, method, params, l.Logout)
		}
		return nil, ErrMethodNotFound(method)
	case MethodSessionNew:
		return call(ctx, method, params, a.NewSession)
	case MethodSessionLoad:
		return call(ctx, method, params, a.LoadSession)
	case MethodSessionResume:
		return call(ctx, method, params, a.ResumeSession)
	case MethodSessionFork:
		if f, ok := a.(Forker); ok {
			return call(ctx, method, params, f.ForkSession)
		}
		return nil, ErrMethodNotFound(method)
	case MethodSessionList:
		return call(ctx, method, params, a.ListSessions)
	case MethodSessionClose:
		return call(ctx, method, params, a.CloseSession)
	case MethodSessionDelete:
		return call(ctx, method, params, a.DeleteSession)
	case MethodSessionSetMode:
		return call(ctx, method, params, a.SetSessionMode)
	case MethodSessionSetConfigOption:
		return call(ctx, method, params, a.SetSessionConfigOption)
	case MethodSessionSetModel:
		// Decision: the removed session/set_model is answered as the
		// `model` config option it became, not -32601: half the agents in
		// the registry still answer it and some clients still send it, to
		// pick a model from a list they got elsewhere. The answer is the
		// old empty object (such a client keeps its own selection); acpd
		// never advertises the old API (no `models` in its answers).
		return call(ctx, method, params, func(ctx context.Context, p *SetSessionModelRequest) (*Empty, error) {
			value, _ := json.Marshal(p.ModelID)
			_, err := a.SetSessionConfigOption(ctx, &SetSessionConfigOptionRequest{SessionID: p.SessionID, ConfigID: "model", Value: value, Meta: p.Meta})
			if err != nil {
				return nil, err
			}
			return &Empty{}, nil
		})
	case MethodSessionPrompt:
		return call(ctx, method, params, a.Prompt)
	case MethodSessionSteering:
		if st, ok := a.(Steerer); ok {
			return call(ctx, method, params, st.Steer)
		}
		return nil, ErrMethodNotFound(method)
	default:
		return nil, ErrMethodNotFound(method)
	}
}

// call decodes and validates params, then runs fn.
func call[P any, R any, PP interface {
	*P
	Params
}](ctx context.Context, method string, raw json.RawMessage, fn func(context.Context, PP) (*R, error)) (any, error) {
	p := PP(new(P))
	if err := DecodeParams(method, raw, p); err != nil {
		return nil, err
	}
	return result(fn(ctx, p))
}

// result never lets a nil pointer become `"result":null`.
func result[R any](r *R, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	if r == nil {
		return struct{}{}, nil
	}
	return r, nil
}

func (c *Conn) notification(method string, params json.RawMessage) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("panic in notification handler", "method", method, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	switch method {
	case MethodSessionCancel:
		var p SessionIDRequest
		if err := DecodeParams(method, params, &p); err != nil {
			c.log.Warn("invalid session/cancel", "err", err)
			return
		}
		c.agent.Cancel(&p)
	case MethodCancelRequest:
		var p CancelRequestNotification
		if err := DecodeParams(method, params, &p); err != nil {
			c.log.Warn("invalid $/cancel_request", "err", err)
			return
		}
		key, _ := idKey(p.RequestID)
		c.mu.Lock()
		for _, f := range c.inflight {
			if f.key == key {
				f.cancel()
			}
		}
		c.mu.Unlock()
	default:
		// Unknown notifications, including `_` extensions, are ignored.
		c.log.Debug("ignoring notification", "method", method)
	}
}

// ToRPCError maps an error to the JSON-RPC error sent to the client: an
// *Error or *jsonrpc2.Error keeps its code, context cancellation becomes
// -32800, anything else -32603 with the error text.
func ToRPCError(err error) *jsonrpc2.Error {
	var ae *Error
	if errors.As(err, &ae) {
		je := &jsonrpc2.Error{Code: int64(ae.Code), Message: ae.Message}
		if ae.Data != nil {
			if b, merr := json.Marshal(ae.Data); merr == nil {
				raw := json.RawMessage(b)
				je.Data = &raw
			}
		}
		return je
	}
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		return je
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &jsonrpc2.Error{Code: CodeRequestCancelled, Message: "Request cancelled"}
	}
	return &jsonrpc2.Error{Code: CodeInternalError, Message: err.Error()}
}

// ---- Client: calls from the agent to the editor ----

// SessionUpdate sends a session/update notification. It is written even
// when ctx is already cancelled: the final updates of a cancelled turn must
// still reach the client before the prompt response.
func (c *Conn) SessionUpdate(_ context.Context, n *SessionNotification) error {
	// Notifications bypass jsonrpc2's triple re-encoding (map, compaction,
	// compaction) and go straight to the stream, which serialises all
	// writes; jsonrpc2 keeps no state for notifications, so nothing is lost.
	if c.rpc.Load() == nil {
		return ErrNotServing
	}
	select {
	case <-c.stream.closed:
		return ErrNotServing
	default:
	}
	if b, ok := appendTextChunk(make([]byte, 0, 256), n); ok {
		return c.stream.writeLine(b)
	}
	const head = `{"jsonrpc":"2.0","method":"` + MethodSessionUpdate + `","params":`
	if n.Meta == nil {
		// Calling the update's MarshalJSON directly spares encoding/json's
		// re-validation and compaction of its output (a third of the cost
		// of a tool-call frame).
		update, err := n.Update.MarshalJSON()
		if err != nil {
			return fmt.Errorf("%s: %w", MethodSessionUpdate, err)
		}
		sid, err := json.Marshal(n.SessionID)
		if err != nil {
			return fmt.Errorf("%s: %w", MethodSessionUpdate, err)
		}
		b := make([]byte, 0, len(head)+len(sid)+len(update)+28)
		b = append(b, head...)
		b = append(b, `{"sessionId":`...)
		b = append(b, sid...)
		b = append(b, `,"update":`...)
		b = append(b, update...)
		b = append(b, "}}"...)
		return c.stream.writeLine(b)
	}
	params, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("%s: %w", MethodSessionUpdate, err)
	}
	b := make([]byte, 0, len(head)+len(params)+2)
	b = append(b, head...)
	b = append(b, params...)
	b = append(b, '}')
	return c.stream.writeLine(b)
}

// callClient sends a request with an id of our own choosing, so that it can
// be cancelled with $/cancel_request when ctx is done.
func (c *Conn) callClient(ctx context.Context, method string, params, out any) error {
	rpc := c.rpc.Load()
	if rpc == nil {
		return ErrNotServing
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	id := jsonrpc2.ID{Str: "acpd-" + strconv.FormatUint(c.seqOut.Add(1), 10), IsString: true}
	w, err := rpc.DispatchCall(ctx, method, params, jsonrpc2.PickID(id))
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	var raw json.RawMessage
	err = w.Wait(ctx, &raw)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		if nerr := rpc.Notify(context.Background(), MethodCancelRequest, map[string]string{"requestId": id.Str}); nerr != nil {
			c.log.Debug("send $/cancel_request", "err", nerr)
		}
		return ctx.Err()
	}
	if err != nil {
		var je *jsonrpc2.Error
		if errors.As(err, &je) {
			e := &Error{Code: int(je.Code), Message: je.Message}
			if je.Data != nil {
				e.Data = *je.Data
			}
			return e
		}
		if errors.Is(err, jsonrpc2.ErrClosed) {
			return fmt.Errorf("%s: %w", method, ErrNotServing)
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	if out == nil || len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: invalid result from client: %w", method, err)
	}
	return nil
}

// RequestPermission asks the user; the outcome is checked to be "cancelled"
// or "selected" with an optionId.
func (c *Conn) RequestPermission(ctx context.Context, req *RequestPermissionRequest) (*RequestPermissionResponse, error) {
	var r RequestPermissionResponse
	if err := c.callClient(ctx, MethodSessionRequestPermission, req, &r); err != nil {
		return nil, err
	}
	switch {
	case r.Outcome.Outcome == "cancelled":
	case r.Outcome.Outcome == "selected" && r.Outcome.OptionID != "":
	default:
		return nil, fmt.Errorf("%s: invalid outcome %q from client", MethodSessionRequestPermission, r.Outcome.Outcome)
	}
	return &r, nil
}

// ReadTextFile reads a file through the editor (unsaved buffers included).
func (c *Conn) ReadTextFile(ctx context.Context, req *ReadTextFileRequest) (*ReadTextFileResponse, error) {
	var r ReadTextFileResponse
	if err := c.callClient(ctx, MethodFSReadTextFile, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// WriteTextFile writes a file through the editor; a null result is accepted.
func (c *Conn) WriteTextFile(ctx context.Context, req *WriteTextFileRequest) error {
	return c.callClient(ctx, MethodFSWriteTextFile, req, nil)
}

// CreateTerminal starts a command in a client terminal.
func (c *Conn) CreateTerminal(ctx context.Context, req *CreateTerminalRequest) (*CreateTerminalResponse, error) {
	var r CreateTerminalResponse
	if err := c.callClient(ctx, MethodTerminalCreate, req, &r); err != nil {
		return nil, err
	}
	if r.TerminalID == "" {
		return nil, fmt.Errorf("%s: client returned no terminalId", MethodTerminalCreate)
	}
	return &r, nil
}

// TerminalOutput fetches the output so far.
func (c *Conn) TerminalOutput(ctx context.Context, req *TerminalRequest) (*TerminalOutputResponse, error) {
	var r TerminalOutputResponse
	if err := c.callClient(ctx, MethodTerminalOutput, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// WaitForTerminalExit blocks until the command exits or ctx is done.
func (c *Conn) WaitForTerminalExit(ctx context.Context, req *TerminalRequest) (*TerminalExitStatus, error) {
	var r TerminalExitStatus
	if err := c.callClient(ctx, MethodTerminalWaitForExit, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// KillTerminal kills the command; the terminal stays valid until released.
func (c *Conn) KillTerminal(ctx context.Context, req *TerminalRequest) error {
	return c.callClient(ctx, MethodTerminalKill, req, nil)
}

// ReleaseTerminal frees the terminal. Callers should pass a context that is
// not cancelled with the turn (e.g. context.WithoutCancel), since release is
// mandatory even after a cancel.
func (c *Conn) ReleaseTerminal(ctx context.Context, req *TerminalRequest) error {
	return c.callClient(ctx, MethodTerminalRelease, req, nil)
}

var (
	_ Elicitor             = (*Conn)(nil)
	_ ElicitationCompleter = (*Conn)(nil)
)

// CreateElicitation asks the user through the editor's form; the action is
// checked to be one the schema defines. The caller makes sure the client
// advertised elicitation.form.
func (c *Conn) CreateElicitation(ctx context.Context, req *CreateElicitationRequest) (*CreateElicitationResponse, error) {
	var r CreateElicitationResponse
	if err := c.callClient(ctx, MethodElicitationCreate, req, &r); err != nil {
		return nil, err
	}
	switch r.Action {
	case ElicitAccept, ElicitDecline, ElicitCancel:
	default:
		return nil, fmt.Errorf("%s: invalid action %q from client", MethodElicitationCreate, r.Action)
	}
	return &r, nil
}

// CompleteElicitation tells the client that the out-of-band step of the
// URL elicitation it was asked for has finished.
func (c *Conn) CompleteElicitation(ctx context.Context, n *CompleteElicitationNotification) error {
	rpc := c.rpc.Load()
	if rpc == nil {
		return ErrNotServing
	}
	return rpc.Notify(ctx, MethodElicitationComplete, n)
}

type replyHooksKey struct{}

// replyHooks are run once a request's response has been written.
type replyHooks struct {
	mu  sync.Mutex
	fns []func()
	ran bool
}

func (h *replyHooks) run() {
	h.mu.Lock()
	fns := h.fns
	h.fns, h.ran = nil, true
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// AfterReply arranges for fn to run once the response to the request that
// ctx belongs to has been written to the wire (or its write failed). A
// session uses it to hold its turn until the prompt's answer is out, so the
// next turn's updates cannot overtake it. It reports false when ctx is not
// a request context of a Conn (or the reply is already out); the caller
// then runs fn itself.
func AfterReply(ctx context.Context, fn func()) bool {
	h, ok := ctx.Value(replyHooksKey{}).(*replyHooks)
	if !ok {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ran {
		return false
	}
	h.fns = append(h.fns, fn)
	return true
}
