package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// CheckAddress applies the listener rule: without TLS only loopback
// addresses are served, since a token sent in clear text over a network can
// be read by anyone on the path. A host name counts as loopback only when
// it is "localhost" (resolvers may map other names anywhere).
func CheckAddress(listen string, tls bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("server.listen: must be host:port such as 127.0.0.1:8123, got %q", listen)
	}
	if tls || isLoopbackHost(host) {
		return nil
	}
	what := host
	if host == "" {
		what = "every interface"
	}
	return fmt.Errorf("refusing to listen on %s (%s) without TLS: the bearer token and every prompt would cross the network in clear text; "+
		"listen on 127.0.0.1 (and reach it through an SSH tunnel), or give --tls-cert and --tls-key", listen, what)
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Refusal reasons, as logged (never with the token).
const (
	reasonHost        = "host not allowed"
	reasonOrigin      = "origin not allowed"
	reasonTokenInURL  = "token in the URL"
	reasonNoToken     = "no bearer token"
	reasonWrongToken  = "wrong bearer token"
	reasonRateLimited = "too many failed authentications"
	reasonTooLarge    = "body too large"
)

// guard is the HTTP security layer in front of every path: Host, Origin,
// credentials in the URL, the per-address failure limit and the bearer
// token, in that order; then the body bound. Health answers without a
// token (see health).
type guard struct {
	log       *slog.Logger
	token     *tokenCheck
	limiter   *failLimiter
	origins   []string
	hosts     []string // lower-case names besides IP literals and localhost
	maxBody   int64
	logRefuse throttle
	// liveConn reports whether id names an ACP connection this server is
	// serving; it lets an authenticated request of a live connection through
	// even while its address is rate limited (see ServeHTTP).
	liveConn func(id string) bool
	next     http.Handler
	health   http.Handler
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.hostAllowed(r.Host) {
		// 421: this server is not the one the name was meant for; a page
		// that rebound its own name to 127.0.0.1 lands here.
		g.refuse(w, r, http.StatusMisdirectedRequest, reasonHost, "host not allowed")
		return
	}
	if o, sent := r.Header["Origin"]; sent && !slices.Contains(g.origins, strings.ToLower(strings.Join(o, ","))) {
		// Checked on every method, GET and the WebSocket upgrade included:
		// a browser page can open both without any CORS preflight.
		g.refuse(w, r, http.StatusForbidden, reasonOrigin, "origin not allowed")
		return
	}
	for k := range r.URL.Query() {
		if strings.EqualFold(k, "token") || strings.EqualFold(k, "access_token") {
			// Proxies and access logs keep URLs; a token there leaks. The
			// message tells a client author where to put it, which helps no
			// guesser.
			g.limiter.fail(clientKey(r.RemoteAddr))
			g.refuse(w, r, http.StatusBadRequest, reasonTokenInURL, "credentials are not accepted in the URL; send Authorization: Bearer")
			return
		}
	}
	if r.URL.Path == healthPath && r.Header.Get("Authorization") == "" {
		// A probe without credentials; with them, health is answered
		// after the token check like any request (so it is no oracle).
		// Its connection is an unauthenticated one's: closed after the
		// answer.
		closeAfter(w, r)
		g.health.ServeHTTP(w, r)
		return
	}
	addr := clientKey(r.RemoteAddr)
	presented, hasToken := bearer(r)
	valid := hasToken && g.token.ok(presented)
	if g.limiter.blocked(addr) {
		// Refused whatever the token, or the answer would tell a guesser
		// which guess was right. Only a request of an ACP connection this
		// server already serves, with the right token, goes on: a client
		// sharing the address (a NAT, the same machine) keeps its turn.
		if !(valid && g.liveConn(r.Header.Get("Acp-Connection-Id"))) {
			w.Header().Set("Retry-After", "60")
			g.refuse(w, r, http.StatusTooManyRequests, reasonRateLimited, "too many failed attempts")
			return
		}
	}
	if !valid {
		reason := reasonWrongToken
		if !hasToken {
			reason = reasonNoToken
		}
		g.limiter.fail(addr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="acpd"`)
		g.refuse(w, r, http.StatusUnauthorized, reason, "unauthorized")
		return
	}
	// The connection has a client with the token: it keeps its place.
	if lc := listenerConn(requestConn(r)); lc != nil {
		lc.authenticated()
	}
	if r.ContentLength > g.maxBody {
		// Refused before a byte of the body is read; a body without a
		// length is cut at the bound by the transport (413 too).
		g.refuse(w, r, http.StatusRequestEntityTooLarge, reasonTooLarge, "request body too large")
		return
	}
	if r.Body != nil && r.Method != http.MethodGet {
		r.Body = http.MaxBytesReader(w, r.Body, g.maxBody)
	}
	g.next.ServeHTTP(w, r)
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// hostAllowed checks the Host header's name; its port is not compared, so
// a daemon reached through an SSH tunnel on another local port still
// answers. IP literals are always allowed: DNS rebinding needs a name the
// attacker controls, and a page served from an IP literal has that IP as
// its origin.
func (g *guard) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host == "localhost" || slices.Contains(g.hosts, host)
}

// refuse answers a refused request with a short, fixed body and logs who
// and why (throttled: a flood of refusals is summarised).
func (g *guard) refuse(w http.ResponseWriter, r *http.Request, status int, reason, body string) {
	if ok, suppressed := g.logRefuse.allow(time.Now()); ok {
		attrs := []any{"remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "status", status, "reason", reason}
		if ua := r.UserAgent(); ua != "" {
			attrs = append(attrs, "user_agent", ua)
		}
		if suppressed > 0 {
			attrs = append(attrs, "refusals_not_logged", suppressed)
		}
		g.log.Warn("request refused", attrs...)
	}
	closeAfter(w, r)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, body)
}

// closeAfter makes an HTTP/1.x connection close once its answer is out. A
// refused client has no business keeping its connection, and net/http,
// once a handler returns without reading the request's body, reads up to
// 256 KiB of it to keep the connection for a next request — with no
// deadline, so a client declaring a body it never sent held its connection
// for as long as it liked. Connection: close skips that read where the
// answer is written; a read deadline already past ends the one net/http
// makes again when it closes the request's body. (Over HTTP/2 a refused
// stream is reset and its body never waited for; the connection itself is
// bounded by the listener's pre-authentication deadline.)
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	}
}

// requestConn is the connection r came in on (http.Server.ConnContext).
func requestConn(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}
