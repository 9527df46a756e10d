package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session"
	"github.com/acpd/acpd/session/headless"
	"github.com/acpd/acpd/session/model/modeltest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	acptest.RemoveAcpd()
	os.Exit(code)
}

// acpdBinary is the built binary the end-to-end tests below run, built
// once per test binary on first use.
func acpdBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the acpd binary")
	}
	return acptest.Acpd(t)
}

// runEnv is one sandboxed invocation: its own HOME, config and data dirs,
// and a workspace with a file the scripts read.
type runEnv struct {
	dir, ws string
	env     []string
}

func newRunEnv(t *testing.T) *runEnv {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "x.txt"), []byte("hello\n"), 0o644))
	return &runEnv{dir: dir, ws: ws, env: []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_STATE_HOME=" + filepath.Join(dir, "state"),
	}}
}

// script writes a model script; %s in it is replaced by the workspace.
func (e *runEnv) script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(e.dir, "script.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(strings.ReplaceAll(body, "%s", e.ws)), 0o644))
	return p
}

// scripted are the flags selecting the scripted provider with script.
func (e *runEnv) scripted(script string, args ...string) []string {
	return append([]string{"run", "--provider", "script", "--model-script", script, "--model", "demo", "--cwd", e.ws}, args...)
}

type runOut struct {
	code           int
	stdout, stderr string
}

func (e *runEnv) run(t *testing.T, stdin string, args ...string) runOut {
	t.Helper()
	bin := acpdBinary(t) // before the clock starts: the build may be slow on a busy machine
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = e.env
	cmd.Dir = e.dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Err(), "acpd run did not finish; stderr:\n%s", errOut.String())
	return runOut{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// beforeSessionLine is text output's stderr without its last line, which
// names the session and the command continuing it.
func beforeSessionLine(t *testing.T, stderr string) string {
	t.Helper()
	i := strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n") + 1
	require.Regexp(t, `^acpd run: session \w+; continue it with: acpd run --session \w+ .*PROMPT\n$`, stderr[i:])
	return stderr[:i]
}

// jsonResult mirrors the json output.
type jsonResult struct {
	SessionID  string `json:"sessionId"`
	StopReason string `json:"stopReason"`
	Error      *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	Text      string                     `json:"text"`
	ToolCalls []headless.ToolCallSummary `json:"toolCalls"`
	Usage     *headless.UsageSummary     `json:"usage"`
	TurnUsage *session.TurnUsage         `json:"turnUsage"`
	Budget    string                     `json:"budget"`
}

func decodeResult(t *testing.T, line string) jsonResult {
	t.Helper()
	var r jsonResult
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), "result line: %s", line)
	require.NotNil(t, r.ToolCalls, "toolCalls must be an array: %s", line)
	return r
}

const readScript = `{"text":"Let me read it.\n","toolCalls":[{"id":"c1","name":"read_file","arguments":{"file_path":"%s/x.txt"}}]}
{"text":"The file says hello.","usage":{"promptTokens":10,"completionTokens":5}}
`

