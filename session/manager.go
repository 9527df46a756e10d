// Package session is acpd's agent: it implements acp.Agent, hosts many
// sessions per connection, runs their prompt turns against a model.Provider,
// executes tools with permission from the editor, streams everything back as
// session/update notifications, and guards every turn with the daemon loop
// guard built on package loopdetect.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/agents"
	"github.com/acpd/acpd/session/checkpoint"
	"github.com/acpd/acpd/session/commands"
	"github.com/acpd/acpd/session/mcp"
	"github.com/acpd/acpd/session/mcp/imported"
	"github.com/acpd/acpd/session/mcp/oauth"
	"github.com/acpd/acpd/session/model"
	"github.com/acpd/acpd/session/notice"
	"github.com/acpd/acpd/session/policy"
	"github.com/acpd/acpd/session/store"
	"github.com/acpd/acpd/session/telemetry"
	"github.com/acpd/acpd/session/toolcall"
	"github.com/acpd/acpd/session/tools"
	"github.com/acpd/acpd/session/tools/sandbox"
	"github.com/acpd/acpd/session/usage"
	"github.com/acpd/acpd/session/workspace"
)

// Approval modes: the ACP mode ids (qwen-code's approval mode values) of
// toolcall.Mode, which the deciders read; the session keeps the id it is
// sent and sends.
const (
	ModePlan     = string(toolcall.ModePlan)
	ModeDefault  = string(toolcall.ModeDefault)
	ModeAutoEdit = string(toolcall.ModeAutoEdit)
	ModeYolo     = string(toolcall.ModeYolo)
)

var availableModes = []acp.SessionMode{
	{ID: ModePlan, Name: "Plan", Description: "Analyse only; tools that modify files or run non-read-only commands are blocked"},
	{ID: ModeDefault, Name: "Default", Description: "Ask before edits and shell commands"},
	{ID: ModeAutoEdit, Name: "Auto Edit", Description: "Apply edits without asking; ask before shell commands"},
	{ID: ModeYolo, Name: "YOLO", Description: "Run every tool without asking"},
}

func validMode(id string) bool {
	return slices.ContainsFunc(availableModes, func(m acp.SessionMode) bool { return m.ID == id })
}

// DefaultAgentConcurrency is how many agent calls of one model response run
// at once when Options.AgentConcurrency is not set.
const DefaultAgentConcurrency = 4

