package session

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/policy"
	"github.com/acpd/acpd/session/side"
	"github.com/acpd/acpd/session/steer"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/tools"
	"github.com/acpd/acpd/session/tools/confine"
	"github.com/acpd/acpd/session/tools/sandbox"
)

// Session is one ACP session: its conversation, mode, model and tools.
type Session struct {
	id    string
	m     *Manager
	cwd   string
	roots []string
	// rootCache keeps the roots' resolution for the tools.
	rootCache confine.RootCache
	// sandbox confines the session's shell commands (nil: unconfined).
	sandbox *sandbox.Session
	log     *slog.Logger
	tools   *tools.Registry

	// turns is a one-slot semaphore: the running turn holds it. history,
	// pendingLoopContext, toolCallIDs and the turn counter belong to the
	// holder and need no other lock.
	turns              chan struct{}
	history            []model.Message
	pendingLoopContext bool
	// idMu guards toolCallIDs and toolSeq: the subagent runs of one
	// response take ids concurrently.
	idMu        sync.Mutex
	toolCallIDs map[string]bool
	toolSeq     int
	// msgCache keeps the wire encoding of history already sent to the model.
	msgCache model.Cache
	// cm is the context accounting and compaction state (compact.go).
	cm compactState
	// title is what the editor shows for the session: set from the first
	// prompt (announced with session_info_update) or the transcript.
	title string
	// notes is the session's route for notices (package notice); a
	// subagent run's session uses its base's.
	notes *notice.Notifier

	// prep gathers the system prompt's environment and instruction files
	// in the background (project.go).
	prep *prep
	// cmds is the session's slash commands (slash.go).
	cmds cmdState
	// lastUsed is the prompt size the provider last reported (turn holder).
	lastUsed int
	// turnNo is the number of prompts recorded (turn holder): the running
	// turn's number for its checkpoint.
	turnNo int
	// cost is the session's cumulative cost at the configured prices
	// (spend.go); costMu guards it (subagent runs charge in parallel).
	costMu sync.Mutex
	cost   float64

	// mcp holds the session's MCP server connections; nil without servers.
	mcp *mcp.Set

	// agentTool is the session's agent tool (subagent.go); nil when the
	// configuration excludes it. agentFiles are the agent files its set
	// was made from (shared with the workspace's other sessions).
	agentTool  *agents.Tool
	agentFiles *agents.Loaded
	// parent is set on the session a subagent run works in (subagent.go):
	// the session it works for, whose mode, "always allow" answers,
	// toolCallIds, workspace cache and sandbox it shares. runID is the
	// toolCallId of the agent call it runs for.
	parent *Session
	runID  string
	// agentName is the subagent a run's session works as.
	agentName string

	// pol is the session's permission rules and hooks (package policy);
	// nil without a policy. Subagent runs use their base's.
	pol *policy.Session
	// hooksStarted: the SessionStart hooks ran (at the first prompt);
	// resumed: the session was loaded or resumed, not created.
	hooksStarted, resumed bool
	// childID is a visible run's id as the client knows it (children.go);
	// children are the session's visible runs.
	childID  string
	children children

	// w appends to the session's transcript; nil when the Manager has no
	// store. Set before the session is published and safe for concurrent use.
	w *store.Writer
	// freeOnce makes free (MCP stop, transcript close) run once.
	freeOnce sync.Once
	freeErr  error

	// mu guards mode, model and prompts; never held while
	// calling the client or waiting for the semaphore.
	mu    sync.Mutex
	mode  string
	model string
	// thought is the thinking level the editor chose for the session ("":
	// the model's default); it goes with every request as ThinkingLevel.
	thought string
	// grants are the "always allow" answers of the session (its subagent
	// runs use their base's).
	grants toolcall.Grants
	// beforeYolo is the mode auto_approve turned into yolo, for turning
	// it off.
	beforeYolo string
	prompts    []*promptHandle // every prompt admitted and not yet answered
	// steers holds the messages the user adds to the running turn
	// (package steer).
	steers steer.Queue
	// sidePrefix is the session's last model request, which a side
	// question repeats (package side); asides are the side questions
	// being answered, cancelled with the turn.
	sidePrefix side.Prefix
	asides     []*promptHandle
	// closed is set by session/close, session/delete and Manager.Close: a
	// prompt that finds it set is refused, so none can start after the
	// close cancelled the admitted ones.
	closed bool
}

// promptHandle exists to give each prompt a unique pointer, so a finishing
// prompt removes only its own entry. admitted is closed once the prompt
// holds the turn or gave up waiting: the next prompt waits for it first,
// so queued prompts start in the order they came.
type promptHandle struct {
	cancel   context.CancelFunc
	admitted chan struct{}
}

