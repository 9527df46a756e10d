// Package notice is the one place that decides what acpd tells the user
// outside the conversation, and how loudly: each Kind has its severity, its
// title and what happens for a client that cannot show notices. A session
// owns one Notifier; everything that has something to tell the user (file
// loaders, budgets, provider retries, the sandbox, rewinds, the loop guard)
// calls Notify with a Kind and a detail, and never builds a notice itself.
//
// Decisions where ACP is silent:
//   - Every notice is also logged to stderr, at the level of its severity:
//     that is what acpd did before notices existed, and an operator reading
//     the log should not lose anything because an editor shows notices.
//   - A notice is live, not history (ACP says so): it is not recorded in the
//     transcript and session/load does not replay it.
//   - Until the client knows the session's id (the session/new, load or
//     resume answer is on the wire) notices are held, then sent in order.
//   - A client without session.notices sees what it saw before: a log line,
//     and for the kinds that were already shown in the conversation (an MCP
//     server that failed to start) the same agent text at the next turn.
//   - A file problem, an MCP failure or an unconfined sandbox with the same
//     detail is told once per session: a broken agent file is reported when
//     found, not at every prompt. Budgets, retries, rewinds and loop
//     warnings are told each time they happen.
package notice

import (
	"context"
	"log/slog"
	"sync"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/display"
)

// Kind is what a notice is about. The Kind decides the severity and title.
type Kind int

// The kinds of notice acpd sends.
const (
	// InstructionFile: an instruction file (AGENTS.md, QWEN.md, an
	// @import) could not be read or was cut.
	InstructionFile Kind = iota + 1
	// CommandFile: a slash command file could not be loaded.
	CommandFile
	// AgentFile: a subagent definition file could not be loaded or names
	// a tool or model the session does not have.
	AgentFile
	// BudgetNear: a token budget (model.maxTokensPerTurn,
	// model.sessionTokenLimit) is 80% spent.
	BudgetNear
	// ProviderRetry: the model provider answered 429, 503 or 529 (rate
	// limited or overloaded) and the request is retried after a wait.
	ProviderRetry
	// SandboxUnconfined: the shell sandbox could not be set up on this
	// kernel and commands run unconfined ([tools] sandbox = "auto").
	SandboxUnconfined
	// SandboxFailed: the shell sandbox could not be set up and the command
	// was not run (mode required, or the helper failed).
	SandboxFailed
	// MCPServerFailed: an MCP server of the session failed to start.
	MCPServerFailed
	// RewindConflict: a rewind could not restore a file as it was (it was
	// changed outside the session since).
	RewindConflict
	// LoopWarning: the loop guard sees the turn repeating itself and will
	// stop it if it goes on.
	LoopWarning
	// ModelRetry: a model request failed otherwise (no answer within
	// model.requestTimeout, a refused or cut connection, a server error)
	// and is retried after a wait.
	ModelRetry
)

// fallback is what a client without session.notices gets besides the log.
type fallback int

const (
	logOnly   fallback = iota
	agentText          // agent text at the start of the next turn
)

type rule struct {
	severity acp.NoticeSeverity
	title    string
	fallback fallback
	// once: the same detail is told once per session (a broken file is
	// found again at every prompt until it is fixed).
	once bool
}

// rules is indexed by Kind: an array of constants is static data, where a
// map would be built by package initialization on every start of acpd.
// Index 0 is no kind.
var rules = [...]rule{
	InstructionFile:   {acp.SeverityWarning, "Instruction file problem", logOnly, true},
	CommandFile:       {acp.SeverityWarning, "Command file problem", logOnly, true},
	AgentFile:         {acp.SeverityWarning, "Agent file problem", logOnly, true},
	BudgetNear:        {acp.SeverityWarning, "Token budget 80% used", logOnly, false},
	ProviderRetry:     {acp.SeverityInfo, "Model provider busy; retrying", logOnly, false},
	SandboxUnconfined: {acp.SeverityWarning, "Shell sandbox unavailable; commands run unconfined", logOnly, true},
	SandboxFailed:     {acp.SeverityError, "Shell sandbox could not be set up; the command did not run", logOnly, false},
	MCPServerFailed:   {acp.SeverityError, "MCP server failed to start", agentText, true},
	RewindConflict:    {acp.SeverityWarning, "Rewind conflict", logOnly, false},
	LoopWarning:       {acp.SeverityWarning, "The turn looks stuck in a loop", logOnly, false},
	ModelRetry:        {acp.SeverityInfo, "Model request failed; retrying", logOnly, false},
}

