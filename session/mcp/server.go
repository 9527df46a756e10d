package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/credhttp"
)

// inheritedEnv is the part of the daemon's environment a stdio server gets
// before the configured env: enough to find programs and a home directory,
// without leaking the daemon's secrets (API keys) to third-party servers.
var inheritedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TEMP", "TMP",
	"LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
	"XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
	"SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "PATHEXT", "COMSPEC",
}

// maxListPages bounds tools/list pagination against a server that never
// stops handing out cursors.
const maxListPages = 100

// exitReportWait bounds how long a failed call waits to learn whether the
// connection is gone (the read loop notices shortly after the call fails).
const exitReportWait = 500 * time.Millisecond

// errClosed is returned by calls after the Set was closed.
var errClosed = errors.New("closed")

// server is one configured MCP server and its current connection.
type server struct {
	cfg  acp.MCPServer
	name string
	opts Options
	log  *slog.Logger

	// life is cancelled by close, aborting a connect or restart in progress.
	life context.Context
	stop context.CancelFunc

	mu        sync.Mutex
	conn      *conn // nil while not connected
	defs      []*toolDef
	byName    map[string]*toolDef
	gen       int   // connection generation, bumped on every connect
	dead      error // why the last connection ended, until a call reports it
	fatal     error // set when calls must fail fast (start or restart failed)
	restarted bool
	closed    bool

	watchers sync.WaitGroup
}

// conn is one live connection: the session, the child process (stdio) and
// a channel closed when the connection ends.
type conn struct {
	cs   *session
	cmd  *exec.Cmd
	gen  int
	done chan struct{}
	// exitErr is what Wait returned (the child's exit status for stdio);
	// read it only after done is closed.
	exitErr error
}

// exitReason is why the connection ended, waiting briefly for the read
// loop to notice; fallback when it has not yet or said nothing.
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

