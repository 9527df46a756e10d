// Package mcp connects a session to the MCP servers a client passes in
// session/new, session/load and session/resume, and turns each server's tools
// into tools.Tool values (named mcp__<server>__<tool>) that run through the
// same guard, permission flow and frames as the built-in tools. stdio servers
// run as child processes; HTTP servers use the streamable HTTP transport. A
// server that dies mid-session (a stdio child that exits, an HTTP server
// that lost the session and answers 404) is reported on its next call and
// restarted (a new MCP session) once. The MCP client is acpd's own (rpc.go,
// stdio.go, http.go, protocol.go, schema.go): the official SDK cost every
// process its package init and page faults before the editor's initialize
// was answered, sessions without MCP servers included.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/tools"
)

// Transport types accepted in acp.MCPServer.Type ("" is stdio).
const (
	TypeStdio = ""
	TypeHTTP  = "http"
	TypeSSE   = "sse"
)

// DefaultConnectTimeout bounds starting and initialising one server.
const DefaultConnectTimeout = 10 * time.Second

// DefaultStopTimeout is how long Close waits for a stdio server to exit after
// closing its stdin, and again after SIGTERM, before killing it.
const DefaultStopTimeout = 2 * time.Second

// Options configures Connect.
type Options struct {
	// Logger receives connection events and the servers' stderr; nil discards.
	Logger *slog.Logger
	// ConnectTimeout bounds connecting one server (start, initialize, list
	// tools); 0 means DefaultConnectTimeout. Restarts use it too.
	ConnectTimeout time.Duration
	// StopTimeout is the grace period of a stdio server at Close; 0 means
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// HTTPClient is the base client for HTTP servers (its Transport is wrapped
	// to add the configured headers); nil uses http.DefaultTransport.
	HTTPClient *http.Client
	// ClientVersion is reported to servers in initialize; "" means "dev".
	ClientVersion string
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	return o
}

// ServerError is a failure of one named server (start, initialize, listing).
type ServerError struct {
	Server string
	Err    error
}

func (e *ServerError) Error() string { return fmt.Sprintf("mcp server %q: %v", e.Server, e.Err) }

func (e *ServerError) Unwrap() error { return e.Err }

// FrameMetaer is implemented by MCP tools and their calls: the host merges
// FrameMeta into the `_meta` of the call's tool_call frames and permission
// request ({toolName, provenance:"mcp", serverId}).
type FrameMetaer interface {
	FrameMeta() map[string]any
}

// ValidateServers checks every entry before anything is started: a non-empty
// unique name, a supported transport (stdio or http; sse and unknown types
// are refused), a command for stdio, an http(s) url for http, well-formed env
// and header names. The error is an *acp.Error -32602 naming the server and
// the field.
func ValidateServers(servers []acp.MCPServer) error {
	seen := make(map[string]int, len(servers))
	for i, s := range servers {
		field := fmt.Sprintf("mcpServers[%d]", i)
		if strings.TrimSpace(s.Name) == "" {
			return acp.ErrInvalidParams(field+".name", fmt.Sprintf("mcp server at index %d has no name", i))
		}
		if j, dup := seen[s.Name]; dup {
			return acp.ErrInvalidParams(field+".name", fmt.Sprintf("mcp server %q is listed twice (indexes %d and %d)", s.Name, j, i))
		}
		seen[s.Name] = i
		switch s.Type {
		case TypeStdio:
			if s.Command == "" {
				return acp.ErrInvalidParams(field+".command", fmt.Sprintf("mcp server %q: command is required", s.Name))
			}
			for k, e := range s.Env {
				if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") {
					return acp.ErrInvalidParams(fmt.Sprintf("%s.env[%d].name", field, k), fmt.Sprintf("mcp server %q: invalid environment variable name %q", s.Name, e.Name))
				}
			}
		case TypeHTTP:
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return acp.ErrInvalidParams(field+".url", fmt.Sprintf("mcp server %q: url must be an absolute http or https URL, got %q", s.Name, s.URL))
			}
			for k, h := range s.Headers {
				if !validHeaderName(h.Name) {
					return acp.ErrInvalidParams(fmt.Sprintf("%s.headers[%d].name", field, k), fmt.Sprintf("mcp server %q: invalid header name %q", s.Name, h.Name))
				}
				if strings.ContainsAny(h.Value, "\r\n\x00") {
					return acp.ErrInvalidParams(fmt.Sprintf("%s.headers[%d].value", field, k), fmt.Sprintf("mcp server %q: header %q has an invalid value", s.Name, h.Name))
				}
			}
		case TypeSSE:
			return acp.ErrInvalidParams(field+".type", fmt.Sprintf("mcp server %q: the sse transport is not supported (it is deprecated by MCP); use http", s.Name))
		default:
			return acp.ErrInvalidParams(field+".type", fmt.Sprintf("mcp server %q: unknown transport type %q", s.Name, s.Type))
		}
	}
	return nil
}

// validHeaderName reports whether n is an RFC 7230 token.
func validHeaderName(n string) bool {
	if n == "" {
		return false
	}
	for _, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

// Set is the MCP servers of one session. Its methods are safe for concurrent
// use.
type Set struct {
	servers []*server
	log     *slog.Logger
}

// Connect validates servers (see ValidateServers; on failure it returns a nil
// Set and that one error), then starts and initialises every server
// concurrently, each within opts.ConnectTimeout, and lists its tools. A server
// that fails is logged and returned as a *ServerError in the slice; the others
// still work. Close the Set when the session ends, even when errors were
// returned.
func Connect(ctx context.Context, servers []acp.MCPServer, opts Options) (*Set, []error) {
	if err := ValidateServers(servers); err != nil {
		return nil, []error{err}
	}
	opts = opts.withDefaults()
	set := &Set{log: opts.Logger}
	for _, cfg := range servers {
		set.servers = append(set.servers, newServer(cfg, opts))
	}
	errs := make([]error, len(set.servers))
	var wg sync.WaitGroup
	for i, s := range set.servers {
		wg.Go(func() { errs[i] = s.start(ctx) })
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return set, out
}

// Tools returns the tools of every connected server, in server order then
// the server's listing order, with unique model-facing names.
func (st *Set) Tools() []tools.Tool {
	if st == nil {
		return nil
	}
	var out []tools.Tool
	used := map[string]bool{}
	for _, s := range st.servers {
		for _, def := range s.listing() {
			name := uniqueName(toolName(s.name, def.name), s.name, def.name, used)
			used[name] = true
			out = append(out, &Tool{name: name, srv: s, def: def})
		}
	}
	return out
}

// Status is a snapshot of one server for diagnostics.
type Status struct {
	Name      string
	Type      string // "stdio" or "http"
	Connected bool
	Tools     int
	// Err is why the server is unavailable (failed start, failed restart).
	Err error
}

// Status reports every server, in the order given to Connect.
func (st *Set) Status() []Status {
	if st == nil {
		return nil
	}
	out := make([]Status, 0, len(st.servers))
	for _, s := range st.servers {
		out = append(out, s.status())
	}
	return out
}

// Close stops every server concurrently: stdio children get stdin closed,
// then SIGTERM, then SIGKILL (each after the StopTimeout grace), and their
// process group is killed; HTTP sessions are ended. It waits until all is
// done and is idempotent.
func (st *Set) Close() error {
	if st == nil {
		return nil
	}
	errs := make([]error, len(st.servers))
	var wg sync.WaitGroup
	for i, s := range st.servers {
		wg.Go(func() { errs[i] = s.close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
