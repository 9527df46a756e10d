package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture is a sandbox: a fake HOME with XDG dirs and a working directory,
// so tests never see the machine's own config or environment.
type fixture struct {
	root, home, work string
	env              map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	fx := &fixture{root: root, home: filepath.Join(root, "home"), work: filepath.Join(root, "work")}
	require.NoError(t, os.MkdirAll(fx.work, 0o755))
	fx.env = map[string]string{
		"HOME":            fx.home,
		"XDG_CONFIG_HOME": filepath.Join(root, "xdg-config"),
		"XDG_STATE_HOME":  filepath.Join(root, "xdg-state"),
	}
	return fx
}

func (fx *fixture) userFile() string {
	return filepath.Join(fx.env["XDG_CONFIG_HOME"], "acpd", "config.toml")
}

func (fx *fixture) write(t *testing.T, path, content string) string {
	t.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join(fx.root, path)
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func (fx *fixture) load(opts LoadOptions) (Config, Sources, error) {
	opts.Getenv = func(k string) string { return fx.env[k] }
	opts.WorkDir = fx.work
	return Load(opts)
}

func TestLoad_MaxToolCallsPerTurn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		user, file   string // contents of the user file and the --config file ("" = absent)
		env          map[string]string
		flags        map[string]string
		want         int
		wantExplicit bool
		wantDisabled bool
		wantSource   SourceKind
	}{
		{name: "unset is adaptive", want: 100, wantSource: SourceDefault},
		{name: "other keys set does not make it explicit", user: "[model]\nname = \"m\"\n", want: 100, wantSource: SourceDefault},
		{name: "100 in the user file is explicit", user: "[model]\nmaxToolCallsPerTurn = 100\n", want: 100, wantExplicit: true, wantSource: SourceFile},
		{name: "100 in the --config file is explicit", file: "[model]\nmaxToolCallsPerTurn = 100\n", want: 100, wantExplicit: true, wantSource: SourceFile},
		{name: "integral float counts as integer", file: "[model]\nmaxToolCallsPerTurn = 100.0\n", want: 100, wantExplicit: true, wantSource: SourceFile},
		{name: "dotted key form", file: "model.maxToolCallsPerTurn = 50\n", want: 50, wantExplicit: true, wantSource: SourceFile},
		{name: "zero disables", file: "[model]\nmaxToolCallsPerTurn = 0\n", want: 0, wantExplicit: true, wantDisabled: true, wantSource: SourceFile},
		{name: "negative disables", file: "[model]\nmaxToolCallsPerTurn = -5\n", want: -5, wantExplicit: true, wantDisabled: true, wantSource: SourceFile},
		{name: "--config file overrides user file", user: "[model]\nmaxToolCallsPerTurn = 10\n", file: "[model]\nmaxToolCallsPerTurn = 20\n", want: 20, wantExplicit: true, wantSource: SourceFile},
		{name: "env overrides files", user: "[model]\nmaxToolCallsPerTurn = 10\n", file: "[model]\nmaxToolCallsPerTurn = 20\n",
			env: map[string]string{"ACPD_MAX_TOOL_CALLS_PER_TURN": "30"}, want: 30, wantExplicit: true, wantSource: SourceEnv},
		{name: "env alone is explicit", env: map[string]string{"ACPD_MAX_TOOL_CALLS_PER_TURN": "100"}, want: 100, wantExplicit: true, wantSource: SourceEnv},
		{name: "env zero disables", env: map[string]string{"ACPD_MAX_TOOL_CALLS_PER_TURN": "0"}, want: 0, wantExplicit: true, wantDisabled: true, wantSource: SourceEnv},
		{name: "empty env is unset", env: map[string]string{"ACPD_MAX_TOOL_CALLS_PER_TURN": ""}, want: 100, wantSource: SourceDefault},
		{name: "flag overrides env and files", file: "[model]\nmaxToolCallsPerTurn = 20\n",
			env: map[string]string{"ACPD_MAX_TOOL_CALLS_PER_TURN": "30"}, flags: map[string]string{"max-tool-calls-per-turn": "40"},
			want: 40, wantExplicit: true, wantSource: SourceFlag},
		{name: "flag alone is explicit", flags: map[string]string{"max-tool-calls-per-turn": "100"}, want: 100, wantExplicit: true, wantSource: SourceFlag},
		{name: "flag negative disables", flags: map[string]string{"max-tool-calls-per-turn": "-1"}, want: -1, wantExplicit: true, wantDisabled: true, wantSource: SourceFlag},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			for k, v := range tt.env {
				fx.env[k] = v
			}
			if tt.user != "" {
				fx.write(t, fx.userFile(), tt.user)
			}
			var opts LoadOptions
			if tt.file != "" {
				opts.ConfigPath = fx.write(t, "project/acpd.toml", tt.file)
			}
			opts.Flags = tt.flags
			cfg, src, err := fx.load(opts)
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Model.MaxToolCallsPerTurn)
			assert.Equal(t, tt.wantExplicit, cfg.Model.MaxToolCallsPerTurnExplicit)
			assert.Equal(t, tt.wantDisabled, cfg.Model.ToolCapDisabled())
			assert.Equal(t, tt.wantSource, src.Of("model.maxToolCallsPerTurn").Kind)
		})
	}
}