func jsonUnmarshal(b json.RawMessage, v any) error {
	if len(b) == 0 {
		return &json.SyntaxError{}
	}
	return json.Unmarshal(b, v)
}

// base is the session itself, or for a subagent run's session the session
// it works for: what is the whole session's (mode, permissions, toolCallIds)
// lives there.
func (s *Session) base() *Session {
	if s.parent != nil {
		return s.parent
	}
	return s
}

func (s *Session) getMode() string {
	s = s.base()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

func (s *Session) getModel() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model
}

func (s *Session) setMode(mode string) {
	s = s.base()
	s.mu.Lock()
	s.mode = mode
	s.mu.Unlock()
}

func (s *Session) modeState() *acp.SessionModeState {
	return &acp.SessionModeState{CurrentModeID: s.getMode(), AvailableModes: availableModes}
}

func (s *Session) configOptions() []acp.SessionConfigOption {
	s.mu.Lock()
	mode, mdl := s.mode, s.model
	s.mu.Unlock()
	modeOpts := make([]acp.SessionConfigSelectOption, 0, len(availableModes))
	for _, m := range availableModes {
		modeOpts = append(modeOpts, acp.SessionConfigSelectOption{Value: m.ID, Name: m.Name, Description: m.Description})
	}
	modelOpts := make([]acp.SessionConfigSelectOption, 0, len(s.m.opts.Models))
	for _, m := range s.m.opts.Models {
		modelOpts = append(modelOpts, acp.SessionConfigSelectOption{Value: m, Name: m})
	}
	opts := []acp.SessionConfigOption{
		{ID: "mode", Name: "Mode", Category: "mode", Type: "select", CurrentValue: mode, Options: modeOpts},
	}
	if mdl != "" {
		// Without a model configured (a first run) a selector would have
		// no value; the first prompt says how to set one.
		opts = append(opts, acp.SessionConfigOption{ID: "model", Name: "Model", Category: "model", Type: "select", CurrentValue: mdl, Options: modelOpts})
	}
	if mdl != "" {
		if levels := s.m.levelsOf(mdl); len(levels) > 0 {
			s.mu.Lock()
			cur := s.thought
			s.mu.Unlock()
			if cur == "" {
				cur = cmp.Or(s.m.opts.DefaultThoughtLevels[mdl], "off")
			}
			levelOpts := make([]acp.SessionConfigSelectOption, 0, len(levels))
			for _, l := range levels {
				levelOpts = append(levelOpts, acp.SessionConfigSelectOption{Value: l, Name: levelName(l)})
			}
			opts = append(opts, acp.SessionConfigOption{ID: "thought_level", Name: "Thinking", Category: "thought_level", Type: "select",
				CurrentValue: cur, Options: levelOpts})
		}
	}
	if s.clientCaps().BooleanOptions() {
		opts = append(opts, acp.SessionConfigOption{ID: configAutoApprove, Name: "Auto-approve",
			Description: "Run every tool without asking (the YOLO mode); off returns to the mode before",
			Type:        "boolean", Bool: mode == ModeYolo})
	}
	return opts
}

// levelsOf are the thought_level option's values for mdl. Once any
// configured model thinks, the option is always there (ACP's config option
// lists keep their options), offering only "off" for a model that does not
// think; without such a model there is none.
func (m *Manager) levelsOf(mdl string) []string {
	if levels := m.opts.ThoughtLevels[mdl]; len(levels) > 0 {
		return levels
	}
	for _, levels := range m.opts.ThoughtLevels {
		if len(levels) > 0 {
			return []string{"off"}
		}
	}
	return nil
}

// levelName is a thinking level as the editor lists it.
func levelName(l string) string {
	if l == "" {
		return l
	}
	return strings.ToUpper(l[:1]) + l[1:]
}

// thinkingLevel is the level the session's next request asks for.
func (s *Session) thinkingLevel() string {
	b := s.base()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.thought
}

// configAutoApprove is the boolean config option offered to clients that
// accept boolean options: the editor's auto-approve toggle. Decision: it
// is a view of the mode, not a setting beside it (two settings would let
// "plan" and "approve everything" be on at once): on is mode yolo, and off
// goes back to the mode the session had before it was turned on (default
// when it started in yolo).
const configAutoApprove = "auto_approve"

// announceMode tells the client that the agent changed the session's mode
// itself: current_mode_update for the modes API and config_option_update
// (the complete list) for config options, so both stay in sync
// (acp-agent.md §2.11). A mode the client set is in its own request's
// answer and is not announced.
func (s *Session) announceMode(ctx context.Context) {
	s = s.base()
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateCurrentMode, CurrentModeID: s.getMode()})
	s.update(ctx, acp.SessionUpdate{Kind: acp.UpdateConfigOption, ConfigOptions: s.configOptions()})
}

