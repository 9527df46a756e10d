package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/hooks"
	"github.com/acpd/acpd/session/rules"
)

// field describes one configuration key. A single table of fields drives
// file decoding, environment variables, flags, provenance and `acpd config`,
// so the four can never disagree about a key.
type field struct {
	table, name string   // "model", "maxToolCallsPerTurn"
	envs        []string // environment variables, in the order they are read
	flag        string   // command-line flag name without dashes; "" for none
	usage       string   // one-line description for flag help
	boolFlag    bool     // the flag may be given without a value
	flagType    string   // the value's kind in help: string, int, path, duration
	values      []string // an enum's values, offered by shell completion
	// group, when set, is the flag's group; otherwise the table's (see
	// FlagGroup): the commands that offer a flag are those of its group.
	group FlagGroup
	// negated makes the flag set the key's opposite: --loop-detection sets
	// skipLoopDetection = false. A negated flag is a bool flag.
	negated bool
	// oldFlags are earlier names of the flag, still accepted with the
	// key's own meaning (never negated) and hidden from help.
	oldFlags []string

	// decode parses raw (a TOML value, or a string when fromText) and stores
	// it in c. Relative paths are resolved against base.
	decode func(c *Config, raw any, fromText bool, r resolver) error
	// encode renders the current value as a TOML literal; ok is false when
	// the value is unset.
	encode func(c *Config) (lit string, ok bool)
}

func (f *field) key() string { return f.table + "." + f.name }

// resolver turns a user-given path into an absolute one.
type resolver struct {
	base string // directory relative paths are taken from
	home string // for a leading "~/"
	file string // the file being read ("" for env and flags)
}

func (r resolver) path(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if r.home == "" {
			return "", errors.New("cannot expand ~: HOME is not set")
		}
		p = filepath.Join(r.home, p[1:])
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.base, p)
	}
	return filepath.Clean(p), nil
}

var tables = []string{"model", "tools", "permissions", "hooks", "mcp", "context", "session", "log", "telemetry", "guard", "server", modelProvidersTable}

