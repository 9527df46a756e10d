// Package netproxy is the HTTP and HTTPS (CONNECT) proxy through which
// confined commands reach the network in proxy mode (tools.sandboxNetwork =
// "proxy"). The commands run in a network namespace of their own whose only
// way out is this proxy's listener, made inside that namespace and served
// by acpd outside it; so every connection they make to another host comes
// here as a request naming that host, and is decided here:
//
//   - a host that matches tools.sandboxAllowedDomains passes;
//   - any other host is asked about through ACP while the command runs
//     (allow once, allow this host always, reject: the asker keeps the
//     "always" answers of the session and answers for them itself); where
//     nobody can be asked (a headless run), it is refused;
//   - link-local and cloud-metadata addresses are refused always; a name
//     that resolves to a loopback or private address passes only when a
//     configured pattern allowed it (an asked-for name cannot be pointed at
//     the user's own services later by its DNS); the ports of acpd's own
//     served API are never reached.
//
// A refusal answers 403 with the reason and is reported to the command's
// result, so the model learns what to do. The proxy dials the address it
// checked (package netguard), never a name resolved again.
package netproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/session/tools/netguard"
)

// Pattern is one entry of tools.sandboxAllowedDomains: a host name
// ("github.com"), a wildcard for its subdomains ("*.npmjs.org", which does
// not match npmjs.org itself), or either with a port ("localhost:8080");
// without a port any port matches.
type Pattern struct {
	Host string // lower case, no final dot; "*.x" for subdomains of x
	Port int    // 0: any
}

// ParsePattern reads one entry; an error says what is wrong with it.
func ParsePattern(s string) (Pattern, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return Pattern{}, errors.New("empty host pattern")
	}
	if strings.Contains(raw, "://") || strings.ContainsAny(raw, "/?#@ ") {
		return Pattern{}, fmt.Errorf("%q: want a host or host:port such as github.com, *.npmjs.org or localhost:8080, not a URL", s)
	}
	host, port := raw, 0
	if h, p, err := net.SplitHostPort(raw); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Pattern{}, fmt.Errorf("%q: port must be 1 to 65535", s)
		}
		host, port = h, n
	}
	host = normHost(host)
	name := strings.TrimPrefix(host, "*.")
	if name == "" || strings.Contains(name, "*") || strings.Contains(name, ":") && !isIP(name) {
		return Pattern{}, fmt.Errorf("%q: want a host or host:port such as github.com, *.npmjs.org or localhost:8080", s)
	}
	return Pattern{Host: host, Port: port}, nil
}

func isIP(s string) bool { _, err := netip.ParseAddr(s); return err == nil }

// String is the pattern as the user wrote it (normalised).
func (p Pattern) String() string {
	if p.Port == 0 {
		return p.Host
	}
	return net.JoinHostPort(p.Host, strconv.Itoa(p.Port))
}

// Match reports whether host:port is allowed by p.
func (p Pattern) Match(host string, port int) bool {
	if p.Port != 0 && p.Port != port {
		return false
	}
	host = normHost(host)
	if sub, ok := strings.CutPrefix(p.Host, "*."); ok {
		return strings.HasSuffix(host, "."+sub)
	}
	return host == p.Host
}

func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// Target is a destination a command asked for: host and port.
type Target struct {
	Host string
	Port int
}

// String is host:port.
func (t Target) String() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// Asker asks the user about t while a command runs: true when allowed
// (once, or for the session: the asker keeps "always" answers and answers
// for them itself); the error says why nobody could answer, and t is then
// refused with it.
type Asker func(ctx context.Context, t Target) (bool, error)

// Options configure a proxy.
type Options struct {
	// Allowed are tools.sandboxAllowedDomains.
	Allowed []Pattern
	// DenyPorts are TCP ports never reached on this machine's own
	// addresses (acpd's served API).
	DenyPorts []uint16
	// Ask asks about a target nothing allowed; nil refuses it.
	Ask Asker
	// Refused is told about each refusal, for the command's result.
	Refused func(t Target, why string)
	// Hooks replace the resolver and dialer (tests).
	Hooks netguard.Hooks
	// Logger logs decisions at debug level; nil: slog.Default().
	Logger *slog.Logger
}

// Proxy serves the proxy protocol on listeners handed to it. Safe for
// concurrent use.
type Proxy struct {
	o Options

	mu     sync.Mutex
	ln     []net.Listener
	srv    *http.Server
	closed bool
}

// timeouts of one request's parts; the tunnel itself has none (a clone
// or a download may take long), and ends with either side or Close.
const (
	headerTimeout = 10 * time.Second
	dialTimeout   = 30 * time.Second
	maxHeader     = 64 << 10
)

// New returns a proxy; Serve hands it listeners.
func New(o Options) *Proxy {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	p := &Proxy{o: o}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: headerTimeout,
		MaxHeaderBytes:    maxHeader,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	return p
}

// Serve serves ln until it is closed or the proxy is; it returns at once.
func (p *Proxy) Serve(ln net.Listener) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return
	}
	p.ln = append(p.ln, ln)
	p.mu.Unlock()
	go func() { _ = p.srv.Serve(ln) }()
}

// Close stops serving and ends every connection, tunnels included.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return p.srv.Close()
}

// configured reports whether the configuration allows t.
func (p *Proxy) configured(t Target) bool {
	for _, pat := range p.o.Allowed {
		if pat.Match(t.Host, t.Port) {
			return true
		}
	}
	return false
}

