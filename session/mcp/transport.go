package mcp

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

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

// transport makes a fresh SDK transport for the server: a started child
// for stdio (cmd), an HTTP client for the others.
func (s *server) transport() (sdk.Transport, *exec.Cmd, error) {
	switch s.cfg.Type {
	case TypeHTTP:
		t := &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.httpClient()}
		if s.auth != nil {
			t.OAuthHandler = s.auth
		}
		return t, nil, nil
	case TypeSSE:
		return &lifeTransport{t: &sdk.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.httpClient()}, life: s.life}, nil, nil
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = childEnv(s.cfg.Env)
	cmd.Dir = neutralDir()
	if d := s.extra().Dir; d != "" {
		// Configured: the folder of a trusted workspace, or one the
		// user's own configuration names.
		cmd.Dir = d
	}
	// The SDK reads stdout; stderr is the server's log and must never
	// reach the daemon's stdout (the ACP stream).
	cmd.Stderr = &stderrLog{log: s.log}
	// A grandchild holding stderr open must not hang Wait.
	cmd.WaitDelay = s.opts.StopTimeout
	setProcAttr(cmd)
	return &stdioTransport{cmd: cmd, stop: s.opts.StopTimeout}, cmd, nil
}

// httpClient is the client of an HTTP server: the configured headers on
// every request, and credentials never sent to another origin: a redirect
// there is refused (credhttp), since the headers would be added again on
// every hop.
func (s *server) httpClient() *http.Client {
	var base http.RoundTripper
	client := &http.Client{}
	if s.opts.HTTPClient != nil {
		*client = *s.opts.HTTPClient
		base = client.Transport
	}
	if base == nil {
		base = credhttp.Transport()
	}
	client.Transport = &headerTransport{base: base, headers: s.cfg.Headers}
	return credhttp.Apply(client)
}

// lifeTransport connects its transport on a context that outlives the
// caller's, which bounds only the connecting: the legacy SSE transport
// holds its event stream on the context it connected with, and the caller
// gives a deadline. The stream ends with the server's life.
type lifeTransport struct {
	t    sdk.Transport
	life context.Context
}

func (l *lifeTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	cctx, cancel := context.WithCancel(l.life)
	stop := context.AfterFunc(ctx, cancel)
	c, err := l.t.Connect(cctx)
	if !stop() || err != nil {
		cancel()
		if err == nil {
			_ = c.Close()
			err = ctx.Err()
		}
		return nil, err
	}
	return &lifeConn{Connection: c, cancel: cancel}, nil
}

// lifeConn ends its context when closed.
type lifeConn struct {
	sdk.Connection
	cancel context.CancelFunc
}

func (c *lifeConn) Close() error {
	defer c.cancel()
	return c.Connection.Close()
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

// hasHeader reports whether the server's configuration sets header name.
func (s *server) hasHeader(name string) bool {
	for _, h := range s.cfg.Headers {
		if http.CanonicalHeaderKey(h.Name) == http.CanonicalHeaderKey(name) {
			return true
		}
	}
	return false
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
