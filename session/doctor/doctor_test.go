package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/config"
	"github.com/acpd/acpd/session/mcp/imported"
	"github.com/acpd/acpd/session/model/anthropic/anthropictest"
	"github.com/acpd/acpd/session/model/gemini/geminitest"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/telemetry/telemetrytest"
	"github.com/acpd/acpd/session/tools/sandbox/sandboxtest"
)

func okConfig(t *testing.T, baseURL string) config.Config {
	cfg := config.Default()
	cfg.Model.Name = "m1"
	cfg.Model.BaseURL = baseURL
	cfg.Model.APIKey = "sk-test"
	cfg.Session.DataDir = filepath.Join(t.TempDir(), "data")
	return cfg
}

// run runs the checks and returns their lines, each check's wrapped
// lines joined back into one.
func run(t *testing.T, env *Env) (bool, []string) {
	t.Helper()
	env.Width = 80
	var out bytes.Buffer
	ok := Run(context.Background(), env, Checks(), &out)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		if strings.HasPrefix(l, " ") && len(lines) > 0 {
			lines[len(lines)-1] += " " + strings.TrimSpace(l)
			continue
		}
		lines = append(lines, l)
	}
	return ok, lines
}

// line returns the output line of the named check.
func line(t *testing.T, lines []string, name string) string {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(l, "  "+name+"  ") {
			return l
		}
	}
	t.Fatalf("no line for %q in:\n%s", name, strings.Join(lines, "\n"))
	return ""
}

func TestDoctor_AllPassAgainstScriptedServer(t *testing.T) {
	srv := modeltest.NewServer(t)
	srv.SetModels("other", "m1")
	collector := telemetrytest.NewCollector(t)
	cfg := okConfig(t, srv.BaseURL())
	cfg.Telemetry = config.TelemetryConfig{Enabled: true, Protocol: "http", Endpoint: collector.URL()}
	claude := anthropictest.NewServer(t)
	claude.SetAPIKey("sk-ant")
	claude.SetModels("claude-sonnet-4-5")
	cfg.Providers = []config.ProviderConfig{
		{ID: "anthropic", Protocol: "anthropic", BaseURL: claude.URL, APIKeyEnv: "ANTHROPIC_API_KEY", APIKey: "sk-ant",
			Models: []config.ProviderModel{{ID: "claude-sonnet-4-5"}}},
		{ID: "local", Protocol: "openai", BaseURL: srv.BaseURL(), Models: []config.ProviderModel{{ID: "other"}}},
	}
	cfg.Server.Listen = "127.0.0.1:8123"
	cfg.Server.TokenFile = writeToken(t, 0o600)
	env := &Env{Config: cfg, Sources: config.Sources{}, Sandbox: policyOf(cfg, landlockABI7)}
	env.MCP = func() imported.Found {
		return imported.Found{Servers: []imported.Server{{MCPServer: acp.MCPServer{Name: "gh", Type: "http", URL: "https://mcp.example/"},
			Agent: imported.Gemini, Scope: imported.ScopeUser, File: "/home/u/.gemini/settings.json"}}}
	}
	ok, lines := run(t, env)
	assert.True(t, ok, strings.Join(lines, "\n"))
	require.Len(t, lines, len(Checks()), "one line per check")
	for _, l := range lines {
		assert.True(t, strings.HasPrefix(l, "ok  "), l)
	}
	assert.Contains(t, line(t, lines, "endpoint"), "model m1 listed")
	assert.Contains(t, line(t, lines, "providers"), "anthropic: ok "+claude.URL+"/v1/models reachable, model claude-sonnet-4-5 listed; local: ok")
	assert.Contains(t, line(t, lines, "data folder"), "is writable")
	assert.Contains(t, line(t, lines, "imported mcp"), "1 started in every session here: gh (http https://mcp.example/; Gemini CLI, user scope, /home/u/.gemini/settings.json)")
	assert.Contains(t, line(t, lines, "telemetry"), "http "+collector.URL()+"/v1/traces accepted an empty export")
	entries, err := os.ReadDir(env.Config.Session.DataDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the probe file is removed")
}

// Each provider entry is checked with its own protocol's request and key:
// an unset key variable, a refused key and an unlisted model fail, naming
// the provider.
func TestDoctor_Providers(t *testing.T) {
	srv := modeltest.NewServer(t)
	srv.SetModels("m1")
	claude := anthropictest.NewServer(t)
	claude.SetAPIKey("the-right-key")
	claude.SetModels("claude-sonnet-4-5")
	cfg := okConfig(t, srv.BaseURL())
	cfg.Providers = []config.ProviderConfig{
		{ID: "anthropic", Protocol: "anthropic", BaseURL: claude.URL, APIKeyEnv: "ANTHROPIC_API_KEY", APIKey: "wrong",
			Models: []config.ProviderModel{{ID: "claude-sonnet-4-5"}}},
		{ID: "openrouter", Protocol: "openai", BaseURL: "https://openrouter.ai/api/v1", APIKeyEnv: "OPENROUTER_API_KEY",
			Models: []config.ProviderModel{{ID: "x"}}},
	}
	ok, lines := run(t, &Env{Config: cfg})
	assert.False(t, ok)
	l := line(t, lines, "providers")
	assert.True(t, strings.HasPrefix(l, "FAIL"), l)
	assert.Contains(t, l, "anthropic: FAIL GET "+claude.URL+"/v1/models: 401 Unauthorized: the provider refused the key read from ANTHROPIC_API_KEY")
	assert.Contains(t, l, "openrouter: FAIL environment variable OPENROUTER_API_KEY is empty or unset")
}

// A Gemini provider is checked at the model list its requests' root has:
// the host alone and a base that already names v1beta (as Google's examples
// write it) both reach GET /v1beta/models and find the model.
func TestDoctor_GeminiBaseWithOrWithoutVersion(t *testing.T) {
	gem := geminitest.NewServer(t)
	gem.SetModels("gemini-2.5-pro")
	for _, base := range []string{gem.URL, gem.URL + "/v1beta", gem.URL + "/v1beta/"} {
		cfg := okConfig(t, "http://127.0.0.1:9/v1")
		cfg.Providers = []config.ProviderConfig{{ID: "gemini", Protocol: "gemini", BaseURL: base, APIKeyEnv: "GEMINI_API_KEY", APIKey: "k",
			Models: []config.ProviderModel{{ID: "gemini-2.5-pro"}}}}
		_, lines := run(t, &Env{Config: cfg})
		l := line(t, lines, "providers")
		assert.True(t, strings.HasPrefix(l, "ok"), "base %s: %s", base, l)
		assert.Contains(t, l, gem.URL+"/v1beta/models reachable, model gemini-2.5-pro listed", base)
	}
}

func TestDoctor_ModelNotListed(t *testing.T) {
	srv := modeltest.NewServer(t)
	srv.SetModels("other")
	ok, lines := run(t, &Env{Config: okConfig(t, srv.BaseURL())})
	assert.False(t, ok)
	assert.Regexp(t, `^FAIL  endpoint .*model m1 is not among its 1 models`, line(t, lines, "endpoint"))
}

func TestDoctor_ClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	ok, lines := run(t, &Env{Config: okConfig(t, "http://"+addr+"/v1"), Timeout: 2 * time.Second})
	assert.False(t, ok)
	l1 := line(t, lines, "endpoint")
	assert.True(t, strings.HasPrefix(l1, "FAIL"), l1)
	assert.Contains(t, l1, "GET http://"+addr+"/v1/models")
	assert.Contains(t, l1, "connection refused")
}

