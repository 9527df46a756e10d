package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/mcp/oauth"
)

// maxListPages bounds the pagination of one listing against a server that
// never stops handing out cursors.
const maxListPages = 100

// exitReportWait bounds how long a failed call waits to learn whether the
// connection is gone (the SDK's reader notices shortly after the call fails).
const exitReportWait = 500 * time.Millisecond

// errClosed is returned by calls after the Set was closed.
var errClosed = errors.New("closed")

// Listing kinds, for the dirty bits the servers' list_changed
// notifications set.
const (
	dirtyTools = 1 << iota
	dirtyPrompts
	dirtyResources
)

// server is one configured MCP server and its current connection.
type server struct {
	cfg    acp.MCPServer
	name   string
	opts   Options
	log    *slog.Logger
	client *sdk.Client
	// auth signs in to an HTTP server that asks for OAuth (nil: none).
	auth *oauth.Handler

	// life is cancelled by close, aborting a connect or restart in progress
	// and whatever the server's own requests wait for.
	life context.Context
	stop context.CancelFunc

	mu        sync.Mutex
	conn      *conn // nil while not connected
	lists     listings
	gen       int   // connection generation, bumped on every connect
	dead      error // why the last connection ended, until a call reports it
	fatal     error // set when calls must fail fast (start or restart failed)
	dirty     int   // listings the server said changed, not yet listed again
	restarted bool
	closed    bool

	// calls are the calls in flight, by progress token (elicit.go ties the
	// server's elicitations and progress to them).
	calls  map[string]*callState
	callNo int
	// elicits are the URL elicitations forwarded to the editor that wait
	// for the server's notifications/elicitation/complete, by the
	// server's elicitation id.
	elicits map[string]*urlElicit

	watchers sync.WaitGroup
}

// listings are what a server offers, as last listed.
type listings struct {
	caps      *sdk.ServerCapabilities
	tools     []*toolDef
	byName    map[string]*toolDef
	prompts   []*sdk.Prompt
	resources []*sdk.Resource
	templates []*sdk.ResourceTemplate
}

// conn is one live connection: the SDK session, the child process (stdio)
// and a channel closed when the connection ends.
type conn struct {
	cs   *sdk.ClientSession
	cmd  *exec.Cmd
	gen  int
	done chan struct{}
	// exitErr is why the connection ended (the child's exit status for
	// stdio); read it only after done is closed.
	exitErr error
}

// exitReason is why the connection ended, waiting briefly for the reader to
// notice; fallback when it has not yet or said nothing.
func (c *conn) exitReason(ctx context.Context, fallback error) error {
	t := time.NewTimer(exitReportWait)
	defer t.Stop()
	select {
	case <-c.done:
		if c.exitErr != nil {
			return c.exitErr
		}
	case <-t.C:
	case <-ctx.Done():
	}
	return fallback
}

// extra is what the configuration says of the server beyond its ACP shape.
func (s *server) extra() ServerOptions { return s.opts.Servers[s.name] }

func newServer(cfg acp.MCPServer, opts Options) *server {
	life, stop := context.WithCancel(context.Background())
	s := &server{
		cfg:     cfg,
		name:    cfg.Name,
		opts:    opts,
		log:     opts.Logger.With("mcp_server", cfg.Name),
		life:    life,
		stop:    stop,
		calls:   map[string]*callState{},
		elicits: map[string]*urlElicit{},
	}
	s.client = s.newClient()
	if cfg.Type == TypeHTTP && opts.Tokens != nil && !s.hasHeader("Authorization") {
		s.auth = oauth.NewHandler(cfg.Name, cfg.URL, opts.Tokens, opts.HTTPClient, s.log)
	}
	return s
}

