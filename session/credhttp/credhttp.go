// Package credhttp is the HTTP client policy of every request acpd sends
// with a credential: the model providers' requests and `acpd doctor`'s model
// listing (API keys), the OTLP exporters (OTEL_EXPORTER_OTLP_HEADERS) and
// HTTP MCP servers (the headers the editor configured).
//
// Such a client follows a redirect only within the origin (scheme, host and
// port) of the request it was given; a redirect anywhere else is refused
// with a *RedirectError and nothing is sent there. Refusing rather than
// stripping the credential: net/http copies every header but
// Authorization, Cookie and WWW-Authenticate to the next hop, a
// RoundTripper that adds configured headers adds them again on every hop,
// and a 307 or 308 re-sends the body — a provider's body is the whole
// conversation, which must not go to a host the user never named either.
package credhttp

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxRedirects is net/http's own limit, kept.
const maxRedirects = 10

// RedirectError is a redirect to another origin, refused. It reaches the
// caller wrapped in the *url.Error that http.Client.Do returns.
type RedirectError struct {
	From string // the origin of the request acpd made
	To   string // the URL the server redirected to
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("refused a redirect from %s to %s: acpd sends credentials only to the origin they are configured for "+
		"(configure the redirect's target as the endpoint if it is meant)", e.From, e.To)
}

// IsRedirect reports whether err is, or wraps, a refused cross-origin
// redirect: not worth retrying, since the server will answer the same.
func IsRedirect(err error) bool {
	var re *RedirectError
	return errors.As(err, &re)
}

// CheckRedirect is the http.Client.CheckRedirect of every credentialed
// client: a redirect is followed only to the origin of the first request
// (so a chain cannot wander off through a same-origin hop), at most ten
// times.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if from := Origin(via[0].URL); Origin(req.URL) != from {
		return &RedirectError{From: from, To: req.URL.String()}
	}
	return nil
}

// Origin is u's scheme, host and port, lower-cased, with the scheme's
// default port filled in: http://Example.com and http://example.com:80 are
// one origin; another port of the same host is another origin.
func Origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch scheme {
		case "http", "ws":
			port = "80"
		case "https", "wss":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// Transport is a clone of net/http's default transport (proxy from the
// environment, HTTP/2, dial and TLS timeouts) that also holds the policy
// itself, through its proxy function (Proxy): the base every credentialed
// client wraps, safe even in a client whose CheckRedirect is not ours.
func Transport() *http.Transport {
	t := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	}
	t.Proxy = Proxy(t.Proxy)
	return t
}

// Proxy wraps a transport's proxy function (nil: no proxy) with the policy,
// for a library that builds its own client but takes a proxy function (the
// OTLP/HTTP exporters, whose WithHTTPClient would drop the certificate and
// timeout variables they read themselves). net/http asks the proxy function
// before every request it sends, and a request made to follow a redirect
// carries the response that caused it: one that leads to another origin
// than the first request of the chain fails here, before a connection is
// made or a header sent.
func Proxy(next func(*http.Request) (*url.URL, error)) func(*http.Request) (*url.URL, error) {
	return func(req *http.Request) (*url.URL, error) {
		first := req
		for first.Response != nil && first.Response.Request != nil {
			first = first.Response.Request
		}
		if from := Origin(first.URL); first != req && Origin(req.URL) != from {
			return nil, &RedirectError{From: from, To: req.URL.String()}
		}
		if next == nil {
			return nil, nil
		}
		return next(req)
	}
}

// NewClient is a client with the policy over rt (nil: Transport()) and the
// overall timeout (0: none; a context bounds the request then).
func NewClient(rt http.RoundTripper, timeout time.Duration) *http.Client {
	if rt == nil {
		rt = Transport()
	}
	return &http.Client{Transport: rt, Timeout: timeout, CheckRedirect: CheckRedirect}
}

// Apply returns a copy of c (nil: a new client) that follows the policy,
// keeping c's transport, jar and timeout.
func Apply(c *http.Client) *http.Client {
	if c == nil {
		return NewClient(nil, 0)
	}
	cp := *c
	cp.CheckRedirect = CheckRedirect
	return &cp
}

// BodyTooLargeError is a response body past the bound LimitBodies set.
type BodyTooLargeError struct{ Limit int64 }

func (e *BodyTooLargeError) Error() string {
	return fmt.Sprintf("the server's answer is over %d KiB, the bound of one answer", e.Limit>>10)
}

// LimitBodies wraps rt (nil: Transport()) so that every response body
// except an event stream (text/event-stream, which lives as long as its
// events come, each bounded by its reader) fails with a
// *BodyTooLargeError once it passes max bytes: a client library that reads
// whole bodies (an OTLP exporter's answer, an MCP server's JSON answer or
// error page) then holds at most max of what the server sends.
func LimitBodies(rt http.RoundTripper, max int64) http.RoundTripper {
	if rt == nil {
		rt = Transport()
	}
	return &limitBodies{rt: rt, max: max}
}

type limitBodies struct {
	rt  http.RoundTripper
	max int64
}

func (l *limitBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		return resp, nil
	}
	resp.Body = &limitedBody{rc: resp.Body, left: l.max, max: l.max}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
	max  int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, &BodyTooLargeError{Limit: b.max}
	}
	// One byte past the bound tells a body of exactly max from a longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), &BodyTooLargeError{Limit: b.max}
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