// Options configure a Manager. The zero value of each field is a usable
// default except Provider, which is required.
type Options struct {
	Provider model.Provider
	Model    string   // model name sent to the provider
	Models   []string // model ids offered in the "model" config option; Model is always included
	// ThoughtLevels are the thinking levels each model offers ("off"
	// first), by model id; a model without levels gets no thought_level
	// option. DefaultThoughtLevels are the levels used until the editor
	// chooses one.
	ThoughtLevels        map[string][]string
	DefaultThoughtLevels map[string]string
	SystemPrompt         string
	MaxTokens            int
	Temperature          *float64
	// ContextWindow is the window of Model in tokens; 0 takes it from the
	// known-model table (contextmgr.KnownWindow), else 131072.
	ContextWindow int
	// ContextWindows are the windows of other models (the selector's); a
	// model not listed gets its known or default window.
	ContextWindows map[string]int
	// CompactThreshold is the fraction of the window at which the history
	// is compacted before a request (0: contextmgr.DefaultThreshold).
	CompactThreshold float64
	// CompactionModel answers summary requests; "" uses the session's model.
	CompactionModel string
	// Prices are what each model's tokens cost (none: no cost is kept).
	Prices usage.Prices
	// MaxTokensPerTurn bounds a turn's input plus output tokens (0: none);
	// SessionTokenLimit refuses a request larger than it after compaction
	// (0: none). See spend.go.
	MaxTokensPerTurn  int
	SessionTokenLimit int

	// Cap is the per-turn tool-call cap (Explicit from config provenance).
	Cap loopdetect.Cap
	// SkipLoopDetection gates only the daemon's global-duplicate halt.
	SkipLoopDetection bool
	// FailureGuard is the repeated-tool-failure guard mode (off, shadow, warn, enforce).
	FailureGuard loopdetect.FailureMode

	// ApprovalMode is the initial mode of new sessions (default "default").
	ApprovalMode string
	// Policy is the permission rules, hooks and workspace trust (package
	// policy); nil: none, the approval mode alone decides.
	Policy *policy.Engine
	// Deciders take part in deciding about every tool call of every
	// session, after plan mode and before the session's "always" grants
	// (package toolcall); none by default.
	Deciders []toolcall.Decider
	// AutoAllowConfined runs, in default and auto-edit mode, the shell
	// commands the sandbox contains without asking (package autoallow).
	AutoAllowConfined bool
	// Tools builds the tool registry of a session; nil means no tools.
	Tools func() *tools.Registry
	// ShellTimeout and MaxOutputBytes are passed to tools through tools.Env.
	ShellTimeout   time.Duration
	MaxOutputBytes int
	// Sandbox confines run_shell_command (nil: unconfined, as mode "off").
	Sandbox *sandbox.Policy
	// WebFetchAllowPrivate lets web_fetch reach loopback and private
	// addresses without asking (tools.webFetchAllowPrivate).
	WebFetchAllowPrivate bool
	// NoAgentTool leaves the agent tool (subagents) out of every session.
	NoAgentTool bool
	// AgentConcurrency bounds the agent calls of one model response that
	// run at once (0: DefaultAgentConcurrency).
	AgentConcurrency int

	// APIKeyEnv names the variable the provider's API key was read from
	// and APIKeyEmpty says it was empty; a 401 or 403 names them.
	APIKeyEnv   string
	APIKeyEmpty bool

	// ContextFileNames replaces the instruction file names (AGENTS.md,
	// QWEN.md); NoEnvironment and NoInstructions leave the environment
	// block and the instruction files out of the system prompt.
	ContextFileNames []string
	NoEnvironment    bool
	NoInstructions   bool
	// MCPTokens keeps the OAuth grants of the HTTP MCP servers that ask
	// to be signed in (nil: such a server fails to start).
	MCPTokens *oauth.Store
	// MCPImport says whose MCP configurations every session reads too
	// (package imported): the user's own files at once, the workspace's
	// once it is trusted. No agents: none.
	MCPImport imported.Options
	// ConfigDir is acpd's user configuration folder, holding the global
	// AGENTS.md and commands/; "" means $XDG_CONFIG_HOME/acpd.
	ConfigDir string

	// AuthRequired makes session/new answer -32000 until authenticate succeeds.
	AuthRequired bool

	// Store makes sessions durable: each is recorded in a transcript there,
	// and session/load, resume, list and delete are served (and advertised)
	// from it. Nil keeps sessions in memory only.
	Store *store.Store
	// CheckpointMaxBytes bounds the checkpoint store beside Store's
	// transcripts (0: no bound); see checkpoint.Store.Prune.
	CheckpointMaxBytes int64

	// Telemetry exports spans and metrics of turns, model requests and
	// tool calls; nil (telemetry off) does nothing.
	Telemetry *telemetry.Telemetry

	Version string
	Logger  *slog.Logger
}

// Manager implements acp.Agent for one connection.
type Manager struct {
	client acp.Client
	opts   Options
	log    *slog.Logger

	// mu guards sessions, clientCaps and authed; never held while calling the
	// client or waiting for a turn.
	mu         sync.Mutex
	sessions   map[string]*Session
	clientCaps acp.ClientCapabilities
	authed     bool

	// webFetch is the tools' web_fetch options (nil: the defaults).
	webFetch *tools.WebFetchOptions
	// hub shares the sessions' command sets and instruction files, and
	// watches the command folders for all of them.
	hub *workspace.Hub
	// builtinAgents is the agent set of every session without agent files:
	// the built-ins, which depend only on the configuration, made once.
	builtinAgents func() *agents.Set
	// cpOnce opens the checkpoint store at first use (checkpoints.go).
	cpOnce func() (*checkpoint.Store, error)
}

