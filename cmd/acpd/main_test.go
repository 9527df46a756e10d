package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpd/acpd/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sandbox gives a run its own HOME and XDG dirs, so the machine's config
// and environment never leak into a test.
type sandbox struct {
	dir string
	env map[string]string
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	dir := t.TempDir()
	return &sandbox{dir: dir, env: map[string]string{
		"HOME":            filepath.Join(dir, "home"),
		"XDG_CONFIG_HOME": filepath.Join(dir, "config"),
		"XDG_STATE_HOME":  filepath.Join(dir, "state"),
	}}
}

func (s *sandbox) file(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(s.dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

type result struct {
	code           int
	stdout, stderr string
}

func (s *sandbox) run(t *testing.T, serve serveFunc, args ...string) result {
	t.Helper()
	if serve == nil {
		serve = func(context.Context, config.Config, io.Reader, io.Writer, *slog.Logger, func()) error {
			return errors.New("serve must not be called")
		}
	}
	var out, errOut bytes.Buffer
	code := runWith(t.Context(), args, strings.NewReader(""), &out, &errOut,
		deps{getenv: func(k string) string { return s.env[k] }, serve: serve})
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func TestRun_ConfigTypoExitsTwoWithSuggestion(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	bad := sb.file(t, "bad.toml", "[model]\nmaxToolCallPerTurn = 50\n")
	r := sb.run(t, nil, "config", "--config", bad)
	assert.Equal(t, 2, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, bad+`:2:1: unknown key "model.maxToolCallPerTurn"; did you mean "maxToolCallsPerTurn"?`)
}

func TestRun_ConfigPrintsSourcesAndRedactsKey(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	sb.env["OPENAI_API_KEY"] = "sk-do-not-print"
	sb.env["ACPD_APPROVAL_MODE"] = "plan"
	user := sb.file(t, "config/acpd/config.toml", "[model]\nname = \"from-user-file\"\n\n[log]\nlevel = \"warn\"\n")
	r := sb.run(t, nil, "--max-tool-calls-per-turn", "100", "config", "--skip-loop-detection=false")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.NotContains(t, r.stdout, "sk-do-not-print")
	for _, want := range []string{
		`name = "from-user-file"  # ` + user + ":2",
		`level = "warn"  # ` + user + ":5",
		`approvalMode = "plan"  # env ACPD_APPROVAL_MODE`,
		`maxToolCallsPerTurn = 100  # flag --max-tool-calls-per-turn (hard cap)`,
		`skipLoopDetection = false  # flag --skip-loop-detection`,
		`# apiKey = "<redacted>"  # env OPENAI_API_KEY`,
		`provider = "openai"  # default`,
	} {
		assert.Contains(t, r.stdout, want)
	}
}

func TestRun_Version(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	// --version does not need a valid configuration.
	sb.env["ACPD_CONFIG"] = sb.file(t, "broken.toml", "[[[")
	r := sb.run(t, nil, "--version")
	assert.Equal(t, 0, r.code)
	assert.Equal(t, versionLine()+"\n", r.stdout)
	assert.NotEmpty(t, versionString())
}

func TestRun_UsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, want: "acpd: unknown command \"frobnicate\"; see 'acpd --help'\n"},
		{name: "misspelt command", args: []string{"stast"}, code: 2, want: "acpd: unknown command \"stast\" (did you mean \"stats\"?); see 'acpd --help'\n"},
		{name: "unknown flag", args: []string{"--colour"}, code: 2, want: "acpd: unknown flag: --colour; see 'acpd --help'\n"},
		{name: "extra argument", args: []string{"config", "extra"}, code: 2, want: "acpd config: unexpected argument \"extra\"; see 'acpd config --help'\n"},
		{name: "cap not an integer", args: []string{"--max-tool-calls-per-turn", "1.5", "config"}, code: 2,
			want: "acpd config: flag --max-tool-calls-per-turn: Invalid maxToolCallsPerTurn: must be an integer, got 1.5; see 'acpd config --help'\n"},
		{name: "bad approval mode", args: []string{"config", "--approval-mode=always"}, code: 2,
			want: `must be one of "plan", "default", "auto-edit", "yolo"`},
		{name: "missing config file", args: []string{"config", "--config", "/nonexistent/acpd.toml"}, code: 2,
			want: "flag --config: cannot read config file"},
		{name: "missing value", args: []string{"run", "--model"}, code: 2, want: "acpd run: flag needs an argument: --model; see 'acpd run --help'\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newSandbox(t).run(t, nil, tt.args...)
			assert.Equal(t, tt.code, r.code, r.stderr)
			assert.Contains(t, r.stderr, tt.want)
			assert.Empty(t, r.stdout)
			if strings.HasSuffix(tt.want, "\n") {
				assert.Equal(t, tt.want, r.stderr, "one line, nothing else")
			}
		})
	}
}