// newClient is the SDK client of the server, advertising only what acpd
// handles: elicitation in the modes the editor offers, nothing else (no
// roots, sampling or logging: acpd has nothing to give a server for them,
// and the 2026-07-28 revision deprecates all three).
func (s *server) newClient() *sdk.Client {
	caps := &sdk.ClientCapabilities{}
	o := &sdk.ClientOptions{
		Logger:                     s.log,
		Capabilities:               caps,
		ToolListChangedHandler:     func(context.Context, *sdk.ToolListChangedRequest) { s.changed(dirtyTools) },
		PromptListChangedHandler:   func(context.Context, *sdk.PromptListChangedRequest) { s.changed(dirtyPrompts) },
		ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) { s.changed(dirtyResources) },
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			s.progress(r.Params)
		},
		ElicitationCompleteHandler: func(_ context.Context, r *sdk.ElicitationCompleteNotificationRequest) {
			if r.Params != nil {
				s.elicitationComplete(r.Params.ElicitationID)
			}
		},
		// A multi round-trip request (2026-07-28) is answered by the
		// SDK through the handlers above, on the request's context.
	}
	if e := s.opts.Elicit; e != nil && (e.Form || e.URL) {
		caps.Elicitation = &sdk.ElicitationCapabilities{}
		if e.Form {
			caps.Elicitation.Form = &sdk.FormElicitationCapabilities{}
		}
		if e.URL {
			caps.Elicitation.URL = &sdk.URLElicitationCapabilities{}
		}
		o.ElicitationHandler = s.elicit
	}
	return sdk.NewClient(&sdk.Implementation{Name: "acpd", Title: "acpd", Version: s.opts.ClientVersion}, o)
}

// changed marks a listing as changed and tells the session.
func (s *server) changed(kind int) {
	s.mu.Lock()
	s.dirty |= kind
	s.mu.Unlock()
	if s.opts.Changed != nil {
		go s.opts.Changed()
	}
}

func (s *server) typeName() string {
	if s.cfg.Type == TypeStdio {
		return "stdio"
	}
	return s.cfg.Type
}

// start makes the first connection; a failure makes every later call fail
// fast (there is nothing to restart).
func (s *server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t0 := time.Now()
	if err := s.connectLocked(ctx); err != nil {
		s.fatal = err
		s.log.Warn("mcp server failed to start", "err", err, "dur", time.Since(t0))
		return err
	}
	s.log.Info("mcp server connected", "transport", s.typeName(), "protocol", s.conn.cs.InitializeResult().ProtocolVersion,
		"tools", len(s.lists.tools), "prompts", len(s.lists.prompts), "resources", len(s.lists.resources), "dur", time.Since(t0))
	return nil
}