// decide says whether t may be reached; configured is set when the user's
// configuration allowed it (then private addresses may be reached).
func (p *Proxy) decide(ctx context.Context, t Target) (configured bool, err error) {
	if netguard.BlockedHost(t.Host) {
		return false, fmt.Errorf("%s is a link-local or cloud-metadata address, which commands never reach", t.Host)
	}
	if p.configured(t) {
		return true, nil
	}
	if p.o.Ask == nil {
		return false, fmt.Errorf("%s is not in tools.sandboxAllowedDomains and nobody can be asked", t)
	}
	ok, err := p.o.Ask(ctx, t)
	if err != nil {
		return false, fmt.Errorf("%s is not in tools.sandboxAllowedDomains and could not be asked about: %v", t, err)
	}
	if !ok {
		return false, fmt.Errorf("the user did not allow %s", t)
	}
	return false, nil
}

// Advice is what the model reads with a refusal: what it can do.
const Advice = "Commands reach the network only through acpd's proxy, and only hosts the user allows. " +
	"Do not try to reach the host another way (it will fail too); tell the user which host is needed and why. " +
	"The user can allow it with [tools] sandboxAllowedDomains = [\"host\"] in acpd's configuration, or answer \"allow\" when asked."

// refuse answers w with a 403 naming why, and reports it.
func (p *Proxy) refuse(w http.ResponseWriter, t Target, why string) {
	p.o.Logger.Debug("sandbox proxy refused", "target", t.String(), "reason", why)
	if p.o.Refused != nil {
		p.o.Refused(t, why)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "acpd sandbox proxy: refused %s: %s. %s\n", t, why, Advice)
}

// ServeHTTP handles CONNECT and absolute-form requests; anything else is
// not a proxy request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" || r.URL.Host == "" {
		w.Header().Set("Connection", "close")
		http.Error(w, "acpd sandbox proxy: send an absolute http:// URL, or CONNECT host:port for https", http.StatusBadRequest)
		return
	}
	t, err := target(r.URL.Host, 80)
	if err != nil {
		http.Error(w, "acpd sandbox proxy: "+err.Error(), http.StatusBadRequest)
		return
	}
	configured, err := p.decide(r.Context(), t)
	if err != nil {
		p.refuse(w, t, err.Error())
		return
	}
	d := p.dialer(configured)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = r.URL
			pr.Out.Host = r.Host
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return p.dial(ctx, d, t)
			},
			DisableKeepAlives:     true,
			ResponseHeaderTimeout: 5 * time.Minute,
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			p.dialFailed(w, t, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// connect opens a tunnel to the CONNECT request's host:port.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	t, err := target(r.Host, 0)
	if err != nil || t.Port == 0 {
		http.Error(w, "acpd sandbox proxy: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	configured, err := p.decide(r.Context(), t)
	if err != nil {
		p.refuse(w, t, err.Error())
		return
	}
	up, err := p.dial(r.Context(), p.dialer(configured), t)
	if err != nil {
		p.dialFailed(w, t, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "acpd sandbox proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	_ = down.SetDeadline(time.Time{})
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		up.Close()
		down.Close()
		return
	}
	// What the client sent after its request (a TLS hello) is in rw's
	// buffer already.
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			up.Close()
			down.Close()
			return
		}
	}
	splice(down, up)
}

// splice copies both ways until either side ends, then closes both.
func splice(a, b net.Conn) {
	var once sync.Once
	done := func() { once.Do(func() { a.Close(); b.Close() }) }
	go func() { _, _ = io.Copy(a, b); done() }()
	_, _ = io.Copy(b, a)
	done()
}

// target reads host[:port] (port def when absent).
func target(hostport string, def int) (Target, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 {
			return Target{}, err
		}
		host, ps = hostport, strconv.Itoa(def)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return Target{}, fmt.Errorf("bad host:port %q", hostport)
	}
	return Target{Host: normHost(host), Port: port}, nil
}

// dialer is the guard for one connection: private addresses only for a
// host the configuration allowed, never link-local or metadata ones.
func (p *Proxy) dialer(configured bool) *netguard.Dialer {
	d := &netguard.Dialer{Hooks: p.o.Hooks, AllowPrivate: configured}
	if len(p.o.DenyPorts) > 0 {
		dial := d.Hooks.Dial
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		deny := p.o.DenyPorts
		d.Hooks.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			ap, err := netip.ParseAddrPort(addr)
			if err == nil && slices.Contains(deny, ap.Port()) && local(ap.Addr()) {
				return nil, fmt.Errorf("%s is acpd's own API, which commands never reach", addr)
			}
			return dial(ctx, network, addr)
		}
	}
	return d
}

// local reports whether a is an address of this machine: loopback, or
// the unspecified address (which connects to it).
func local(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsUnspecified() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if b, ok := netip.AddrFromSlice(n.IP); ok && b.Unmap() == a {
				return true
			}
		}
	}
	return false
}

func (p *Proxy) dial(ctx context.Context, d *netguard.Dialer, t Target) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return d.DialContext(ctx, "tcp", t.String())
}

// dialFailed answers a connection the guard refused (403, reported) or
// that failed (502).
func (p *Proxy) dialFailed(w http.ResponseWriter, t Target, err error) {
	if errors.Is(err, netguard.ErrBlockedAddress) || errors.Is(err, netguard.ErrPrivateAddress) || strings.Contains(err.Error(), "acpd's own API") {
		why := err.Error()
		if errors.Is(err, netguard.ErrPrivateAddress) {
			why = fmt.Sprintf("%s resolves to a loopback or private address, which commands reach only through a host named in tools.sandboxAllowedDomains", t.Host)
		}
		p.refuse(w, t, why)
		return
	}
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("acpd sandbox proxy: cannot reach %s: %v", t, err), http.StatusBadGateway)
}
