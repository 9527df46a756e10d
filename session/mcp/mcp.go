// Package mcp connects a session to the MCP servers a client passes in
// session/new, session/load and session/resume, on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): stdio servers run as child
// processes, HTTP servers use the Streamable HTTP transport (or the legacy
// SSE one), signing in with OAuth when they ask for it (oauth.go).
//
// What the package gives the session: each server's tools as tools.Tool
// values (named mcp__<server>__<tool>) that run through the same guard,
// permission flow and frames as the built-in tools; its prompts, offered as
// slash commands (prompt.go); its resources, through a read tool for the
// model and for the resources a prompt mentions (resource.go); and its
// elicitations, forwarded to the editor (elicit.go).
//
// What it adds to the SDK: a server that dies mid-session (a stdio child
// that exits, an HTTP server that lost the session and answers 404) is
// reported on its next call and restarted (a new MCP session) once;
// connecting and stopping are bounded; stdio servers start outside the
// workspace with a minimal environment; HTTP credentials never follow a
// redirect to another origin; listing changes reach the model only at the
// next turn boundary, in a stable order.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/mcp/oauth"
	"github.com/acpd/acpd/session/tools"
)

// Transport types accepted in acp.MCPServer.Type ("" is stdio).
const (
	TypeStdio = ""
	TypeHTTP  = "http"
	TypeSSE   = "sse"
	// TypeACP is MCP over ACP (schema.unstable.json's McpServerAcp),
	// refused: see ValidateServers.
	TypeACP = "acp"
)

// ProtocolVersion is the MCP revision acpd asks for in initialize.
//
// Decision: 2025-11-25, not the SDK's default 2026-07-28. Every server in
// use answers initialize, servers of the 2026-07-28 revision included (the
// Go SDK's do), and the server may answer with an older revision it speaks
// (2025-06-18, 2025-03-26, 2024-11-05), which the SDK accepts. Probing
// with 2026-07-28's server/discover first would cost a server that never
// answers unknown methods the whole connect timeout, and what acpd
// forwards to the editor (URL elicitations with their ids,
// notifications/elicitation/complete, -32042) exists as such only up to
// 2025-11-25. A server that speaks only 2026-07-28 refuses initialize
// (method not found, or unsupported protocol version): acpd then connects
// again with 2026-07-28, through server/discover (connectSession).
const ProtocolVersion = "2025-11-25"

// statelessVersion is the revision of servers without initialize.
const statelessVersion = "2026-07-28"

// DefaultConnectTimeout bounds starting and initialising one server.
const DefaultConnectTimeout = 10 * time.Second

// DefaultStopTimeout is how long Close waits for a stdio server to exit after
// closing its stdin, and again after SIGTERM, before killing it.
const DefaultStopTimeout = 2 * time.Second

// Options configures Connect.
type Options struct {
	// Logger receives connection events and the servers' stderr; nil discards.
	Logger *slog.Logger
	// ConnectTimeout bounds connecting one server (start, initialize,
	// listing); 0 means DefaultConnectTimeout. Restarts use it too.
	ConnectTimeout time.Duration
	// StopTimeout is the grace period of a stdio server at Close; 0 means
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// HTTPClient is the base client for HTTP servers: its Transport is
	// wrapped to add the configured headers and its redirect policy
	// replaced by credhttp's; nil uses a new transport.
	HTTPClient *http.Client
	// ClientVersion is reported to servers in initialize; "" means "dev".
	ClientVersion string
	// Elicit forwards the servers' elicitations to the editor; nil means
	// none can be answered (and none is advertised).
	Elicit *Elicitation
	// Tokens keeps the OAuth grants of HTTP servers that ask to be
	// signed in; nil: such a server's 401 is an error. An HTTP server
	// given an Authorization header is never signed in: its header is
	// the credential.
	Tokens *oauth.Store
	// SignIn asks the user to sign in to a server during a call whose
	// token was refused (the session's: through the editor); nil: the
	// call fails saying the server waits for a sign-in.
	SignIn oauth.Prompt
	// Servers are what is known of some servers beyond their ACP shape
	// (those imported from other agents' configurations), by name.
	Servers map[string]ServerOptions
	// Changed is called, on a goroutine of its own, when a server said
	// its tools, prompts or resources changed. Set.Refresh applies the
	// change; until then the session keeps what it had.
	Changed func()
}