func TestRunCmd_OutputFormats(t *testing.T) {
	t.Parallel()
	wantCalls := []headless.ToolCallSummary{{ToolCallID: "c1", Title: "Read x.txt", Kind: "read", Status: "completed"}}
	tests := []struct {
		format string
		check  func(t *testing.T, o runOut)
	}{
		{format: "text", check: func(t *testing.T, o runOut) {
			assert.Equal(t, "Let me read it.\nThe file says hello.\n", o.stdout)
			assert.Contains(t, o.stderr, "[tool] Read x.txt … completed\n")
		}},
		{format: "json", check: func(t *testing.T, o runOut) {
			lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
			require.Len(t, lines, 1, "json prints one object")
			r := decodeResult(t, lines[0])
			assert.NotEmpty(t, r.SessionID)
			assert.Equal(t, "end_turn", r.StopReason)
			assert.Nil(t, r.Error)
			assert.Equal(t, "Let me read it.\nThe file says hello.", r.Text)
			assert.Equal(t, wantCalls, r.ToolCalls)
			assert.Equal(t, &headless.UsageSummary{Used: 15, Size: 131072}, r.Usage)
			// Two requests: the first without usage (estimated), the
			// second as the script reported it.
			require.NotNil(t, r.TurnUsage)
			assert.Equal(t, 2, r.TurnUsage.Requests)
			assert.Equal(t, 1, r.TurnUsage.Estimated)
			assert.Greater(t, r.TurnUsage.Input, 10)
			assert.Nil(t, r.TurnUsage.Cost, "no prices")
			assert.NotContains(t, o.stderr, "[tool]")
		}},
		{format: "stream-json", check: func(t *testing.T, o runOut) {
			lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
			require.GreaterOrEqual(t, len(lines), 2)
			r := decodeResult(t, lines[len(lines)-1])
			assert.Equal(t, "end_turn", r.StopReason)
			assert.Equal(t, wantCalls, r.ToolCalls)
			var kinds []string
			for _, l := range lines[:len(lines)-1] {
				var n struct {
					SessionID string         `json:"sessionId"`
					Update    map[string]any `json:"update"`
				}
				require.NoError(t, json.Unmarshal([]byte(l), &n), l)
				assert.Equal(t, r.SessionID, n.SessionID)
				kinds = append(kinds, fmt.Sprint(n.Update["sessionUpdate"]))
			}
			assert.Equal(t, []string{"session_info_update", "agent_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk", "usage_update"}, kinds)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			t.Parallel()
			e := newRunEnv(t)
			o := e.run(t, "", e.scripted(e.script(t, readScript), "--output-format", tt.format, "read x.txt")...)
			require.Equal(t, 0, o.code, o.stderr)
			tt.check(t, o)
		})
	}
}

