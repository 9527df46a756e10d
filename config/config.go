// Package config resolves acpd's configuration from built-in defaults, TOML
// files, the environment and command-line flags, remembering where each
// value came from. The resolved Config is a plain value passed down by the
// caller; the package keeps no global state.
package config

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acpd/acpd/session/hooks"
	"github.com/acpd/acpd/session/rules"
)

// PermissionsConfig is the [permissions] table: permission rules in Claude
// Code's syntax (package session/rules) and whether Claude Code's user
// settings are read too.
type PermissionsConfig struct {
	// Rules are the allow, ask and deny rules of every configuration file,
	// each with its file.
	Rules []rules.Rule
	// ClaudeUserSettings reads the rules and hooks of the user's
	// ~/.claude/settings.json as the user's own.
	ClaudeUserSettings bool
}

// MCPConfig is the [mcp] table: the MCP servers a session takes beyond
// those its client passes.
type MCPConfig struct {
	// Import names the agents whose configured MCP servers every session
	// starts too ("claude", "gemini", "codex"); empty: none. A
	// workspace's own files (.mcp.json, .gemini/settings.json,
	// .codex/config.toml) count only once the workspace is trusted.
	Import []string
}

// DefaultMaxToolCallsPerTurn is the adaptive soft cap used when no layer sets
// model.maxToolCallsPerTurn (qwen-code's DEFAULT_MAX_TOOL_CALLS_PER_TURN).
const DefaultMaxToolCallsPerTurn = 100

// Provider selects the model backend.
type Provider string

// Model providers.
const (
	ProviderOpenAI    Provider = "openai"    // an OpenAI-compatible endpoint (chat completions, or Responses with model.wireApi)
	ProviderAnthropic Provider = "anthropic" // the Anthropic Messages API
	ProviderGemini    Provider = "gemini"    // the Gemini API
	ProviderScript    Provider = "script"    // a scripted model read from model.script (tests, demos)
)

// ApprovalMode decides which tool calls need the user's permission.
type ApprovalMode string

// Approval modes, with qwen-code's names.
const (
	ApprovalPlan     ApprovalMode = "plan"
	ApprovalDefault  ApprovalMode = "default"
	ApprovalAutoEdit ApprovalMode = "auto-edit"
	ApprovalYolo     ApprovalMode = "yolo"
)

// GuardMode is the mode of the repeated-tool-failure guard.
type GuardMode string

// Repeated-tool-failure guard modes (loop-detection.md §7.6).
const (
	GuardOff     GuardMode = "off"
	GuardShadow  GuardMode = "shadow"
	GuardWarn    GuardMode = "warn"
	GuardEnforce GuardMode = "enforce"
)

// Config is the resolved configuration of one acpd process.
type Config struct {
	Model ModelConfig
	// Providers are the [modelProviders.<id>] entries, by id.
	Providers []ProviderConfig
	Tools     ToolsConfig
	// Permissions is the [permissions] table: allow, ask and deny rules.
	Permissions PermissionsConfig
	// Hooks are the [hooks] table's commands, every file's, by event.
	Hooks hooks.Config
	// MCP is the [mcp] table.
	MCP       MCPConfig
	Context   ContextConfig
	Session   SessionConfig
	Log       LogConfig
	Telemetry TelemetryConfig
	Guard     GuardConfig
	Server    ServerConfig
}