// connectLocked starts the transport, initialises the session and lists
// what the server offers, all within ConnectTimeout. s.mu is held.
func (s *server) connectLocked(ctx context.Context) error {
	if s.closed {
		return &ServerError{Server: s.name, Err: errClosed}
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()

	cs, cmd, err := s.connectSession(cctx)
	if err != nil {
		return &ServerError{Server: s.name, Err: s.connectErr("connect", cctx, err)}
	}
	lists, err := s.list(cctx, cs, dirtyTools|dirtyPrompts|dirtyResources, listings{})
	if err != nil {
		_ = cs.Close()
		killGroup(cmd)
		return &ServerError{Server: s.name, Err: s.connectErr("list", cctx, err)}
	}
	s.gen++
	c := &conn{cs: cs, cmd: cmd, gen: s.gen, done: make(chan struct{})}
	s.conn = c
	s.lists = lists
	s.dirty = 0
	s.dead = nil
	s.watchers.Go(func() { s.watch(c) })
	return nil
}

// connectSession connects with ProtocolVersion, and again with the
// stateless revision when the server refuses initialize as a server of
// that revision only would.
func (s *server) connectSession(ctx context.Context) (*sdk.ClientSession, *exec.Cmd, error) {
	version := ProtocolVersion
	for {
		t, cmd, err := s.transport()
		if err != nil {
			return nil, nil, err
		}
		cs, err := s.client.Connect(ctx, t, &sdk.ClientSessionOptions{ProtocolVersion: version})
		if err == nil {
			return cs, cmd, nil
		}
		killGroup(cmd)
		var rpcErr *jsonrpc.Error
		if version == statelessVersion || ctx.Err() != nil || !errors.As(err, &rpcErr) ||
			(rpcErr.Code != jsonrpc.CodeMethodNotFound && rpcErr.Code != sdk.CodeUnsupportedProtocolVersion) {
			return nil, nil, err
		}
		s.log.Info("mcp server refused initialize; connecting with server/discover", "err", err)
		version = statelessVersion
	}
}

// connectErr names a timeout plainly instead of "context deadline exceeded".
func (s *server) connectErr(step string, cctx context.Context, err error) error {
	if errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer within %s", step, s.opts.ConnectTimeout)
	}
	if s.life.Err() != nil {
		return fmt.Errorf("%s: %w", step, errClosed)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// list lists the kinds of what the server offers, following pagination,
// each only when the server's capabilities say it has it; the other
// listings are kept from prev.
func (s *server) list(ctx context.Context, cs *sdk.ClientSession, kinds int, prev listings) (listings, error) {
	out := prev
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		caps = &sdk.ServerCapabilities{}
	}
	out.caps = caps
	if kinds&dirtyTools != 0 && caps.Tools != nil {
		var defs []*toolDef
		seen := map[string]bool{}
		err := paginate(ctx, func(ctx context.Context, cursor string) (string, error) {
			res, err := cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
			if err != nil {
				return "", fmt.Errorf("tools/list: %w", err)
			}
			for _, t := range res.Tools {
				if t == nil || t.Name == "" || seen[t.Name] || !s.extra().offers(t.Name) {
					continue
				}
				seen[t.Name] = true
				defs = append(defs, newToolDef(t))
			}
			return res.NextCursor, nil
		})
		if err != nil {
			return out, err
		}
		out.tools, out.byName = defs, make(map[string]*toolDef, len(defs))
		for _, d := range defs {
			out.byName[d.name] = d
		}
	}
	if kinds&dirtyPrompts != 0 && caps.Prompts != nil {
		var ps []*sdk.Prompt
		seen := map[string]bool{}
		err := paginate(ctx, func(ctx context.Context, cursor string) (string, error) {
			res, err := cs.ListPrompts(ctx, &sdk.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return "", fmt.Errorf("prompts/list: %w", err)
			}
			for _, p := range res.Prompts {
				if p != nil && p.Name != "" && !seen[p.Name] {
					seen[p.Name] = true
					ps = append(ps, p)
				}
			}
			return res.NextCursor, nil
		})
		if err != nil {
			return out, err
		}
		out.prompts = ps
	}
	if kinds&dirtyResources != 0 && caps.Resources != nil {
		var rs []*sdk.Resource
		err := paginate(ctx, func(ctx context.Context, cursor string) (string, error) {
			res, err := cs.ListResources(ctx, &sdk.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return "", fmt.Errorf("resources/list: %w", err)
			}
			for _, r := range res.Resources {
				if r != nil && r.URI != "" {
					rs = append(rs, r)
				}
			}
			return res.NextCursor, nil
		})
		if err != nil {
			return out, err
		}
		var ts []*sdk.ResourceTemplate
		err = paginate(ctx, func(ctx context.Context, cursor string) (string, error) {
			res, err := cs.ListResourceTemplates(ctx, &sdk.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return "", fmt.Errorf("resources/templates/list: %w", err)
			}
			for _, t := range res.ResourceTemplates {
				if t != nil && t.URITemplate != "" {
					ts = append(ts, t)
				}
			}
			return res.NextCursor, nil
		})
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeMethodNotFound {
			err = nil // templates are optional
		}
		if err != nil {
			return out, err
		}
		out.resources, out.templates = rs, ts
	}
	return out, nil
}

// paginate calls page with each cursor until one returns none, refusing a
// repeated cursor and more than maxListPages pages.
func paginate(ctx context.Context, page func(ctx context.Context, cursor string) (next string, err error)) error {
	cursors := map[string]bool{}
	cursor := ""
	for range maxListPages {
		next, err := page(ctx, cursor)
		if err != nil || next == "" {
			return err
		}
		if cursors[next] {
			return fmt.Errorf("the server repeated the cursor %q", next)
		}
		cursors[next] = true
		cursor = next
	}
	return fmt.Errorf("the server's listing has more than %d pages", maxListPages)
}

// refresh lists again what the server said changed, keeping the rest.
func (s *server) refresh(ctx context.Context) Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	kinds := s.dirty
	if kinds == 0 || s.conn == nil {
		return Changes{}
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	lists, err := s.list(cctx, s.conn.cs, kinds, s.lists)
	if err != nil {
		// Kept dirty: the next boundary tries again; until then the
		// session keeps the listing it had.
		s.log.Warn("mcp server listing failed", "err", err)
		return Changes{}
	}
	s.lists = lists
	s.dirty = 0
	s.log.Info("mcp server listing changed", "tools", len(lists.tools), "prompts", len(lists.prompts), "resources", len(lists.resources))
	return Changes{Tools: kinds&dirtyTools != 0, Prompts: kinds&dirtyPrompts != 0, Resources: kinds&dirtyResources != 0}
}

// watch waits for the connection to end; an end we did not cause marks the
// server dead until its next call reports it.
func (s *server) watch(c *conn) {
	err := c.cs.Wait()
	s.mu.Lock()
	closed := s.closed
	current := s.conn == c && !closed
	s.mu.Unlock()
	if !closed {
		// Reap the child and anything it left behind. When the output
		// just ended, the child's exit status says why; a broken message
		// says so itself (and the child may then die of the closed pipe).
		if cerr := c.cs.Close(); cerr != nil && plainEnd(err) {
			err = cerr
		}
		killGroup(c.cmd)
	}
	c.exitErr = connEndReason(err)
	close(c.done)
	if closed {
		return // close cleans up
	}
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
		s.dead = c.exitErr
	}
	s.mu.Unlock()
	if current {
		s.log.Warn("mcp server stopped unexpectedly", "err", c.exitErr)
	}
}

