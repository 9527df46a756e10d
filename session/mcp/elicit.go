package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acpd/acpd/acp"
)

// Elicitation is how the servers' elicitations reach the editor. Decisions:
//   - A server may ask only in the modes the editor advertised
//     (clientCapabilities.elicitation.form and .url); acpd advertises
//     exactly those to the server, and declines a request in any other
//     mode. An editor with neither gets no elicitation capability at all.
//   - The request goes to the editor as ACP elicitation/create in the
//     session's scope, tied to the tool call it came with (toolCallId):
//     the call whose request carried it (the 2026-07-28 revision's
//     multi round-trip requests), else the server's only call in flight;
//     with several in flight, or none, it is tied to the session alone.
//   - The message names the server that asks (MCP requires it), and
//     _meta says where it came from: {"source":"mcp","server":NAME}.
//   - A URL elicitation gets an id of acpd's own for the editor (the
//     server's id is unique only on its connection), and the server's
//     notifications/elicitation/complete reaches the editor as
//     elicitation/complete with that id.
//   - A failed editor request (an error, a closed connection) answers the
//     server "cancel".
type Elicitation struct {
	// Form and URL are the modes the editor advertised.
	Form, URL bool
	// Create sends elicitation/create; the caller fills SessionID.
	Create func(ctx context.Context, req *acp.CreateElicitationRequest) (*acp.CreateElicitationResponse, error)
	// Complete sends elicitation/complete for an id Create was given.
	Complete func(ctx context.Context, elicitationID string)
}

// urlWaitLimit bounds how long a call waits for the server to say that
// the URL elicitations its -32042 asked for are complete.
const urlWaitLimit = 10 * time.Minute

// callKey carries the call a request runs for in its context.
type callKey struct{}

func withCall(ctx context.Context, cs *callState) context.Context {
	return context.WithValue(ctx, callKey{}, cs)
}

// callFor is the call ctx was made for, or else the server's only call in
// flight; nil when there is no such call.
func (s *server) callFor(ctx context.Context) *callState {
	if cs, ok := ctx.Value(callKey{}).(*callState); ok {
		return cs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) != 1 {
		return nil
	}
	for _, cs := range s.calls {
		return cs
	}
	return nil
}

// urlElicit is a URL elicitation forwarded to the editor, waiting for the
// server's completion notice.
type urlElicit struct {
	acpID string
	done  chan struct{}
	once  sync.Once
}

// askContext is the context of a question to the editor: the request's,
// ended also when the call it is tied to ends or the server is closed.
func (s *server) askContext(ctx context.Context, cs *callState) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stops := []func() bool{context.AfterFunc(s.life, cancel)}
	if cs != nil && cs.ctx != nil {
		stops = append(stops, context.AfterFunc(cs.ctx, cancel))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// elicit is the SDK's elicitation handler: the server's question goes to
// the editor.
func (s *server) elicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	e := s.opts.Elicit
	p := req.Params
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "elicitation/create without params"}
	}
	mode := p.Mode
	if mode == "" {
		mode = "form"
		if p.URL != "" {
			mode = "url"
		}
	}
	cs := s.callFor(ctx)
	ar := &acp.CreateElicitationRequest{
		Mode:    mode,
		Message: fmt.Sprintf("MCP server %q: %s", s.name, p.Message),
		Meta:    acp.Meta{"source": "mcp", "server": s.name},
	}
	if cs != nil {
		ar.ToolCallID = cs.toolCallID
	}
	var waiter *urlElicit
	switch {
	case mode == "form" && e.Form:
		schema, err := formSchema(p.RequestedSchema)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		ar.RequestedSchema = schema
	case mode == "url" && e.URL:
		ar.URL, ar.ElicitationID = p.URL, "mcp-"+rand.Text()
		if p.ElicitationID != "" {
			waiter = s.awaitComplete(p.ElicitationID, ar.ElicitationID)
		}
	default:
		s.log.Info("mcp server elicitation declined: the editor does not offer its mode", "mode", mode)
		return &sdk.ElicitResult{Action: acp.ElicitDecline}, nil
	}
	actx, done := s.askContext(ctx, cs)
	defer done()
	resp, err := e.Create(actx, ar)
	if err != nil {
		s.log.Warn("mcp server elicitation: the editor's answer failed", "err", err)
		s.dropComplete(p.ElicitationID, waiter)
		return &sdk.ElicitResult{Action: acp.ElicitCancel}, nil
	}
	if resp.Action != acp.ElicitAccept {
		s.dropComplete(p.ElicitationID, waiter)
		return &sdk.ElicitResult{Action: resp.Action}, nil
	}
	out := &sdk.ElicitResult{Action: acp.ElicitAccept}
	if mode == "form" {
		out.Content = map[string]any{}
		for k, raw := range resp.Content {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("the editor's answer for %q is not JSON", k)}
			}
			out.Content[k] = v
		}
	}
	return out, nil
}