// ServerConfig is the [server] table: `acpd serve`, ACP over HTTP and
// WebSocket (package session/server). Nothing listens unless `acpd serve`
// runs; the limits' defaults hold on a 2-core machine.
type ServerConfig struct {
	// Listen is host:port; "" means acpd serve has nowhere to listen.
	Listen string
	// TLSCert and TLSKey are PEM files (absolute paths), both or neither.
	// Without them only loopback addresses are served.
	TLSCert, TLSKey string
	// TokenFile holds the bearer token; "" means <dataDir>/server.token
	// unless TokenEnv names a variable.
	TokenFile string
	// TokenEnv names the environment variable holding the token; when set
	// it is used instead of any file.
	TokenEnv string
	// AllowedOrigins are the browser origins (scheme://host[:port]) whose
	// requests are let through; any other Origin header is refused.
	AllowedOrigins []string
	// AllowedHosts are further host names a request's Host may carry
	// besides IP literals, localhost and the listen host.
	AllowedHosts []string
	// MaxConnections bounds the ACP connections served at once;
	// MaxTCPConnections the TCP connections open at the listener (an HTTP/1.1
	// ACP connection holds one per open stream).
	MaxConnections    int
	MaxTCPConnections int
	// MaxSessionsPerConnection bounds the live sessions of one connection.
	MaxSessionsPerConnection int
	// MaxMessageBytes bounds one JSON-RPC message (a POST body, a frame).
	MaxMessageBytes int
	// MaxStreams bounds the SSE streams open on one ACP connection.
	MaxStreams int
	// HeaderTimeout bounds reading a request's headers; IdleTimeout ends an
	// ACP connection without streams or requests for that long.
	HeaderTimeout time.Duration
	IdleTimeout   time.Duration
	// AuthFailuresPerMinute is how many failed authentications one client
	// address may make per minute before it is refused (429) for a while.
	AuthFailuresPerMinute int
}

// DefaultTokenFile is the token file's name under the data directory when
// neither server.tokenFile nor server.tokenEnv is set.
const DefaultTokenFile = "server.token"

// GuardConfig is the [guard] table: what is `acpd guard`'s own (package
// session/agentguard). The loop guard's settings are [model]'s, as for acpd.
type GuardConfig struct {
	// CancelGrace is how long a turn the guard stopped waits for the
	// agent's answer to session/cancel before the guard answers the editor.
	CancelGrace time.Duration
	// ShutdownGrace is how long the agent has to exit once its stdin is
	// closed, and again after SIGTERM, before SIGTERM and then SIGKILL.
	ShutdownGrace time.Duration
	// Confine runs the agent in acpd's sandbox (acpd guard --confine;
	// package session/agentconfine).
	Confine bool
}

// TelemetryConfig is the [telemetry] table: OpenTelemetry export, off by
// default (package session/telemetry).
type TelemetryConfig struct {
	Enabled bool
	// Endpoint is the OTLP collector URL; "" defers to the OTEL_EXPORTER_OTLP_
	// endpoint variables, else localhost.
	Endpoint string
	// Protocol is grpc or http; "" (the default) lets
	// OTEL_EXPORTER_OTLP_PROTOCOL decide, else grpc (session/telemetry).
	Protocol string
	// LogPrompts adds prompt text and tool arguments to spans.
	LogPrompts bool
}