func TestLoad_Layers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		user, file string
		acpdConfig bool // pass the file through ACPD_CONFIG instead of --config
		env        map[string]string
		flags      map[string]string
		check      func(t *testing.T, fx *fixture, cfg Config, src Sources)
	}{
		{name: "defaults", check: func(t *testing.T, fx *fixture, cfg Config, src Sources) {
			want := Default()
			want.Session.DataDir = filepath.Join(fx.env["XDG_STATE_HOME"], "acpd")
			assert.Equal(t, want, cfg)
			assert.True(t, cfg.Model.SkipLoopDetection)
			assert.Equal(t, "default", src.Of("model.name").String())
		}},
		{name: "data dir falls back to HOME", env: map[string]string{"XDG_STATE_HOME": ""}, check: func(t *testing.T, fx *fixture, cfg Config, _ Sources) {
			assert.Equal(t, filepath.Join(fx.home, ".local", "state", "acpd"), cfg.Session.DataDir)
		}},
		{name: "relative XDG_STATE_HOME is ignored", env: map[string]string{"XDG_STATE_HOME": "rel"}, check: func(t *testing.T, fx *fixture, cfg Config, _ Sources) {
			assert.Equal(t, filepath.Join(fx.home, ".local", "state", "acpd"), cfg.Session.DataDir)
		}},
		{name: "user file found through HOME", env: map[string]string{"XDG_CONFIG_HOME": ""}, user: "", check: func(t *testing.T, fx *fixture, cfg Config, src Sources) {
			// written below by the special case in the loop
			assert.Equal(t, "from-home", cfg.Model.Name)
			assert.Equal(t, filepath.Join(fx.home, ".config", "acpd", "config.toml"), src.Of("model.name").File)
		}},
		{name: "user file then --config", user: "[model]\nname = \"u\"\nbaseUrl = \"http://u\"\n", file: "[model]\nname = \"f\"\n",
			check: func(t *testing.T, fx *fixture, cfg Config, src Sources) {
				assert.Equal(t, "f", cfg.Model.Name)
				assert.Equal(t, "http://u", cfg.Model.BaseURL)
				assert.Equal(t, fx.userFile(), src.Of("model.baseUrl").File)
				assert.Equal(t, Source{Kind: SourceFile, File: filepath.Join(fx.root, "project/acpd.toml"), Line: 2, Col: 1}, src.Of("model.name"))
			}},
		{name: "ACPD_CONFIG names the file", file: "[tools]\napprovalMode = \"plan\"\n", acpdConfig: true,
			check: func(t *testing.T, _ *fixture, cfg Config, src Sources) {
				assert.Equal(t, ApprovalPlan, cfg.Tools.ApprovalMode)
				assert.Equal(t, SourceFile, src.Of("tools.approvalMode").Kind)
			}},
		{name: "OPENAI env vars override files", file: "[model]\nname = \"f\"\nbaseUrl = \"http://f\"\n",
			env: map[string]string{"OPENAI_MODEL": "env-model", "OPENAI_BASE_URL": "http://env", "OPENAI_API_KEY": "sk-env"},
			check: func(t *testing.T, _ *fixture, cfg Config, src Sources) {
				assert.Equal(t, "env-model", cfg.Model.Name)
				assert.Equal(t, "http://env", cfg.Model.BaseURL)
				assert.Equal(t, "sk-env", cfg.Model.APIKey)
				assert.Equal(t, "env OPENAI_MODEL", src.Of("model.name").String())
				assert.Equal(t, "env OPENAI_API_KEY", src.Of("model.apiKey").String())
			}},
		{name: "apiKeyEnv picks another variable", file: "[model]\napiKeyEnv = \"MY_KEY\"\n",
			env: map[string]string{"OPENAI_API_KEY": "sk-openai", "MY_KEY": "sk-mine"},
			check: func(t *testing.T, _ *fixture, cfg Config, src Sources) {
				assert.Equal(t, "sk-mine", cfg.Model.APIKey)
				assert.Equal(t, "env MY_KEY", src.Of("model.apiKey").String())
			}},
		{name: "flags override env", file: "[model]\nname = \"f\"\n",
			env:   map[string]string{"OPENAI_MODEL": "e", "ACPD_APPROVAL_MODE": "yolo", "ACPD_SKIP_LOOP_DETECTION": "false"},
			flags: map[string]string{"model": "flag-model", "approval-mode": "auto-edit", "skip-loop-detection": "true", "log-level": "debug", "trace": "true"},
			check: func(t *testing.T, _ *fixture, cfg Config, src Sources) {
				assert.Equal(t, "flag-model", cfg.Model.Name)
				assert.Equal(t, ApprovalAutoEdit, cfg.Tools.ApprovalMode)
				assert.True(t, cfg.Model.SkipLoopDetection)
				assert.Equal(t, "debug", cfg.Log.Level)
				assert.True(t, cfg.Log.Trace)
				assert.Equal(t, "flag --model", src.Of("model.name").String())
				assert.Equal(t, "flag --skip-loop-detection", src.Of("model.skipLoopDetection").String())
			}},
		{name: "env without flags", env: map[string]string{"ACPD_APPROVAL_MODE": "yolo", "ACPD_SKIP_LOOP_DETECTION": "false", "ACPD_REPEATED_TOOL_FAILURE_GUARD": "enforce"},
			check: func(t *testing.T, _ *fixture, cfg Config, _ Sources) {
				assert.Equal(t, ApprovalYolo, cfg.Tools.ApprovalMode)
				assert.False(t, cfg.Model.SkipLoopDetection)
				assert.Equal(t, GuardEnforce, cfg.Tools.RepeatedToolFailureGuard)
			}},
		{name: "every file key", file: `
[model]
provider = "script"
name = "m"
baseUrl = "http://localhost:1234/v1"
apiKeyEnv = "K"
maxToolCallsPerTurn = 7
skipLoopDetection = false
stuckSignal = "results"
loopRecovery = "warn"
maxRetries = 0
requestTimeout = "30s"
maxTokens = 4096
temperature = 0
script = "scripts/turns.json"
systemPrompt = "be brief"
models = ["m-large", "m-small"]
contextWindow = 65536
contextWindows = { "m-large" = 200000, "m-small" = 32768 }
compactThreshold = 0.7
compactionModel = "m-small"
cacheControl = "on"
maxTokensPerTurn = 40000
sessionTokenLimit = 0
prices = { "m-small" = { input = 0.2, output = 0.6, currency = "EUR" } }
[model.price]
input = 1.25
cachedInput = 0.125
output = 10
currency = "EUR"
[tools]
approvalMode = "yolo"
exclude = ["web_fetch", "run_shell_command"]
shellTimeout = "1m30s"
maxOutputBytes = 1024
repeatedToolFailureGuard = "warn"
sandbox = "required"
sandboxWritable = ["cache", "~/.npm"]
sandboxNetwork = false
sandboxAllowedDomains = ["GitHub.com", "*.npmjs.org", "localhost:8080"]
autoAllowConfined = true
sandboxPassEnv = ["GH_TOKEN"]
sandboxDenyRead = ["secrets", "!~/.npmrc"]
webFetchAllowPrivate = true
subagentConcurrency = 2
[mcp]
import = ["gemini"]
[context]
fileNames = ["CONVENTIONS.md", "AGENTS.md"]
environment = false
instructions = false
[session]
dataDir = "../state"
[log]
level = "warn"
file = "logs/acpd.log"
trace = true
[guard]
cancelGrace = "500ms"
shutdownGrace = "10s"
[server]
listen = "0.0.0.0:8443"
tlsCert = "tls/cert.pem"
tlsKey = "tls/key.pem"
tokenFile = "~/acpd.token"
tokenEnv = "ACPD_TOKEN"
allowedOrigins = ["https://Editor.example.com/"]
allowedHosts = ["ACPD.example.com"]
maxConnections = 4
maxTcpConnections = 16
maxSessionsPerConnection = 2
maxMessageBytes = 65536
maxStreams = 3
headerTimeout = "2s"
idleTimeout = "1m"
authFailuresPerMinute = 5
`, check: func(t *testing.T, fx *fixture, cfg Config, _ Sources) {
			dir := filepath.Join(fx.root, "project")
			zero := 0.0
			assert.Equal(t, Config{
				Model: ModelConfig{Provider: ProviderScript, Name: "m", BaseURL: "http://localhost:1234/v1", WireAPI: "chat-completions", APIKeyEnv: "K",
					MaxToolCallsPerTurn: 7, MaxToolCallsPerTurnExplicit: true, SkipLoopDetection: false, StuckSignal: "results", LoopRecovery: "warn", MaxRetries: 0,
					RequestTimeout: 30 * time.Second, MaxTokens: 4096, Temperature: &zero,
					Script: filepath.Join(dir, "scripts", "turns.json"), SystemPrompt: "be brief",
					Models: []string{"m-large", "m-small"}, ContextWindow: 65536,
					ContextWindows: map[string]int{"m-large": 200000, "m-small": 32768}, CompactThreshold: 0.7, CompactionModel: "m-small",
					CacheControl: "on", MaxTokensPerTurn: 40000, MaxTokensPerTurnExplicit: true, SessionTokenLimitExplicit: true,
					Price:  &Price{Input: 1.25, CachedInput: 0.125, CacheWrite: 1.25, Output: 10, Currency: "EUR"},
					Prices: map[string]Price{"m-small": {Input: 0.2, CachedInput: 0.2, CacheWrite: 0.2, Output: 0.6, Currency: "EUR"}}},
				Tools: ToolsConfig{ApprovalMode: ApprovalYolo, Exclude: []string{"web_fetch", "run_shell_command"},
					ShellTimeout: 90 * time.Second, MaxOutputBytes: 1024, RepeatedToolFailureGuard: GuardWarn,
					Sandbox: "required", SandboxWritable: []string{filepath.Join(dir, "cache"), filepath.Join(fx.home, ".npm")}, SandboxNetwork: NetworkOff,
					SandboxAllowedDomains: []string{"github.com", "*.npmjs.org", "localhost:8080"}, AutoAllowConfined: true,
					SandboxPassEnv: []string{"GH_TOKEN"}, SandboxDenyRead: []string{filepath.Join(dir, "secrets"), "!" + filepath.Join(fx.home, ".npmrc")},
					WebFetchAllowPrivate: true, SubagentConcurrency: 2},
				MCP:     MCPConfig{Import: []string{"gemini"}},
				Context: ContextConfig{FileNames: []string{"CONVENTIONS.md", "AGENTS.md"}},
				Session: SessionConfig{DataDir: filepath.Join(fx.root, "state"), CheckpointMaxBytes: 2 << 30},
				Log:     LogConfig{Level: "warn", File: filepath.Join(dir, "logs", "acpd.log"), Trace: true},
				Guard:   GuardConfig{CancelGrace: 500 * time.Millisecond, ShutdownGrace: 10 * time.Second},
				Server: ServerConfig{Listen: "0.0.0.0:8443", TLSCert: filepath.Join(dir, "tls", "cert.pem"), TLSKey: filepath.Join(dir, "tls", "key.pem"),
					TokenFile: filepath.Join(fx.home, "acpd.token"), TokenEnv: "ACPD_TOKEN",
					AllowedOrigins: []string{"https://editor.example.com"}, AllowedHosts: []string{"acpd.example.com"},
					MaxConnections: 4, MaxTCPConnections: 16, MaxSessionsPerConnection: 2, MaxMessageBytes: 65536, MaxStreams: 3,
					HeaderTimeout: 2 * time.Second, IdleTimeout: time.Minute, AuthFailuresPerMinute: 5},
			}, cfg)
		}},
		{name: "paths from env and flags resolve against the working dir; ~ expands", env: map[string]string{"ACPD_DATA_DIR": "data"},
			flags: map[string]string{"log-file": "~/acpd.log"},
			check: func(t *testing.T, fx *fixture, cfg Config, _ Sources) {
				assert.Equal(t, filepath.Join(fx.work, "data"), cfg.Session.DataDir)
				assert.Equal(t, filepath.Join(fx.home, "acpd.log"), cfg.Log.File)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			for k, v := range tt.env {
				fx.env[k] = v
			}
			if tt.name == "user file found through HOME" {
				fx.write(t, filepath.Join(fx.home, ".config", "acpd", "config.toml"), "[model]\nname = \"from-home\"\n")
			}
			if tt.user != "" {
				fx.write(t, fx.userFile(), tt.user)
			}
			opts := LoadOptions{Flags: tt.flags}
			if tt.file != "" {
				p := fx.write(t, "project/acpd.toml", tt.file)
				if tt.acpdConfig {
					fx.env["ACPD_CONFIG"] = p
				} else {
					opts.ConfigPath = p
				}
			}
			cfg, src, err := fx.load(opts)
			require.NoError(t, err)
			// Derived from HOME and the resolved folders: TestDenyRead.
			cfg.Tools.DenyReadDefaults = nil
			tt.check(t, fx, cfg, src)
		})
	}
}