func TestDoctor_UnauthorizedNamesTheVariable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "Bearer sk-test", r.Header.Get("Authorization"))
		http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	cfg := okConfig(t, srv.URL)
	cfg.Model.APIKeyEnv = "MY_KEY"
	ok, lines := run(t, &Env{Config: cfg})
	assert.False(t, ok)
	assert.Contains(t, line(t, lines, "endpoint"), "401 Unauthorized: the provider refused the key read from MY_KEY (it was not empty)")
}

func TestDoctor_SlowEndpointTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ok, lines := run(t, &Env{Config: okConfig(t, srv.URL), Timeout: 100 * time.Millisecond})
	assert.False(t, ok)
	assert.Contains(t, line(t, lines, "endpoint"), "no answer within 100ms")
}

func TestDoctor_MissingModelAndKey(t *testing.T) {
	srv := modeltest.NewServer(t)
	cfg := okConfig(t, srv.BaseURL())
	cfg.Model.Name, cfg.Model.APIKey = "", ""
	ok, lines := run(t, &Env{Config: cfg, Sources: config.Sources{"model.baseUrl": {Kind: config.SourceFlag, Name: "base-url"}}})
	assert.False(t, ok)
	m := line(t, lines, "model")
	for _, want := range []string{"FAIL", "[model] name", "OPENAI_MODEL", "--model"} {
		assert.Contains(t, m, want)
	}
	assert.Regexp(t, `^ok +api key +none set, none needed by a local endpoint`, line(t, lines, "api key"))
}