// ModelConfig is the [model] table.
type ModelConfig struct {
	Provider Provider
	// Name is the model id sent to the provider.
	Name    string
	BaseURL string
	// WireAPI is the openai provider's wire API: chat-completions (the
	// default) or responses.
	WireAPI string
	// Thinking is model.name's thinking settings (nil: none).
	Thinking *Thinking
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string
	// APIKey is read from the variable named by APIKeyEnv; it is never
	// accepted from a file and never printed.
	APIKey string
	// MaxToolCallsPerTurn is the per-turn tool-call cap; ≤ 0 disables it.
	MaxToolCallsPerTurn int
	// MaxToolCallsPerTurnExplicit is true when any layer above the defaults set
	// MaxToolCallsPerTurn, which turns the adaptive cap into a hard cap. It
	// depends on provenance, not on the value: an explicit 100 is still explicit.
	MaxToolCallsPerTurnExplicit bool
	// SkipLoopDetection skips the opt-in heuristic loop detectors.
	SkipLoopDetection bool
	// StuckWindow narrows the adaptive cap's stuck signal to the turn's
	// last StuckWindow tool calls; 0 (the default) keeps the reference's
	// whole-turn signal (loopdetect.Cap.StuckWindow).
	StuckWindow int
	// StuckSignal is what counts as a repeat for the stuck signal and the
	// global duplicate: "calls" (the reference) or "results"
	// (loopdetect.Cap.Signal).
	StuckSignal string
	// LoopRecovery is what they do when they fire: "stop" (the reference)
	// or "warn" (warn the model once, stop at the next firing;
	// loopdetect.Cap.Recovery).
	LoopRecovery   string
	MaxRetries     int
	RequestTimeout time.Duration
	// MaxTokens bounds a completion; 0 leaves it to the provider.
	MaxTokens int
	// Temperature is nil when unset (the provider's default applies).
	Temperature *float64
	// Script is the absolute path of the script for provider "script".
	Script string
	// SystemPrompt replaces the built-in system prompt when non-empty.
	SystemPrompt string
	// Models are further model ids offered in the session's model selector
	// (the configured Name is always offered first).
	Models []string
	// ContextWindow is the context window of Name in tokens; 0 takes it
	// from the known-model table (session/contextmgr), else 131072.
	ContextWindow int
	// ContextWindows are the windows of the selector's other models (and of
	// CompactionModel), by model id.
	ContextWindows map[string]int
	// CompactThreshold is the fraction of the window at which the history
	// is compacted before a model request, in (0, 1]; default 0.85.
	CompactThreshold float64
	// CompactionModel answers compaction summary requests; "" uses the
	// session's model.
	CompactionModel string
	// CacheControl is "auto", "on" or "off": whether requests carry
	// cache_control markers (auto: for the providers known to need them).
	CacheControl string
	// Price is what Name's tokens cost (nil: unknown); Prices are the
	// selector's other models' (and CompactionModel's), by model id.
	Price  *Price
	Prices map[string]Price
	// MaxTokensPerTurn bounds a turn's input plus output tokens over its
	// model requests; 0 (the default) sets no budget.
	MaxTokensPerTurn int
	// SessionTokenLimit refuses a request larger than this many tokens
	// after compaction (agent-features.md §1.11); 0 (the default): none.
	SessionTokenLimit int
	// MaxTokensPerTurnExplicit and SessionTokenLimitExplicit are true when
	// a layer above the defaults set the value (as for
	// MaxToolCallsPerTurnExplicit): an explicit 0 says "no budget" on
	// purpose, which `acpd config` shows.
	MaxTokensPerTurnExplicit  bool
	SessionTokenLimitExplicit bool
}

// Price is what a model's tokens cost, per million tokens.
type Price struct {
	Input, CachedInput, Output float64
	// CacheWrite is the price of input written to the provider's cache
	// (Anthropic bills it at 1.25× the input price); default Input.
	CacheWrite float64
	// Currency is an ISO 4217 code or another unit ("credits"); default USD.
	Currency string
}

// The values of tools.sandboxNetwork.
const (
	NetworkOpen  = "true"
	NetworkOff   = "false"
	NetworkProxy = "proxy"
)

// DefaultCurrency is a price's currency when none is given.
const DefaultCurrency = "USD"

// ModelNotConfiguredHint names the three ways to choose a model. `acpd
// doctor`, the prompt error of a session without a model and `acpd run`
// all say it.
const ModelNotConfiguredHint = "set [model] name in a config file, the OPENAI_MODEL environment variable, or the --model flag"

// ToolCapDisabled reports whether the per-turn tool-call cap is off
// (a configured value ≤ 0, explicit or not; loop-detection.md Decision 4).
func (m ModelConfig) ToolCapDisabled() bool { return m.MaxToolCallsPerTurn <= 0 }