// fields lists every key; the order is the order of `acpd config` output.
// Built at first use: the table's rows and closures are several KB that
// acpd's start-up (and each sandbox helper) need not allocate before main.
var fields = sync.OnceValue(func() []*field {
	return []*field{
		enumField("model", "provider", []string{string(ProviderOpenAI), string(ProviderAnthropic), string(ProviderGemini), string(ProviderScript)},
			func(c *Config) *string { return (*string)(&c.Model.Provider) },
			[]string{"ACPD_PROVIDER"}, "provider", "model provider: openai, anthropic, gemini or script"),
		enumField("model", "wireApi", WireAPIs, func(c *Config) *string { return &c.Model.WireAPI },
			[]string{"ACPD_WIRE_API"}, "wire-api", "wire API of the openai provider: chat-completions or responses"),
		thinkingField(),
		stringField("model", "name", func(c *Config) *string { return &c.Model.Name },
			[]string{"OPENAI_MODEL"}, "model", "model name"),
		baseURLField(),
		stringField("model", "apiKeyEnv", func(c *Config) *string { return &c.Model.APIKeyEnv },
			nil, "", ""),
		maxToolCallsField(),
		loopDetectionField(),
		loopFlag(stuckWindowField()),
		loopFlag(enumField("model", "stuckSignal", []string{string(loopdetect.SignalCalls), string(loopdetect.SignalResults)},
			func(c *Config) *string { return &c.Model.StuckSignal },
			[]string{"ACPD_STUCK_SIGNAL"}, "stuck-signal", "what counts as a repeated tool call: calls or results (same call, same result)")),
		loopFlag(enumField("model", "loopRecovery", []string{string(loopdetect.RecoveryStop), string(loopdetect.RecoveryWarn)},
			func(c *Config) *string { return &c.Model.LoopRecovery },
			[]string{"ACPD_LOOP_RECOVERY"}, "loop-recovery", "when a turn repeats itself: stop, or warn the model once, then stop")),
		intField("model", "maxRetries", 0, func(c *Config) *int { return &c.Model.MaxRetries },
			nil, "", ""),
		durationField("model", "requestTimeout", func(c *Config) *time.Duration { return &c.Model.RequestTimeout },
			nil, "", ""),
		stringListField("model", "models", func(c *Config) *[]string { return &c.Model.Models },
			nil, "", ""),
		intField("model", "contextWindow", 0, func(c *Config) *int { return &c.Model.ContextWindow },
			nil, "context-window", "context window of the model in tokens (default: known model table, else 131072)"),
		contextWindowsField(),
		compactThresholdField(),
		stringField("model", "compactionModel", func(c *Config) *string { return &c.Model.CompactionModel },
			nil, "", ""),
		enumField("model", "cacheControl", []string{"auto", "on", "off"}, func(c *Config) *string { return &c.Model.CacheControl },
			[]string{"ACPD_CACHE_CONTROL"}, "", ""),
		priceField(),
		pricesField(),
		budgetField("maxTokensPerTurn", func(c *Config) (*int, bool) { return &c.Model.MaxTokensPerTurn, c.Model.MaxTokensPerTurnExplicit },
			"ACPD_MAX_TOKENS_PER_TURN", "max-tokens-per-turn", "token budget of a turn: input plus output tokens over its model requests; 0 sets none (the default)"),
		budgetField("sessionTokenLimit", func(c *Config) (*int, bool) { return &c.Model.SessionTokenLimit, c.Model.SessionTokenLimitExplicit },
			"ACPD_SESSION_TOKEN_LIMIT", "session-token-limit", "refuse a prompt whose request is larger than this many tokens after compaction; 0 sets none (the default)"),
		intField("model", "maxTokens", 0, func(c *Config) *int { return &c.Model.MaxTokens },
			nil, "", ""),
		temperatureField(),
		pathField("model", "script", func(c *Config) *string { return &c.Model.Script },
			[]string{"ACPD_MODEL_SCRIPT"}, "model-script", "scripted model responses (JSONL) for provider script"),
		stringField("model", "systemPrompt", func(c *Config) *string { return &c.Model.SystemPrompt },
			nil, "", ""),

		enumField("tools", "approvalMode",
			[]string{string(ApprovalPlan), string(ApprovalDefault), string(ApprovalAutoEdit), string(ApprovalYolo)},
			func(c *Config) *string { return (*string)(&c.Tools.ApprovalMode) },
			[]string{"ACPD_APPROVAL_MODE"}, "approval-mode", "approval mode: plan, default, auto-edit or yolo"),
		stringListField("tools", "exclude", func(c *Config) *[]string { return &c.Tools.Exclude },
			nil, "", ""),
		durationField("tools", "shellTimeout", func(c *Config) *time.Duration { return &c.Tools.ShellTimeout },
			nil, "", ""),
		intField("tools", "maxOutputBytes", 1, func(c *Config) *int { return &c.Tools.MaxOutputBytes },
			nil, "", ""),
		enumField("tools", "repeatedToolFailureGuard",
			[]string{string(GuardOff), string(GuardShadow), string(GuardWarn), string(GuardEnforce)},
			func(c *Config) *string { return (*string)(&c.Tools.RepeatedToolFailureGuard) },
			[]string{"ACPD_REPEATED_TOOL_FAILURE_GUARD"}, "", ""),
		enumField("tools", "sandbox", []string{"auto", "required", "off"},
			func(c *Config) *string { return &c.Tools.Sandbox },
			[]string{"ACPD_SANDBOX"}, "sandbox", "confine shell commands with Landlock: auto, required or off"),
		pathListField("tools", "sandboxWritable", func(c *Config) *[]string { return &c.Tools.SandboxWritable }),
		networkField(),
		allowedDomainsField(),
		boolField("tools", "autoAllowConfined", func(c *Config) *bool { return &c.Tools.AutoAllowConfined },
			[]string{"ACPD_AUTO_ALLOW_CONFINED"}, "auto-allow-confined", "run shell commands without asking when the sandbox confines them with secrets denied and the network only through acpd's proxy"),
		passEnvField(),
		denyReadField(),
		boolField("tools", "webFetchAllowPrivate", func(c *Config) *bool { return &c.Tools.WebFetchAllowPrivate },
			[]string{"ACPD_WEB_FETCH_ALLOW_PRIVATE"}, "", ""),
		intField("tools", "subagentConcurrency", 1, func(c *Config) *int { return &c.Tools.SubagentConcurrency },
			[]string{"ACPD_SUBAGENT_CONCURRENCY"}, "", ""),

		rulesField(rules.Allow),
		rulesField(rules.Ask),
		rulesField(rules.Deny),
		boolField("permissions", "claudeUserSettings", func(c *Config) *bool { return &c.Permissions.ClaudeUserSettings },
			nil, "", ""),
		hookField(hooks.PreToolUse),
		hookField(hooks.PostToolUse),
		hookField(hooks.UserPromptSubmit),
		hookField(hooks.Stop),
		hookField(hooks.SubagentStop),
		hookField(hooks.SessionStart),
		hookField(hooks.SessionEnd),
		hookField(hooks.PreCompact),
		hookField(hooks.Notification),

		mcpImportField(),

		fileNamesField(),
		boolField("context", "environment", func(c *Config) *bool { return &c.Context.Environment },
			nil, "", ""),
		boolField("context", "instructions", func(c *Config) *bool { return &c.Context.Instructions },
			nil, "", ""),

		pathField("session", "dataDir", func(c *Config) *string { return &c.Session.DataDir },
			[]string{"ACPD_DATA_DIR"}, "data-dir", "folder of the sessions, checkpoints and statistics (default: $XDG_STATE_HOME/acpd, else ~/.local/state/acpd)"),
		intField("session", "checkpointMaxBytes", 0, func(c *Config) *int { return &c.Session.CheckpointMaxBytes },
			[]string{"ACPD_CHECKPOINT_MAX_BYTES"}, "", ""),

		enumField("log", "level", []string{"debug", "info", "warn", "error"},
			func(c *Config) *string { return &c.Log.Level },
			[]string{"ACPD_LOG_LEVEL"}, "log-level", "log level: debug, info, warn or error"),
		pathField("log", "file", func(c *Config) *string { return &c.Log.File },
			[]string{"ACPD_LOG_FILE"}, "log-file", "write logs to this file instead of stderr"),
		boolField("log", "trace", func(c *Config) *bool { return &c.Log.Trace },
			[]string{"ACPD_TRACE"}, "trace", "log every JSON-RPC message at debug level"),

		boolField("telemetry", "enabled", func(c *Config) *bool { return &c.Telemetry.Enabled },
			[]string{"ACPD_TELEMETRY"}, "telemetry", "export traces and metrics over OTLP"),
		endpointField(),
		// "" is the default: OTEL_EXPORTER_OTLP_PROTOCOL decides, else grpc.
		enumField("telemetry", "protocol", []string{"", "grpc", "http"}, func(c *Config) *string { return &c.Telemetry.Protocol },
			[]string{"ACPD_TELEMETRY_PROTOCOL"}, "telemetry-protocol", "OTLP protocol: grpc or http (default: OTEL_EXPORTER_OTLP_PROTOCOL, else grpc)"),
		boolField("telemetry", "logPrompts", func(c *Config) *bool { return &c.Telemetry.LogPrompts },
			nil, "", ""),

		durationField("guard", "cancelGrace", func(c *Config) *time.Duration { return &c.Guard.CancelGrace },
			[]string{"ACPD_GUARD_CANCEL_GRACE"}, "guard-cancel-grace", "how long a turn the guard stopped waits for the agent's cancelled answer"),
		boolField("guard", "confine", func(c *Config) *bool { return &c.Guard.Confine },
			[]string{"ACPD_GUARD_CONFINE"}, "confine", "run the agent's whole process tree in acpd's sandbox ([tools] sandbox*), with its own state folders, credential file, key variable and provider host allowed"),
		durationField("guard", "shutdownGrace", func(c *Config) *time.Duration { return &c.Guard.ShutdownGrace },
			[]string{"ACPD_GUARD_SHUTDOWN_GRACE"}, "guard-shutdown-grace", "how long the agent may take to exit after its input closes, then after SIGTERM"),

		serveFlag(listenField()),
		serveFlag(pathField("server", "tlsCert", func(c *Config) *string { return &c.Server.TLSCert },
			[]string{"ACPD_TLS_CERT"}, "tls-cert", "TLS certificate (PEM) of acpd serve; with --tls-key, lets it listen beyond loopback")),
		serveFlag(pathField("server", "tlsKey", func(c *Config) *string { return &c.Server.TLSKey },
			[]string{"ACPD_TLS_KEY"}, "tls-key", "TLS private key (PEM) of acpd serve")),
		serveFlag(pathField("server", "tokenFile", func(c *Config) *string { return &c.Server.TokenFile },
			[]string{"ACPD_TOKEN_FILE"}, "token-file", "file holding the bearer token clients of acpd serve send (default: <dataDir>/server.token)")),
		tokenEnvField(),
		originsField(),
		hostsField(),
		intField("server", "maxConnections", 1, func(c *Config) *int { return &c.Server.MaxConnections }, nil, "", ""),
		intField("server", "maxTcpConnections", 1, func(c *Config) *int { return &c.Server.MaxTCPConnections }, nil, "", ""),
		intField("server", "maxSessionsPerConnection", 1, func(c *Config) *int { return &c.Server.MaxSessionsPerConnection }, nil, "", ""),
		intField("server", "maxMessageBytes", 4096, func(c *Config) *int { return &c.Server.MaxMessageBytes }, nil, "", ""),
		intField("server", "maxStreams", 2, func(c *Config) *int { return &c.Server.MaxStreams }, nil, "", ""),
		durationField("server", "headerTimeout", func(c *Config) *time.Duration { return &c.Server.HeaderTimeout }, nil, "", ""),
		durationField("server", "idleTimeout", func(c *Config) *time.Duration { return &c.Server.IdleTimeout }, nil, "", ""),
		intField("server", "authFailuresPerMinute", 1, func(c *Config) *int { return &c.Server.AuthFailuresPerMinute }, nil, "", ""),
	}
})

