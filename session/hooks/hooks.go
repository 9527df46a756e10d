// Package hooks runs the commands users attach to events of a session, in
// Claude Code's contract: the events (PreToolUse, PostToolUse,
// UserPromptSubmit, Stop, SubagentStop, SessionStart, SessionEnd,
// PreCompact, Notification), matchers on tool names, a JSON object on the
// command's stdin with the fields Claude Code sends, exit 0 (success; JSON
// on stdout is read), 2 (blocking: stderr is the reason) or other (a
// non-blocking error shown to the user), JSON output (decision,
// hookSpecificOutput.permissionDecision, updatedInput, additionalContext,
// continue, stopReason, suppressOutput, systemMessage), a timeout after
// which the command's process group is killed, and the hooks of one
// event run in parallel.
//
// The configuration is Claude Code's nested shape, read from acpd's TOML
// ([[hooks.PreToolUse]] with matcher and hooks = [{type = "command",
// command = "…", timeout = 30}]) and from Claude Code's settings files.
// This package only runs hooks and reads their answers; where an answer
// takes effect (a tool call refused, a prompt dropped) is its callers'.
package hooks

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The events, as Claude Code names them.
const (
	PreToolUse       = "PreToolUse"
	PostToolUse      = "PostToolUse"
	UserPromptSubmit = "UserPromptSubmit"
	Stop             = "Stop"
	SubagentStop     = "SubagentStop"
	SessionStart     = "SessionStart"
	SessionEnd       = "SessionEnd"
	PreCompact       = "PreCompact"
	Notification     = "Notification"
)

// Events lists every event acpd runs hooks for.
var Events = []string{PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop, SessionStart, SessionEnd, PreCompact, Notification}

// IsEvent reports an event name acpd knows.
func IsEvent(name string) bool { return slices.Contains(Events, name) }

// Default timeouts, Claude Code's: a command may take ten minutes, a
// prompt's hook half a minute (the user waits on it), a session's end a
// moment unless the hook asks for more (at most a minute).
const (
	DefaultTimeout    = 600 * time.Second
	PromptTimeout     = 30 * time.Second
	SessionEndTimeout = 1500 * time.Millisecond
	SessionEndMax     = 60 * time.Second
)

// Source is where a hook was configured.
type Source struct {
	// File is the settings file's path.
	File string
	// Project marks a file of the workspace (it runs only once the
	// workspace is trusted).
	Project bool
}

// Handler is one hook command.
type Handler struct {
	Command string
	// Timeout is the handler's own (0: the event's default).
	Timeout time.Duration
}

// Hook is one handler with the event and matcher it is configured under
// and where.
type Hook struct {
	Event   string
	Matcher string
	Handler
	Source Source
	match  func(string) bool
}

// Config is a set of hooks.
type Config []*Hook

// Of is the hooks of event whose matcher accepts any of names (a tool
// event's tool names; the source, trigger or type of a session event);
// a handler configured twice (the same command for the same event) runs
// once.
func (c Config) Of(event string, names ...string) []*Hook {
	var out []*Hook
	seen := map[string]bool{}
	for _, h := range c {
		if h.Event != event || seen[h.Command] {
			continue
		}
		if h.match != nil && len(names) > 0 && !slices.ContainsFunc(names, h.match) {
			continue
		}
		seen[h.Command] = true
		out = append(out, h)
	}
	return out
}

// timeout is how long h may run.
func (h *Hook) timeout() time.Duration {
	switch {
	case h.Event == SessionEnd && h.Timeout > 0:
		return min(h.Timeout, SessionEndMax)
	case h.Event == SessionEnd:
		return SessionEndTimeout
	case h.Timeout > 0:
		return h.Timeout
	case h.Event == UserPromptSubmit:
		return PromptTimeout
	}
	return DefaultTimeout
}

// String names the hook for the user: its event and command.
func (h *Hook) String() string { return h.Event + " hook " + h.Command }

