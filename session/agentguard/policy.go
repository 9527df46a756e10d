package agentguard

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/proxy"
	"github.com/acpd/acpd/session/hooks"
	"github.com/acpd/acpd/session/policy"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/turnguard"
)

// The guard answers the agent's permission requests from acpd's rules and
// PreToolUse hooks (package policy), as acpd answers its own calls: a
// deny picks the agent's reject_once option, an allow its allow_once (never
// allow_always, whose scope the agent defines), anything else goes to the
// editor as before. The editor's "always allow" answer is kept as a rule
// in acpd's state folder. PostToolUse hooks run on the calls the agent
// reports completed.
//
// Decision: the guard never asks the workspace-trust question (the
// question is acpd's, and the agent's editor would see a request about a
// call that does not exist); a project's allow rules and hooks apply in
// the guard once the workspace was trusted by acpd or `acpd trust`.

// policySession is the policy of a guarded session; nil without a policy.
// Callers hold mu.
func (e *Engine) policySession(s *guardedSession) *policy.Session {
	if e.opts.Policy == nil {
		return nil
	}
	if s.pol == nil {
		cwd := s.cwd
		if cwd == "" {
			cwd = e.opts.Cwd
		}
		transcript := ""
		if e.opts.Store != nil {
			transcript = e.opts.Store.Path(StoreID(e.agentName, s.id))
		}
		s.pol = e.opts.Policy.Workspace(cwd).Session(s.id, transcript, []string{cwd})
	}
	return s.pol
}

// foreignOf is a permission request's or a call's tool call as the policy
// reads it.
func foreignOf(title, kind string, input, locations []byte, cwd string) policy.Foreign {
	f := policy.Foreign{Kind: acp.ToolKind(kind), Title: title, Cwd: cwd}
	if len(input) > 0 {
		f.RawInput = json.RawMessage(append([]byte(nil), input...))
	}
	var locs []struct {
		Path string `json:"path"`
	}
	if len(locations) > 0 && json.Unmarshal(locations, &locs) == nil {
		for _, l := range locs {
			if l.Path != "" {
				f.Locations = append(f.Locations, l.Path)
			}
		}
	}
	return f
}

// checkPermission decides a permission request by the policy. It returns
// false when the request goes to the editor now, unchanged; true when the
// guard answered it or will (the hooks run in the background, so the
// relay does not wait for them). Callers hold mu.
func (e *Engine) checkPermission(m *proxy.Message, t *turn, p *permission, f turnguard.Frame) bool {
	ps := e.policySession(t.s)
	if ps == nil {
		return false
	}
	cwd := t.s.cwd
	if cwd == "" {
		cwd = e.opts.Cwd
	}
	p.foreign = foreignOf(f.Title, f.Kind, f.RawInput, f.Locations, cwd)
	p.pol = ps
	v := ps.CheckForeign(p.foreign)
	if v.Verdict >= toolcall.Deny || !ps.HasHooks(hooks.PreToolUse, ps.ForeignToolName(p.foreign)) {
		return e.settle(m.Line, p, v, false)
	}
	line := append([]byte(nil), m.Line...)
	go func() {
		hv := ps.PreToolUseForeign(t.ctx, nil, p.foreign)
		if hv.Verdict > v.Verdict {
			v = hv
		} else if v.Verdict == toolcall.Allow && hv.Verdict == toolcall.Allow {
			v.Reason += "; " + hv.Reason
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.closed {
			return
		}
		if t.stopped {
			e.p.Send(proxy.Agent, cancelledAnswer(p.rawID))
			return
		}
		e.settle(line, p, v, true)
	}()
	return true
}

// settle carries out the policy's verdict on a permission request: the
// agent's allow_once or reject_once option, or the editor's question (sent
// now when forward is set, else left to the relay). It reports whether the
// guard answered. Callers hold mu.
func (e *Engine) settle(line []byte, p *permission, v policy.ForeignVerdict, forward bool) bool {
	kinds := map[toolcall.Verdict][]string{
		toolcall.Allow: {string(acp.AllowOnce)},
		toolcall.Deny:  {string(acp.RejectOnce)},
		toolcall.Stop:  {string(acp.RejectOnce)},
	}[v.Verdict]
	opt := ""
	for _, k := range kinds {
		for id, kind := range p.options {
			if kind == k && (opt == "" || id < opt) {
				opt = id
			}
		}
	}
	if opt == "" && v.Verdict >= toolcall.Deny {
		// No reject_once option: a cancelled outcome refuses it too.
		e.decided(p, v)
		e.markRejected(p)
		e.p.Send(proxy.Agent, cancelledAnswer(p.rawID))
		return true
	}
	if opt == "" {
		if v.Verdict == toolcall.Ask {
			e.decided(p, v)
		}
		e.perms[proxy.IDKey(p.rawID)] = p
		if forward {
			e.p.Send(proxy.Editor, line)
		}
		return forward
	}
	e.decided(p, v)
	if v.Verdict >= toolcall.Deny {
		e.markRejected(p)
	}
	e.p.Send(proxy.Agent, selectedAnswer(p.rawID, opt))
	return true
}

// markRejected counts a refused call's failure as the user's answer, not
// the tool's, as the editor's reject would.
func (e *Engine) markRejected(p *permission) {
	if c := p.t.obs.Get(p.callID); c != nil {
		c.Rejected = true
	}
}

// decided keeps who decided about a call for its transcript record.
func (e *Engine) decided(p *permission, v policy.ForeignVerdict) {
	if p.callID == "" || v.By == "" {
		return
	}
	if p.t.decisions == nil {
		p.t.decisions = map[string][]store.Decision{}
	}
	p.t.decisions[p.callID] = append(p.t.decisions[p.callID], store.Decision{By: v.By, Verdict: v.Verdict.String(), Reason: v.Reason})
}

// granted keeps the editor's "always allow" answer to a forwarded request
// as a rule. Callers hold mu.
func (e *Engine) granted(m *proxy.Message, p *permission) {
	if p.pol == nil || m.Error != nil {
		return
	}
	o := proxy.Field(m.Result, "outcome")
	if proxy.String(proxy.Field(o, "outcome")) != "selected" ||
		p.options[proxy.String(proxy.Field(o, "optionId"))] != string(acp.AllowAlways) {
		return
	}
	added, err := p.pol.GrantForeign(p.foreign)
	if err != nil {
		e.log.Warn("keeping an \"always allow\" answer", "err", err)
		return
	}
	if len(added) > 0 {
		e.log.Info("kept an \"always allow\" answer", "rules", strings.Join(added, ", "))
	}
}

// postToolUse runs the PostToolUse hooks on a call the agent reported
// completed, in the background. Callers hold mu.
func (e *Engine) postToolUse(t *turn, c *turnguard.Call) {
	ps := e.policySession(t.s)
	if ps == nil {
		return
	}
	title, kind, input, locations, output := c.Shown()
	cwd := t.s.cwd
	if cwd == "" {
		cwd = e.opts.Cwd
	}
	f := foreignOf(title, kind, input, locations, cwd)
	if !ps.HasHooks(hooks.PostToolUse, ps.ForeignToolName(f)) {
		return
	}
	out := json.RawMessage(append([]byte(nil), output...))
	go ps.PostToolUseForeign(context.WithoutCancel(t.ctx), nil, f, out)
}

func selectedAnswer(id []byte, optionID string) []byte {
	opt, _ := json.Marshal(optionID)
	return concat(`{"jsonrpc":"2.0","id":`, id, `,"result":{"outcome":{"outcome":"selected","optionId":`+string(opt)+`}}}`)
}
