// Package oauth signs acpd in to the HTTP MCP servers that ask for OAuth,
// on the official Go SDK's authorization-code handler (discovery of the
// protected resource and authorization server metadata, dynamic client
// registration, PKCE, the resource indicator, the issuer check), adding
// what the SDK leaves to its caller: where the redirect lands, how the user
// reaches the authorization page, and keeping the tokens.
//
// The browser step. acpd has no browser; the user's editor does, and may
// run on another machine (an editor over SSH, acpd in a container, acpd
// serve). So the page is handed to a Prompt (the session's: an ACP URL
// elicitation; acpd mcp login's: the terminal), and the redirect is taken
// two ways at once: a loopback listener of acpd's (http://127.0.0.1:PORT/
// callback, registered as the redirect URI) completes the flow by itself
// when the browser runs on acpd's machine; elsewhere the browser fails to
// load that address, and the user pastes it (or the code in it) back.
//
// Tokens are kept per issuer in a Store, refreshed before use (an access
// token within ten seconds of expiry is refreshed with the refresh token
// before the request), and sent only to the server they were issued for,
// through a client that never follows a redirect to another origin.
package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/acpd/acpd/session/credhttp"
	"github.com/acpd/acpd/session/tools/netguard"
)

// SignInTimeout bounds one sign-in: the user has this long to finish in
// the browser.
const SignInTimeout = 10 * time.Minute

// maxMetadata bounds an authorization server's metadata document.
const maxMetadata = 1 << 20

// ErrSignInRequired is returned by Authorize when the server wants a
// sign-in and nobody can be asked now.
var ErrSignInRequired = errors.New("the server requires signing in (OAuth)")

// IsSignInRequired reports whether err means the server waits for a
// sign-in.
func IsSignInRequired(err error) bool { return errors.Is(err, ErrSignInRequired) }

// Page is what a Prompt shows: the server, the authorization page and the
// redirect address the browser goes to after it.
type Page struct {
	Server      string
	URL         string
	RedirectURL string
	// Done is closed when the redirect reached acpd's loopback listener:
	// the Prompt may stop waiting for a paste.
	Done <-chan struct{}
}

// Prompt brings the user to p.URL and returns what they pasted back: the
// address the browser landed on, or the code in it; "" when they only
// opened the page (the loopback listener is then waited for). An error
// (declined, cancelled) ends the sign-in.
type Prompt func(ctx context.Context, p *Page) (pasted string, err error)

type promptKey struct{}

// WithPrompt marks ctx: an Authorize under it may ask the user through p.
// Without it, Authorize fails with ErrSignInRequired, so that connecting a
// server never waits for a person.
func WithPrompt(ctx context.Context, p Prompt) context.Context {
	return context.WithValue(ctx, promptKey{}, p)
}

// Handler is the auth.OAuthHandler of one HTTP MCP server.
type Handler struct {
	name     string
	resource string
	store    *Store
	client   *http.Client
	log      *slog.Logger

	mu sync.Mutex
	ts oauth2.TokenSource // nil until loaded or signed in
	// loaded is set once the store was read.
	loaded bool
}

var _ auth.OAuthHandler = (*Handler)(nil)

// NewHandler is the handler of the server name at resource (its URL);
// base is the HTTP client for the authorization server's endpoints (nil:
// a new one), to which the credential redirect policy is applied.
func NewHandler(name, resource string, store *Store, base *http.Client, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{name: name, resource: CanonicalResource(resource), store: store, client: authClient(base), log: log}
}

// authClient is the client for metadata, registration and the token
// endpoint: no redirect to another origin (the code, the verifier and the
// refresh token are credentials), and no link-local or cloud-metadata
// address (discovery follows URLs a server chose). Loopback and private
// addresses stay reachable: a local MCP server with a local authorization
// server is a set-up users have.
func authClient(base *http.Client) *http.Client {
	c := &http.Client{Timeout: 30 * time.Second}
	if base != nil {
		*c = *base
	}
	if c.Transport == nil {
		t := credhttp.Transport()
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: blockMetadata}
		t.DialContext = d.DialContext
		c.Transport = t
	}
	return credhttp.Apply(c)
}

func blockMetadata(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	if a, err := netip.ParseAddr(host); err == nil && netguard.BlockedAddr(a) {
		return fmt.Errorf("oauth: %s is a link-local or cloud-metadata address", host)
	}
	return nil
}

// TokenSource is the stored grant's, refreshing (and storing) its token
// when it expires; nil before any sign-in.
func (h *Handler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded {
		h.loaded = true
		g, err := h.store.Find(h.resource)
		if err != nil {
			h.log.Warn("reading the stored sign-in failed", "err", err)
		} else if g != nil {
			h.ts = h.source(g)
		}
	}
	return h.ts, nil
}