var _ acp.Agent = (*Manager)(nil)

// NewManager returns an agent that talks to client.
func NewManager(client acp.Client, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ApprovalMode == "" {
		opts.ApprovalMode = ModeDefault
	}
	opts.FailureGuard = loopdetect.ResolveFailureMode(string(opts.FailureGuard))
	if opts.AgentConcurrency <= 0 {
		opts.AgentConcurrency = DefaultAgentConcurrency
	}
	if opts.ConfigDir == "" {
		opts.ConfigDir = config.UserDir(os.Getenv)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	// Without a model name the first further model is the default; with
	// neither (a first run) there is no model selector and a prompt
	// explains how to configure one.
	if opts.Model == "" && len(opts.Models) > 0 {
		opts.Model = opts.Models[0]
	}
	if opts.Model != "" && !slices.Contains(opts.Models, opts.Model) {
		opts.Models = append([]string{opts.Model}, opts.Models...)
	}
	m := &Manager{client: client, opts: opts, log: opts.Logger, sessions: map[string]*Session{},
		hub: workspace.NewHub(opts.Logger, commands.Builtins)}
	if opts.WebFetchAllowPrivate {
		m.webFetch = &tools.WebFetchOptions{AllowPrivate: true}
	}
	if opts.Store != nil {
		dir := opts.Store.Dir()
		m.cpOnce = sync.OnceValues(func() (*checkpoint.Store, error) { return checkpoint.Open(dir) })
	}
	m.builtinAgents = sync.OnceValue(func() *agents.Set {
		reg := tools.NewRegistry()
		if opts.Tools != nil {
			reg = opts.Tools()
		}
		return agents.NewSet(agents.Builtins(), nil, agents.Check{Tool: func(n string) bool {
			_, ok := reg.Get(n)
			return ok
		}})
	})
	return m
}

// authMethodID is the one auth method acpd advertises: an API key from the
// environment, as qwen-code's newest authMethods (open question 7 of
// loop-detection.md §15, settled: only `openai`).
const authMethodID = "openai"

// Initialize answers protocol version 1 and advertises only what works.
func (m *Manager) Initialize(ctx context.Context, req *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	m.mu.Lock()
	m.clientCaps = req.ClientCapabilities
	m.mu.Unlock()
	if st := m.opts.Store; st != nil {
		// A store opened with a deferred index load reads it now that the
		// editor is no longer waiting: after this answer is on the wire.
		if !acp.AfterReply(ctx, st.LoadIndex) {
			st.LoadIndex()
		}
	}
	caps := acp.AgentCapabilities{
		PromptCapabilities: acp.PromptCapabilities{Image: true, EmbeddedContext: true},
		MCPCapabilities:    acp.MCPCapabilities{HTTP: true, SSE: true},
		SessionCapabilities: acp.SessionCapabilities{
			Close:                 &acp.Capability{},
			AdditionalDirectories: &acp.Capability{},
		},
		Auth: &acp.AgentAuthCapabilities{Logout: &acp.Capability{}},
	}
	// Prompt queueing, advertised as claude-agent-acp does; a client
	// that opts in gets it (steering.go).
	caps.Meta = acp.Meta{metaPromptQueueing: true}
	if m.opts.Store != nil {
		caps.LoadSession = true
		caps.SessionCapabilities.List = &acp.Capability{}
		caps.SessionCapabilities.Resume = &acp.Capability{}
		caps.SessionCapabilities.Delete = &acp.Capability{}
		caps.SessionCapabilities.Fork = &acp.Capability{}
	}
	return &acp.InitializeResponse{
		ProtocolVersion:   acp.ProtocolVersion,
		AgentCapabilities: caps,
		AuthMethods: []acp.AuthMethod{{
			ID:          authMethodID,
			Name:        "Use OpenAI API key",
			Description: "Requires setting the `OPENAI_API_KEY` environment variable",
		}},
		AgentInfo: &acp.Implementation{Name: "acpd", Title: "acpd", Version: m.opts.Version},
		Meta:      m.steeringMeta(),
	}, nil
}

// Authenticate accepts the advertised method when an API key is configured.
func (m *Manager) Authenticate(_ context.Context, req *acp.AuthenticateRequest) (*acp.Empty, error) {
	if req.MethodID != authMethodID {
		return nil, acp.ErrInvalidParams("methodId", "Unknown auth method: "+req.MethodID)
	}
	if m.opts.AuthRequired {
		return nil, acp.ErrAuthRequired()
	}
	m.mu.Lock()
	m.authed = true
	m.mu.Unlock()
	return &acp.Empty{}, nil
}

// newMessageID is the messageId of one message's chunks: every chunk of a
// model response (its reasoning and text), of a prompt, of a message acpd
// writes itself, shares one; the next message has another.
func newMessageID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "msg_" + hex.EncodeToString(b[:])
}