// ToolsConfig is the [tools] table.
type ToolsConfig struct {
	ApprovalMode ApprovalMode
	// Exclude lists tool names that are not offered to the model.
	Exclude        []string
	ShellTimeout   time.Duration
	MaxOutputBytes int
	// RepeatedToolFailureGuard is the mode of the repeated-failure guard.
	RepeatedToolFailureGuard GuardMode
	// Sandbox confines run_shell_command with Landlock: "auto" (confine
	// when the kernel can, else warn and run unconfined), "required"
	// (refuse unconfined runs) or "off".
	Sandbox string
	// SandboxWritable are further absolute folders confined commands may write.
	SandboxWritable []string
	// SandboxNetwork is "true" (open), "false" (none) or "proxy" (only
	// through acpd's proxy). Its default is "true", or "proxy" when
	// AutoAllowConfined is set and no layer named the network.
	SandboxNetwork string
	// SandboxAllowedDomains are the hosts the proxy lets through without
	// asking: "github.com", "*.npmjs.org", "localhost:8080".
	SandboxAllowedDomains []string
	// AutoAllowConfined runs, in default and auto-edit mode, shell commands
	// the sandbox confines with secrets denied and the network only through
	// acpd's proxy without a permission request.
	AutoAllowConfined bool
	// SandboxPassEnv names variables commands inherit although acpd would
	// drop them (credentials, ACPD_*, secret-looking names).
	SandboxPassEnv []string
	// SandboxDenyRead adds absolute paths confined commands may not read
	// to DenyReadDefaults; an entry "!PATH" removes PATH from the defaults.
	SandboxDenyRead []string
	// DenyReadDefaults are the paths denied without configuration: the
	// user's credentials and acpd's own folders, found at Load from HOME,
	// the XDG folders and the resolved [session], [server] and [log] paths.
	DenyReadDefaults []string
	// WebFetchAllowPrivate lets web_fetch reach loopback and private
	// network addresses as it reaches public ones; false (the default)
	// asks the user every time, in every approval mode.
	WebFetchAllowPrivate bool
	// SubagentConcurrency bounds the agent calls of one model response
	// that run at once.
	SubagentConcurrency int
}

// ContextConfig is the [context] table: what the system prompt tells the
// model about its project.
type ContextConfig struct {
	// FileNames replaces the instruction file names (AGENTS.md, QWEN.md).
	FileNames []string
	// Environment adds the environment block (date, OS, shell, roots and
	// their git state); Instructions adds the instruction files.
	Environment  bool
	Instructions bool
}

// SessionConfig is the [session] table.
type SessionConfig struct {
	// DataDir is the absolute directory where sessions are persisted.
	DataDir string
	// CheckpointMaxBytes bounds the checkpoint store under DataDir: past it
	// the oldest sessions' checkpoints are removed (0: no bound).
	CheckpointMaxBytes int
}

// LogConfig is the [log] table.
type LogConfig struct {
	// Level is one of debug, info, warn, error.
	Level string
	// File, when set, receives the logs instead of stderr (absolute path).
	File string
	// Trace logs every JSON-RPC message (at debug level).
	Trace bool
}

// SlogLevel converts Level; an unknown level (prevented by Load) means info.
func (l LogConfig) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Default returns the built-in defaults. Session.DataDir is left empty here
// because its default depends on the environment; Load fills it in from
// $XDG_STATE_HOME or $HOME.
func Default() Config {
	return Config{
		Model: ModelConfig{
			Provider:            ProviderOpenAI,
			WireAPI:             "chat-completions",
			BaseURL:             "https://api.openai.com/v1",
			APIKeyEnv:           "OPENAI_API_KEY",
			MaxToolCallsPerTurn: DefaultMaxToolCallsPerTurn,
			SkipLoopDetection:   true,
			StuckSignal:         "calls",
			LoopRecovery:        "stop",
			MaxRetries:          3,
			RequestTimeout:      120 * time.Second,
			Models:              []string{},
			ContextWindows:      map[string]int{},
			CompactThreshold:    0.85,
			CacheControl:        "auto",
			Prices:              map[string]Price{},
		},
		Tools: ToolsConfig{
			ApprovalMode:             ApprovalDefault,
			Exclude:                  []string{},
			ShellTimeout:             120 * time.Second,
			MaxOutputBytes:           64 << 10,
			RepeatedToolFailureGuard: GuardShadow,
			Sandbox:                  "auto",
			SandboxWritable:          []string{},
			SandboxNetwork:           NetworkOpen,
			SandboxAllowedDomains:    []string{},
			SandboxPassEnv:           []string{},
			SandboxDenyRead:          []string{},
			SubagentConcurrency:      4,
		},
		MCP:       MCPConfig{Import: []string{"claude", "gemini", "codex"}},
		Context:   ContextConfig{FileNames: []string{}, Environment: true, Instructions: true},
		Session:   SessionConfig{CheckpointMaxBytes: 2 << 30},
		Log:       LogConfig{Level: "info"},
		Telemetry: TelemetryConfig{},
		Guard:     GuardConfig{CancelGrace: 2 * time.Second, ShutdownGrace: 3 * time.Second},
		Server: ServerConfig{
			AllowedOrigins:           []string{},
			AllowedHosts:             []string{},
			MaxConnections:           32,
			MaxTCPConnections:        256,
			MaxSessionsPerConnection: 64,
			MaxMessageBytes:          16 << 20,
			MaxStreams:               66,
			HeaderTimeout:            10 * time.Second,
			IdleTimeout:              10 * time.Minute,
			AuthFailuresPerMinute:    10,
		},
	}
}

