package model

import (
	"context"
	"fmt"
	"iter"
	"slices"
)

// Route is where one model's requests go: the provider, its configured id
// (which thinking blocks are tagged with), and the model id on its wire.
type Route struct {
	Provider   Provider
	ProviderID string
	Model      string
}

// Router is the Provider of a daemon with several providers: each request
// goes to the route of its model, so choosing another model moves the
// session's next request to that model's provider, history and all.
// Thinking blocks come back tagged with the provider that produced them,
// and a request to another provider goes without them: its protocol could
// not read them, or its provider would reject them.
type Router struct {
	routes   map[string]Route
	fallback Route
}

// NewRouter routes each model id in routes to its Route, and every other
// model to fallback (with the model id unchanged), whose Provider may be
// nil when there is none.
func NewRouter(routes map[string]Route, fallback Route) *Router {
	return &Router{routes: routes, fallback: fallback}
}

// RouteOf is where model id's requests go.
func (r *Router) RouteOf(id string) (Route, bool) {
	if rt, ok := r.routes[id]; ok {
		if rt.Model == "" {
			rt.Model = id
		}
		return rt, true
	}
	if r.fallback.Provider == nil {
		return Route{}, false
	}
	rt := r.fallback
	rt.Model = id
	return rt, true
}

// Stream implements Provider.
func (r *Router) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	rt, ok := r.RouteOf(req.Model)
	if !ok {
		return func(yield func(Event, error) bool) {
			yield(Event{}, fmt.Errorf("model %q: no configured provider serves it", req.Model))
		}
	}
	req.Model = rt.Model
	req.Messages = ForProvider(req.Messages, rt.ProviderID)
	return func(yield func(Event, error) bool) {
		for ev, err := range rt.Provider.Stream(ctx, req) {
			if ev.Kind == EventThinking && ev.Thinking.Provider == "" {
				ev.Thinking.Provider = rt.ProviderID
			}
			if ev.Kind == EventToolCall {
				for i := range ev.ToolCall.Thinking {
					if ev.ToolCall.Thinking[i].Provider == "" {
						ev.ToolCall.Thinking[i].Provider = rt.ProviderID
					}
				}
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// ForProvider is msgs without the thinking blocks another provider
// produced; msgs itself when there are none, so a conversation that stays
// with its provider is never copied. Blocks without a provider tag (from a
// single-provider daemon) are kept: their protocol decides.
func ForProvider(msgs []Message, providerID string) []Message {
	foreign := func(ts []Thinking) bool {
		return slices.ContainsFunc(ts, func(t Thinking) bool { return t.Provider != "" && t.Provider != providerID })
	}
	keep := func(ts []Thinking) []Thinking {
		return slices.DeleteFunc(slices.Clone(ts), func(t Thinking) bool { return t.Provider != "" && t.Provider != providerID })
	}
	var out []Message
	for i, m := range msgs {
		dirty := foreign(m.Thinking)
		for _, c := range m.ToolCalls {
			dirty = dirty || foreign(c.Thinking)
		}
		if !dirty {
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if out == nil {
			out = append(make([]Message, 0, len(msgs)), msgs[:i]...)
		}
		m.Thinking = keep(m.Thinking)
		if len(m.ToolCalls) > 0 {
			calls := slices.Clone(m.ToolCalls)
			for j := range calls {
				calls[j].Thinking = keep(calls[j].Thinking)
			}
			m.ToolCalls = calls
		}
		out = append(out, m)
	}
	if out == nil {
		return msgs
	}
	return out
}