func lookupField(table, name string) *field {
	for _, f := range fields() {
		if f.table == table && f.name == name {
			return f
		}
	}
	return nil
}

// FlagGroup sorts the configuration flags by what they configure; each
// command offers the groups it reads, and its help lists them under their
// titles.
type FlagGroup int

const (
	// GroupGlobal flags apply to every command: the data folder, logging.
	GroupGlobal FlagGroup = iota + 1
	GroupModel
	GroupTools
	// GroupLoop is the loop guard's: the agent's turns, acpd guard, and the
	// what-if replay of acpd stats.
	GroupLoop
	GroupTelemetry
	GroupGuard
	GroupServer
)

// Title is the group's heading in help.
func (g FlagGroup) Title() string {
	switch g {
	case GroupGlobal:
		return "Global flags"
	case GroupModel:
		return "Model flags"
	case GroupTools:
		return "Tool flags"
	case GroupLoop:
		return "Loop protection flags"
	case GroupTelemetry:
		return "Telemetry flags"
	case GroupGuard:
		return "Guard flags"
	case GroupServer:
		return "Server flags"
	}
	return "Flags"
}

// tableGroups are the groups of the tables' flags, unless a field says
// otherwise.
var tableGroups = map[string]FlagGroup{
	"model": GroupModel, "tools": GroupTools, "permissions": GroupTools, "hooks": GroupTools, "mcp": GroupTools, "context": GroupTools, "session": GroupGlobal, "log": GroupGlobal,
	"telemetry": GroupTelemetry, "guard": GroupGuard, "server": GroupServer,
}

// Flag describes a command-line flag that sets a configuration key.
type Flag struct {
	Name  string // without dashes, e.g. "max-tool-calls-per-turn"
	Key   string // e.g. "model.maxToolCallsPerTurn"
	Usage string
	// Bool flags may be given without a value (--trace).
	Bool bool
	// Type is the kind of value help shows after the name: string, int,
	// path, duration ("" for a bool flag).
	Type string
	// Default is the built-in default as help shows it; "" when there is
	// none, or the usage says it in words.
	Default string
	// Values are an enum's values, for shell completion.
	Values []string
	Group  FlagGroup
	// Hidden marks an old name kept working.
	Hidden bool
}

// Flags lists the flags that set configuration keys, for the command to
// register. Their raw values go back to Load in LoadOptions.Flags. The
// list is shared: callers must not change it.
func Flags() []Flag { return flagList() }

// flagList is worked out once: each command registers the flags of its
// groups, and the defaults' text comes from encoding every field.
var flagList = sync.OnceValue(func() []Flag {
	var out []Flag
	defaults := Default()
	for _, f := range fields() {
		if f.flag == "" {
			continue
		}
		fl := Flag{Name: f.flag, Key: f.key(), Usage: f.usage, Bool: f.boolFlag, Type: f.flagType,
			Values: f.values, Group: f.group}
		if fl.Group == 0 {
			fl.Group = tableGroups[f.table]
		}
		if fl.Bool {
			fl.Type = ""
		}
		if lit, ok := f.encode(&defaults); ok && !strings.Contains(f.usage, "(default") {
			if s, err := strconv.Unquote(lit); err == nil {
				lit = s
			}
			if f.negated {
				lit = strconv.FormatBool(lit != "true")
			}
			fl.Default = lit
		}
		out = append(out, fl)
		for _, old := range f.oldFlags {
			o := fl
			o.Name, o.Hidden, o.Usage = old, true, "old name of --"+f.flag
			if f.negated {
				o.Usage = "old name of --" + f.flag + ", meaning its opposite"
				o.Default = strconv.FormatBool(o.Default != "true")
			}
			out = append(out, o)
		}
	}
	return out
})

// tomlType names the TOML type of a decoded value, for error messages.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any, []map[string]any:
		return "array"
	case map[string]any:
		return "table"
	}
	return "datetime"
}

func typeErr(want string, v any) error {
	switch v := v.(type) {
	case string:
		return fmt.Errorf("must be %s, got string %s", want, quote(v))
	case int64, float64, bool:
		return fmt.Errorf("must be %s, got %s %v", want, tomlType(v), v)
	}
	return fmt.Errorf("must be %s, got %s", want, tomlType(v))
}

func stringField(table, name string, acc func(*Config) *string, envs []string, flag, usage string) *field {
	return &field{
		table: table, name: name, envs: envs, flag: flag, usage: usage, flagType: "string",
		decode: func(c *Config, raw any, _ bool, _ resolver) error {
			s, ok := raw.(string)
			if !ok {
				return typeErr("a string", raw)
			}
			*acc(c) = s
			return nil
		},
		encode: func(c *Config) (string, bool) { return quote(*acc(c)), true },
	}
}