func TestLoad_ConfigFlagBeatsEnv(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	fx.env["ACPD_CONFIG"] = fx.write(t, "env.toml", "[model]\nname = \"env\"\n")
	flagFile := fx.write(t, "flag.toml", "[model]\nname = \"flag\"\n")
	cfg, _, err := fx.load(LoadOptions{ConfigPath: flagFile})
	require.NoError(t, err)
	assert.Equal(t, "flag", cfg.Model.Name)
}

func TestLoad_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		file      string
		line, col int
		msg       string // exact Error.Msg
	}{
		{name: "syntax error", file: "[model]\nname = \n", line: 2, col: 8,
			msg: `syntax error: expected value but found '\n' instead`},
		{name: "unterminated table header at column 1", file: "[model]\nname = \"x\"\n[tools\n", line: 3, col: 7},
		{name: "unknown key with suggestion", file: "[model]\n  maxToolCallPerTurn = 50\n", line: 2, col: 3,
			msg: `unknown key "model.maxToolCallPerTurn"; did you mean "maxToolCallsPerTurn"?`},
		{name: "unknown key differing in case", file: "[tools]\nApprovalmode = \"plan\"\n", line: 2, col: 1,
			msg: `unknown key "tools.Approvalmode"; did you mean "approvalMode"?`},
		{name: "key in the wrong table", file: "[model]\nname = \"x\"\napprovalMode = \"yolo\"\n", line: 3, col: 1,
			msg: `unknown key "model.approvalMode"; did you mean "tools.approvalMode" (it belongs in [tools])?`},
		{name: "unknown key without suggestion", file: "[log]\nverbosity = 3\n", line: 2, col: 1,
			msg: `unknown key "log.verbosity"; valid keys in [log]: level, file, trace`},
		{name: "unknown table", file: "\n[modle]\nname = \"x\"\n", line: 2, col: 2,
			msg: `unknown table "modle"; did you mean [model]?`},
		{name: "top-level key", file: "approvalMode = \"yolo\"\n", line: 1, col: 1,
			msg: `unknown key "approvalMode"; did you mean "tools.approvalMode" (it belongs in [tools])?`},
		{name: "api key in a file", file: "[model]\napiKey = \"sk-x\"\n", line: 2, col: 1,
			msg: "model.apiKey cannot be set in a config file; put the key in the environment variable named by model.apiKeyEnv (default OPENAI_API_KEY)"},
		{name: "wrong type", file: "[model]\nmaxRetries = \"3\"\n", line: 2, col: 14,
			msg: `model.maxRetries: must be an integer, got string "3"`},
		{name: "wrong type for a table", file: "model = 3\n", line: 1, col: 1,
			msg: "model must be a table ([model]), got integer"},
		{name: "table where a value belongs", file: "[model.name]\nx = 1\n", line: 1, col: 1,
			msg: "model.name: must be a string, got table"},
		{name: "array element type", file: "[tools]\nexclude = [\"a\", 2]\n", line: 2, col: 12,
			msg: "tools.exclude: element 1: must be a string, got integer 2"},
		{name: "maxToolCallsPerTurn not an integer", file: "[model]\nmaxToolCallsPerTurn = 1.5\n", line: 2, col: 23,
			msg: "Invalid maxToolCallsPerTurn: must be an integer, got 1.5"},
		{name: "maxToolCallsPerTurn a string", file: "[model]\nmaxToolCallsPerTurn = \"100\"\n", line: 2, col: 23,
			msg: `Invalid maxToolCallsPerTurn: must be an integer, got "100"`},
		{name: "maxToolCallsPerTurn infinite", file: "[model]\nmaxToolCallsPerTurn = inf\n", line: 2, col: 23,
			msg: "Invalid maxToolCallsPerTurn: must be an integer, got inf"},
		{name: "unknown enum value", file: "[tools]\napprovalMode = \"yoloo\"\n", line: 2, col: 16,
			msg: `tools.approvalMode: invalid value "yoloo": must be one of "plan", "default", "auto-edit", "yolo"`},
		{name: "unknown provider", file: "[model]\nprovider = 'antropic'\n", line: 2, col: 12,
			msg: `model.provider: invalid value "antropic": must be one of "openai", "anthropic", "gemini", "script"`},
		{name: "unknown guard mode", file: "[tools]\nrepeatedToolFailureGuard = \"on\"\n", line: 2, col: 28,
			msg: `tools.repeatedToolFailureGuard: invalid value "on": must be one of "off", "shadow", "warn", "enforce"`},
		{name: "bad duration", file: "[tools]\nshellTimeout = \"2 minutes\"\n", line: 2, col: 16,
			msg: `tools.shellTimeout: must be a duration such as "120s" or "2m", got "2 minutes"`},
		{name: "duration as a number", file: "[model]\nrequestTimeout = 120\n", line: 2, col: 18,
			msg: `model.requestTimeout: must be a duration string such as "120s", got integer 120`},
		{name: "out of range", file: "[tools]\nmaxOutputBytes = 0\n", line: 2, col: 18,
			msg: "tools.maxOutputBytes: must be at least 1, got 0"},
		{name: "temperature out of range", file: "[model]\ntemperature = 3.5\n", line: 2, col: 15,
			msg: "model.temperature: must be between 0 and 2, got 3.5"},
		{name: "path not a string", file: "[session]\ndataDir = 5\n", line: 2, col: 11,
			msg: "session.dataDir: must be a path string, got integer 5"},
		{name: "script provider needs a script", file: "[model]\n\tprovider = \"script\"\n", line: 2, col: 2,
			msg: `model.script is required when model.provider is "script"`},
		{name: "base URL with a misspelt scheme", file: "[model]\nbaseUrl = \"htp://localhost:8080/v1\"\n", line: 2, col: 11,
			msg: `model.baseUrl: must be an http or https URL such as https://api.openai.com/v1, got "htp://localhost:8080/v1"`},
		{name: "base URL without a host", file: "[model]\nbaseUrl = \"localhost:8080\"\n", line: 2, col: 11,
			msg: `model.baseUrl: must be an http or https URL such as https://api.openai.com/v1, got "localhost:8080"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertFileError(t, tt.file, tt.line, tt.col, tt.msg)
		})
	}
}

// assertFileError loads file as the --config file and checks the error
// names the file, line and column, and (unless msg is "") says msg.
func assertFileError(t *testing.T, file string, line, col int, msg string) {
	t.Helper()
	fx := newFixture(t)
	path := fx.write(t, "bad.toml", file)
	_, _, err := fx.load(LoadOptions{ConfigPath: path})
	require.Error(t, err)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, path, ce.File)
	assert.Equal(t, line, ce.Line, "line")
	assert.Equal(t, col, ce.Col, "column")
	if msg != "" {
		assert.Equal(t, msg, ce.Msg)
	}
	assert.Contains(t, err.Error(), fmt.Sprintf("%s:%d:%d: ", path, line, col))
}

func TestLoad_ReportsEveryFileError(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	path := fx.write(t, "bad.toml", "[model]\nnmae = \"x\"\nmaxRetries = -1\n[tools]\napprovalMode = \"always\"\n")
	_, _, err := fx.load(LoadOptions{ConfigPath: path})
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 3)
	assert.Contains(t, lines[0], path+":2:1: ")
	assert.Contains(t, lines[0], `did you mean "name"?`)
	assert.Contains(t, lines[1], path+":3:14: model.maxRetries: must be at least 0, got -1")
	assert.Contains(t, lines[2], path+":5:16: tools.approvalMode")
}

func TestLoad_EnvAndFlagErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		env    map[string]string
		flags  map[string]string
		config string
		want   string
	}{
		{name: "env not an integer", env: map[string]string{"ACPD_MAX_TOOL_CALLS_PER_TURN": "1.5"},
			want: "env ACPD_MAX_TOOL_CALLS_PER_TURN: Invalid maxToolCallsPerTurn: must be an integer, got 1.5"},
		{name: "flag not an integer", flags: map[string]string{"max-tool-calls-per-turn": "lots"},
			want: "flag --max-tool-calls-per-turn: Invalid maxToolCallsPerTurn: must be an integer, got lots"},
		{name: "env bad bool", env: map[string]string{"ACPD_SKIP_LOOP_DETECTION": "maybe"},
			want: `env ACPD_SKIP_LOOP_DETECTION: model.skipLoopDetection: must be true or false, got "maybe"`},
		{name: "flag bad enum", flags: map[string]string{"approval-mode": "never"},
			want: `flag --approval-mode: tools.approvalMode: invalid value "never": must be one of "plan", "default", "auto-edit", "yolo"`},
		{name: "unknown flag", flags: map[string]string{"colour": "red"}, want: "flag --colour: not a configuration flag"},
		{name: "missing --config file", config: "nope.toml", want: "flag --config: cannot read config file: "},
		{name: "missing ACPD_CONFIG file", env: map[string]string{"ACPD_CONFIG": "/nonexistent/acpd.toml"}, want: "env ACPD_CONFIG: cannot read config file: "},
		{name: "no data dir at all", env: map[string]string{"HOME": "", "XDG_STATE_HOME": "", "XDG_CONFIG_HOME": ""},
			want: "session.dataDir has no default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			for k, v := range tt.env {
				fx.env[k] = v
			}
			_, _, err := fx.load(LoadOptions{Flags: tt.flags, ConfigPath: tt.config})
			require.Error(t, err)
			var ce *Error
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoad_UnreadableUserFile(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	// A directory where the file should be: exists, but cannot be read.
	require.NoError(t, os.MkdirAll(fx.userFile(), 0o755))
	_, _, err := fx.load(LoadOptions{})
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, fx.userFile(), ce.File)
}

func TestFormatTOML(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	fx.env["OPENAI_API_KEY"] = "sk-very-secret"
	fx.env["OPENAI_MODEL"] = "qwen3-coder"
	path := fx.write(t, "p/acpd.toml", "[model]\nmaxToolCallsPerTurn = 100\nsystemPrompt = \"line1\\n\\\"quoted\\\"\\u0001\"\n[tools]\nexclude = [\"web_fetch\"]\n")
	cfg, src, err := fx.load(LoadOptions{ConfigPath: path, Flags: map[string]string{"approval-mode": "yolo"}})
	require.NoError(t, err)
	out := FormatTOML(cfg, src)

	assert.NotContains(t, out, "sk-very-secret")
	assert.Contains(t, out, `# apiKey = "<redacted>"  # env OPENAI_API_KEY`)
	assert.Contains(t, out, `name = "qwen3-coder"  # env OPENAI_MODEL`)
	assert.Contains(t, out, "maxToolCallsPerTurn = 100  # "+path+":2 (hard cap)")
	assert.Contains(t, out, `approvalMode = "yolo"  # flag --approval-mode`)
	assert.Contains(t, out, `provider = "openai"  # default`)
	assert.Contains(t, out, "# temperature is unset  # default")

	// The output is valid TOML that loads back to the same configuration.
	fx2 := newFixture(t)
	fx2.env["OPENAI_API_KEY"] = "sk-very-secret"
	back, _, err := fx2.load(LoadOptions{ConfigPath: fx2.write(t, "out.toml", out)})
	require.NoError(t, err, out)
	// The deny list's defaults follow each fixture's own home folder.
	assert.Contains(t, out, "# built-in deny list")
	assert.Contains(t, out, "#   "+filepath.Join(fx.home, ".ssh")+"\n")
	cfg.Tools.DenyReadDefaults, back.Tools.DenyReadDefaults = nil, nil
	assert.Equal(t, cfg, back)
}

// TestSandboxNetwork: true, false and "proxy", from a file or the
// environment; the default is the proxy when autoAllowConfined is on and
// nothing named the network; allowed domains are checked.
func TestSandboxNetwork(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	load := func(file string, env map[string]string) (Config, error) {
		for k, v := range env {
			fx.env[k] = v
		}
		defer func() {
			for k := range env {
				delete(fx.env, k)
			}
		}()
		cfg, _, err := fx.load(LoadOptions{ConfigPath: fx.write(t, "n/acpd.toml", file)})
		return cfg, err
	}
	for file, want := range map[string]string{
		"":                                      NetworkOpen,
		"[tools]\nsandboxNetwork = false\n":     NetworkOff,
		"[tools]\nsandboxNetwork = \"proxy\"\n": NetworkProxy,
		"[tools]\nautoAllowConfined = true\n":   NetworkProxy,
		"[tools]\nautoAllowConfined = true\nsandboxNetwork = true\n": NetworkOpen,
	} {
		cfg, err := load(file, nil)
		require.NoError(t, err, file)
		assert.Equal(t, want, cfg.Tools.SandboxNetwork, file)
	}
	cfg, err := load("", map[string]string{"ACPD_SANDBOX_NETWORK": "proxy", "ACPD_SANDBOX_ALLOWED_DOMAINS": "github.com, *.pypi.org"})
	require.NoError(t, err)
	assert.Equal(t, NetworkProxy, cfg.Tools.SandboxNetwork)
	assert.Equal(t, []string{"github.com", "*.pypi.org"}, cfg.Tools.SandboxAllowedDomains)
	out := FormatTOML(cfg, Sources{})
	assert.Contains(t, out, `sandboxNetwork = "proxy"`)
	for _, bad := range []string{"[tools]\nsandboxNetwork = \"maybe\"\n", "[tools]\nsandboxAllowedDomains = [\"https://github.com\"]\n", "[tools]\nsandboxAllowedDomains = [\"a*b.com\"]\n", "[tools]\nsandboxAllowedDomains = [\"host:0\"]\n"} {
		_, err := load(bad, nil)
		assert.Error(t, err, bad)
	}
}

// TestDenyRead: the default deny list follows HOME, XDG_CONFIG_HOME and
// the resolved data, token, log and cache folders; tools.sandboxDenyRead
// adds paths and removes defaults with "!".
func TestDenyRead(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	fx.env["XDG_CONFIG_HOME"] = filepath.Join(fx.root, "xdg-config")
	fx.env["XDG_CACHE_HOME"] = filepath.Join(fx.root, "xdg-cache")
	path := fx.write(t, "p/acpd.toml", "[tools]\nsandboxDenyRead = [\"~/private\", \"!~/.npmrc\", \"!~/not-a-default\"]\n[log]\nfile = \"/var/log/acpd.log\"\n[server]\ntokenFile = \"/etc/acpd/token\"\n")
	cfg, _, err := fx.load(LoadOptions{ConfigPath: path, Flags: map[string]string{"data-dir": "/srv/acpd"}})
	require.NoError(t, err)
	defaults := cfg.Tools.DenyReadDefaults
	for _, p := range []string{
		filepath.Join(fx.home, ".ssh"), filepath.Join(fx.home, ".aws"), filepath.Join(fx.home, ".config", "gh"),
		filepath.Join(fx.root, "xdg-config", "gh"), filepath.Join(fx.home, ".netrc"), filepath.Join(fx.home, ".docker", "config.json"),
		filepath.Join(fx.home, ".npmrc"),
		filepath.Join(fx.root, "xdg-config", "acpd"), "/srv/acpd", "/etc/acpd/token", "/var/log/acpd.log",
		filepath.Join(fx.root, "xdg-cache", "acpd"),
	} {
		assert.Contains(t, defaults, p)
	}
	got := cfg.Tools.DenyRead()
	assert.Contains(t, got, filepath.Join(fx.home, "private"))
	assert.Contains(t, got, filepath.Join(fx.home, ".ssh"))
	assert.NotContains(t, got, filepath.Join(fx.home, ".npmrc"), "removed with !")
	assert.NotContains(t, got, "!"+filepath.Join(fx.home, "not-a-default"))

	_, _, err = fx.load(LoadOptions{ConfigPath: fx.write(t, "q/acpd.toml", "[tools]\nsandboxDenyRead = [\"/\"]\n")})
	require.ErrorContains(t, err, "would deny every file")
}

func TestFormatTOML_CapModes(t *testing.T) {
	t.Parallel()
	cfg := Default()
	assert.Contains(t, FormatTOML(cfg, Sources{}), "maxToolCallsPerTurn = 100  # default (adaptive: soft 100, backstop 1000)")
	cfg.Model.MaxToolCallsPerTurn, cfg.Model.MaxToolCallsPerTurnExplicit = 0, true
	assert.Contains(t, FormatTOML(cfg, Sources{"model.maxToolCallsPerTurn": {Kind: SourceFlag, Name: "max-tool-calls-per-turn"}}),
		"maxToolCallsPerTurn = 0  # flag --max-tool-calls-per-turn (cap disabled)")
	assert.Contains(t, FormatTOML(cfg, Sources{}), "# apiKey is unset  # env OPENAI_API_KEY is empty")
}

// The token budgets are unset by default and explicit once a layer sets
// them, 0 included (no budget, on purpose), as acpd config shows.
func TestFormatTOML_Budgets(t *testing.T) {
	t.Parallel()
	cfg := Default()
	out := FormatTOML(cfg, Sources{})
	assert.Contains(t, out, "# maxTokensPerTurn is unset  # default")
	assert.Contains(t, out, "# sessionTokenLimit is unset  # default")
	assert.Contains(t, out, "# price is unset  # default")
	assert.Contains(t, out, `cacheControl = "auto"  # default`)

	fx := newFixture(t)
	fx.env["ACPD_SESSION_TOKEN_LIMIT"] = "200000"
	cfg, src, err := fx.load(LoadOptions{Flags: map[string]string{"max-tokens-per-turn": "0"}})
	require.NoError(t, err)
	assert.True(t, cfg.Model.MaxTokensPerTurnExplicit)
	assert.True(t, cfg.Model.SessionTokenLimitExplicit)
	out = FormatTOML(cfg, src)
	assert.Contains(t, out, "maxTokensPerTurn = 0  # flag --max-tokens-per-turn")
	assert.Contains(t, out, "sessionTokenLimit = 200000  # env ACPD_SESSION_TOKEN_LIMIT")

	_, _, err = fx.load(LoadOptions{Flags: map[string]string{"max-tokens-per-turn": "-5"}})
	require.ErrorContains(t, err, "model.maxTokensPerTurn")
}

// Price tables: what is required, the defaults, and one currency.
func TestLoad_Prices(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ file, err string }{
		{"[model.price]\ninput = 1\n", "output is required"},
		{"[model.price]\ninput = 1\noutput = -2\n", "output: must be a price per million tokens of at least 0, got -2"},
		{"[model.price]\ninput = 1\noutput = 2\ncached = 0.1\n", `unknown key "cached"`},
		{"[model.price]\ninput = 1\noutput = 2\ncurrency = \"\"\n", "currency: must be a non-empty string"},
		{"[model]\nprice = 3\n", "must be a table"},
		{"[model.price]\ninput = 1\noutput = 2\n[model.prices]\nx = { input = 1, output = 2, currency = \"EUR\" }\n", `model "x": currency EUR differs from model.price's USD`},
	} {
		fx := newFixture(t)
		_, _, err := fx.load(LoadOptions{ConfigPath: fx.write(t, "c.toml", tc.file)})
		require.ErrorContains(t, err, tc.err, tc.file)
	}
	fx := newFixture(t)
	cfg, _, err := fx.load(LoadOptions{ConfigPath: fx.write(t, "c.toml", "[model.price]\ninput = 3\noutput = 15\n")})
	require.NoError(t, err)
	assert.Equal(t, &Price{Input: 3, CachedInput: 3, CacheWrite: 3, Output: 15, Currency: "USD"}, cfg.Model.Price, "cachedInput and cacheWrite default to input")
}