func newServer(cfg acp.MCPServer, opts Options) *server {
	life, stop := context.WithCancel(context.Background())
	return &server{
		cfg:  cfg,
		name: cfg.Name,
		opts: opts,
		log:  opts.Logger.With("mcp_server", cfg.Name),
		life: life,
		stop: stop,
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
	s.log.Info("mcp server connected", "transport", s.typeName(), "tools", len(s.defs), "dur", time.Since(t0))
	return nil
}

// connectLocked starts the transport, initialises the session and lists the
// tools, all within ConnectTimeout. s.mu is held.
func (s *server) connectLocked(ctx context.Context) error {
	if s.closed {
		return &ServerError{Server: s.name, Err: errClosed}
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()

	r, cmd, err := s.dial()
	if err != nil {
		return &ServerError{Server: s.name, Err: s.connectErr("connect", cctx, err)}
	}
	cs, err := initialize(cctx, r, s.opts.ClientVersion)
	if err != nil {
		_ = r.close()
		killGroup(cmd)
		return &ServerError{Server: s.name, Err: s.connectErr("connect", cctx, err)}
	}
	defs, err := listTools(cctx, cs)
	if err != nil {
		_ = r.close()
		killGroup(cmd)
		return &ServerError{Server: s.name, Err: s.connectErr("list tools", cctx, err)}
	}
	s.gen++
	c := &conn{cs: cs, cmd: cmd, gen: s.gen, done: make(chan struct{})}
	s.conn = c
	s.setDefs(defs)
	s.dead = nil
	s.watchers.Go(func() { s.watch(c) })
	return nil
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

// dial opens a fresh connection: an HTTP transport, or a started child for
// stdio servers (cmd).
func (s *server) dial() (*rpc, *exec.Cmd, error) {
	r := newRPC(s.log)
	if s.cfg.Type == TypeHTTP {
		base := http.DefaultTransport
		client := &http.Client{}
		if s.opts.HTTPClient != nil {
			*client = *s.opts.HTTPClient
			if client.Transport != nil {
				base = client.Transport
			}
		}
		client.Transport = &headerTransport{base: base, headers: s.cfg.Headers}
		client.CheckRedirect = credhttp.CheckRedirect // headerTransport adds the headers on every hop
		r.t = newHTTPTransport(s.cfg.URL, client, r)
		return r, nil, nil
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = childEnv(s.cfg.Env)
	cmd.Dir = neutralDir()
	// The client reads stdout; stderr is the server's log and must never
	// reach the daemon's stdout (the ACP stream).
	cmd.Stderr = &stderrLog{log: s.log}
	// A grandchild holding stderr open must not hang Wait.
	cmd.WaitDelay = s.opts.StopTimeout
	setProcAttr(cmd)
	t, err := startStdio(cmd, r, s.opts.StopTimeout)
	if err != nil {
		return nil, nil, err
	}
	r.t = t
	return r, cmd, nil
}

// neutralDir is the working directory of every stdio server: never the
// session's folder (the command itself is an absolute path: the wire
// requires one). A server started there would run what the workspace
// plants for it before any prompt — npx runs a package from the folder's
// node_modules, python3 -m a module of the folder — as the user,
// unconfined. The root folder exists everywhere, only root can write it and
// leaves nothing to clean up; a server that needs a project folder is
// given it as an argument by the editor's configuration.
func neutralDir() string {
	if runtime.GOOS == "windows" {
		return filepath.VolumeName(os.TempDir()) + `\`
	}
	return "/"
}

// absolutePath keeps the absolute entries of a PATH list: an empty or
// relative entry names the working directory or a folder below it.
func absolutePath(list string) string {
	var keep []string
	for _, d := range filepath.SplitList(list) {
		if filepath.IsAbs(d) {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// childEnv is the inherited minimum plus the configured variables, which
// win; the inherited PATH keeps only its absolute entries (a relative one
// would be looked up in the server's working directory).
func childEnv(vars []acp.EnvVariable) []string {
	env := make([]string, 0, len(inheritedEnv)+len(vars))
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			if k == "PATH" {
				v = absolutePath(v)
			}
			env = append(env, k+"="+v)
		}
	}
	for _, v := range vars {
		env = append(env, v.Name+"="+v.Value)
	}
	return env
}

// listTools follows tools/list pagination.
func listTools(ctx context.Context, cs *session) ([]*toolDef, error) {
	var defs []*toolDef
	seen := map[string]bool{}
	cursors := map[string]bool{}
	cursor := ""
	for range maxListPages {
		res, err := cs.listTools(ctx, cursor)
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			if t == nil || t.Name == "" || seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			defs = append(defs, newToolDef(t))
		}
		if res.NextCursor == "" {
			return defs, nil
		}
		if cursors[res.NextCursor] {
			return nil, fmt.Errorf("tools/list repeated cursor %q", res.NextCursor)
		}
		cursors[res.NextCursor] = true
		cursor = res.NextCursor
	}
	return nil, fmt.Errorf("tools/list returned more than %d pages", maxListPages)
}

func (s *server) setDefs(defs []*toolDef) {
	s.defs = defs
	s.byName = make(map[string]*toolDef, len(defs))
	for _, d := range defs {
		s.byName[d.name] = d
	}
}

// watch waits for the connection to end; an end we did not cause marks the
// server dead until its next call reports it.
func (s *server) watch(c *conn) {
	err := c.cs.rpc.wait()
	c.exitErr = err
	close(c.done)
	s.mu.Lock()
	closed := s.closed
	current := s.conn == c && !closed
	if current {
		s.conn = nil
		s.dead = exitReason(err)
	}
	s.mu.Unlock()
	if closed {
		return // close cleans up
	}
	if current {
		s.log.Warn("mcp server stopped unexpectedly", "err", err)
	}
	// Reap the child and anything it left behind.
	_ = c.cs.rpc.close()
	killGroup(c.cmd)
}

func exitReason(err error) error {
	if err == nil {
		return errors.New("the connection closed")
	}
	return err
}

// call runs one tools/call. A dead server is reported here, once, naming
// it, and restarted (once per session).
func (s *server) call(ctx context.Context, tool string, args []byte) (*callToolResult, error) {
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
	if _, ok := s.byName[tool]; !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("mcp server %q no longer offers tool %q", s.name, tool)
	}
	s.mu.Unlock()

	// Close cancels calls in flight.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	res, err := c.cs.callTool(cctx, tool, jsonObject(args))
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if s.life.Err() != nil {
		return nil, fmt.Errorf("mcp server %q was closed during the call", s.name)
	}
	if !s.connectionLost(ctx, c, err) {
		return nil, fmt.Errorf("mcp server %q: %w", s.name, err)
	}
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
	}
	s.mu.Unlock()
	reason := c.exitReason(ctx, err)
	return nil, s.recover(ctx, c.gen, reason, fmt.Errorf("mcp server %q stopped during the call (%v)", s.name, reason))
}

// connectionLost tells a dead connection from an error answer. A JSON-RPC
// error from the server is an answer; anything else waits briefly for the
// read loop to notice a closed connection.
func (s *server) connectionLost(ctx context.Context, c *conn, err error) bool {
	if errors.Is(err, errConnClosed) {
		return true
	}
	if rpcErr := (*rpcError)(nil); errors.As(err, &rpcErr) {
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
// with report; the caller's call was not run (or died with the server).
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
	s.log.Info("mcp server restarted", "tools", len(s.defs))
	return fmt.Errorf("%w; it was restarted, call the tool again", report)
}

// listing is the current tool list (empty while the server is down).
func (s *server) listing() []*toolDef {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil && s.dead == nil {
		return nil
	}
	return s.defs
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.name, Type: s.typeName(), Connected: s.conn != nil, Err: s.fatal}
	if s.conn != nil {
		st.Tools = len(s.defs)
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
		err = c.cs.rpc.close()
		killGroup(c.cmd)
	}
	s.watchers.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
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

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers []acp.HTTPHeader
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for _, h := range t.headers {
		if http.CanonicalHeaderKey(h.Name) == "Host" {
			req.Host = h.Value
			continue
		}
		req.Header.Set(h.Name, h.Value)
	}
	return t.base.RoundTrip(req)
}

// maxStderrLine bounds one buffered stderr line.
const maxStderrLine = 8 << 10

// stderrLog logs a stdio server's stderr line by line.
type stderrLog struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimRight(w.buf[:i], "\r"); len(line) > 0 {
			w.log.Info("mcp server stderr", "line", string(line))
		}
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxStderrLine {
		w.log.Info("mcp server stderr", "line", string(w.buf[:maxStderrLine]), "truncated", true)
		w.buf = w.buf[:0]
	}
	return len(p), nil
}