// ServerOptions are the settings of one server that session/new has no
// field for; the configurations of other agents have them.
type ServerOptions struct {
	// Dir is a stdio server's working directory; "" is the neutral one
	// (see neutralDir).
	Dir string
	// IncludeTools, when not empty, are the only tools offered;
	// ExcludeTools are never offered (and win).
	IncludeTools, ExcludeTools []string
	// CallTimeout bounds each tools/call; 0: none but the turn's.
	CallTimeout time.Duration
}

// offers reports whether the server's tool called name is offered.
func (o ServerOptions) offers(name string) bool {
	if slices.Contains(o.ExcludeTools, name) {
		return false
	}
	return len(o.IncludeTools) == 0 || slices.Contains(o.IncludeTools, name)
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
// unique name, a supported transport (stdio, http or sse), a command for
// stdio, an http(s) url for http and sse, well-formed env and header names.
// The error is an *acp.Error -32602 naming the server and the field.
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
		case TypeHTTP, TypeSSE:
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
		case TypeACP:
			// Decision: refused, as acp-agent.md asks of a stable agent.
			// MCP over ACP ({type:"acp"} and mcp/message) exists only in
			// the unstable schema; acpd advertises no mcpCapabilities.acp,
			// so a client must not send it, and relaying mcp/message would
			// tie acpd to a wire that may still change.
			return acp.ErrInvalidParams(field+".type", fmt.Sprintf("mcp server %q: MCP over ACP (type \"acp\") is not supported: it is unstable in ACP and acpd does not advertise mcpCapabilities.acp; give the server as stdio, http or sse", s.Name))
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
	// srvMu guards servers, which Add extends.
	srvMu   sync.RWMutex
	servers []*server
	opts    Options
	log     *slog.Logger
	// mu guards names and order: a tool's model-facing name and its
	// position are fixed the first time the set lists it, so a tool keeps
	// both when listings change (tool definitions sit in the model's
	// cached prompt prefix).
	mu    sync.Mutex
	names map[toolKey]string
	order map[toolKey]int
	used  map[string]bool
}

// toolKey identifies a tool across listings: its server and its name there.
type toolKey struct{ server, tool string }

// Connect validates servers (see ValidateServers; on failure it returns a nil
// Set and that one error), then starts and initialises every server
// concurrently, each within opts.ConnectTimeout, and lists its tools,
// prompts and resources. A server that fails is logged and returned as a
// *ServerError in the slice; the others still work. Close the Set when the
// session ends, even when errors were returned.
func Connect(ctx context.Context, servers []acp.MCPServer, opts Options) (*Set, []error) {
	if err := ValidateServers(servers); err != nil {
		return nil, []error{err}
	}
	opts = opts.withDefaults()
	set := &Set{opts: opts, log: opts.Logger, names: map[toolKey]string{}, order: map[toolKey]int{}, used: map[string]bool{}}
	return set, set.start(ctx, servers, opts)
}