func TestRunCmd_ExitCodes(t *testing.T) {
	t.Parallel()
	threeReads := strings.Repeat(`{"toolCalls":[{"name":"read_file","arguments":{"file_path":"%s/x.txt"}}]}`+"\n", 3) + `{"text":"never"}` + "\n"
	tests := []struct {
		name   string
		script string
		args   []string // after the scripted flags
		stdin  string
		code   int
		stderr string
		check  func(t *testing.T, r jsonResult)
	}{
		{name: "end_turn", script: `{"text":"done"}`, args: []string{"--output-format", "json", "hi"}, code: 0,
			check: func(t *testing.T, r jsonResult) { assert.Equal(t, "end_turn", r.StopReason) }},
		{name: "model error: script exhausted", script: `{"text":"one","toolCalls":[{"name":"read_file","arguments":{"file_path":"%s/x.txt"}}]}`,
			args: []string{"--output-format", "json", "hi"}, code: 1, stderr: "model script exhausted",
			check: func(t *testing.T, r jsonResult) {
				require.NotNil(t, r.Error)
				assert.Equal(t, -32603, r.Error.Code)
				assert.Contains(t, r.Error.Message, "model script exhausted after 1 responses")
				assert.Empty(t, r.StopReason)
				assert.Equal(t, "one", r.Text)
			}},
		{name: "loop protection: hard cap", script: threeReads,
			args: []string{"--max-tool-calls-per-turn", "2", "--output-format", "json", "hi"}, code: 3,
			stderr: "loop protection stopped the turn (turn_tool_call_cap: explicit cap of 2; 3 tool calls with the stopped batch)",
			check: func(t *testing.T, r jsonResult) {
				require.NotNil(t, r.Error)
				assert.Equal(t, -32603, r.Error.Code)
				assert.Contains(t, r.Error.Message, "Tool-call loop protection stopped this turn")
				assert.JSONEq(t, `{"code":"LOOP_DETECTED","errorKind":"loop_detected","loopType":"turn_tool_call_cap",`+
					`"capReason":"explicit","toolCalls":3,"maxKeyRepeat":3,"maxToolCallsPerTurn":2,"explicit":true}`, string(r.Error.Data))
				require.Len(t, r.ToolCalls, 3)
				assert.Equal(t, "completed", string(r.ToolCalls[1].Status))
				assert.Equal(t, "failed", string(r.ToolCalls[2].Status), "the call past the cap never runs")
			}},
		{name: "loop protection in text mode", script: threeReads,
			args: []string{"--max-tool-calls-per-turn", "2", "hi"}, code: 3,
			stderr: "acpd run: loop protection stopped the turn (turn_tool_call_cap: explicit cap of 2; 3 tool calls with the stopped batch)"},
		{name: "max_tokens", script: `{"text":"cut sho","finish":"length"}`, args: []string{"--output-format", "json", "hi"}, code: 4,
			check: func(t *testing.T, r jsonResult) { assert.Equal(t, "max_tokens", r.StopReason) }},
		{name: "refusal", script: `{"text":"no","finish":"content_filter"}`, args: []string{"hi"}, code: 4,
			stderr: "acpd run: the turn stopped: refusal"},
		{name: "usage: bad output format", script: `{"text":"x"}`, args: []string{"--output-format", "xml", "hi"}, code: 2,
			stderr: `acpd run: invalid argument "xml" for "-o, --output-format" flag: must be text, json or stream-json; see 'acpd run --help'`},
		{name: "usage: bad approval mode", script: `{"text":"x"}`, args: []string{"--approval-mode", "always", "hi"}, code: 2,
			stderr: `must be one of "plan", "default", "auto-edit", "yolo"`},
		{name: "usage: yolo conflicts with approval mode", script: `{"text":"x"}`, args: []string{"--approval-mode", "plan", "--yolo", "hi"}, code: 2,
			stderr: "--yolo conflicts with --approval-mode plan"},
		{name: "usage: empty prompt", script: `{"text":"x"}`, args: nil, stdin: " \n", code: 2,
			stderr: "empty prompt"},
		{name: "usage: two prompts", script: `{"text":"x"}`, args: []string{"a", "b"}, code: 2,
			stderr: `unexpected argument "b"`},
		{name: "usage: cwd is a file", script: `{"text":"x"}`, args: []string{"--cwd", "script.jsonl", "hi"}, code: 2,
			stderr: "not a directory"},
		{name: "usage: unknown session", script: `{"text":"x"}`, args: []string{"--session", "sess_0", "hi"}, code: 2,
			stderr: "acpd run: --session sess_0: no such session in "},
		{name: "usage: unknown session, the command that lists them", script: `{"text":"x"}`, args: []string{"--session", "sess_0", "hi"}, code: 2,
			stderr: "; acpd sessions lists them; see 'acpd run --help'\n"},
		{name: "usage: invalid session id", script: `{"text":"x"}`, args: []string{"--session", "../x", "hi"}, code: 2,
			stderr: "acpd run: --session ../x: not a session id ("},
		{name: "config: bad script line", script: `{"txt":"x"}`, args: []string{"hi"}, code: 2,
			stderr: "configuration error: model script:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newRunEnv(t)
			o := e.run(t, tt.stdin, e.scripted(e.script(t, tt.script+"\n"), tt.args...)...)
			assert.Equal(t, tt.code, o.code, "stderr: %s", o.stderr)
			assert.Contains(t, o.stderr, tt.stderr)
			if tt.check != nil {
				tt.check(t, decodeResult(t, strings.TrimSpace(o.stdout)))
			}
			if tt.code == exitUsage {
				assert.Empty(t, o.stdout)
			}
		})
	}
}

func TestRunCmd_BadConfigFileExitsTwo(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	cfg := filepath.Join(e.dir, "acpd.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[model]\nmaxToolCallPerTurn = 5\n"), 0o644))
	o := e.run(t, "", e.scripted(e.script(t, `{"text":"x"}`), "--config", cfg, "hi")...)
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, `unknown key "model.maxToolCallPerTurn"`)
	assert.Empty(t, o.stdout)
}