var _ acp.Logouter = (*Manager)(nil)

// Logout forgets what authenticate set for this connection: with
// authentication required, session/new, load and resume answer -32000
// again until the next authenticate. Sessions already open stay open
// (ACP leaves it to the agent; closing them would lose running turns).
func (m *Manager) Logout(_ context.Context, _ *acp.LogoutRequest) (*acp.Empty, error) {
	m.mu.Lock()
	m.authed = false
	m.mu.Unlock()
	return &acp.Empty{}, nil
}

func newSessionID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "sess_" + hex.EncodeToString(b[:])
}

// checkAuth refuses session creation until authenticate succeeded, when
// authentication is required.
func (m *Manager) checkAuth() error {
	if !m.opts.AuthRequired {
		return nil
	}
	m.mu.Lock()
	authed := m.authed
	m.mu.Unlock()
	if !authed {
		return acp.ErrAuthRequired()
	}
	return nil
}

func checkDirs(cwd string, extra []string) error {
	if !filepath.IsAbs(cwd) {
		return acp.ErrInvalidParams("cwd", "cwd must be an absolute path: "+cwd)
	}
	for i, d := range extra {
		if !filepath.IsAbs(d) {
			return acp.ErrInvalidParams(fmt.Sprintf("additionalDirectories[%d]", i), "additionalDirectories entries must be absolute paths: "+d)
		}
	}
	return nil
}

// NewSession creates a session rooted at cwd.
func (m *Manager) NewSession(ctx context.Context, req *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	if err := checkDirs(req.Cwd, req.AdditionalDirectories); err != nil {
		return nil, err
	}
	if err := mcp.ValidateServers(req.MCPServers); err != nil {
		return nil, err
	}
	if err := m.checkAuth(); err != nil {
		return nil, err
	}
	var s *Session
	if st := m.opts.Store; st != nil {
		s = m.newSession(store.NewID(), req.Cwd, req.AdditionalDirectories)
		w, err := st.Create(store.SessionMeta{ID: s.id, Cwd: req.Cwd, AdditionalDirectories: req.AdditionalDirectories})
		if err != nil {
			s.stopPrep()
			m.log.Error("creating session transcript failed", "err", err)
			return nil, acp.ErrInternal("session/new: creating the session transcript failed: " + err.Error())
		}
		s.w = w
		// The starting mode and model are recorded so a reload restores them
		// even if the daemon's defaults change in between.
		for _, rec := range []store.Record{{Kind: store.KindMode, ModeID: s.mode}, {Kind: store.KindModel, ModelID: s.model}} {
			if rec.Kind == store.KindModel && rec.ModelID == "" {
				continue // no model configured yet: nothing to restore
			}
			if err := s.record(rec); err != nil {
				_ = w.Close()
				s.stopPrep()
				return nil, storeError(s.id, err)
			}
		}
	} else {
		s = m.newSession(newSessionID(), req.Cwd, req.AdditionalDirectories)
	}
	m.connectMCP(ctx, s, req.MCPServers)
	m.mu.Lock()
	m.sessions[s.id] = s
	m.mu.Unlock()
	m.log.Info("session created", "session_id", s.id, "cwd", s.cwd)
	s.startPrepAfterReply(ctx)
	s.announceCommands(ctx, false)
	return &acp.NewSessionResponse{SessionID: s.id, Modes: s.modeState(), ConfigOptions: s.configOptions()}, nil
}