// SignedIn reports whether a grant is stored for the server.
func (h *Handler) SignedIn() bool {
	ts, _ := h.TokenSource(context.Background())
	return ts != nil
}

// source is g's token source: the oauth2 package refreshes the token when
// it is within ten seconds of expiry; a new token is stored.
func (h *Handler) source(g *Grant) oauth2.TokenSource {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.client)
	return &storingSource{base: g.config().TokenSource(ctx, g.Token), grant: *g, h: h, last: g.Token.AccessToken}
}

type storingSource struct {
	base  oauth2.TokenSource
	h     *Handler
	mu    sync.Mutex
	grant Grant
	last  string
}

func (s *storingSource) Token() (*oauth2.Token, error) {
	t, err := s.base.Token()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.AccessToken != s.last {
		s.last = t.AccessToken
		g := s.grant
		g.Token = t
		if err := s.h.store.Put(&g); err != nil {
			s.h.log.Warn("storing the refreshed token failed", "err", err)
		} else {
			s.h.log.Info("mcp server token refreshed")
		}
	}
	return t, nil
}

// Authorize runs the authorization-code flow for a 401 (or a 403 asking
// for more scope) when ctx carries a Prompt; otherwise it fails with
// ErrSignInRequired.
func (h *Handler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	prompt, _ := ctx.Value(promptKey{}).(Prompt)
	if prompt == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return ErrSignInRequired
	}
	return h.authorize(ctx, req, resp, prompt)
}

func (h *Handler) authorize(ctx context.Context, req *http.Request, resp *http.Response, prompt Prompt) error {
	cb, err := listenCallback()
	if err != nil {
		return err
	}
	defer cb.close()
	sniff := &issuerSniffer{base: h.client.Transport}
	client := *h.client
	client.Transport = sniff
	var grant *Grant
	inner, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:            []string{cb.redirectURL},
			ClientName:              "acpd",
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			TokenEndpointAuthMethod: "none",
		}},
		RedirectURL:         cb.redirectURL,
		RequestRefreshToken: true,
		Client:              &client,
		AuthorizationCodeFetcher: func(ctx context.Context, a *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			return h.fetch(ctx, a.URL, cb, prompt)
		},
		NewTokenSource: func(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			grant = &Grant{Resource: h.resource, Issuer: sniff.issuer(cfg.Endpoint.TokenURL), ClientID: cfg.ClientID,
				ClientSecret: cfg.ClientSecret, TokenURL: cfg.Endpoint.TokenURL, AuthStyle: int(cfg.Endpoint.AuthStyle), Token: tok}
			return oauth2.StaticTokenSource(tok), nil
		},
	})
	if err != nil {
		return err
	}
	if err := inner.Authorize(ctx, req, resp); err != nil {
		return fmt.Errorf("signing in: %w", err)
	}
	if grant == nil {
		return errors.New("signing in: no token")
	}
	if err := h.store.Put(grant); err != nil {
		return fmt.Errorf("storing the token: %w", err)
	}
	h.mu.Lock()
	h.ts, h.loaded = h.source(grant), true
	h.mu.Unlock()
	h.log.Info("signed in to mcp server", "issuer", grant.Issuer)
	return nil
}

// fetch is the browser step: the Prompt shows the page while the loopback
// listener waits; the first of the redirect and a pasted answer wins.
func (h *Handler) fetch(ctx context.Context, authURL string, cb *callback, prompt Prompt) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	state := u.Query().Get("state")
	cb.expect(state)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		s   string
		err error
	}
	pasted := make(chan answer, 1)
	go func() {
		s, err := prompt(pctx, &Page{Server: h.name, URL: authURL, RedirectURL: cb.redirectURL, Done: cb.done})
		pasted <- answer{s, err}
	}()
	for {
		select {
		case <-cb.done:
			return cb.result()
		case a := <-pasted:
			if a.err != nil {
				// The redirect may have won while the prompt was being
				// dismissed.
				select {
				case <-cb.done:
					return cb.result()
				default:
				}
				return nil, a.err
			}
			if strings.TrimSpace(a.s) == "" {
				pasted = nil // opened only: wait for the redirect
				continue
			}
			return parsePasted(a.s, state)
		case <-ctx.Done():
			return nil, fmt.Errorf("no answer from the browser: %w", ctx.Err())
		}
	}
}

