package model

import (
	"bytes"
	"slices"
)

// CloneMessage copies m's slices, which a caller could rewrite in place: a
// protocol's per-conversation cache keeps such a copy to compare against.
func CloneMessage(m Message) Message {
	m.Images = slices.Clone(m.Images)
	m.Thinking = cloneThinking(m.Thinking)
	if m.ToolCalls != nil {
		calls := make([]ToolCall, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			tc.Arguments = bytes.Clone(tc.Arguments)
			tc.Thinking = cloneThinking(tc.Thinking)
			calls[i] = tc
		}
		m.ToolCalls = calls
	}
	return m
}

func cloneThinking(ts []Thinking) []Thinking {
	if ts == nil {
		return nil
	}
	out := make([]Thinking, len(ts))
	for i, t := range ts {
		t.Raw = bytes.Clone(t.Raw)
		out[i] = t
	}
	return out
}

// SameMessage reports whether a and b are the same message in every field
// a protocol encodes. It is cheap when they share their data, as a
// conversation's earlier messages do from one request to the next.
func SameMessage(a, b Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.Reasoning != b.Reasoning ||
		a.ToolCallID != b.ToolCallID || a.Name != b.Name ||
		len(a.Images) != len(b.Images) || len(a.ToolCalls) != len(b.ToolCalls) ||
		!sameThinking(a.Thinking, b.Thinking) {
		return false
	}
	for i := range a.Images {
		if a.Images[i] != b.Images[i] {
			return false
		}
	}
	for i, x := range a.ToolCalls {
		y := b.ToolCalls[i]
		if x.ID != y.ID || x.Name != y.Name || x.Invalid != y.Invalid || !bytes.Equal(x.Arguments, y.Arguments) ||
			!sameThinking(x.Thinking, y.Thinking) {
			return false
		}
	}
	return true
}

func sameThinking(a, b []Thinking) bool {
	if len(a) != len(b) {
		return false
	}
	for i, x := range a {
		y := b[i]
		if x.Protocol != y.Protocol || x.Provider != y.Provider || x.Type != y.Type || x.Text != y.Text ||
			x.Signature != y.Signature || x.Data != y.Data || x.ID != y.ID || x.Prefix != y.Prefix || !bytes.Equal(x.Raw, y.Raw) {
			return false
		}
	}
	return true
}