func TestFlags(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, f := range Flags() {
		assert.False(t, seen[f.Name], "duplicate flag %s", f.Name)
		seen[f.Name] = true
		assert.NotEmpty(t, f.Usage, f.Name)
		fd, _ := flagField(f.Name)
		require.NotNil(t, fd)
		assert.NotZero(t, f.Group, f.Name)
	}
	for _, name := range []string{"model", "max-tool-calls-per-turn", "approval-mode", "loop-detection", "skip-loop-detection", "data-dir", "log-level", "log-file", "trace"} {
		assert.True(t, seen[name], name)
	}
}

// TestLoopDetectionFlag: --loop-detection turns the duplicate halt on
// (skipLoopDetection = false); the old --skip-loop-detection keeps its own
// meaning; both are recorded as the flag the user typed.
func TestLoopDetectionFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		flag, val string
		skip      bool
	}{
		{"loop-detection", "true", false},
		{"loop-detection", "false", true},
		{"skip-loop-detection", "false", false},
		{"skip-loop-detection", "true", true},
	}
	for _, tt := range tests {
		fx := newFixture(t)
		cfg, src, err := fx.load(LoadOptions{Flags: map[string]string{tt.flag: tt.val}})
		require.NoError(t, err)
		assert.Equal(t, tt.skip, cfg.Model.SkipLoopDetection, "--%s=%s", tt.flag, tt.val)
		assert.Equal(t, Source{Kind: SourceFlag, Name: tt.flag}, src.Of("model.skipLoopDetection"))
	}
	fx := newFixture(t)
	_, _, err := fx.load(LoadOptions{Flags: map[string]string{"loop-detection": "maybe"}})
	require.ErrorContains(t, err, `flag --loop-detection: must be true or false, got "maybe"`)

	byName := map[string]Flag{}
	for _, f := range Flags() {
		byName[f.Name] = f
	}
	assert.Equal(t, "false", byName["loop-detection"].Default)
	assert.True(t, byName["skip-loop-detection"].Hidden)
	assert.Equal(t, "true", byName["skip-loop-detection"].Default)
	assert.Equal(t, []string{"openai", "anthropic", "gemini", "script"}, byName["provider"].Values)
	assert.Equal(t, "openai", byName["provider"].Default)
	assert.Equal(t, "2s", byName["guard-cancel-grace"].Default)
	assert.Equal(t, GroupServer, byName["listen"].Group)
	assert.Equal(t, GroupLoop, byName["stuck-window"].Group)
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"maxToolCallPerTurn", "maxToolCallsPerTurn"},
		{"approvalmode", "approvalMode"},
		{"nmae", "name"},
		{"baseURL", "baseUrl"},
		{"xyz", ""},
	}
	var names []string
	for _, f := range fields() {
		names = append(names, f.name)
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, suggest(tt.in, names), tt.in)
	}
	assert.Equal(t, 3, editDistance("kitten", "sitting"))
	assert.Equal(t, 0, editDistance("", ""))
}

