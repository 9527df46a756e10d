package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/headless"
	"github.com/acpd/acpd/session/model/modeltest"
	"github.com/acpd/acpd/session/telemetry/telemetrytest"
	sbx "github.com/acpd/acpd/session/tools/sandbox"
)

// TestDoctorCmd_ScriptedServer runs `acpd doctor` against the scripted
// model server and an in-test OTLP/gRPC collector: every check passes, one
// line each, exit 0.
func TestDoctorCmd_ScriptedServer(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t)
	srv.SetModels("m1")
	e := newRunEnv(t)
	cfgDir := filepath.Join(e.dir, "config", "acpd")
	require.NoError(t, os.MkdirAll(cfgDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "config.toml"),
		[]byte("[model]\nname = \"m1\"\nbaseUrl = \""+srv.BaseURL()+"\"\n"), 0o644))
	collector := telemetrytest.NewGRPCCollector(t)
	e.env = append(e.env, "OPENAI_API_KEY=sk-test", "ACPD_TELEMETRY=true", "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL())
	o := e.run(t, "", "doctor")
	require.Equal(t, 0, o.code, "stdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	lines := checkLines(o.stdout)
	require.Len(t, lines, 10, o.stdout)
	for _, l := range lines {
		if strings.Contains(l, "  server  ") {
			// No [server] listen: acpd serve is not set up.
			assert.True(t, strings.HasPrefix(l, "skip  "), l)
			continue
		}
		if strings.Contains(l, "  providers  ") {
			// No [modelProviders] entries: nothing to check.
			assert.True(t, strings.HasPrefix(l, "skip  "), l)
			continue
		}
		if strings.Contains(l, "  shell sandbox  ") && !sbx.Probe().Usable() {
			// This machine has no usable Landlock: mode auto warns.
			assert.True(t, strings.HasPrefix(l, "WARN  "), l)
			continue
		}
		assert.True(t, strings.HasPrefix(l, "ok  "), l)
	}
	assert.Regexp(t, `(?m)^\S+ +shell sandbox  mode auto, landlock`, o.stdout)
	assert.Contains(t, o.stdout, filepath.Join(cfgDir, "config.toml"))
	assert.Contains(t, o.stdout, "m1 (from ")
	assert.Contains(t, o.stdout, "read from OPENAI_API_KEY")
	assert.Contains(t, o.stdout, srv.BaseURL()+"/models reachable, model m1 listed")
	assert.Contains(t, o.stdout, filepath.Join(e.dir, "state", "acpd")+" is writable")
	assert.Contains(t, o.stdout, "grpc "+collector.URL()+" accepted an empty export")
	assert.Equal(t, 1, collector.Requests())
}

// TestDoctorCmd_ClosedPort: the endpoint check fails and doctor exits 1;
// a fresh home without a model or key fails those checks too.
func TestDoctorCmd_ClosedPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	e := newRunEnv(t)
	o := e.run(t, "", "doctor", "--base-url", "http://"+addr+"/v1")
	require.Equal(t, 1, o.code, "stdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	assert.Regexp(t, `(?m)^ok    configuration  valid`, o.stdout)
	assert.Regexp(t, `(?m)^FAIL  model .*\[model\] name.*OPENAI_MODEL.*--model`, o.stdout)
	assert.Regexp(t, `(?m)^ok    api key +none set, none needed by a local endpoint`, o.stdout)
	assert.Regexp(t, `(?m)^FAIL  endpoint .*GET http://`+addr+`/v1/models: .*connection refused`, o.stdout)
	assert.Regexp(t, `(?m)^ok    data folder`, o.stdout)
	assert.Contains(t, o.stderr, "some checks failed")
}

// TestDoctorCmd_BadConfig reports the configuration error as a failed check
// (exit 1), where other commands exit 2.
func TestDoctorCmd_BadConfig(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	bad := filepath.Join(e.dir, "bad.toml")
	require.NoError(t, os.WriteFile(bad, []byte("[model]\nnmae = \"x\"\n"), 0o644))
	o := e.run(t, "", "doctor", "--config", bad)
	require.Equal(t, 1, o.code, o.stdout+o.stderr)
	assert.Regexp(t, `^FAIL  configuration  .*bad.toml:2`, o.stdout)
	assert.Len(t, checkLines(o.stdout), 10, "one line per check, the sandbox's, telemetry's, the providers', the server's and the imported MCP servers' included")
	fails := 0
	for _, l := range checkLines(o.stdout) {
		if strings.HasPrefix(l, "FAIL") {
			fails++
		}
	}
	assert.Equal(t, 1, fails, "the other checks skip: one cause, reported once\n%s", o.stdout)
}

// checkLines are doctor's lines, a check's wrapped lines joined into one.
func checkLines(stdout string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
		if strings.HasPrefix(l, " ") && len(lines) > 0 {
			lines[len(lines)-1] += " " + strings.TrimSpace(l)
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// TestDoctorCmd_FirstRun: a fresh home, nothing configured: the missing
// model fails once, the key and endpoint skip (no probe of an endpoint
// nobody chose), every line fits 80 columns, and a misspelt --base-url is
// a configuration error named as such.
func TestDoctorCmd_FirstRun(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	o := e.run(t, "", "doctor")
	require.Equal(t, 1, o.code, o.stdout+o.stderr)
	assert.Regexp(t, `(?m)^FAIL  model +no model configured`, o.stdout)
	assert.Regexp(t, `(?m)^skip  api key +no model or endpoint configured`, o.stdout)
	assert.Regexp(t, `(?m)^skip  endpoint +no model or endpoint configured`, o.stdout)
	assert.NotContains(t, o.stdout, "api.openai.com")
	assert.Equal(t, 1, strings.Count(o.stdout, "FAIL"), o.stdout)
	assert.Greater(t, len(checkLines(o.stdout)[6]), 200, "piped, the sandbox's check is one line, for grep")

	// On a terminal (80 columns) every line fits.
	o = e.runTerminal(t, true, "doctor")
	require.Equal(t, 1, o.code, o.stderr)
	assert.Len(t, checkLines(strings.TrimSuffix(o.stderr, "acpd doctor: some checks failed\n")), 10, o.stderr)
	for _, l := range strings.Split(o.stderr, "\n") {
		if !strings.HasPrefix(l, " ") || len(strings.Fields(l)) > 1 {
			// (a continued line of one word — a long path — is left whole)
			assert.LessOrEqual(t, len([]rune(l)), 80, "%q", l)
		}
	}
	assert.Regexp(t, `(?m)^ok    shell sandbox  \S.*\n {21}\S`, o.stderr, "the sandbox's detail goes on under itself")

	o = e.run(t, "", "doctor", "--base-url", "htp://localhost:8080/v1", "--model", "m1")
	require.Equal(t, 1, o.code)
	assert.Regexp(t, `^FAIL  configuration  flag --base-url: model.baseUrl: must be an http or https URL`, o.stdout)
	assert.Equal(t, 1, strings.Count(o.stdout, "FAIL"), o.stdout)
}

// TestDoctorCmd_ServerFromFlags: acpd doctor takes acpd serve's flags and
// checks the server set up by them, as acpd serve would start it.
func TestDoctorCmd_ServerFromFlags(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	token := filepath.Join(e.dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("0123456789abcdef0123456789abcdef\n"), 0o600))
	o := e.run(t, "", "doctor", "--listen", "127.0.0.1:8123", "--token-file", token)
	joined := strings.Join(checkLines(o.stdout), "\n")
	assert.Regexp(t, `(?m)^ok    server +127.0.0.1:8123 \(loopback, no TLS\); token file `+regexp.QuoteMeta(token)+` \(owner only\)`, joined)
	o = e.run(t, "", "doctor", "--listen", "0.0.0.0:8123", "--token-file", token)
	assert.Regexp(t, `(?m)^FAIL  server +refusing to listen on 0.0.0.0:8123`, strings.Join(checkLines(o.stdout), "\n"))
}

// TestRunCmd_FreshHomeWithoutModel: `acpd run` in a home without any
// configuration exits 2 with the message naming the three settings.
func TestRunCmd_FreshHomeWithoutModel(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	o := e.run(t, "", "run", "--cwd", e.ws, "hi")
	require.Equal(t, exitUsage, o.code, "stdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	for _, want := range []string{"No model is configured", "[model] name", "OPENAI_MODEL", "--model", "acpd doctor"} {
		assert.Contains(t, o.stderr, want)
	}
	assert.NotContains(t, o.stderr, "writing the transcript failed")

	o = e.run(t, "", "run", "--cwd", e.ws, "--output-format", "json", "hi")
	require.Equal(t, exitUsage, o.code, o.stderr)
	r := decodeResult(t, strings.TrimSpace(o.stdout))
	require.NotNil(t, r.Error)
	assert.Equal(t, -32603, r.Error.Code)
	assert.JSONEq(t, `{"errorKind":"model_not_configured"}`, string(r.Error.Data))
}

// TestRunCmd_PlanModeStaysHeadless: a headless run follows its approval
// mode; in plan mode exit_plan_mode is answered "keep planning".
func TestRunCmd_PlanModeStaysHeadless(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"id":"p1","name":"exit_plan_mode","arguments":{"plan":"1. write it"}}]}
{"text":"Staying in plan mode."}
`)
	o := e.run(t, "", append(e.scripted(script, "--approval-mode", "plan", "--output-format", "json"), "plan it")...)
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stderr, `kept plan mode for "Plan: 1. write it"`)
	r := decodeResult(t, strings.TrimSpace(o.stdout))
	require.Len(t, r.ToolCalls, 1)
	assert.Equal(t, headless.ToolCallSummary{ToolCallID: "p1", Title: "Plan: 1. write it", Kind: "switch_mode", Status: "failed"}, r.ToolCalls[0])
}
