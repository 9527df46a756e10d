package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/display"
	"github.com/acpd/acpd/session/toolcall"
)

// PermissionTrust is the acp.MetaPermission value of the trust question,
// so a client that answers by itself (acpd run) knows it for what it is.
const PermissionTrust = "workspaceTrust"

// PendingTrust is the project whose trust a session must ask about now:
// its settings would widen what runs, they are not trusted as they are,
// the user has not declined them in this process, and no other session is
// asking. It claims the question: AnswerTrust must follow.
func (s *Session) PendingTrust() (*Project, bool) {
	snap := s.ws.Snapshot()
	p := snap.Project
	e := s.ws.e
	if snap.Trusted || p == nil || !p.Widens() || p.Digest == "" || e.opts.StateDir == "" {
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.declined[s.ws.Root] == p.Digest || e.asking[s.ws.Root] {
		return nil, false
	}
	e.asking[s.ws.Root] = true
	return p, true
}

// AnswerTrust records the user's answer to the question PendingTrust
// claimed: trusted with the settings the question showed, or declined
// until they change or acpd restarts. unanswered (a cancel, a failed
// request) releases the question for a later prompt.
func (s *Session) AnswerTrust(p *Project, yes, unanswered bool) error {
	e := s.ws.e
	e.mu.Lock()
	delete(e.asking, s.ws.Root)
	if !yes && !unanswered {
		e.declined[s.ws.Root] = p.Digest
	}
	e.mu.Unlock()
	if !yes {
		return nil
	}
	return e.trustDigest(s.ws, p)
}

// TrustText is the question: what trusting the workspace turns on, what
// applies either way, and what acpd never takes from a workspace.
func (p *Project) TrustText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "The settings of %s would enable:\n", p.Root)
	for _, x := range p.Enables() {
		b.WriteString("  - " + x + "\n")
	}
	b.WriteString("\nTrusting the workspace runs these hooks, starts these MCP servers and lets these rules allow calls without asking, until the files change " +
		"(acpd then asks again). Its deny and ask rules apply either way.")
	if len(p.Ignored) > 0 {
		b.WriteString("\nacpd never takes these from a workspace, trusted or not: " + strings.Join(p.Ignored, ", ") + ".")
	}
	return b.String()
}

// Asker is what asking the trust question needs of a session.
type Asker interface {
	toolcall.Asker
	// Elicit sends elicitation/create; nil when the editor offers no
	// form elicitation.
	Elicit() func(ctx context.Context, req *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error)
}

// AskTrust asks the user whether to trust the project's settings: a form
// elicitation when the editor offers one, else a permission request on a
// card of its own. It reports the answer, and false, false when nobody
// answered (cancelled, failed).
func AskTrust(ctx context.Context, sessionID string, a Asker, p *Project) (yes, answered bool) {
	text := p.TrustText()
	if el := a.Elicit(); el != nil {
		resp, err := el(ctx, &acp.CreateElicitationRequest{
			SessionID: sessionID, Mode: "form", Message: display.Text(text),
			RequestedSchema: acp.ElicitationSchema{Type: "object", Properties: map[string]acp.ElicitationProperty{
				"decision": {Type: "string", Title: "Trust this workspace's settings?", OneOf: []acp.EnumOption{
					{Const: "trust", Title: "Trust them"},
					{Const: "decline", Title: "Don't trust them"},
				}},
			}, Required: []string{"decision"}},
			Meta: acp.Meta{acp.MetaPermission: PermissionTrust},
		})
		switch {
		case err != nil || resp == nil || resp.Action == acp.ElicitCancel:
			return false, false
		case resp.Action == acp.ElicitDecline:
			return false, true
		}
		var d string
		_ = json.Unmarshal(resp.Content["decision"], &d)
		return d == "trust", true
	}
	title := "Trust the settings of " + p.Root + "?"
	ok, err := toolcall.AskAside(ctx, a, toolcall.Aside{
		Card: acp.ToolCall{ToolCallID: "trust_" + randomHex(6), Title: display.Line(title), Kind: acp.KindOther,
			Content: []acp.ToolCallContent{acp.TextContent(display.Text(text))}},
		Allow:   acp.PermissionOption{OptionID: "trust", Name: "Trust this workspace", Kind: acp.AllowOnce},
		Reject:  acp.PermissionOption{OptionID: "decline", Name: "Don't trust it", Kind: acp.RejectOnce},
		Meta:    acp.Meta{acp.MetaPermission: PermissionTrust},
		Allowed: "Trusted: the workspace's allow rules, hooks and MCP servers apply.",
		Kept:    "Not trusted: only the workspace's deny and ask rules apply; its MCP servers stay off.",
	})
	if err != nil {
		return false, false
	}
	return ok, true
}