// formSchema is an MCP form schema as ACP's (the SDK checked that it is a
// flat object of primitives). The legacy enumNames become titled choices.
func formSchema(requested any) (acp.ElicitationSchema, error) {
	out := acp.ElicitationSchema{Type: "object", Properties: map[string]acp.ElicitationProperty{}}
	if requested == nil {
		return out, nil
	}
	raw, err := json.Marshal(requested)
	if err != nil {
		return out, err
	}
	var wire struct {
		Title      string   `json:"title"`
		Required   []string `json:"required"`
		Properties map[string]struct {
			acp.ElicitationProperty
			EnumNames []string `json:"enumNames"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return out, fmt.Errorf("requestedSchema: %v", err)
	}
	out.Title, out.Required = wire.Title, wire.Required
	for name, p := range wire.Properties {
		prop := p.ElicitationProperty
		if len(p.EnumNames) == len(prop.Enum) && len(prop.Enum) > 0 && len(prop.OneOf) == 0 {
			for i, v := range prop.Enum {
				prop.OneOf = append(prop.OneOf, acp.EnumOption{Const: v, Title: p.EnumNames[i]})
			}
			prop.Enum = nil
		}
		out.Properties[name] = prop
	}
	return out, nil
}

// awaitComplete registers a forwarded URL elicitation for the server's
// completion notice.
func (s *server) awaitComplete(serverID, acpID string) *urlElicit {
	w := &urlElicit{acpID: acpID, done: make(chan struct{})}
	s.mu.Lock()
	s.elicits[serverID] = w
	s.mu.Unlock()
	return w
}

// dropComplete forgets a URL elicitation the user did not accept.
func (s *server) dropComplete(serverID string, w *urlElicit) {
	if w == nil {
		return
	}
	s.mu.Lock()
	if s.elicits[serverID] == w {
		delete(s.elicits, serverID)
	}
	s.mu.Unlock()
}

// elicitationComplete is the server's notifications/elicitation/complete:
// the editor is told, and a call waiting for it goes on. Unknown ids are
// ignored, as MCP asks.
func (s *server) elicitationComplete(serverID string) {
	s.mu.Lock()
	w := s.elicits[serverID]
	delete(s.elicits, serverID)
	s.mu.Unlock()
	if w == nil {
		return
	}
	w.once.Do(func() { close(w.done) })
	if e := s.opts.Elicit; e != nil && e.Complete != nil {
		e.Complete(s.life, w.acpID)
	}
}

// urlRequired reports whether err is a -32042 (URL elicitation required)
// answer and returns the elicitations it asks for.
func urlRequired(err error) ([]*sdk.ElicitParams, bool) {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != sdk.CodeURLElicitationRequired {
		return nil, false
	}
	var data struct {
		Elicitations []*sdk.ElicitParams `json:"elicitations"`
	}
	if len(rpcErr.Data) > 0 && json.Unmarshal(rpcErr.Data, &data) != nil {
		return nil, false
	}
	return data.Elicitations, true
}

// elicitURLs handles a -32042: each URL elicitation goes to the editor,
// and once the user accepted them all, the call waits for the server to
// say they are complete (at most urlWaitLimit) before it is retried.
func (s *server) elicitURLs(ctx context.Context, cs *callState, list []*sdk.ElicitParams) error {
	e := s.opts.Elicit
	if e == nil || !e.URL {
		// The URL is meant for the user's eyes, not the model's.
		return fmt.Errorf("mcp server %q needs the user to open a web page first, and this editor cannot show one (it does not offer URL elicitations)", s.name)
	}
	if len(list) == 0 {
		return fmt.Errorf("mcp server %q asked for a URL elicitation without naming one", s.name)
	}
	var waiters []*urlElicit
	for _, p := range list {
		if p == nil || p.URL == "" || (p.Mode != "" && p.Mode != "url") {
			return fmt.Errorf("mcp server %q sent a -32042 that is not a URL elicitation", s.name)
		}
		ar := &acp.CreateElicitationRequest{
			Mode: "url", URL: p.URL, ElicitationID: "mcp-" + rand.Text(), ToolCallID: cs.toolCallID,
			Message: fmt.Sprintf("MCP server %q: %s", s.name, p.Message),
			Meta:    acp.Meta{"source": "mcp", "server": s.name},
		}
		var w *urlElicit
		if p.ElicitationID != "" {
			w = s.awaitComplete(p.ElicitationID, ar.ElicitationID)
			waiters = append(waiters, w)
		}
		actx, done := s.askContext(ctx, cs)
		resp, err := e.Create(actx, ar)
		done()
		if err != nil || resp.Action != acp.ElicitAccept {
			s.dropComplete(p.ElicitationID, w)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				return fmt.Errorf("mcp server %q needs the user to open a web page first; asking the editor failed: %v", s.name, err)
			}
			return fmt.Errorf("mcp server %q needs the user to open a web page first, and the user answered %q", s.name, resp.Action)
		}
	}
	limit := time.NewTimer(urlWaitLimit)
	defer limit.Stop()
	for _, w := range waiters {
		select {
		case <-w.done:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.life.Done():
			return fmt.Errorf("mcp server %q was closed during the call", s.name)
		case <-limit.C:
			return fmt.Errorf("mcp server %q did not say within %s that the web page's step was done", s.name, urlWaitLimit)
		}
	}
	return nil
}

// progressEvery bounds how often a call's progress reaches the editor.
const progressEvery = 100 * time.Millisecond

// progress sends the server's notifications/progress for a call in flight
// to the editor as a tool_call_update: the message and figures as the
// call's content, and the figures in _meta.progress.
func (s *server) progress(p *sdk.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token, _ := p.ProgressToken.(string)
	s.mu.Lock()
	cs := s.calls[token]
	s.mu.Unlock()
	if cs == nil || cs.update == nil {
		return
	}
	now := time.Now()
	final := p.Total > 0 && p.Progress >= p.Total
	cs.mu.Lock()
	if !final && now.Sub(cs.lastProgress) < progressEvery {
		cs.mu.Unlock()
		return
	}
	cs.lastProgress = now
	cs.mu.Unlock()
	text := fmt.Sprintf("%g", p.Progress)
	if p.Total > 0 {
		text += fmt.Sprintf("/%g", p.Total)
	}
	if p.Message != "" {
		text = p.Message + " (" + text + ")"
	}
	meta := map[string]any{"progress": p.Progress}
	if p.Total > 0 {
		meta["total"] = p.Total
	}
	if p.Message != "" {
		meta["message"] = p.Message
	}
	_ = cs.update(cs.ctx, acp.ToolCallUpdate{
		Content: []acp.ToolCallContent{acp.TextContent(text)},
		Meta:    acp.Meta{"progress": meta},
	})
}