func TestRunCmd_HelpDocumentsExitCodes(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	o := e.run(t, "", "run", "--help")
	assert.Equal(t, 0, o.code)
	for _, want := range []string{"Usage:\n  acpd run [flags] [PROMPT]", "--output-format", "--yolo", "--cwd", "--session",
		"--max-tool-calls-per-turn", "\n  0 ", "\n  1 ", "\n  2 ", "\n  3 ", "\n  4 ", "\n  130 "} {
		assert.Contains(t, o.stdout, want)
	}
}

func TestRunCmd_ConfigFileSetsProviderAndFlagsFollowCommand(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"text":"from config"}`)
	cfg := filepath.Join(e.dir, "acpd.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("[model]\nprovider = \"script\"\nscript = %q\nname = \"demo\"\n", script)), 0o644))
	o := e.run(t, "", "run", "--config", cfg, "--cwd", e.ws, "hi")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, "from config\n", o.stdout)
}

// TestRunCmd_YoloRunsShell shows the tool actually runs under --yolo and
// the default log level keeps info logs off stderr.
func TestRunCmd_YoloRunsShell(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"name":"run_shell_command","arguments":{"command":"echo made > made.txt"}}]}
{"text":"ok"}`)
	o := e.run(t, "", e.scripted(script, "--yolo", "make it")...)
	require.Equal(t, 0, o.code, o.stderr)
	b, err := os.ReadFile(filepath.Join(e.ws, "made.txt"))
	require.NoError(t, err)
	assert.Equal(t, "made\n", string(b))
	assert.Equal(t, "[tool] echo made > made.txt … completed\n", beforeSessionLine(t, o.stderr))
}

