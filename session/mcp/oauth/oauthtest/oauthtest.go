// Package oauthtest is an OAuth 2.1 authorization server and an
// OAuth-protected MCP endpoint, on loopback, for tests: metadata discovery
// (RFC 8414 and RFC 9728), dynamic client registration (RFC 7591), the
// authorization-code grant with PKCE S256 required, the resource
// indicator (RFC 8707) checked at both endpoints, refresh tokens, access
// tokens that expire, and token introspection (RFC 7662).
package oauthtest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// AS is the authorization server.
type AS struct {
	URL string
	// TokenTTL is the access tokens' lifetime (default one hour).
	TokenTTL time.Duration

	mu      sync.Mutex
	clients map[string][]string // client id -> redirect URIs
	codes   map[string]*grant
	refresh map[string]*grant
	access  map[string]*grant
	counts  Counts
}

// Counts are what the server was asked.
type Counts struct {
	Registered, Authorized, Exchanged, Refreshed int
	// Resources are the resource parameters of the token requests.
	Resources []string
}

type grant struct {
	client, redirect, challenge, resource, scope string
	expires                                      time.Time
}

// NewAS starts the authorization server; it stops when the test ends.
func NewAS(t testing.TB) *AS {
	a := &AS{TokenTTL: time.Hour, clients: map[string][]string{}, codes: map[string]*grant{},
		refresh: map[string]*grant{}, access: map[string]*grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", a.metadata)
	mux.HandleFunc("POST /register", a.register)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	mux.HandleFunc("POST /introspect", a.introspect)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// Counts returns what the server was asked so far.
func (a *AS) Counts() Counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.counts
	c.Resources = append([]string(nil), c.Resources...)
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code, desc string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
}

func (a *AS) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                a.URL,
		"authorization_endpoint":                a.URL + "/authorize",
		"token_endpoint":                        a.URL + "/token",
		"registration_endpoint":                 a.URL + "/register",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"scopes_supported":                      []string{"mcp", "offline_access"},
	})
}

func (a *AS) register(w http.ResponseWriter, r *http.Request) {
	var m struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	a.mu.Lock()
	id := "client-" + rand.Text()[:8]
	a.clients[id] = m.RedirectURIs
	a.counts.Registered++
	a.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "none"})
}

// authorize is the user consenting at once: the browser is redirected with
// a code (an error when the request breaks the rules).
func (a *AS) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	defer a.mu.Unlock()
	redirects, ok := a.clients[q.Get("client_id")]
	redirect := q.Get("redirect_uri")
	if !ok || !contains(redirects, redirect) {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back := func(v url.Values) {
		v.Set("state", q.Get("state"))
		http.Redirect(w, r, redirect+"?"+v.Encode(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		back(url.Values{"error": {"unsupported_response_type"}})
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		back(url.Values{"error": {"invalid_request"}, "error_description": {"PKCE S256 is required"}})
	case q.Get("resource") == "":
		back(url.Values{"error": {"invalid_target"}, "error_description": {"resource is required"}})
	default:
		code := "code-" + rand.Text()
		a.codes[code] = &grant{client: q.Get("client_id"), redirect: redirect, challenge: q.Get("code_challenge"),
			resource: q.Get("resource"), scope: q.Get("scope")}
		a.counts.Authorized++
		back(url.Values{"code": {code}})
	}
}

func (a *AS) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, "invalid_request", err.Error())
		return
	}
	f := r.PostForm
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts.Resources = append(a.counts.Resources, f.Get("resource"))
	var g *grant
	switch f.Get("grant_type") {
	case "authorization_code":
		g = a.codes[f.Get("code")]
		delete(a.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		switch {
		case g == nil:
			oauthError(w, "invalid_grant", "unknown code")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			oauthError(w, "invalid_grant", "PKCE verifier does not match")
			return
		case f.Get("redirect_uri") != g.redirect || f.Get("client_id") != g.client:
			oauthError(w, "invalid_grant", "client or redirect_uri differs")
			return
		case f.Get("resource") != g.resource:
			oauthError(w, "invalid_target", "resource differs from the authorization request's")
			return
		}
		a.counts.Exchanged++
	case "refresh_token":
		g = a.refresh[f.Get("refresh_token")]
		if g == nil || f.Get("client_id") != g.client {
			oauthError(w, "invalid_grant", "unknown refresh token")
			return
		}
		delete(a.refresh, f.Get("refresh_token")) // rotated
		a.counts.Refreshed++
	default:
		oauthError(w, "unsupported_grant_type", f.Get("grant_type"))
		return
	}
	at, rt := "at-"+rand.Text(), "rt-"+rand.Text()
	ng := *g
	ng.expires = time.Now().Add(a.TokenTTL)
	a.access[at] = &ng
	a.refresh[rt] = g
	writeJSON(w, http.StatusOK, map[string]any{"access_token": at, "token_type": "Bearer",
		"expires_in": int(a.TokenTTL / time.Second), "refresh_token": rt, "scope": g.scope})
}

// introspect answers RFC 7662 token introspection, so a resource server
// in another process (the TypeScript SDK's, in acpd's end-to-end tests)
// can check this server's tokens: active, client_id, scope, exp and the
// resource the token was issued for (aud).
func (a *AS) introspect(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, "invalid_request", err.Error())
		return
	}
	a.mu.Lock()
	g := a.access[r.PostForm.Get("token")]
	a.mu.Unlock()
	if g == nil || !time.Now().Before(g.expires) {
		writeJSON(w, http.StatusOK, map[string]any{"active": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"active": true, "client_id": g.client, "scope": g.scope,
		"exp": g.expires.Unix(), "aud": g.resource, "token_type": "Bearer"})
}

// Valid reports whether token is a live access token for resource.
func (a *AS) Valid(token, resource string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.access[token]
	return g != nil && time.Now().Before(g.expires) && strings.TrimSuffix(g.resource, "/") == strings.TrimSuffix(resource, "/")
}

// Protect serves h at /mcp of a new loopback server that requires this
// server's tokens, with its protected resource metadata; it returns the
// endpoint's URL.
func (a *AS) Protect(t testing.TB, h http.Handler) string {
	var endpoint string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": endpoint, "authorization_servers": []string{a.URL},
			"scopes_supported": []string{"mcp"}, "bearer_methods_supported": []string{"header"}})
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !a.Valid(tok, endpoint) {
			base := strings.TrimSuffix(endpoint, "/mcp")
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="mcp"`, base))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
	// The endpoint is known before the server serves, so a request that
	// comes at once (a port another test's client reuses) reads it set.
	srv := httptest.NewUnstartedServer(mux)
	endpoint = "http://" + srv.Listener.Addr().String() + "/mcp"
	srv.Start()
	t.Cleanup(srv.Close)
	return endpoint
}

// Consent is the user in a browser: it opens authURL and returns the
// address the authorization server redirects to, without going there.
func Consent(authURL string) (string, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return "", fmt.Errorf("authorization page answered %s", resp.Status)
	}
	return resp.Header.Get("Location"), nil
}

// Follow is the browser going on to the redirect address (acpd's loopback
// listener, when the browser runs on acpd's machine).
func Follow(location string) error {
	resp, err := http.Get(location)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("redirect target answered %s", resp.Status)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