func (m *Manager) newSession(id, cwd string, extra []string) *Session {
	s := &Session{
		id:    id,
		m:     m,
		cwd:   cwd,
		roots: append([]string{cwd}, extra...),
		mode:  m.opts.ApprovalMode,
		model: m.opts.Model,
		log:   m.log.With("session_id", id),
		turns: make(chan struct{}, 1),
	}
	s.cmds.ready = make(chan struct{})
	if m.opts.Tools != nil {
		s.tools = m.opts.Tools()
	} else {
		s.tools = tools.NewRegistry()
	}
	if !m.opts.NoAgentTool {
		// The built-in agents until a prompt finds agent files.
		s.agentTool = agents.NewTool(m.builtinAgents())
		s.tools.Add(s.agentTool)
	}
	m.mu.Lock()
	caps := m.clientCaps
	m.mu.Unlock()
	s.notes = notice.New(s.log, caps.Notices(), s.update)
	if t, ok := s.tools.Get(tools.NameAskUserQuestion); ok && tools.AsksUser(t) && !tools.CanAsk(m.client, caps) {
		// Offered to the model only when the user can be asked.
		s.tools.Remove(tools.NameAskUserQuestion)
	}
	s.newPrep()
	if m.opts.Policy != nil {
		transcript := ""
		if m.opts.Store != nil {
			transcript = m.opts.Store.Path(id)
		}
		s.pol = m.opts.Policy.Workspace(cwd).Session(id, transcript, s.roots)
	}
	if m.opts.Sandbox != nil {
		// In mode off too: it filters the commands' environment.
		s.sandbox = m.opts.Sandbox.NewSession(s.roots)
	}
	return s
}

// clientCaps are the capabilities the client advertised in initialize.
func (s *Session) clientCaps() acp.ClientCapabilities {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	return s.m.clientCaps
}

func (m *Manager) session(id string) *Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[id]
}

// errUnknownSession answers every method naming a session this connection
// does not host. qwen-code answers set_mode and set_config_option so
// (-32602), but session/prompt with a plain Error `Session not found: <id>`
// (-32603, §8); acpd answers -32602 for prompt too, since the id is a bad
// parameter (ACP's error table; Gemini and Goose do the same). Deliberate
// deviation.
func errUnknownSession(id string) error {
	return acp.ErrInvalidParams("sessionId", "Session not found for id: "+id)
}

// errSessionClosing answers a prompt that reaches a session being closed
// (qwen-code's invalidParams `Session is closing`, §8).
func errSessionClosing() error {
	return acp.ErrInvalidParams("sessionId", "Session is closing")
}

// SetSessionMode switches the approval mode.
func (m *Manager) SetSessionMode(_ context.Context, req *acp.SetSessionModeRequest) (*acp.Empty, error) {
	s := m.session(req.SessionID)
	if s == nil {
		return nil, errUnknownSession(req.SessionID)
	}
	if !validMode(req.ModeID) {
		return nil, acp.ErrInvalidParams("modeId", "Unknown approval mode: "+req.ModeID)
	}
	if err := s.record(store.Record{Kind: store.KindMode, ModeID: req.ModeID}); err != nil {
		return nil, storeError(s.id, err)
	}
	s.setMode(req.ModeID)
	return &acp.Empty{}, nil
}