func enumField(table, name string, valid []string, acc func(*Config) *string, envs []string, flag, usage string) *field {
	return &field{
		table: table, name: name, envs: envs, flag: flag, usage: usage, flagType: "string", values: valid,
		decode: func(c *Config, raw any, _ bool, _ resolver) error {
			s, ok := raw.(string)
			if !ok {
				return typeErr("a string", raw)
			}
			if !slices.Contains(valid, s) {
				q := make([]string, len(valid))
				for i, v := range valid {
					q[i] = quote(v)
				}
				return fmt.Errorf("invalid value %s: must be one of %s", quote(s), strings.Join(q, ", "))
			}
			*acc(c) = s
			return nil
		},
		encode: func(c *Config) (string, bool) { return quote(*acc(c)), true },
	}
}

func pathField(table, name string, acc func(*Config) *string, envs []string, flag, usage string) *field {
	return &field{
		table: table, name: name, envs: envs, flag: flag, usage: usage, flagType: "path",
		decode: func(c *Config, raw any, _ bool, r resolver) error {
			s, ok := raw.(string)
			if !ok {
				return typeErr("a path string", raw)
			}
			p, err := r.path(s)
			if err != nil {
				return err
			}
			*acc(c) = p
			return nil
		},
		encode: func(c *Config) (string, bool) {
			v := *acc(c)
			return quote(v), v != ""
		},
	}
}

func boolField(table, name string, acc func(*Config) *bool, envs []string, flag, usage string) *field {
	return &field{
		table: table, name: name, envs: envs, flag: flag, usage: usage, boolFlag: flag != "",
		decode: func(c *Config, raw any, fromText bool, _ resolver) error {
			if s, ok := raw.(string); ok && fromText {
				b, err := strconv.ParseBool(strings.TrimSpace(s))
				if err != nil {
					return fmt.Errorf("must be true or false, got %s", quote(s))
				}
				*acc(c) = b
				return nil
			}
			b, ok := raw.(bool)
			if !ok {
				return typeErr("a boolean", raw)
			}
			*acc(c) = b
			return nil
		},
		encode: func(c *Config) (string, bool) { return strconv.FormatBool(*acc(c)), true },
	}
}

// integral accepts TOML integers, floats with an integral value (JSON-style
// settings such as 100.0 mean 100) and, from env or flags, decimal text.
func integral(raw any, fromText bool) (int, bool) {
	if s, ok := raw.(string); ok && fromText {
		s = strings.TrimSpace(s)
		if n, err := strconv.ParseInt(s, 10, 0); err == nil {
			return int(n), true
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, false
		}
		raw = f
	}
	switch v := raw.(type) {
	case int64:
		if v < math.MinInt || v > math.MaxInt {
			return 0, false
		}
		return int(v), true
	case float64:
		if v != math.Trunc(v) || math.IsInf(v, 0) || v < math.MinInt64 || v >= math.MaxInt64 {
			return 0, false
		}
		return int(v), true
	}
	return 0, false
}

func intField(table, name string, minimum int, acc func(*Config) *int, envs []string, flag, usage string) *field {
	return &field{
		table: table, name: name, envs: envs, flag: flag, usage: usage, flagType: "int",
		decode: func(c *Config, raw any, fromText bool, _ resolver) error {
			n, ok := integral(raw, fromText)
			if !ok {
				return typeErr("an integer", raw)
			}
			if n < minimum {
				return fmt.Errorf("must be at least %d, got %d", minimum, n)
			}
			*acc(c) = n
			return nil
		},
		encode: func(c *Config) (string, bool) { return strconv.Itoa(*acc(c)), true },
	}
}

// maxToolCallsField keeps qwen-code's exact error text, which users may
// search for; every value is accepted, ≤ 0 meaning "no cap".
func maxToolCallsField() *field {
	return &field{
		table: "model", name: "maxToolCallsPerTurn",
		envs: []string{"ACPD_MAX_TOOL_CALLS_PER_TURN"}, flag: "max-tool-calls-per-turn", flagType: "int", group: GroupLoop,
		usage: "hard cap on tool calls per turn; 0 or less disables it (default: adaptive 100)",
		decode: func(c *Config, raw any, fromText bool, _ resolver) error {
			n, ok := integral(raw, fromText)
			if !ok {
				got := rawText(raw)
				if s, ok := raw.(string); ok && !fromText {
					got = quote(s)
				}
				return fullError{"Invalid maxToolCallsPerTurn: must be an integer, got " + got}
			}
			c.Model.MaxToolCallsPerTurn = n
			return nil
		},
		encode: func(c *Config) (string, bool) { return strconv.Itoa(c.Model.MaxToolCallsPerTurn), true },
	}
}

// rawText shows a value the way the user wrote it (1.5, not 1.500000).
func rawText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		switch {
		case math.IsInf(v, 1):
			return "inf" // as TOML spells it
		case math.IsInf(v, -1):
			return "-inf"
		case math.IsNaN(v):
			return "nan"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case int64, bool:
		return fmt.Sprint(v)
	}
	if t := tomlType(v); t == "array" {
		return "an array"
	} else {
		return "a " + t
	}
}

func durationField(table, name string, acc func(*Config) *time.Duration, envs []string, flag, usage string) *field {
	return &field{
		table: table, name: name, envs: envs, flag: flag, usage: usage, flagType: "duration",
		decode: func(c *Config, raw any, _ bool, _ resolver) error {
			s, ok := raw.(string)
			if !ok {
				return typeErr(`a duration string such as "120s"`, raw)
			}
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf(`must be a duration such as "120s" or "2m", got %s`, quote(s))
			}
			if d <= 0 {
				return fmt.Errorf("must be positive, got %s", quote(s))
			}
			*acc(c) = d
			return nil
		},
		encode: func(c *Config) (string, bool) { return quote(acc(c).String()), true },
	}
}