// Severity is the severity of notices of kind k.
func Severity(k Kind) acp.NoticeSeverity { r, _ := ruleOf(k); return r.severity }

// Title is the title of notices of kind k.
func Title(k Kind) string { r, _ := ruleOf(k); return r.title }

// ruleOf is the rule of k; ok is false for an unknown kind.
func ruleOf(k Kind) (r rule, ok bool) {
	if k <= 0 || int(k) >= len(rules) {
		return rule{}, false
	}
	return rules[k], true
}

// Sender delivers one session/update for the session (the session's own
// update path, which knows its id and serialises with its other updates).
type Sender func(ctx context.Context, u acp.SessionUpdate)

// Notifier is a session's route for notices. The zero value is not usable;
// a nil *Notifier only logs nothing and sends nothing (Notify is safe on it).
type Notifier struct {
	log     *slog.Logger
	send    Sender
	enabled bool // the client advertised session.notices

	mu   sync.Mutex
	open bool
	held []acp.Notice
	seen map[string]bool
	text []string
}

// New returns the notifier of a session. enabled is whether the client
// advertised session.notices; send delivers an update to it.
func New(log *slog.Logger, enabled bool, send Sender) *Notifier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Notifier{log: log, send: send, enabled: enabled && send != nil, seen: map[string]bool{}}
}

// Enabled reports whether notices reach the client as `notice` updates.
func (n *Notifier) Enabled() bool { return n != nil && n.enabled }

// Notify tells the user about k; detail says what happened and, where it
// helps, what to do (plain text, one or a few sentences).
func (n *Notifier) Notify(ctx context.Context, k Kind, detail string) {
	if n == nil {
		return
	}
	r, ok := ruleOf(k)
	if !ok {
		n.log.Error("notice of an unknown kind", "kind", int(k), "detail", detail)
		return
	}
	// A detail quotes what went wrong: a path of the workspace, a
	// server's error, the model's tool name.
	detail = display.Text(detail)
	key := r.title + "\x00" + detail
	n.mu.Lock()
	if r.once {
		if n.seen[key] {
			n.mu.Unlock()
			return
		}
		n.seen[key] = true
	}
	note := acp.Notice{Severity: r.severity, Title: r.title, Description: detail}
	send := n.enabled && n.open
	switch {
	case n.enabled && !n.open:
		n.held = append(n.held, note)
	case !n.enabled && r.fallback == agentText:
		n.text = append(n.text, r.title+": "+detail+"\n\n")
	}
	n.mu.Unlock()
	n.logNotice(note)
	if send {
		n.send(ctx, acp.SessionUpdate{Kind: acp.UpdateNotice, Notice: &note})
	}
}

// Open marks the session known to the client (its session/new, load or
// resume answer is on the wire) and sends the notices held until then.
func (n *Notifier) Open(ctx context.Context) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.open = true
	held := n.held
	n.held = nil
	n.mu.Unlock()
	for i := range held {
		n.send(ctx, acp.SessionUpdate{Kind: acp.UpdateNotice, Notice: &held[i]})
	}
}

// TakeText returns, and forgets, the notices a client without
// session.notices is shown as agent text at the start of the next turn.
func (n *Notifier) TakeText() []string {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.text
	n.text = nil
	return t
}

func (n *Notifier) logNotice(note acp.Notice) {
	level := slog.LevelWarn
	switch note.Severity {
	case acp.SeverityInfo:
		level = slog.LevelInfo
	case acp.SeverityError:
		level = slog.LevelError
	}
	n.log.Log(context.Background(), level, note.Title, "detail", note.Description)
}