// compileMatcher reads a matcher as Claude Code does: none, "" or "*" is
// every name; a matcher of only letters, digits, '_', '-', ' ', ',' and
// '|' is a list of exact names; anything else is a regular expression
// found anywhere in the name (Go's syntax, close to the JavaScript Claude
// Code uses for the usual patterns).
func compileMatcher(m string) (func(string) bool, error) {
	m = strings.TrimSpace(m)
	if m == "" || m == "*" {
		return nil, nil
	}
	plain := true
	for _, r := range m {
		if !(r == '_' || r == '-' || r == ' ' || r == ',' || r == '|' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			plain = false
			break
		}
	}
	if plain {
		names := strings.FieldsFunc(m, func(r rune) bool { return r == '|' || r == ',' || r == ' ' })
		return func(s string) bool { return slices.Contains(names, s) }, nil
	}
	re, err := regexp.Compile(m)
	if err != nil {
		return nil, fmt.Errorf("matcher %q is not a valid regular expression: %v", m, err)
	}
	return re.MatchString, nil
}

// Decode reads a settings file's "hooks" object: event names to lists of
// {matcher, hooks: [{type, command, timeout}]}. A part that cannot be read
// is an error naming it; the rest is kept.
func Decode(raw any, src Source) (Config, []error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, []error{errors.New("hooks must be an object of event names")}
	}
	var out Config
	var errs []error
	for _, ev := range sortedKeys(m) {
		hs, err := DecodeEvent(ev, m[ev], src)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, hs...)
	}
	return out, errs
}

// DecodeEvent reads one event's list of matcher groups; the groups it
// could read are returned with the error about the others.
func DecodeEvent(event string, raw any, src Source) (Config, error) {
	if !IsEvent(event) {
		return nil, fmt.Errorf("hooks.%s: unknown event; acpd runs hooks for %s", event, strings.Join(Events, ", "))
	}
	groups, ok := raw.([]any)
	if !ok {
		if ms, isMaps := raw.([]map[string]any); isMaps {
			for _, g := range ms {
				groups = append(groups, g)
			}
		} else {
			return nil, fmt.Errorf("hooks.%s: must be a list of {matcher, hooks} entries", event)
		}
	}
	var out Config
	var errs []error
	for i, g := range groups {
		gm, ok := g.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("hooks.%s[%d]: must be a table with matcher and hooks", event, i))
			continue
		}
		matcher, _ := gm["matcher"].(string)
		if v, ok := gm["matcher"]; ok && v != nil {
			if _, isStr := v.(string); !isStr {
				errs = append(errs, fmt.Errorf("hooks.%s[%d].matcher: must be a string", event, i))
				continue
			}
		}
		match, err := compileMatcher(matcher)
		if err != nil {
			errs = append(errs, fmt.Errorf("hooks.%s[%d]: %v", event, i, err))
			continue
		}
		handlers, err := handlerList(gm["hooks"])
		if err != nil {
			errs = append(errs, fmt.Errorf("hooks.%s[%d].hooks: %v", event, i, err))
			continue
		}
		for _, h := range handlers {
			out = append(out, &Hook{Event: event, Matcher: matcher, Handler: h, Source: src, match: match})
		}
	}
	return out, errors.Join(errs...)
}

func handlerList(raw any) ([]Handler, error) {
	var items []any
	switch v := raw.(type) {
	case []any:
		items = v
	case []map[string]any:
		for _, m := range v {
			items = append(items, m)
		}
	default:
		return nil, errors.New(`must be a list of {type = "command", command = "…", timeout = seconds}`)
	}
	var out []Handler
	for j, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("[%d]: must be a table", j)
		}
		if t, _ := m["type"].(string); t != "command" {
			return nil, fmt.Errorf(`[%d].type: acpd runs hooks of type "command" (got %v)`, j, m["type"])
		}
		cmd, _ := m["command"].(string)
		if strings.TrimSpace(cmd) == "" {
			return nil, fmt.Errorf("[%d].command: must be a non-empty string", j)
		}
		h := Handler{Command: cmd}
		switch t := m["timeout"].(type) {
		case nil:
		case int64:
			h.Timeout = time.Duration(t) * time.Second
		case float64:
			h.Timeout = time.Duration(t * float64(time.Second))
		default:
			return nil, fmt.Errorf("[%d].timeout: must be a number of seconds", j)
		}
		if h.Timeout < 0 {
			return nil, fmt.Errorf("[%d].timeout: must not be negative", j)
		}
		out = append(out, h)
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