// TestRunCmd_PrivateFetchAdvice: a web_fetch of a loopback site is asked
// about even under --yolo, so the headless refusal names the setting that
// allows it, not --yolo; with that setting the same run fetches the page.
func TestRunCmd_PrivateFetchAdvice(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("internal dashboard"))
	}))
	defer site.Close()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"id":"f1","name":"web_fetch","arguments":{"url":"`+site.URL+`/status","prompt":"what does it say"}}]}
{"text":"ok"}`)
	title := "Fetch " + site.URL + "/status"

	o := e.run(t, "", e.scripted(script, "--yolo", "--output-format", "json", "look")...)
	require.Equal(t, 7, o.code, "a refused call: the turn did not do all it was asked; %s", o.stderr)
	assert.Contains(t, o.stderr, `acpd run: refused "`+title+`": it reaches a loopback or private network address, which acpd asks about every time, in every approval mode (--yolo too)`)
	assert.Contains(t, o.stderr, "tools.webFetchAllowPrivate = true in the config file or ACPD_WEB_FETCH_ALLOW_PRIVATE=true")
	assert.NotContains(t, o.stderr, "allow such calls with --yolo")
	r := decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Equal(t, []headless.ToolCallSummary{{ToolCallID: "f1", Title: title, Kind: "fetch", Status: "failed"}}, r.ToolCalls)
	assert.Zero(t, hits.Load(), "the refused fetch never reached the site")

	e.env = append(e.env, "ACPD_WEB_FETCH_ALLOW_PRIVATE=true")
	o = e.run(t, "", e.scripted(script, "--yolo", "--output-format", "json", "look")...)
	require.Equal(t, 0, o.code, o.stderr)
	assert.NotContains(t, o.stderr, "refused")
	r = decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Equal(t, []headless.ToolCallSummary{{ToolCallID: "f1", Title: title, Kind: "fetch", Status: "completed"}}, r.ToolCalls)
	assert.Equal(t, int32(1), hits.Load(), "fetched once allowed")
}

// TestRunCmd_LoopbackModel drives the OpenAI-compatible provider against
// the loopback test server: the prompt comes from stdin, a shell call is
// refused in approval mode "default", and the model is told so.
func TestRunCmd_LoopbackModel(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t,
		modeltest.Response{Text: "I will write it.", ToolCalls: []modeltest.ToolCall{{ID: "w1", Name: "run_shell_command", Arguments: `{"command":"echo x > out.txt"}`}}},
		modeltest.Response{Text: " Declined, fine.", Usage: nil},
	)
	e := newRunEnv(t)
	e.env = append(e.env, "OPENAI_API_KEY=test-key")
	o := e.run(t, "please write out.txt\n", "run", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "m1",
		"--cwd", "ws", "--output-format", "json", "-")
	require.Equal(t, 7, o.code, "the refused command: %s", o.stderr)
	r := decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Equal(t, "end_turn", r.StopReason)
	assert.Equal(t, "I will write it. Declined, fine.", r.Text)
	require.Len(t, r.ToolCalls, 1)
	assert.Equal(t, headless.ToolCallSummary{ToolCallID: "w1", Title: "echo x > out.txt", Kind: "execute", Status: "failed"}, r.ToolCalls[0])
	assert.Contains(t, o.stderr, `acpd run: refused "echo x > out.txt": approval mode "default"`)
	assert.NoFileExists(t, filepath.Join(e.ws, "out.txt"))

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "m1", reqs[0].Model)
	var user, system, tool string
	for _, m := range reqs[1].Messages {
		switch m.Role {
		case "user":
			user = m.Text()
		case "system":
			system = m.Text()
		case "tool":
			tool = m.Text()
		}
	}
	assert.Equal(t, "please write out.txt\n", user)
	assert.Contains(t, system, e.ws, "a relative --cwd is made absolute")
	assert.Equal(t, `Tool "run_shell_command" was canceled by the user.`, tool)
}

// TestRunCmd_SIGINTDuringToolCall interrupts a long shell call: the turn is
// cancelled over ACP, answers `cancelled`, and acpd exits 130 promptly.
func TestRunCmd_SIGINTDuringToolCall(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"id":"s1","name":"run_shell_command","arguments":{"command":"sleep 30"}}]}
{"text":"never reached"}`)
	bin := acpdBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, e.scripted(script, "--yolo", "--output-format", "stream-json", "wait")...)
	cmd.Env, cmd.Dir = e.env, e.dir
	var errOut acptest.SyncBuffer // written by exec's copier while the test reads it
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got []string
	started := false
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for !started {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "stdout closed before the tool call started; stderr:\n%s", errOut.String())
			got = append(got, l)
			started = strings.Contains(l, `"sessionUpdate":"tool_call"`)
		case <-timeout.C:
			t.Fatalf("no tool_call line; stdout so far: %q", got)
		}
	}
	sent := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	for l := range lines {
		got = append(got, l)
	}
	err = cmd.Wait()
	elapsed := time.Since(sent)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr: %s", errOut.String())
	assert.Equal(t, 130, ee.ExitCode(), "stderr: %s", errOut.String())
	assert.Less(t, elapsed, 10*time.Second, "the sleep must be cancelled, not waited for")
	r := decodeResult(t, got[len(got)-1])
	assert.Equal(t, "cancelled", r.StopReason)
	assert.Equal(t, []headless.ToolCallSummary{{ToolCallID: "s1", Title: "sleep 30", Kind: "execute", Status: "failed"}}, r.ToolCalls)
	assert.Contains(t, errOut.String(), "cancelling the turn")
}

// TestRunCmd_ContinueSession continues a run's session in a second process:
// the model gets the first turn as history, and only the new turn is
// reported.
func TestRunCmd_ContinueSession(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Text: "first answer"}, modeltest.Response{Text: "second answer"})
	e := newRunEnv(t)
	e.env = append(e.env, "OPENAI_API_KEY=test-key")
	args := []string{"run", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "m1", "--cwd", e.ws, "--output-format", "json"}

	o := e.run(t, "", append(args, "first question")...)
	require.Equal(t, 0, o.code, o.stderr)
	first := decodeResult(t, strings.TrimSpace(o.stdout))
	require.NotEmpty(t, first.SessionID)

	o = e.run(t, "", append(args, "--session", first.SessionID, "second question")...)
	require.Equal(t, 0, o.code, o.stderr)
	second := decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Equal(t, first.SessionID, second.SessionID)
	assert.Equal(t, "end_turn", second.StopReason)
	assert.Equal(t, "second answer", second.Text, "the replayed history is not reported")

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	var convo []string
	for _, m := range reqs[1].Messages {
		if m.Role != "system" {
			convo = append(convo, m.Role+": "+m.Text())
		}
	}
	assert.Equal(t, []string{"user: first question", "assistant: first answer", "user: second question"}, convo)
}