// start makes the servers part of the set and starts them concurrently.
func (st *Set) start(ctx context.Context, servers []acp.MCPServer, opts Options) []error {
	added := make([]*server, 0, len(servers))
	for _, cfg := range servers {
		added = append(added, newServer(cfg, opts))
	}
	st.srvMu.Lock()
	st.servers = append(st.servers, added...)
	st.srvMu.Unlock()
	errs := make([]error, len(added))
	var wg sync.WaitGroup
	for i, s := range added {
		wg.Go(func() { errs[i] = s.start(ctx) })
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Add starts more servers in the set (a workspace's, once trusted), with
// the set's options and the given per-server ones. A server whose name the
// set already has, or that fails validation, is refused; their tools reach
// the session as Connect's do.
func (st *Set) Add(ctx context.Context, servers []acp.MCPServer, extra map[string]ServerOptions) []error {
	if err := ValidateServers(servers); err != nil {
		return []error{err}
	}
	var out []error
	var fresh []acp.MCPServer
	for _, s := range servers {
		if st.server(s.Name) != nil {
			out = append(out, &ServerError{Server: s.Name, Err: errors.New("a server of this name is already running in the session")})
			continue
		}
		fresh = append(fresh, s)
	}
	opts := st.opts
	if len(extra) > 0 {
		opts.Servers = make(map[string]ServerOptions, len(st.opts.Servers)+len(extra))
		maps.Copy(opts.Servers, st.opts.Servers)
		maps.Copy(opts.Servers, extra)
	}
	return append(out, st.start(ctx, fresh, opts)...)
}

// list is the set's servers now.
func (st *Set) list() []*server {
	st.srvMu.RLock()
	defer st.srvMu.RUnlock()
	return slices.Clip(st.servers)
}

// Tools returns the tools of every connected server with unique
// model-facing names, and the resource tool when a server offers
// resources. The order is stable: a tool keeps the place it had when the
// set first listed it, and tools listed later follow, in server order then
// the server's listing order.
func (st *Set) Tools() []tools.Tool {
	if st == nil {
		return nil
	}
	type placed struct {
		pos int
		t   tools.Tool
	}
	var all []placed
	st.mu.Lock()
	for _, s := range st.list() {
		for _, def := range s.listing() {
			k := toolKey{s.name, def.name}
			name, ok := st.names[k]
			if !ok {
				name = uniqueName(toolName(s.name, def.name), s.name, def.name, st.used)
				st.used[name] = true
				st.names[k] = name
				st.order[k] = len(st.order)
			}
			all = append(all, placed{st.order[k], &Tool{name: name, srv: s, def: def}})
		}
	}
	if rt := st.resourceTool(); rt != nil {
		k := toolKey{tool: ResourceToolName}
		if _, ok := st.order[k]; !ok {
			st.order[k] = len(st.order)
		}
		all = append(all, placed{st.order[k], rt})
	}
	st.mu.Unlock()
	slices.SortFunc(all, func(a, b placed) int { return a.pos - b.pos })
	out := make([]tools.Tool, 0, len(all))
	for _, p := range all {
		out = append(out, p.t)
	}
	return out
}

// Refresh applies the listing changes the servers announced since the last
// call (tools/list_changed, prompts/list_changed, resources/list_changed)
// by listing again; the session calls it at a turn boundary. It reports
// what changed.
func (st *Set) Refresh(ctx context.Context) Changes {
	var ch Changes
	if st == nil {
		return ch
	}
	for _, s := range st.list() {
		c := s.refresh(ctx)
		ch.Tools = ch.Tools || c.Tools
		ch.Prompts = ch.Prompts || c.Prompts
		ch.Resources = ch.Resources || c.Resources
	}
	return ch
}

// Changes says which listings changed.
type Changes struct {
	Tools, Prompts, Resources bool
}

// Status is a snapshot of one server for diagnostics.
type Status struct {
	Name      string
	Type      string // "stdio", "http" or "sse"
	Connected bool
	Tools     int
	Prompts   int
	Resources int
	// Err is why the server is unavailable (failed start, failed restart).
	Err error
	// SignInRequired is set when the server waits for an OAuth sign-in.
	SignInRequired bool
}

// Status reports every server, in the order given to Connect.
func (st *Set) Status() []Status {
	if st == nil {
		return nil
	}
	list := st.list()
	out := make([]Status, 0, len(list))
	for _, s := range list {
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
	list := st.list()
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, s := range list {
		wg.Go(func() { errs[i] = s.close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// NeedsSignIn names the servers that did not start because they wait for
// an OAuth sign-in, in the order given to Connect.
func (st *Set) NeedsSignIn() []string {
	if st == nil {
		return nil
	}
	var out []string
	for _, s := range st.list() {
		if s.status().SignInRequired {
			out = append(out, s.name)
		}
	}
	return out
}

// SignIn signs in to the server called name through prompt (within
// oauth.SignInTimeout) and connects it; what it offers reaches the session
// at the next turn boundary, as a listing change does (Changed is
// called).
func (st *Set) SignIn(ctx context.Context, name string, prompt oauth.Prompt) error {
	s := st.server(name)
	if s == nil || s.auth == nil {
		return fmt.Errorf("mcp server %q does not sign in with OAuth", name)
	}
	return s.signIn(ctx, prompt)
}

// server returns the server called name.
func (st *Set) server(name string) *server {
	for _, s := range st.list() {
		if s.name == name {
			return s
		}
	}
	return nil
}