// plainEnd reports whether err says only that the connection ended.
func plainEnd(err error) bool {
	return err == nil || errors.Is(err, io.EOF) || errors.Is(err, sdk.ErrConnectionClosed)
}

// connEndReason is what a connection's end is reported as.
func connEndReason(err error) error {
	if err == nil || errors.Is(err, sdk.ErrConnectionClosed) {
		return errors.New("the connection closed")
	}
	return err
}

// session returns the live connection for a request, or why there is
// none: a dead server is reported here, once, naming it, and restarted
// (once per session).
func (s *server) session(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, fmt.Errorf("mcp server %q is closed", s.name)
	case s.conn == nil && s.dead != nil:
		gen, reason := s.gen, s.dead
		s.mu.Unlock()
		return nil, s.recover(ctx, gen, reason, fmt.Errorf("mcp server %q had stopped (%v)", s.name, reason))
	case s.conn == nil:
		err := s.fatal
		s.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("mcp server %q is not connected", s.name)
		}
		return nil, err
	}
	c := s.conn
	s.mu.Unlock()
	return c, nil
}

// do runs one request on the live connection. Close cancels it; a
// connection lost under it is reported and the server restarted.
func (s *server) do(ctx context.Context, c *conn, req func(ctx context.Context) error) error {
	if s.auth != nil && s.opts.SignIn != nil {
		// A refused token mid-session (revoked, or its refresh token
		// expired) is signed in again through the editor, the call
		// waiting.
		ctx = oauth.WithPrompt(ctx, s.opts.SignIn)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	err := req(cctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.life.Err() != nil {
		return fmt.Errorf("mcp server %q was closed during the call", s.name)
	}
	if !s.connectionLost(ctx, c, err) {
		return fmt.Errorf("mcp server %q: %w", s.name, err)
	}
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
	}
	s.mu.Unlock()
	reason := c.exitReason(ctx, err)
	return s.recover(ctx, c.gen, reason, fmt.Errorf("mcp server %q stopped during the call (%v)", s.name, reason))
}

// connectionLost tells a dead connection from an error answer. A JSON-RPC
// error from the server is an answer; anything else waits briefly for the
// reader to notice a closed connection.
func (s *server) connectionLost(ctx context.Context, c *conn, err error) bool {
	if errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing) {
		return true
	}
	if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) {
		return false
	}
	t := time.NewTimer(exitReportWait)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// recover handles a dead connection of generation gen: the first time it
// restarts the server, later it fails fast. reason is why the connection
// ended; report says so naming the server. The returned error always starts
// with report; the caller's request was not run (or died with the server).
func (s *server) recover(ctx context.Context, gen int, reason, report error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("%w; the session's MCP servers are closed", report)
	case s.gen != gen || s.conn != nil:
		// A concurrent call already restarted it.
		if s.conn != nil {
			return fmt.Errorf("%w; it was restarted, call the tool again", report)
		}
		return s.fatal
	case s.restarted:
		s.dead = nil
		s.fatal = fmt.Errorf("%w; it was already restarted once and is not restarted again", report)
		s.log.Warn("mcp server stopped again; not restarting", "err", report)
		return s.fatal
	}
	s.restarted = true
	s.dead = nil
	s.log.Warn("restarting mcp server", "err", report)
	prev := s.lists
	if err := s.connectLocked(ctx); err != nil {
		if ctx.Err() != nil && s.life.Err() == nil {
			// The caller gave up, not the server: the next call tries again.
			s.restarted = false
			s.dead = reason
			return fmt.Errorf("%w; the restart was interrupted: %w", report, ctx.Err())
		}
		s.fatal = fmt.Errorf("%w; restarting it failed: %v", report, errors.Unwrap(err))
		s.log.Warn("mcp server restart failed", "err", err)
		return s.fatal
	}
	// What the restarted server offers reaches the model at the next turn
	// boundary, as any change does.
	s.dirty |= s.lists.differs(prev)
	if s.dirty != 0 && s.opts.Changed != nil {
		go s.opts.Changed()
	}
	s.log.Info("mcp server restarted", "tools", len(s.lists.tools))
	return fmt.Errorf("%w; it was restarted, call the tool again", report)
}