// Two agent calls in one response: their subagents' calls show on stderr
// indented under their agent call's title (repeated when the runs' lines
// alternate), in json with the agent call's id, and in stream-json with it
// in _meta. The script keys each subagent's responses on its prompt.
const subagentScript = `{"text":"Delegating.\n","toolCalls":[{"id":"agent_a","name":"agent","arguments":{"description":"Read x","prompt":"TASK-A: read x.txt","subagent_type":"Explore"}},{"id":"agent_b","name":"agent","arguments":{"description":"List files","prompt":"TASK-B: list the workspace","subagent_type":"Explore"}}]}
{"match":"TASK-A","toolCalls":[{"id":"sa1","name":"read_file","arguments":{"file_path":"%s/x.txt"}}]}
{"match":"TASK-A","text":"x.txt says hello"}
{"match":"TASK-B","toolCalls":[{"id":"sb1","name":"list_directory","arguments":{"path":"%s"}}]}
{"match":"TASK-B","text":"one file: x.txt"}
{"text":"Both done."}
`

func TestRunCmd_Subagents(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, subagentScript)
	e.env = append(e.env, "ACPD_SUBAGENT_CONCURRENCY=1") // one run after the other: a fixed order of lines
	o := e.run(t, "", e.scripted(script, "go")...)
	require.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, "Delegating.\nBoth done.\n", o.stdout, "the subagents' text is not the assistant's")
	assert.Equal(t, "[agent] Read x\n  [tool] Read x.txt … completed\n[tool] Read x … completed\n"+
		"[agent] List files\n  [tool] List . … completed\n[tool] List files … completed\n", beforeSessionLine(t, o.stderr))

	o = e.run(t, "", e.scripted(script, "--output-format", "json", "go")...)
	require.Equal(t, 0, o.code, o.stderr)
	r := decodeResult(t, strings.TrimSpace(o.stdout))
	require.Len(t, r.ToolCalls, 4)
	parents := map[string]string{}
	for _, c := range r.ToolCalls {
		parents[c.ToolCallID] = c.ParentToolCallID
	}
	assert.Equal(t, map[string]string{"agent_a": "", "agent_b": "", "sa1": "agent_a", "sb1": "agent_b"}, parents)

	o = e.run(t, "", e.scripted(script, "--output-format", "stream-json", "go")...)
	require.Equal(t, 0, o.code, o.stderr)
	nested := 0
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	for _, l := range lines[:len(lines)-1] { // the last line is the result
		if strings.Contains(l, `"toolCallId":"sa1"`) {
			assert.Contains(t, l, `"_meta":{"acpd.parentToolCallId":"agent_a"`)
			nested++
		}
	}
	assert.Equal(t, 2, nested, "sa1's tool_call and tool_call_update")
}

// The token budgets have their own exit statuses, and the json result
// names the budget and carries the turn's usage: 5 when a turn reaches
// model.maxTokensPerTurn, 6 when the request is larger than
// model.sessionTokenLimit.
func TestRunCmd_TokenBudgetExitStatus(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "x.txt"), []byte(strings.Repeat("hello world\n", 400)), 0o644))
	read := fmt.Sprintf(`{"toolCalls":[{"name":"read_file","arguments":{"file_path":"%s/x.txt"}}],"usage":{"promptTokens":1500,"completionTokens":20,"cachedTokens":1024}}`, e.ws) + "\n"
	script := e.script(t, strings.Repeat(read, 5)+`{"text":"done"}`+"\n")
	o := e.run(t, "", e.scripted(script, "--max-tokens-per-turn", "5000", "--output-format", "json", "read it again and again")...)
	require.Equal(t, 5, o.code, o.stderr)
	r := decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Equal(t, "max_tokens", r.StopReason)
	assert.Equal(t, "maxTokensPerTurn", r.Budget)
	require.NotNil(t, r.TurnUsage)
	assert.Equal(t, r.TurnUsage.Requests*1024, r.TurnUsage.Cached)
	assert.LessOrEqual(t, r.TurnUsage.Total(), 5000)
	assert.Contains(t, r.Text, "Token budget reached")

	o = e.run(t, "", e.scripted(script, "--session-token-limit", "10", "--output-format", "json", "hi")...)
	require.Equal(t, 6, o.code, o.stderr)
	r = decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Equal(t, "sessionTokenLimit", r.Budget)
	assert.Contains(t, r.Text, "Session token limit exceeded")
}