// SetSessionConfigOption sets `mode` or `model` and returns every option.
func (m *Manager) SetSessionConfigOption(_ context.Context, req *acp.SetSessionConfigOptionRequest) (*acp.SetSessionConfigOptionResponse, error) {
	s := m.session(req.SessionID)
	if s == nil {
		return nil, errUnknownSession(req.SessionID)
	}
	if req.ConfigID == configAutoApprove && s.clientCaps().BooleanOptions() {
		var on bool
		if req.Type != "boolean" || jsonUnmarshal(req.Value, &on) != nil {
			return nil, acp.ErrInvalidParams("value", "value must be a boolean (type \"boolean\") for configId "+req.ConfigID)
		}
		mode := s.getMode()
		next := mode
		switch {
		case on && mode != ModeYolo:
			next = ModeYolo
		case !on && mode == ModeYolo:
			s.mu.Lock()
			next = s.beforeYolo
			s.mu.Unlock()
			if next == "" || next == ModeYolo {
				next = ModeDefault
			}
		}
		if next != mode {
			if err := s.record(store.Record{Kind: store.KindMode, ModeID: next}); err != nil {
				return nil, storeError(s.id, err)
			}
			s.mu.Lock()
			if on {
				s.beforeYolo = mode
			}
			s.mu.Unlock()
			s.setMode(next)
		}
		return &acp.SetSessionConfigOptionResponse{ConfigOptions: s.configOptions()}, nil
	}
	var value string
	if req.Type == "boolean" || jsonUnmarshal(req.Value, &value) != nil {
		return nil, acp.ErrInvalidParams("value", "value must be a string for configId "+req.ConfigID)
	}
	switch req.ConfigID {
	case "mode":
		if !validMode(value) {
			return nil, acp.ErrInvalidParams("value", "Unknown approval mode: "+value)
		}
		if err := s.record(store.Record{Kind: store.KindMode, ModeID: value}); err != nil {
			return nil, storeError(s.id, err)
		}
		s.setMode(value)
	case "model":
		if !slices.Contains(m.opts.Models, value) {
			return nil, acp.ErrInvalidParams("value", "Unknown model: "+value)
		}
		if err := s.record(store.Record{Kind: store.KindModel, ModelID: value}); err != nil {
			return nil, storeError(s.id, err)
		}
		s.mu.Lock()
		s.model = value
		// A level the new model does not offer gives way to its default.
		if !slices.Contains(m.levelsOf(value), s.thought) {
			s.thought = ""
		}
		s.mu.Unlock()
	case "thought_level":
		levels := m.levelsOf(s.getModel())
		if !slices.Contains(levels, value) {
			if len(levels) == 0 {
				return nil, acp.ErrInvalidParams("configId", "The model "+s.getModel()+" has no thinking levels")
			}
			return nil, acp.ErrInvalidParams("value", "Unknown thinking level: "+value+" (levels: "+strings.Join(levels, ", ")+")")
		}
		if err := s.record(store.Record{Kind: store.KindThought, ThoughtLevel: value}); err != nil {
			return nil, storeError(s.id, err)
		}
		s.mu.Lock()
		s.thought = value
		s.mu.Unlock()
	default:
		return nil, acp.ErrInvalidParams("configId", "Unsupported configId: "+req.ConfigID)
	}
	return &acp.SetSessionConfigOptionResponse{ConfigOptions: s.configOptions()}, nil
}

// Prompt runs one turn. A prompt arriving while the session's previous turn
// is still running cancels that turn (it answers `cancelled`) and then runs:
// coder/acp-go-sdk's behaviour, and qwen-code's ("new prompt" abort). A
// client that opted in to prompt queueing gets it queued instead: it runs
// when the turns before it have answered.
func (m *Manager) Prompt(ctx context.Context, req *acp.PromptRequest) (*acp.PromptResponse, error) {
	s := m.session(req.SessionID)
	if s == nil {
		return nil, errUnknownSession(req.SessionID)
	}
	return s.prompt(ctx, req.Prompt, m.queueing())
}

// Cancel cancels the session's running turn; unknown or idle sessions are ignored.
func (m *Manager) Cancel(req *acp.SessionIDRequest) {
	if s := m.session(req.SessionID); s != nil {
		s.cancelTurn()
		return
	}
	m.cancelChild(req.SessionID)
}
