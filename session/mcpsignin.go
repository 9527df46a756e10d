package session

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/mcp/oauth"
	"github.com/acpd/acpd/session/notice"
)

// Signing in to MCP servers. A server that asks for OAuth is connected
// without asking anyone (a stored token, refreshed when needed); one that
// still waits for a sign-in is signed in once session/new has been
// answered, through the editor: the authorization page as a URL
// elicitation, and — for an editor on another machine, whose browser
// cannot reach acpd's loopback listener — a form for the address the
// browser landed on. What the server offers reaches the model at the next
// turn boundary.

// signInPrompt is the session's way to bring the user to an authorization
// page; nil when the editor offers no elicitation.
func (m *Manager) signInPrompt(s *Session) oauth.Prompt {
	caps := s.clientCaps()
	el, ok := m.client.(acp.Elicitor)
	if !ok || (!caps.ElicitURL() && !caps.ElicitForm()) {
		return nil
	}
	ask := func(ctx context.Context, req *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error) {
		req.SessionID = s.id
		req.Meta = acp.Meta{"source": "mcp", "server": req.Meta["server"], "purpose": "sign-in"}
		return el.CreateElicitation(ctx, req)
	}
	return func(ctx context.Context, p *oauth.Page) (string, error) {
		host := p.URL
		if u, err := url.Parse(p.URL); err == nil {
			host = u.Host
		}
		if !caps.ElicitURL() {
			// A form alone: the page's address in the message.
			return pasteForm(ctx, ask, p, fmt.Sprintf("MCP server %q asks you to sign in. Open this page in a browser: %s — then paste here the address the browser ends on (it starts with %s), or its code.", p.Server, p.URL, p.RedirectURL))
		}
		id := "mcp-signin-" + rand.Text()
		complete := func() {
			if c, ok := m.client.(acp.ElicitationCompleter); ok {
				_ = c.CompleteElicitation(context.WithoutCancel(ctx), &acp.CompleteElicitationNotification{ElicitationID: id})
			}
		}
		go func() {
			select {
			case <-p.Done:
			case <-ctx.Done():
				// The sign-in ended (the page's question may still
				// be open when the redirect arrives); it came back
				// through the loopback listener if Done is closed.
				select {
				case <-p.Done:
				default:
					return
				}
			}
			complete()
		}()
		r, err := ask(ctx, &acp.CreateElicitationRequest{Mode: "url", ElicitationID: id, URL: p.URL,
			Message: fmt.Sprintf("MCP server %q asks you to sign in at %s.", p.Server, host), Meta: acp.Meta{"server": p.Server}})
		if err != nil {
			return "", err
		}
		if r.Action != acp.ElicitAccept {
			return "", fmt.Errorf("the user answered %q to signing in", r.Action)
		}
		if !caps.ElicitForm() {
			return "", nil // the loopback listener brings the answer
		}
		pasted, err := pasteForm(ctx, ask, p, fmt.Sprintf("MCP server %q: when you have signed in, your browser goes to %s. If that page does not load (acpd runs on another machine), paste its address here; otherwise just wait.", p.Server, p.RedirectURL))
		if err == nil && pasted != "" {
			complete() // the user is back from the page
		}
		return pasted, err
	}
}

// pasteForm asks for the address the browser landed on (or its code).
func pasteForm(ctx context.Context, ask func(context.Context, *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error), p *oauth.Page, msg string) (string, error) {
	r, err := ask(ctx, &acp.CreateElicitationRequest{Mode: "form", Message: msg, Meta: acp.Meta{"server": p.Server},
		RequestedSchema: acp.ElicitationSchema{Type: "object", Properties: map[string]acp.ElicitationProperty{
			"redirect": {Type: "string", Title: "Address the browser landed on", Description: "the whole address (" + p.RedirectURL + "?code=…), or the code alone"},
		}}})
	if err != nil {
		return "", err
	}
	if r.Action != acp.ElicitAccept {
		return "", fmt.Errorf("the user answered %q to signing in", r.Action)
	}
	var v string
	if raw, ok := r.Content["redirect"]; ok {
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", fmt.Errorf("the answer's redirect is not text: %v", err)
		}
	}
	return strings.TrimSpace(v), nil
}

// signInMCP signs in, one after the other, to the servers that wait for
// it, once session/new has been answered; each failure is a notice.
func (m *Manager) signInMCP(ctx context.Context, s *Session, names []string) {
	prompt := m.signInPrompt(s)
	if prompt == nil {
		for _, n := range names {
			s.notify(ctx, notice.MCPServerFailed, fmt.Sprintf("mcp server %q waits for a sign-in (OAuth), and this editor cannot show the page: run `acpd mcp login --url URL` with the server's URL in a terminal, then start a new session", n))
		}
		return
	}
	go func() {
		select {
		case <-s.cmds.ready:
		case <-s.prep.ctx.Done():
			return
		}
		for _, n := range names {
			if err := s.mcp.SignIn(s.prep.ctx, n, prompt); err != nil {
				s.log.Warn("mcp sign-in failed", "mcp_server", n, "err", err)
				s.notify(s.prep.ctx, notice.MCPServerFailed, fmt.Sprintf("%v", err))
			}
		}
	}()
}