// acquire takes the turn semaphore, or fails when ctx ends first.
func (s *Session) acquire(ctx context.Context) error {
	select {
	case s.turns <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Session) release() { <-s.turns }

// cancelTurn cancels every admitted prompt of the session, running or
// waiting; the running turn takes no more steering messages.
func (s *Session) cancelTurn() {
	s.steers.Shut()
	s.mu.Lock()
	ps := append(append([]*promptHandle(nil), s.prompts...), s.asides...)
	s.mu.Unlock()
	for _, p := range ps {
		p.cancel()
	}
}

// prompt admits a new prompt and runs it once it holds the turn. With
// queue false it cancels the prompts before it (today's default, and
// coder/acp-go-sdk's); with queue true (the client opted in to prompt
// queueing, or the turn a steering message started) it waits behind them,
// in the order they came.
func (s *Session) prompt(ctx context.Context, blocks []acp.ContentBlock, queue bool) (*acp.PromptResponse, error) {
	msg, err := s.userMessage(blocks)
	if err != nil {
		return nil, err
	}
	if cmd, args := s.besideCommand(blocks); cmd != nil {
		// A side question neither waits for the running turn nor cancels
		// it (btw.go).
		return s.runBeside(ctx, cmd, args)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &promptHandle{cancel: cancel, admitted: make(chan struct{})}
	admitted := sync.OnceFunc(func() { close(h.admitted) })
	defer admitted()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errSessionClosing()
	}
	older := s.prompts
	s.prompts = append(append([]*promptHandle(nil), older...), h)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for i, p := range s.prompts {
			if p == h {
				s.prompts = append(s.prompts[:i:i], s.prompts[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
	}()
	if !queue {
		for _, p := range older {
			p.cancel()
		}
	}
	if n := len(older); n > 0 {
		select {
		case <-older[n-1].admitted:
		case <-ctx.Done():
		}
	}
	err = s.acquire(ctx)
	admitted()
	if err != nil {
		return &acp.PromptResponse{StopReason: acp.StopCancelled}, nil
	}
	// The turn is held until the prompt's answer is on the wire, so a next
	// turn's updates can never reach the client before it.
	if !acp.AfterReply(ctx, s.release) {
		defer s.release()
	}
	if ctx.Err() != nil || !s.waitCommands(ctx) {
		return &acp.PromptResponse{StopReason: acp.StopCancelled}, nil
	}
	s.refreshMCP(ctx)
	s.refreshCommands(ctx)
	s.refreshAgents(ctx)
	resp, next, handled, err := s.runCommand(ctx, blocks)
	switch {
	case !handled:
	case err != nil || resp != nil:
		return resp, err
	default:
		blocks = next
		if msg, err = s.userMessage(blocks); err != nil {
			return nil, err
		}
	}
	// Checked after the slash commands: /rewind, /context and the other
	// commands that answer without the model work without one.
	if s.getModel() == "" {
		return nil, errModelNotConfigured()
	}
	if blocks, msg, err = s.mcpMentions(ctx, blocks, msg); err != nil {
		return nil, err
	}
	return s.runTurn(ctx, blocks, msg)
}

// update sends one session/update. Final updates after a cancel are allowed
// by ACP, so the send does not inherit the turn's cancellation.
func (s *Session) update(ctx context.Context, u acp.SessionUpdate) {
	if s.parent != nil && !s.subagentUpdate(&u) {
		return
	}
	id := s.wire()
	if u.Kind == acp.UpdateCurrentMode || u.Kind == acp.UpdateConfigOption {
		id = s.base().wire() // the mode is the whole session's
	}
	err := s.m.client.SessionUpdate(context.WithoutCancel(ctx), &acp.SessionNotification{SessionID: id, Update: u})
	if err != nil {
		s.log.Warn("session update failed", "kind", u.Kind, "err", err)
	}
}

// notify tells the user about k (package notice decides how).
func (s *Session) notify(ctx context.Context, k notice.Kind, detail string) {
	s.base().notes.Notify(ctx, k, detail)
}

// closeMCP stops the session's MCP servers.
func (s *Session) closeMCP() {
	if err := s.mcp.Close(); err != nil {
		s.log.Warn("stopping MCP servers", "err", err)
	}
}

// startSource is what SessionStart hooks are told of how the session
// began: startup, or resume for a loaded one.
func (s *Session) startSource() string {
	if s.resumed {
		return "resume"
	}
	return "startup"
}

// agentType is the subagent a run's session works as ("" for a session).
func (s *Session) agentType() string { return s.agentName }