// TestDoctor_FirstRunOneCause: with nothing configured the missing model
// is said once; the key and the endpoint, which fail for that reason, skip,
// and no endpoint nobody chose (api.openai.com) is asked.
func TestDoctor_FirstRunOneCause(t *testing.T) {
	cfg := config.Default()
	cfg.Session.DataDir = filepath.Join(t.TempDir(), "data")
	asked := false
	client := &http.Client{Transport: roundTrip(func(*http.Request) (*http.Response, error) {
		asked = true
		return nil, errors.New("no network in this test")
	})}
	ok, lines := run(t, &Env{Config: cfg, Sources: config.Sources{}, HTTP: client})
	assert.False(t, ok)
	fails := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "FAIL") {
			fails++
		}
	}
	assert.Equal(t, 1, fails, "one cause, one failure:\n%s", strings.Join(lines, "\n"))
	assert.Regexp(t, `^FAIL +model +no model configured`, line(t, lines, "model"))
	assert.Regexp(t, `^skip +api key +no model or endpoint configured`, line(t, lines, "api key"))
	assert.Regexp(t, `^skip +endpoint +no model or endpoint configured`, line(t, lines, "endpoint"))
	assert.False(t, asked, "no endpoint was probed")
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestDoctor_NamedKeyVariableEmpty: model.apiKeyEnv set (in a file) to a
// variable that is empty fails even for a local endpoint: naming it says a
// key is wanted.
func TestDoctor_NamedKeyVariableEmpty(t *testing.T) {
	srv := modeltest.NewServer(t)
	srv.SetModels("m1")
	cfg := okConfig(t, srv.BaseURL())
	cfg.Model.APIKey, cfg.Model.APIKeyEnv = "", "LOCAL_LLM_KEY"
	src := config.Sources{"model.apiKeyEnv": {Kind: config.SourceFile, File: "/etc/acpd.toml", Line: 3}}
	ok, lines := run(t, &Env{Config: cfg, Sources: src})
	assert.False(t, ok)
	assert.Regexp(t, `^FAIL +api key +environment variable LOCAL_LLM_KEY is empty or unset \(model.apiKeyEnv names it, /etc/acpd.toml:3\)`, line(t, lines, "api key"))
}

// TestDoctor_MismatchListsOfferedModels: a model the endpoint does not
// offer fails with the models it does offer, sorted, at most 20.
func TestDoctor_MismatchListsOfferedModels(t *testing.T) {
	srv := modeltest.NewServer(t)
	srv.SetModels("qwen3-coder-plus", "qwen-max", "deepseek-v3")
	cfg := okConfig(t, srv.BaseURL())
	cfg.Model.Name = "qwen3-coder"
	_, lines := run(t, &Env{Config: cfg, Sources: config.Sources{}})
	assert.Regexp(t, `^FAIL +endpoint +.* reachable, but model qwen3-coder is not among its 3 models: deepseek-v3, qwen-max, qwen3-coder-plus$`, line(t, lines, "endpoint"))

	var many []string
	for i := range 25 {
		many = append(many, fmt.Sprintf("m%02d", i))
	}
	assert.Equal(t, strings.Join(many[:20], ", ")+" and 5 more", offered(many))
}

// TestDoctor_LinesWrapped: a long detail (the sandbox's) is wrapped at the
// width, its continued lines indented under the detail column.
func TestDoctor_LinesWrapped(t *testing.T) {
	const Width = 80
	got := wrap("ok    shell sandbox  ", strings.Repeat("word ", 40)+"/a/very/long/path/that/cannot/be/broken/anywhere/at/all/xxxxxxxxxxxxxxxxxxxxxxxxxx", Width)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Greater(t, len(lines), 2)
	for i, l := range lines[:len(lines)-1] {
		assert.LessOrEqual(t, len(l), Width, "line %d: %q", i, l)
		if i > 0 {
			assert.True(t, strings.HasPrefix(l, strings.Repeat(" ", len("ok    shell sandbox  "))+"word"), l)
		}
	}
	assert.Contains(t, lines[len(lines)-1], "/a/very/long/path", "a word longer than the room is left whole")
}

// TestDoctor_KeylessLocalEndpoint: an Ollama-style server on this machine
// takes requests without a key, as acpd run sends them; doctor passes it
// and asks it without an Authorization header.
func TestDoctor_KeylessLocalEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Empty(t, r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"qwen3-coder:30b","object":"model"}]}`))
	}))
	defer srv.Close()
	cfg := okConfig(t, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)+"/v1")
	cfg.Model.Name, cfg.Model.APIKey = "qwen3-coder:30b", ""
	_, lines := run(t, &Env{Config: cfg})
	assert.Regexp(t, `^ok +api key +none set, none needed by a local endpoint \(http://localhost:\d+/v1\)$`, line(t, lines, "api key"))
	assert.Regexp(t, `^ok +endpoint +.*model qwen3-coder:30b listed$`, line(t, lines, "endpoint"))
}