// signIn runs the OAuth flow through prompt and connects the server,
// which waited for it.
func (s *server) signIn(ctx context.Context, prompt oauth.Prompt) error {
	sctx, cancel := context.WithTimeout(ctx, oauth.SignInTimeout)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	if err := s.auth.SignIn(sctx, s.httpClient().Transport, prompt); err != nil {
		return &ServerError{Server: s.name, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		return nil
	}
	if err := s.connectLocked(ctx); err != nil {
		s.fatal = err
		return err
	}
	s.fatal = nil
	s.dirty |= s.lists.differs(listings{})
	if s.dirty != 0 && s.opts.Changed != nil {
		go s.opts.Changed()
	}
	s.log.Info("mcp server connected after signing in", "tools", len(s.lists.tools))
	return nil
}

// differs is the kinds of listing in which l and prev differ by name or
// definition (for the refresh a restart calls for).
func (l listings) differs(prev listings) int {
	kinds := 0
	if len(l.tools) != len(prev.tools) {
		kinds |= dirtyTools
	} else {
		for i, d := range l.tools {
			if d.name != prev.tools[i].name || string(d.params) != string(prev.tools[i].params) || d.description != prev.tools[i].description {
				kinds |= dirtyTools
			}
		}
	}
	if len(l.prompts) != len(prev.prompts) {
		kinds |= dirtyPrompts
	}
	if len(l.resources) != len(prev.resources) || len(l.templates) != len(prev.templates) {
		kinds |= dirtyResources
	}
	return kinds
}

// listing is the current tool list (empty while the server cannot be
// used: it failed to start, or to restart).
func (s *server) listing() []*toolDef {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil && s.dead == nil {
		return nil
	}
	return s.lists.tools
}

// lookup returns the definition of the tool called name on the server.
func (s *server) lookup(name string) (*toolDef, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.lists.byName[name]
	return d, ok
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.name, Type: s.typeName(), Connected: s.conn != nil, Err: s.fatal,
		SignInRequired: s.conn == nil && oauth.IsSignInRequired(s.fatal)}
	if s.conn != nil {
		st.Tools, st.Prompts, st.Resources = len(s.lists.tools), len(s.lists.prompts), len(s.lists.resources)+len(s.lists.templates)
	}
	return st
}

// close ends the connection (a child's stdin is closed, then it is
// signalled) and kills whatever is left of the child's process group.
func (s *server) close() error {
	s.stop()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	var err error
	if c != nil {
		err = c.cs.Close()
		killGroup(c.cmd)
	}
	s.watchers.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) || errors.Is(err, sdk.ErrConnectionClosed) {
		// The child was stopped by a signal or exited non-zero on the way
		// out; it is gone, which is all Close promises.
		s.log.Debug("mcp server exit", "err", err)
		err = nil
	}
	if err != nil {
		return &ServerError{Server: s.name, Err: fmt.Errorf("close: %w", err)}
	}
	s.log.Debug("mcp server closed")
	return nil
}

// callState is one request in flight: the progress and elicitations the
// server sends about it go to the editor's tool call.
type callState struct {
	ctx        context.Context
	toolCallID string
	// update sends a tool_call_update for the call (nil: none can be sent).
	update func(ctx context.Context, u acp.ToolCallUpdate) error

	mu           sync.Mutex
	lastProgress time.Time
}

// track registers a call for its progress token; untrack removes it.
func (s *server) track(cs *callState) (token string, untrack func()) {
	s.mu.Lock()
	s.callNo++
	token = "acpd-" + strconv.Itoa(s.callNo)
	s.calls[token] = cs
	s.mu.Unlock()
	return token, func() {
		s.mu.Lock()
		delete(s.calls, token)
		s.mu.Unlock()
	}
}