// decodeFloat reads a number: a TOML float or integer, or (from the
// environment or a flag) its text.
func decodeFloat(raw any, fromText bool) (float64, error) {
	switch v := raw.(type) {
	case float64:
		return v, nil
	case int64:
		return float64(v), nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !fromText || err != nil {
			return 0, typeErr("a number", raw)
		}
		return f, nil
	}
	return 0, typeErr("a number", raw)
}

// encodeFloat renders f as a TOML float literal (always with a point).
func encodeFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func temperatureField() *field {
	return &field{
		table: "model", name: "temperature",
		decode: func(c *Config, raw any, fromText bool, _ resolver) error {
			t, err := decodeFloat(raw, fromText)
			if err != nil {
				return err
			}
			if math.IsNaN(t) || t < 0 || t > 2 {
				return fmt.Errorf("must be between 0 and 2, got %s", rawText(t))
			}
			c.Model.Temperature = &t
			return nil
		},
		encode: func(c *Config) (string, bool) {
			if c.Model.Temperature == nil {
				return "", false
			}
			return encodeFloat(*c.Model.Temperature), true
		},
	}
}

func stringListField(table, name string, acc func(*Config) *[]string, envs []string, flag, usage string) *field {
	return &field{
		table: table, name: name, envs: envs, flag: flag, usage: usage,
		decode: func(c *Config, raw any, fromText bool, _ resolver) error {
			if s, ok := raw.(string); ok && fromText {
				out := []string{}
				for part := range strings.SplitSeq(s, ",") {
					if part = strings.TrimSpace(part); part != "" {
						out = append(out, part)
					}
				}
				*acc(c) = out
				return nil
			}
			list, ok := raw.([]any)
			if !ok {
				return typeErr("an array of strings", raw)
			}
			out := make([]string, 0, len(list))
			for i, el := range list {
				s, ok := el.(string)
				if !ok {
					return fmt.Errorf("element %d: %w", i, typeErr("a string", el))
				}
				out = append(out, s)
			}
			*acc(c) = out
			return nil
		},
		encode: func(c *Config) (string, bool) {
			list := *acc(c)
			q := make([]string, len(list))
			for i, s := range list {
				q[i] = quote(s)
			}
			return "[" + strings.Join(q, ", ") + "]", true
		},
	}
}

// pathListField is an array of paths, each resolved like a path field
// (relative to the file, "~/" from HOME). File only: no env, no flag.
func pathListField(table, name string, acc func(*Config) *[]string) *field {
	list := stringListField(table, name, acc, nil, "", "")
	decode := list.decode
	list.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		for i, p := range *acc(c) {
			if p == "" {
				return fmt.Errorf("element %d: must not be empty", i)
			}
			abs, err := r.path(p)
			if err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
			(*acc(c))[i] = abs
		}
		return nil
	}
	return list
}

// quote writes a TOML basic string. Go's strconv.Quote is not usable: its
// \x escapes are not valid TOML.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// compactThresholdField is model.compactThreshold: a fraction in (0, 1].
func compactThresholdField() *field {
	return &field{
		table: "model", name: "compactThreshold",
		decode: func(c *Config, raw any, fromText bool, _ resolver) error {
			t, err := decodeFloat(raw, fromText)
			if err != nil {
				return err
			}
			if math.IsNaN(t) || t <= 0 || t > 1 {
				return fmt.Errorf("must be greater than 0 and at most 1, got %s", rawText(t))
			}
			c.Model.CompactThreshold = t
			return nil
		},
		encode: func(c *Config) (string, bool) {
			return encodeFloat(c.Model.CompactThreshold), true
		},
	}
}