// TestDoctor_KeylessRemoteEndpointFails: a provider on the internet still
// needs its key, and the message names the variable.
func TestDoctor_KeylessRemoteEndpointFails(t *testing.T) {
	cfg := okConfig(t, "https://dashscope.aliyuncs.com/compatible-mode/v1")
	cfg.Model.APIKey, cfg.Model.APIKeyEnv = "", "DASHSCOPE_API_KEY"
	failing := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("no network in this test")
	})}
	ok, lines := run(t, &Env{Config: cfg, HTTP: failing})
	assert.False(t, ok)
	assert.Regexp(t, `^FAIL +api key +environment variable DASHSCOPE_API_KEY is empty or unset`, line(t, lines, "api key"))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestLocalEndpoint(t *testing.T) {
	for u, want := range map[string]bool{
		"http://localhost:11434/v1":      true,
		"http://127.0.0.1:8080/v1":       true,
		"http://[::1]:1234/v1":           true,
		"http://192.168.1.20:11434/v1":   true,
		"http://10.0.0.5/v1":             true,
		"http://ollama.localhost/v1":     true,
		"https://api.openai.com/v1":      false,
		"https://8.8.8.8/v1":             false,
		"http://localhost.example.com/v": false,
		"::not a url":                    false,
	} {
		assert.Equal(t, want, localEndpoint(u), u)
	}
}

func TestDoctor_ConfigErrorSkipsTheRest(t *testing.T) {
	ok, lines := run(t, &Env{ConfigErr: errors.New("acpd.toml:3:1: unknown key \"modle\"\nsecond problem")})
	assert.False(t, ok)
	require.Len(t, lines, len(Checks()), "a multi-line error stays on one line")
	assert.Contains(t, lines[0], `FAIL  configuration  acpd.toml:3:1: unknown key "modle" ; second problem`)
	for _, l := range lines[1:] {
		assert.True(t, strings.HasPrefix(l, "skip"), l)
	}
}

// TestDoctor_DataFolderNotWritable: a data folder that exists but refuses
// writes, and one that cannot exist (a file is in the way); both fail, for
// root too.
func TestDoctor_DataFolderNotWritable(t *testing.T) {
	srv := modeltest.NewServer(t)
	srv.SetModels("m1")
	cfg := okConfig(t, srv.BaseURL())
	require.NoError(t, os.MkdirAll(cfg.Session.DataDir, 0o700))
	var r Result
	sandboxtest.Deny(t, sandboxtest.Denial{Write: []string{cfg.Session.DataDir}}, func() {
		r = checkDataDir(t.Context(), &Env{Config: cfg})
	})
	assert.Equal(t, Fail, r.Status)
	assert.Contains(t, r.Detail, "is not writable")
	assert.Contains(t, r.Detail, "permission denied")

	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cfg.Session.DataDir = filepath.Join(file, "data")
	ok, lines := run(t, &Env{Config: cfg, Sandbox: policyOf(cfg, landlockABI7)})
	assert.False(t, ok)
	assert.Contains(t, line(t, lines, "data folder"), "not a directory")
}

// The telemetry check: off it does not apply; on, the collector must take an
// empty export over the configured protocol, and a refusal or silence fails
// with the target named.
func TestDoctor_Telemetry(t *testing.T) {
	withTelemetry := func(proto, endpoint string) *Env {
		cfg := okConfig(t, "http://127.0.0.1:1/v1")
		cfg.Telemetry = config.TelemetryConfig{Enabled: true, Protocol: proto, Endpoint: endpoint}
		return &Env{Config: cfg, Timeout: 500 * time.Millisecond, Getenv: func(string) string { return "" }}
	}
	r := checkTelemetry(t.Context(), &Env{Config: okConfig(t, "")})
	assert.Equal(t, Result{Status: Skip, Detail: "off ([telemetry] enabled = false)"}, r)

	g := telemetrytest.NewGRPCCollector(t)
	r = checkTelemetry(t.Context(), withTelemetry("grpc", g.URL()))
	assert.Equal(t, Result{Status: OK, Detail: "grpc " + g.URL() + " accepted an empty export"}, r)
	assert.Equal(t, 1, g.Requests())

	r = checkTelemetry(t.Context(), withTelemetry("http", "http://127.0.0.1:1"))
	assert.Equal(t, Fail, r.Status)
	assert.Contains(t, r.Detail, "http http://127.0.0.1:1/v1/traces: ")
	assert.Contains(t, r.Detail, "connection refused")

	hole, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer hole.Close()
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	r = checkTelemetry(t.Context(), withTelemetry("http", "http://"+hole.Addr().String()))
	assert.Equal(t, Result{Status: Fail, Detail: "http http://" + hole.Addr().String() + "/v1/traces: no answer within 500ms"}, r)

	r = checkTelemetry(t.Context(), withTelemetry("udp", "http://127.0.0.1:1"))
	assert.Equal(t, Fail, r.Status)
	assert.Contains(t, r.Detail, "telemetry.protocol")
}