func TestLoad_PositionProbeSeesEveryKey(t *testing.T) {
	t.Parallel()
	doc := "[model]\nname = \"x\"\n[tools]\nexclude = [\"a\"]\n[a.b.c]\nd = {e = 1}\n"
	var root map[string]toml.Primitive
	md, err := toml.Decode(doc, &root)
	require.NoError(t, err)
	for _, k := range md.Keys() {
		e, ok := locate(&md, root, k)
		require.True(t, ok, k.String())
		assert.NotZero(t, e.pos.Line, k.String())
	}
}

func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"", "[model]\nmaxToolCallsPerTurn = 1.5\n", "[model]\nname = \n", "[modle]\n",
		"model.name.x = 1\n", "[[tools]]\n", "[tools]\nexclude = [1, [2]]\n", "a = {b = {c = 1}}\n",
		"[model]\nprovider = \"script\"\nscript = \"\"\n", "[session]\ndataDir = \"~\"\n",
		"[log]\nlevel = \"debug\"\ntrace = true\n\"quoted key\" = 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env := map[string]string{"HOME": "/home/u"}
		_, _, err := Load(LoadOptions{
			ConfigPath: "/cfg/acpd.toml",
			WorkDir:    "/w",
			Getenv:     func(k string) string { return env[k] },
			ReadFile: func(p string) ([]byte, error) {
				if p == "/cfg/acpd.toml" {
					return data, nil
				}
				return nil, os.ErrNotExist
			},
		})
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a *config.Error: %v", err)
			}
			if ce.File != "" && (ce.Line < 1 || ce.Col < 1) {
				t.Fatalf("error without a position: %v", err)
			}
		}
	})
}