func TestRun_ServeGetsConfigAndJSONLogger(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	var got config.Config
	r := sb.run(t, func(ctx context.Context, cfg config.Config, _ io.Reader, stdout io.Writer, logger *slog.Logger, _ func()) error {
		got = cfg
		logger.Info("hello from serve", "session_id", "s1")
		_, err := io.WriteString(stdout, `{"jsonrpc":"2.0"}`+"\n")
		return err
	}, "--model", "m1", "--approval-mode", "yolo", "--log-level", "debug")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "m1", got.Model.Name)
	assert.Equal(t, config.ApprovalYolo, got.Tools.ApprovalMode)
	assert.False(t, got.Model.MaxToolCallsPerTurnExplicit)
	assert.Equal(t, `{"jsonrpc":"2.0"}`+"\n", r.stdout, "stdout carries only what serve wrote")

	// stderr is not a terminal here, so every log line is JSON.
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	require.NotEmpty(t, lines)
	var sawHello bool
	for _, ln := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(ln), &rec), ln)
		if rec["msg"] == "hello from serve" {
			sawHello = true
			assert.Equal(t, "s1", rec["session_id"])
		}
	}
	assert.True(t, sawHello)
}

func TestRun_ServeErrorExitsOne(t *testing.T) {
	t.Parallel()
	r := newSandbox(t).run(t, func(context.Context, config.Config, io.Reader, io.Writer, *slog.Logger, func()) error {
		return errors.New("listener exploded")
	})
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "listener exploded")
}

func TestRun_LogFile(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	logPath := filepath.Join(sb.dir, "logs", "acpd.log")
	r := sb.run(t, func(_ context.Context, _ config.Config, _ io.Reader, _ io.Writer, logger *slog.Logger, _ func()) error {
		logger.Debug("debug line")
		return nil
	}, "--log-file", logPath, "--trace")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr, "logs go to the file, not stderr")
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"msg":"debug line"`, "--trace lowers the level to debug")
}

func TestRun_UnwritableLogFileIsAConfigError(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	dir := filepath.Join(sb.dir, "a-dir")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	r := sb.run(t, nil, "--log-file", dir)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "open log file")
}

func TestNewLogger_Levels(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger, closeLog, err := newLogger(config.LogConfig{Level: "warn"}, &buf)
	require.NoError(t, err)
	defer func() { require.NoError(t, closeLog()) }()
	logger.Info("hidden")
	logger.Warn("shown")
	assert.NotContains(t, buf.String(), "hidden")
	assert.Contains(t, buf.String(), `"msg":"shown"`)
	assert.False(t, isTerminal(&buf))
}

// TestRun_SignalCancelsServe sends SIGTERM to the test process; run has
// installed its handler once serve called onReady (its first answer is
// out), so the signal cancels serve's context instead of killing the
// process.
func TestRun_SignalCancelsServe(t *testing.T) {
	sb := newSandbox(t)
	done := make(chan int, 1)
	started := make(chan struct{})
	go func() {
		var out, errOut bytes.Buffer
		done <- runWith(t.Context(), nil, strings.NewReader(""), &out, &errOut, deps{
			getenv: func(k string) string { return sb.env[k] },
			serve: func(ctx context.Context, _ config.Config, _ io.Reader, _ io.Writer, _ *slog.Logger, onReady func()) error {
				onReady()
				onReady() // a second call changes nothing
				close(started)
				<-ctx.Done()
				return ctx.Err()
			},
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("serve was not called")
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not cancel serve")
	}
}

// TestBinary builds the real command and runs it as a user would.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	sb := newSandbox(t)
	bin := filepath.Join(sb.dir, "acpd")
	build := exec.CommandContext(t.Context(), "go", "build", "-ldflags", "-X main.version=v9.9.9-test -X main.commit=0123456789abcdef0123", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	env := []string{}
	for k, v := range sb.env {
		env = append(env, k+"="+v)
	}
	exe := func(args ...string) (int, string, string) {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return code, stdout.String(), stderr.String()
	}

	code, stdout, _ := exe("--version")
	assert.Equal(t, 0, code)
	assert.Equal(t, "acpd v9.9.9-test (commit 0123456789ab)\n", stdout, "the stamped version and commit")

	bad := sb.file(t, "bad.toml", "[tools]\napprovalmode = \"yolo\"\n")
	code, stdout, stderr := exe("config", "--config", bad)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, bad+`:2:1: unknown key "tools.approvalmode"; did you mean "approvalMode"?`)
}
