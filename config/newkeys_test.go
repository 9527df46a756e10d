package config

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoad_NewKeyErrors pins the errors for the keys added with context
// management, loop windows, instruction files, telemetry and the sandbox:
// each names the file, line, column and key, and says what was wanted.
func TestLoad_NewKeyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		file      string
		line, col int
		msg       string
	}{
		{name: "threshold zero", file: "[model]\ncompactThreshold = 0\n", line: 2, col: 20,
			msg: "model.compactThreshold: must be greater than 0 and at most 1, got 0"},
		{name: "threshold negative", file: "[model]\ncompactThreshold = -0.5\n", line: 2, col: 20,
			msg: "model.compactThreshold: must be greater than 0 and at most 1, got -0.5"},
		{name: "threshold above one", file: "[model]\ncompactThreshold = 1.01\n", line: 2, col: 20,
			msg: "model.compactThreshold: must be greater than 0 and at most 1, got 1.01"},
		{name: "threshold nan", file: "[model]\ncompactThreshold = nan\n", line: 2, col: 20,
			msg: "model.compactThreshold: must be greater than 0 and at most 1, got nan"},
		{name: "threshold a string", file: "[model]\ncompactThreshold = \"0.5\"\n", line: 2, col: 20,
			msg: `model.compactThreshold: must be a number, got string "0.5"`},
		{name: "compaction model not a string", file: "[model]\ncompactionModel = 5\n", line: 2, col: 19,
			msg: "model.compactionModel: must be a string, got integer 5"},
		{name: "negative window", file: "[model]\ncontextWindow = -1\n", line: 2, col: 17,
			msg: "model.contextWindow: must be at least 0, got -1"},
		{name: "windows not a table", file: "[model]\ncontextWindows = 3\n", line: 2, col: 18,
			msg: "model.contextWindows: must be a table of model ids to token counts, got integer 3"},
		{name: "windows negative entry", file: "[model]\ncontextWindows = { \"gpt-4o\" = -5 }\n", line: 2, col: 19,
			msg: `model.contextWindows: model "gpt-4o": must be at least 1, got -5`},
		{name: "windows zero entry", file: "[model]\n[model.contextWindows]\nm = 0\n", line: 2, col: 1,
			msg: `model.contextWindows: model "m": must be at least 1, got 0`},
		{name: "windows string entry", file: "[model]\ncontextWindows = { m = \"big\" }\n", line: 2, col: 19,
			msg: `model.contextWindows: model "m": must be an integer, got string "big"`},
		{name: "stuck window negative", file: "[model]\nstuckWindow = -1\n", line: 2, col: 15,
			msg: "model.stuckWindow: must be at least 0, got -1"},
		{name: "stuck window below the stuck threshold", file: "[model]\nstuckWindow = 5\n", line: 2, col: 15,
			msg: "model.stuckWindow: must be 0 (the whole turn) or at least 6 (the repeats of one call that mean stuck), got 5"},
		{name: "stuck window a float", file: "[model]\nstuckWindow = 2.5\n", line: 2, col: 15,
			msg: "model.stuckWindow: must be an integer, got float 2.5"},
		{name: "file names a string", file: "[context]\nfileNames = \"AGENTS.md\"\n", line: 2, col: 13,
			msg: `context.fileNames: must be an array of strings, got string "AGENTS.md"`},
		{name: "file names empty name", file: "[context]\nfileNames = [\"AGENTS.md\", \"\"]\n", line: 2, col: 14,
			msg: `context.fileNames: element 1: must be a file name without a folder, got ""`},
		{name: "file names a path", file: "[context]\nfileNames = [\"../secret.md\"]\n", line: 2, col: 14,
			msg: `context.fileNames: element 0: must be a file name without a folder, got "../secret.md"`},
		{name: "environment not a bool", file: "[context]\nenvironment = \"yes\"\n", line: 2, col: 15,
			msg: `context.environment: must be a boolean, got string "yes"`},
		{name: "unknown context key", file: "[context]\nfileName = [\"A.md\"]\n", line: 2, col: 1,
			msg: `unknown key "context.fileName"; did you mean "fileNames"?`},
		{name: "telemetry enabled not a bool", file: "[telemetry]\nenabled = 1\n", line: 2, col: 11,
			msg: "telemetry.enabled: must be a boolean, got integer 1"},
		{name: "telemetry protocol", file: "[telemetry]\nprotocol = \"udp\"\n", line: 2, col: 12,
			msg: `telemetry.protocol: invalid value "udp": must be one of "", "grpc", "http"`},
		{name: "telemetry endpoint not a URL", file: "[telemetry]\nendpoint = \"::nope\"\n", line: 2, col: 12,
			msg: `telemetry.endpoint: must be an http or https URL such as http://localhost:4317, got "::nope"`},
		{name: "telemetry endpoint scheme", file: "[telemetry]\nendpoint = \"ftp://collector\"\n", line: 2, col: 12,
			msg: `telemetry.endpoint: must be an http or https URL such as http://localhost:4317, got "ftp://collector"`},
		{name: "telemetry endpoint port", file: "[telemetry]\nendpoint = \"http://collector:70000\"\n", line: 2, col: 12,
			msg: `telemetry.endpoint: must be an http or https URL such as http://localhost:4317, got "http://collector:70000" (port 70000)`},
		{name: "sandbox mode", file: "[tools]\nsandbox = \"on\"\n", line: 2, col: 11,
			msg: `tools.sandbox: invalid value "on": must be one of "auto", "required", "off"`},
		{name: "sandbox writable a string", file: "[tools]\nsandboxWritable = \"/tmp\"\n", line: 2, col: 19,
			msg: `tools.sandboxWritable: must be an array of strings, got string "/tmp"`},
		{name: "sandbox network not a bool", file: "[tools]\nsandboxNetwork = \"no\"\n", line: 2, col: 18,
			msg: `tools.sandboxNetwork: must be true, false or "proxy", got "no"`},
		{name: "web fetch allow private not a bool", file: "[tools]\nwebFetchAllowPrivate = 1\n", line: 2, col: 24,
			msg: "tools.webFetchAllowPrivate: must be a boolean, got integer 1"},
		{name: "listen without a port", file: "[server]\nlisten = \"localhost\"\n", line: 2, col: 10,
			msg: `server.listen: must be host:port such as 127.0.0.1:8123, got "localhost"`},
		{name: "listen port out of range", file: "[server]\nlisten = \"127.0.0.1:70000\"\n", line: 2, col: 10,
			msg: `server.listen: must be host:port with a port from 0 to 65535, got "127.0.0.1:70000"`},
		{name: "token env not a name", file: "[server]\ntokenEnv = \"my token\"\n", line: 2, col: 12,
			msg: `server.tokenEnv: must name an environment variable (letters, digits, _), got "my token"`},
		{name: "origin with a path", file: "[server]\nallowedOrigins = [\"https://e.example/app\"]\n", line: 2, col: 19,
			msg: `server.allowedOrigins: element 0: must be an origin such as https://editor.example.com, got "https://e.example/app"`},
		{name: "host with a port", file: "[server]\nallowedHosts = [\"a.example:80\"]\n", line: 2, col: 17,
			msg: `server.allowedHosts: element 0: must be a host name without port or scheme, such as acpd.example.com, got "a.example:80"`},
		{name: "message bound too small", file: "[server]\nmaxMessageBytes = 10\n", line: 2, col: 19,
			msg: "server.maxMessageBytes: must be at least 4096, got 10"},
		{name: "cert without key", file: "[server]\ntlsCert = \"/c.pem\"\n", line: 2, col: 1,
			msg: "server.tlsCert is set but server.tlsKey is not: TLS needs both the certificate and its key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NotEmpty(t, tt.msg, "every new key's message is pinned")
			assertFileError(t, tt.file, tt.line, tt.col, tt.msg)
		})
	}
}

// The endpoint forms the exporters accept load.
func TestLoad_TelemetryEndpointForms(t *testing.T) {
	t.Parallel()
	for _, e := range []string{"localhost:4317", "http://collector:4318/", "https://otel.example.com", "http://[::1]:4317"} {
		fx := newFixture(t)
		path := fx.write(t, "ok.toml", fmt.Sprintf("[telemetry]\nendpoint = %q\n", e))
		c, _, err := fx.load(LoadOptions{ConfigPath: path})
		require.NoError(t, err, e)
		assert.Equal(t, e, c.Telemetry.Endpoint)
	}
}