// TestRunCmd_ControlCharactersShownEscaped: a command whose text carries a
// carriage return and ESC [2K — which on a terminal erase the line and
// print a harmless title over `touch evil` — and an answer carrying an
// OSC 52 clipboard write and a bidi override are printed with those
// characters escaped, so the terminal shows what ran.
func TestRunCmd_ControlCharactersShownEscaped(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"name":"run_shell_command","arguments":{"command":"touch evil # \r\u001b[2K[tool] ls -la"}}]}
{"text":"done \u001b]52;c;ZXZpbA==\u0007 access\u202e level\n"}`)
	o := e.run(t, "", e.scripted(script, "--yolo", "go")...)
	require.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, `[tool] touch evil # \r\x1b[2K[tool] ls -la … completed`+"\n", beforeSessionLine(t, o.stderr))
	assert.Equal(t, `done \x1b]52;c;ZXZpbA==\x07 access\u202e level`+"\n", o.stdout)
	assert.FileExists(t, filepath.Join(e.ws, "evil"), "the command itself ran as written")
}

// acpd run --btw --session ID asks a side question on the stored
// conversation: one request, the conversation then the question, tool use
// off; the answer is printed and the session is left as it was (the next
// prompt's request holds neither).
func TestRunCmd_SideQuestion(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Text: "first answer"}, modeltest.Response{Text: "BTW-answer"},
		modeltest.Response{Text: "second answer"})
	e := newRunEnv(t)
	e.env = append(e.env, "OPENAI_API_KEY=test-key")
	args := []string{"run", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "m1", "--cwd", e.ws, "--output-format", "json"}

	o := e.run(t, "", append(args, "first question")...)
	require.Equal(t, 0, o.code, o.stderr)
	first := decodeResult(t, strings.TrimSpace(o.stdout))

	o = e.run(t, "", append(args, "--session", first.SessionID, "--btw", "BTW-question?")...)
	require.Equal(t, 0, o.code, o.stderr)
	side := decodeResult(t, strings.TrimSpace(o.stdout))
	assert.Equal(t, "end_turn", side.StopReason)
	assert.Equal(t, "BTW-answer", side.Text)

	o = e.run(t, "", append(args, "--session", first.SessionID, "second question")...)
	require.Equal(t, 0, o.code, o.stderr)

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	convo := func(r modeltest.Request) []string {
		var out []string
		for _, m := range r.Messages {
			if m.Role != "system" {
				out = append(out, m.Role+": "+m.Text())
			}
		}
		return out
	}
	assert.Equal(t, []string{"user: first question", "assistant: first answer", "user: BTW-question?"}, convo(reqs[1]))
	assert.Contains(t, string(reqs[1].Body), `"tool_choice":"none"`)
	assert.Equal(t, len(reqs[0].Tools), len(reqs[1].Tools), "the same tools, not callable")
	assert.Equal(t, []string{"user: first question", "assistant: first answer", "user: second question"}, convo(reqs[2]),
		"the side question is not in the conversation")

	o = e.run(t, "", append(args, "--btw", "--rewind", "1", "--session", first.SessionID)...)
	assert.Equal(t, 2, o.code, "--btw with --rewind is a usage error")
}