func BenchmarkLoad(b *testing.B) {
	doc := []byte("[model]\nname = \"m\"\nmaxToolCallsPerTurn = 50\ntemperature = 0.2\n[tools]\napprovalMode = \"auto-edit\"\nexclude = [\"web_fetch\"]\n[log]\nlevel = \"debug\"\n")
	env := map[string]string{"HOME": "/home/u", "OPENAI_API_KEY": "sk"}
	opts := LoadOptions{
		ConfigPath: "/cfg/acpd.toml", WorkDir: "/w",
		Getenv: func(k string) string { return env[k] },
		ReadFile: func(p string) ([]byte, error) {
			if p == "/cfg/acpd.toml" {
				return doc, nil
			}
			return nil, os.ErrNotExist
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Load(opts); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMCPImport: mcp.import takes the agents once each; from the
// environment a list or "none" (an empty variable is no setting).
func TestMCPImport(t *testing.T) {
	for _, c := range []struct {
		env  string
		want []string
		err  string
	}{
		{"none", []string{}, ""},
		{"claude, codex", []string{"claude", "codex"}, ""},
		{"cursor", nil, `unknown agent "cursor"`},
		{"gemini,gemini", nil, `"gemini" is listed twice`},
	} {
		cfg, _, err := Load(LoadOptions{Getenv: func(k string) string {
			switch k {
			case "ACPD_MCP_IMPORT":
				return c.env
			case "ACPD_DATA_DIR":
				return "/var/acpd"
			}
			return ""
		}, ReadFile: func(string) ([]byte, error) { return nil, fs.ErrNotExist }})
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.env)
			continue
		}
		require.NoError(t, err, c.env)
		assert.Equal(t, c.want, cfg.MCP.Import, c.env)
	}
}