// contextWindowsField is model.contextWindows: a table of model id →
// window in tokens (TOML `contextWindows = { "gpt-4o" = 128000 }`), or
// "id=tokens,id=tokens" from the environment or a flag.
func contextWindowsField() *field {
	return &field{
		table: "model", name: "contextWindows",
		decode: func(c *Config, raw any, fromText bool, _ resolver) error {
			out := map[string]int{}
			set := func(id string, v any, text bool) error {
				n, ok := integral(v, text)
				if !ok {
					return fmt.Errorf("model %q: %w", id, typeErr("an integer", v))
				}
				if n < 1 {
					return fmt.Errorf("model %q: must be at least 1, got %d", id, n)
				}
				out[id] = n
				return nil
			}
			switch v := raw.(type) {
			case map[string]any:
				for id, w := range v {
					if err := set(id, w, false); err != nil {
						return err
					}
				}
			case string:
				if !fromText {
					return typeErr("a table of model ids to token counts", raw)
				}
				for part := range strings.SplitSeq(v, ",") {
					if part = strings.TrimSpace(part); part == "" {
						continue
					}
					id, n, ok := strings.Cut(part, "=")
					if !ok || strings.TrimSpace(id) == "" {
						return fmt.Errorf("%q: want model=tokens", part)
					}
					if err := set(strings.TrimSpace(id), strings.TrimSpace(n), true); err != nil {
						return err
					}
				}
			default:
				return typeErr("a table of model ids to token counts", raw)
			}
			c.Model.ContextWindows = out
			return nil
		},
		encode: func(c *Config) (string, bool) {
			ids := make([]string, 0, len(c.Model.ContextWindows))
			for id := range c.Model.ContextWindows {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			parts := make([]string, len(ids))
			for i, id := range ids {
				parts[i] = quote(id) + " = " + strconv.Itoa(c.Model.ContextWindows[id])
			}
			return "{" + strings.Join(parts, ", ") + "}", true
		},
	}
}

// fileNamesField is context.fileNames: instruction file names looked up in
// every folder from the git root down to the workspace root. Decision: each
// is a plain file name — "" would name the folder itself and "a/b" or ".."
// would read outside the folders walked — so those are configuration
// errors rather than a warning on every session/new.
func fileNamesField() *field {
	f := stringListField("context", "fileNames", func(c *Config) *[]string { return &c.Context.FileNames },
		nil, "", "")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		for i, n := range c.Context.FileNames {
			if n == "" || n == "." || n == ".." || strings.ContainsAny(n, `/\`) {
				return fmt.Errorf("element %d: must be a file name without a folder, got %s", i, quote(n))
			}
		}
		return nil
	}
	return f
}

// baseURLField is model.baseUrl: an http or https URL with a host. A typo
// in the scheme (htp://) would otherwise pass every check until the first
// request failed.
func baseURLField() *field {
	f := stringField("model", "baseUrl", func(c *Config) *string { return &c.Model.BaseURL },
		[]string{"OPENAI_BASE_URL"}, "base-url", "the provider's API base URL")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		if b := c.Model.BaseURL; b != "" {
			u, err := url.Parse(b)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("must be an http or https URL such as https://api.openai.com/v1, got %s", quote(b))
			}
		}
		return nil
	}
	return f
}

// endpointField is telemetry.endpoint: the OTLP collector's URL. The
// exporters drop a URL they cannot parse and fall back to localhost with
// only a line on stderr, so a bad value is a configuration error here. A
// bare host:port is taken as http://host:port, as the exporter does.
func endpointField() *field {
	f := stringField("telemetry", "endpoint", func(c *Config) *string { return &c.Telemetry.Endpoint },
		[]string{"ACPD_TELEMETRY_ENDPOINT"}, "telemetry-endpoint", "OTLP collector URL (default: OTEL_EXPORTER_OTLP_ENDPOINT, else localhost)")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		e := c.Telemetry.Endpoint
		if e == "" {
			return nil
		}
		full := e
		if !strings.Contains(full, "://") {
			full = "http://" + full
		}
		u, err := url.Parse(full)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("must be an http or https URL such as http://localhost:4317, got %s", quote(e))
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("must be an http or https URL such as http://localhost:4317, got %s (port %s)", quote(e), p)
			}
		}
		return nil
	}
	return f
}

// loopDetectionField is model.skipLoopDetection. Its flag says it the
// positive way, --loop-detection, as "skip … (default true)" made users
// write --skip-loop-detection=false to turn something on; the old flag
// keeps working, unlisted. The key and its variable keep the reference's
// name, which qwen-code's users know.
func loopDetectionField() *field {
	f := boolField("model", "skipLoopDetection", func(c *Config) *bool { return &c.Model.SkipLoopDetection },
		[]string{"ACPD_SKIP_LOOP_DETECTION"}, "loop-detection",
		"also stop a turn when one (tool, args) call repeats 6 times (sets skipLoopDetection = false)")
	f.negated, f.oldFlags, f.group = true, []string{"skip-loop-detection"}, GroupLoop
	return f
}

// stuckWindowField is model.stuckWindow: 0 (the whole turn) or a window of
// the last N calls. Decision: a window smaller than the stuck threshold can
// never hold that many repeats of one call, so it would silently switch the
// adaptive cap's stuck halt off (turns would run on to the backstop); it is
// refused, naming the threshold.
func stuckWindowField() *field {
	f := intField("model", "stuckWindow", 0, func(c *Config) *int { return &c.Model.StuckWindow },
		[]string{"ACPD_STUCK_WINDOW"}, "stuck-window", "adaptive cap: judge 'stuck' on the last N tool calls only (0: the whole turn)")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		if w := c.Model.StuckWindow; w > 0 && w < loopdetect.GlobalDuplicateThreshold {
			return fmt.Errorf("must be 0 (the whole turn) or at least %d (the repeats of one call that mean stuck), got %d",
				loopdetect.GlobalDuplicateThreshold, w)
		}
		return nil
	}
	return f
}

// decodePrice reads one price table: input and output (per million
// tokens) are required, cachedInput defaults to input (no discount known)
// and currency to USD.
func decodePrice(raw any) (Price, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return Price{}, typeErr("a table with input, cachedInput, output and currency", raw)
	}
	p := Price{Currency: DefaultCurrency}
	var seen []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		var dst *float64
		switch k {
		case "input":
			dst = &p.Input
		case "cachedInput":
			dst = &p.CachedInput
		case "output":
			dst = &p.Output
		case "cacheWrite":
			dst = &p.CacheWrite
		case "currency":
			c, ok := v.(string)
			if !ok || strings.TrimSpace(c) == "" {
				return Price{}, fmt.Errorf("currency: must be a non-empty string such as \"USD\", got %s", rawText(v))
			}
			p.Currency = strings.TrimSpace(c)
			continue
		default:
			return Price{}, fmt.Errorf("unknown key %s: want input, cachedInput, cacheWrite, output or currency", quote(k))
		}
		f, err := decodeFloat(v, false)
		if err != nil {
			return Price{}, fmt.Errorf("%s: %w", k, err)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return Price{}, fmt.Errorf("%s: must be a price per million tokens of at least 0, got %s", k, rawText(f))
		}
		*dst = f
		seen = append(seen, k)
	}
	for _, k := range []string{"input", "output"} {
		if !slices.Contains(seen, k) {
			return Price{}, fmt.Errorf("%s is required (the price per million tokens)", k)
		}
	}
	if !slices.Contains(seen, "cachedInput") {
		p.CachedInput = p.Input
	}
	if !slices.Contains(seen, "cacheWrite") {
		p.CacheWrite = p.Input
	}
	return p, nil
}

// encodePrice renders p as an inline TOML table.
func encodePrice(p Price) string {
	return fmt.Sprintf("{input = %s, cachedInput = %s, cacheWrite = %s, output = %s, currency = %s}",
		encodeFloat(p.Input), encodeFloat(p.CachedInput), encodeFloat(p.CacheWrite), encodeFloat(p.Output), quote(p.Currency))
}

// budgetField is a token budget of [model]: unset by default, 0 or more
// when a layer sets it (0 explicitly: no budget, on purpose).
func budgetField(name string, acc func(*Config) (*int, bool), env, flag, usage string) *field {
	f := intField("model", name, 0, func(c *Config) *int { p, _ := acc(c); return p }, []string{env}, flag, usage)
	f.encode = func(c *Config) (string, bool) {
		p, explicit := acc(c)
		if !explicit && *p == 0 {
			return "", false
		}
		return strconv.Itoa(*p), true
	}
	return f
}

// thinkingField is model.thinking: model.name's thinking settings.
func thinkingField() *field {
	return &field{
		table: "model", name: "thinking",
		decode: func(c *Config, raw any, _ bool, _ resolver) error {
			t, err := decodeThinking(raw)
			if err != nil {
				return err
			}
			c.Model.Thinking = t
			return nil
		},
		encode: func(c *Config) (string, bool) {
			if c.Model.Thinking == nil {
				return "", false
			}
			lit := encodeProvider(ProviderConfig{Models: []ProviderModel{{Thinking: c.Model.Thinking}}})
			i := strings.Index(lit, "thinking = ")
			return strings.TrimSuffix(lit[i+len("thinking = "):], "}]}"), true
		},
	}
}

// priceField is model.price: what model.name's tokens cost.
func priceField() *field {
	return &field{
		table: "model", name: "price",
		decode: func(c *Config, raw any, _ bool, _ resolver) error {
			p, err := decodePrice(raw)
			if err != nil {
				return err
			}
			c.Model.Price = &p
			return nil
		},
		encode: func(c *Config) (string, bool) {
			if c.Model.Price == nil {
				return "", false
			}
			return encodePrice(*c.Model.Price), true
		},
	}
}

// pricesField is model.prices: the prices of the selector's other models
// (and of model.compactionModel), by model id.
func pricesField() *field {
	return &field{
		table: "model", name: "prices",
		decode: func(c *Config, raw any, _ bool, _ resolver) error {
			m, ok := raw.(map[string]any)
			if !ok {
				return typeErr("a table of model ids to price tables", raw)
			}
			out := make(map[string]Price, len(m))
			for id, v := range m {
				if strings.TrimSpace(id) == "" {
					return errors.New("a model id must not be empty")
				}
				p, err := decodePrice(v)
				if err != nil {
					return fmt.Errorf("model %q: %w", id, err)
				}
				out[id] = p
			}
			c.Model.Prices = out
			return nil
		},
		encode: func(c *Config) (string, bool) {
			if len(c.Model.Prices) == 0 {
				return "", false
			}
			ids := slices.Sorted(maps.Keys(c.Model.Prices))
			parts := make([]string, len(ids))
			for i, id := range ids {
				parts[i] = quote(id) + " = " + encodePrice(c.Model.Prices[id])
			}
			return "{" + strings.Join(parts, ", ") + "}", true
		},
	}
}

// serveFlag puts f's flag in the server group: acpd serve's own, and
// acpd doctor's and acpd config's.
func serveFlag(f *field) *field {
	f.group = GroupServer
	return f
}

// loopFlag puts f's flag in the loop guard's group.
func loopFlag(f *field) *field {
	f.group = GroupLoop
	return f
}

// listenField is server.listen: host:port, the host an IP address or a
// name ("" for every interface), the port 0 (any free one) to 65535.
func listenField() *field {
	f := stringField("server", "listen", func(c *Config) *string { return &c.Server.Listen },
		[]string{"ACPD_LISTEN"}, "listen", "address acpd serve listens on, host:port (loopback only unless --tls-cert and --tls-key are given)")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		a := c.Server.Listen
		if a == "" {
			return nil
		}
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("must be host:port such as 127.0.0.1:8123, got %s", quote(a))
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("must be host:port with a port from 0 to 65535, got %s", quote(a))
		}
		return nil
	}
	return f
}

// tokenEnvField is server.tokenEnv: the name of a variable, never the token
// itself (a config file is the wrong place for a secret).
func tokenEnvField() *field {
	f := stringField("server", "tokenEnv", func(c *Config) *string { return &c.Server.TokenEnv }, nil, "", "")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		if n := c.Server.TokenEnv; n != "" && !envNameRE().MatchString(n) {
			return fmt.Errorf("must name an environment variable (letters, digits, _), got %s", quote(n))
		}
		return nil
	}
	return f
}

// denyReadField is tools.sandboxDenyRead: paths confined commands may not
// read, added to the defaults; "!PATH" removes PATH from the defaults. Each
// is resolved like a path field. "/" is refused: a command that can read
// nothing cannot run.
func denyReadField() *field {
	acc := func(c *Config) *[]string { return &c.Tools.SandboxDenyRead }
	list := stringListField("tools", "sandboxDenyRead", acc, nil, "", "")
	decode := list.decode
	list.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		for i, p := range *acc(c) {
			neg := strings.HasPrefix(p, "!")
			p = strings.TrimPrefix(p, "!")
			if p == "" {
				return fmt.Errorf("element %d: must not be empty", i)
			}
			abs, err := r.path(p)
			if err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
			if abs == "/" && !neg {
				return fmt.Errorf("element %d: \"/\" would deny every file, and no command could start", i)
			}
			if neg {
				abs = "!" + abs
			}
			(*acc(c))[i] = abs
		}
		return nil
	}
	return list
}

// networkField is tools.sandboxNetwork: true (open), false (none) or
// "proxy" (only through acpd's proxy); from the environment the same words.
func networkField() *field {
	acc := func(c *Config) *string { return &c.Tools.SandboxNetwork }
	return &field{
		table: "tools", name: "sandboxNetwork", envs: []string{"ACPD_SANDBOX_NETWORK"},
		decode: func(c *Config, raw any, fromText bool, _ resolver) error {
			switch v := raw.(type) {
			case bool:
				*acc(c) = strconv.FormatBool(v)
				return nil
			case string:
				s := strings.TrimSpace(v)
				if s == NetworkProxy {
					*acc(c) = s
					return nil
				}
				if b, err := strconv.ParseBool(s); err == nil && fromText {
					*acc(c) = strconv.FormatBool(b)
					return nil
				}
				return fmt.Errorf("must be true, false or \"proxy\", got %s", quote(v))
			}
			return typeErr(`true, false or "proxy"`, raw)
		},
		encode: func(c *Config) (string, bool) {
			if v := *acc(c); v == NetworkProxy {
				return quote(v), true
			}
			return *acc(c), true
		},
	}
}

// allowedDomainsField is tools.sandboxAllowedDomains: hosts (github.com),
// subdomain wildcards (*.npmjs.org) or either with a port (localhost:8080)
// that commands reach through the proxy without a question.
func allowedDomainsField() *field {
	acc := func(c *Config) *[]string { return &c.Tools.SandboxAllowedDomains }
	f := stringListField("tools", "sandboxAllowedDomains", acc, []string{"ACPD_SANDBOX_ALLOWED_DOMAINS"}, "", "")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		for i, p := range *acc(c) {
			n, err := checkHostPattern(p)
			if err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
			(*acc(c))[i] = n
		}
		return nil
	}
	return f
}

// checkHostPattern validates one host pattern (the proxy parses it again)
// and returns it in lower case.
func checkHostPattern(p string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(p))
	if s == "" || strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@ ") {
		return "", fmt.Errorf("want a host or host:port such as github.com, *.npmjs.org or localhost:8080, got %s", quote(p))
	}
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port must be 1 to 65535, got %s", quote(p))
		}
		host = h
	}
	name := strings.TrimPrefix(strings.Trim(host, "[]"), "*.")
	if name == "" || strings.Contains(name, "*") || (strings.Contains(name, ":") && net.ParseIP(name) == nil) {
		return "", fmt.Errorf("want a host or host:port such as github.com, *.npmjs.org or localhost:8080, got %s", quote(p))
	}
	return s, nil
}

// passEnvField is tools.sandboxPassEnv: names of variables commands
// inherit deliberately, each a variable name.
func passEnvField() *field {
	f := stringListField("tools", "sandboxPassEnv", func(c *Config) *[]string { return &c.Tools.SandboxPassEnv },
		[]string{"ACPD_SANDBOX_PASS_ENV"}, "", "")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		for i, n := range c.Tools.SandboxPassEnv {
			if !envNameRE().MatchString(n) {
				return fmt.Errorf("element %d: must name an environment variable (letters, digits, _), got %s", i, quote(n))
			}
		}
		return nil
	}
	return f
}

var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// originsField is server.allowedOrigins: each an origin as a browser sends
// it, scheme://host[:port], with no path; compared exactly.
func originsField() *field {
	f := stringListField("server", "allowedOrigins", func(c *Config) *[]string { return &c.Server.AllowedOrigins }, nil, "", "")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		for i, o := range c.Server.AllowedOrigins {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
				return fmt.Errorf("element %d: must be an origin such as https://editor.example.com, got %s", i, quote(o))
			}
			c.Server.AllowedOrigins[i] = u.Scheme + "://" + strings.ToLower(u.Host)
		}
		return nil
	}
	return f
}

// hostsField is server.allowedHosts: host names (no port) a request's Host
// header may carry, for a daemon reached by name (behind an ingress).
func hostsField() *field {
	f := stringListField("server", "allowedHosts", func(c *Config) *[]string { return &c.Server.AllowedHosts }, nil, "", "")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		for i, h := range c.Server.AllowedHosts {
			if h == "" || strings.ContainsAny(h, ":/ ") {
				return fmt.Errorf("element %d: must be a host name without port or scheme, such as acpd.example.com, got %s", i, quote(h))
			}
			c.Server.AllowedHosts[i] = strings.ToLower(h)
		}
		return nil
	}
	return f
}

// rulesField is [permissions] allow, ask or deny: rules in Claude Code's
// syntax (package session/rules), each kept with the file it came from.
// Decision: the files' rules add up rather than replace each other, as
// Claude Code merges the rules of all its scopes, so a deny of the user
// file still holds when --config names another file.
func rulesField(k rules.Kind) *field {
	return &field{
		table: "permissions", name: k.String(),
		decode: func(c *Config, raw any, _ bool, r resolver) error {
			list, ok := raw.([]any)
			if !ok {
				return typeErr("an array of rules such as \"Bash(npm test:*)\"", raw)
			}
			for i, el := range list {
				text, ok := el.(string)
				if !ok {
					return fmt.Errorf("element %d: %w", i, typeErr("a string", el))
				}
				rl, err := rules.Parse(text, k, rules.Source{Scope: rules.ScopeConfig, File: r.file})
				if err != nil {
					return fmt.Errorf("element %d: %w", i, err)
				}
				if !slices.ContainsFunc(c.Permissions.Rules, func(o rules.Rule) bool { return o.Kind == k && o.Text == text }) {
					c.Permissions.Rules = append(c.Permissions.Rules, rl)
				}
			}
			return nil
		},
		encode: func(c *Config) (string, bool) {
			var q []string
			for _, rl := range c.Permissions.Rules {
				if rl.Kind == k {
					q = append(q, quote(rl.Text))
				}
			}
			return "[" + strings.Join(q, ", ") + "]", true
		},
	}
}

// hookField is one event's [[hooks.EVENT]] entries in Claude Code's nested
// shape; like the rules, every file's hooks add up.
func hookField(event string) *field {
	return &field{
		table: "hooks", name: event,
		decode: func(c *Config, raw any, _ bool, r resolver) error {
			hs, err := hooks.DecodeEvent(event, raw, hooks.Source{File: r.file})
			if err != nil {
				return fullError{msg: err.Error()}
			}
			c.Hooks = append(c.Hooks, hs...)
			return nil
		},
		encode: func(c *Config) (string, bool) {
			var q []string
			for _, h := range c.Hooks {
				if h.Event != event {
					continue
				}
				m := ""
				if h.Matcher != "" {
					m = "matcher = " + quote(h.Matcher) + ", "
				}
				t := ""
				if h.Timeout > 0 {
					t = ", timeout = " + strconv.FormatFloat(h.Timeout.Seconds(), 'g', -1, 64)
				}
				q = append(q, fmt.Sprintf(`{%shooks = [{type = "command", command = %s%s}]}`, m, quote(h.Command), t))
			}
			if len(q) == 0 {
				return "", false
			}
			return "[" + strings.Join(q, ", ") + "]", true
		},
	}
}

// mcpImportField is mcp.import: the agents whose MCP servers are read
// (package session/mcp/imported), each named once; [] switches it off.
func mcpImportField() *field {
	f := stringListField("mcp", "import", func(c *Config) *[]string { return &c.MCP.Import },
		[]string{"ACPD_MCP_IMPORT"}, "", "")
	decode := f.decode
	f.decode = func(c *Config, raw any, fromText bool, r resolver) error {
		if s, ok := raw.(string); ok && fromText && strings.TrimSpace(s) == "none" {
			// An empty variable is no setting: "none" is the empty list.
			c.MCP.Import = []string{}
			return nil
		}
		if err := decode(c, raw, fromText, r); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, a := range c.MCP.Import {
			if a != "claude" && a != "gemini" && a != "codex" {
				return fmt.Errorf("unknown agent %q; valid: claude, gemini, codex", a)
			}
			if seen[a] {
				return fmt.Errorf("%q is listed twice", a)
			}
			seen[a] = true
		}
		return nil
	}
	return f
}