// parsePasted reads what the user pasted: the address the browser was
// redirected to (its code, state and iss), or the bare code.
func parsePasted(s, state string) (*auth.AuthorizationResult, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "?") || strings.Contains(s, "code=") || strings.Contains(s, "error=") {
		raw := s
		if i := strings.IndexByte(s, '?'); i >= 0 {
			raw = s[i+1:]
		}
		raw, _, _ = strings.Cut(raw, "#")
		q, err := url.ParseQuery(raw)
		if err != nil {
			return nil, fmt.Errorf("the pasted address has no readable query: %v", err)
		}
		return fromQuery(q)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return nil, errors.New("the pasted text is neither the address the browser landed on nor a code")
	}
	return &auth.AuthorizationResult{Code: s, State: state}, nil
}

// fromQuery reads an authorization response.
func fromQuery(q url.Values) (*auth.AuthorizationResult, error) {
	if e := q.Get("error"); e != "" {
		if d := q.Get("error_description"); d != "" {
			e += ": " + d
		}
		return nil, fmt.Errorf("the authorization server refused: %s", e)
	}
	if q.Get("code") == "" {
		return nil, errors.New("the address has no code")
	}
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

// SignIn signs in now, asking through prompt: it sends the server a
// request without a token and, when it is refused with 401 (or 403 for
// scope), runs the flow on that answer. A server that answers otherwise
// needs no sign-in, and nothing is asked.
func (h *Handler) SignIn(ctx context.Context, transport http.RoundTripper, prompt Prompt) error {
	body := []byte(`{"jsonrpc":"2.0","id":"acpd-sign-in","method":"ping"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.resource, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if transport == nil {
		transport = h.client.Transport
	}
	resp, err := credhttp.Apply(&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		_ = resp.Body.Close()
		return nil
	}
	return h.authorize(ctx, req, resp, prompt)
}

// SignOut forgets the server's grant; it reports whether there was one.
func (h *Handler) SignOut() (bool, error) {
	h.mu.Lock()
	h.ts, h.loaded = nil, true
	h.mu.Unlock()
	return h.store.Remove(h.resource)
}

// callback is the loopback listener the browser is redirected to.
type callback struct {
	redirectURL string
	srv         *http.Server
	done        chan struct{}
	once        sync.Once
	mu          sync.Mutex
	state       string
	res         *auth.AuthorizationResult
	err         error
}

func listenCallback() (*callback, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the sign-in redirect: %w", err)
	}
	cb := &callback{redirectURL: "http://" + ln.Addr().String() + "/callback", done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", cb.serve)
	cb.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = cb.srv.Serve(ln) }()
	return cb, nil
}

func (cb *callback) expect(state string) {
	cb.mu.Lock()
	cb.state = state
	cb.mu.Unlock()
}

// serve takes the redirect carrying the flow's state (another one, from
// whatever else reaches the port, is refused and changes nothing).
func (cb *callback) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cb.mu.Lock()
	want := cb.state
	cb.mu.Unlock()
	if want == "" || q.Get("state") != want {
		http.Error(w, "acpd: this is not the sign-in acpd is waiting for", http.StatusBadRequest)
		return
	}
	res, err := fromQuery(q)
	msg := "Signed in. You can close this page and go back to your editor."
	if err != nil {
		msg = "Sign-in failed: " + err.Error()
	}
	cb.once.Do(func() {
		cb.mu.Lock()
		cb.res, cb.err = res, err
		cb.mu.Unlock()
		close(cb.done)
	})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><title>acpd</title><p>%s</p>\n", html.EscapeString(msg))
}

func (cb *callback) result() (*auth.AuthorizationResult, error) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.res, cb.err
}

func (cb *callback) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = cb.srv.Shutdown(ctx)
}

// issuerSniffer notes the issuer of the authorization server metadata the
// SDK fetches (it does not hand it to its caller), by token endpoint.
type issuerSniffer struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen map[string]string // token endpoint -> issuer
}

func (s *issuerSniffer) RoundTrip(req *http.Request) (*http.Response, error) {
	base := s.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(req.URL.Path, "/.well-known/") {
		return resp, err
	}
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxMetadata+1))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if rerr != nil {
		return resp, nil
	}
	var m struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	if json.Unmarshal(b, &m) == nil && m.Issuer != "" && m.TokenEndpoint != "" {
		s.mu.Lock()
		if s.seen == nil {
			s.seen = map[string]string{}
		}
		s.seen[m.TokenEndpoint] = m.Issuer
		s.mu.Unlock()
	}
	return resp, nil
}

// issuer is the issuer whose metadata named tokenURL; without metadata
// (servers of the 2025-03-26 revision), the token endpoint's origin.
func (s *issuerSniffer) issuer(tokenURL string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if iss, ok := s.seen[tokenURL]; ok {
		return iss
	}
	if u, err := url.Parse(tokenURL); err == nil {
		return credhttp.Origin(u)
	}
	return tokenURL
}