// CredentialEnv lists the environment variables this configuration reads a
// credential from: model.apiKeyEnv, every [modelProviders] apiKeyEnv and
// server.tokenEnv. Commands acpd runs never inherit them (see the shell
// sandbox's environment policy), whatever their names.
func (c Config) CredentialEnv() []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	add(c.Model.APIKeyEnv)
	for _, p := range c.Providers {
		add(p.APIKeyEnv)
	}
	add(c.Server.TokenEnv)
	return out
}

// DenyRead is the effective list of paths confined commands may not read:
// the defaults without the ones tools.sandboxDenyRead removes ("!PATH"),
// then the ones it adds.
func (t ToolsConfig) DenyRead() []string {
	var out []string
	removed := func(p string) bool { return slices.Contains(t.SandboxDenyRead, "!"+p) }
	for _, p := range t.DenyReadDefaults {
		if !removed(p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range t.SandboxDenyRead {
		if !strings.HasPrefix(p, "!") && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// credentialPaths are the files and folders under the home folder that
// hold the user's credentials, denied to confined commands by default. The
// list is what attackers of developer machines take (SSH and cloud keys,
// package-registry and git tokens, browser profiles with their cookies,
// password stores) and what other agents' own credentials are kept in;
// paths under ~/.config are also looked up under $XDG_CONFIG_HOME.
var credentialPaths = []string{
	// Keys and cloud accounts.
	".ssh", ".gnupg", ".aws", ".azure", ".oci", ".config/gcloud", ".kube", ".docker/config.json",
	".config/containers/auth.json", ".config/rclone", ".s3cfg", ".boto", ".vault-token",
	".terraform.d/credentials.tfrc.json",
	// Git hosts and package registries.
	".git-credentials", ".config/git/credentials", ".config/gh", ".config/hub", ".config/github-copilot",
	".netrc", ".npmrc", ".yarnrc.yml", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials",
	// Databases.
	".pgpass", ".my.cnf",
	// Password stores and keyrings.
	".password-store", ".local/share/keyrings", ".config/op",
	// Browser profiles (cookies, saved passwords, session tokens).
	".mozilla", ".thunderbird", ".config/google-chrome", ".config/chromium", ".config/BraveSoftware", ".config/microsoft-edge",
	// Other agents' credentials.
	".claude/.credentials.json", ".codex/auth.json", ".gemini/oauth_creds.json", ".qwen/oauth_creds.json",
	".local/share/opencode/auth.json",
}

// denyReadDefaults lists the paths denied by default for this configuration:
// the credential paths under home (and $XDG_CONFIG_HOME), and acpd's own
// configuration folder, data folder (transcripts of every session,
// checkpoints, the default serve token), token file, log file and cache
// folder (the tool caches of every workspace; each session's own is
// granted back).
func denyReadDefaults(cfg *Config, getenv func(string) string) []string {
	var out []string
	add := func(p string) {
		if p != "" && filepath.IsAbs(p) && !slices.Contains(out, filepath.Clean(p)) {
			out = append(out, filepath.Clean(p))
		}
	}
	home := getenv("HOME")
	configHome := xdgDir(getenv, "XDG_CONFIG_HOME", ".config")
	for _, p := range credentialPaths {
		if home != "" {
			add(filepath.Join(home, p))
		}
		if rest, ok := strings.CutPrefix(p, ".config/"); ok && configHome != "" {
			add(filepath.Join(configHome, rest))
		}
	}
	add(UserDir(getenv))
	add(cfg.Session.DataDir)
	add(cfg.Server.TokenFile)
	add(cfg.Log.File)
	if d := xdgDir(getenv, "XDG_CACHE_HOME", ".cache"); d != "" {
		add(filepath.Join(d, "acpd"))
	}
	return out
}
