package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/loopdetect"
	"github.com/acpd/acpd/session/model/modeltest"
)

// acpdBin is the daemon built once for this test binary.
var acpdBin string

func TestMain(m *testing.M) {
	var err error
	if acpdBin, err = acptest.BuildAcpd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// ACPD_BENCH_BIN runs another executable in its place (a wrapper that
	// execs acpd under strace or perf, for performance work).
	if b := os.Getenv("ACPD_BENCH_BIN"); b != "" {
		acpdBin = b
	}
	code := m.Run()
	acptest.RemoveAcpd()
	os.Exit(code)
}

// daemon is the built acpd running against a loopback scripted model, driven
// by a schema-validating ACP client over its real stdin/stdout.
type daemon struct {
	cc      *acptest.ClientConn
	model   *modeltest.Server
	cwd     string
	dataDir string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	// waited is set by a test that reaped the process itself.
	waited bool
}

func startDaemon(t *testing.T, fc *acptest.FakeClient, responses []modeltest.Response, flags ...string) *daemon {
	t.Helper()
	return startDaemonIn(t, t.TempDir(), t.TempDir(), fc, responses, flags...)
}

// startDaemonIn is startDaemon with the session's cwd and the daemon's
// XDG_CONFIG_HOME given.
func startDaemonIn(t *testing.T, cwd, configHome string, fc *acptest.FakeClient, responses []modeltest.Response, flags ...string) *daemon {
	t.Helper()
	return startDaemonEnv(t, cwd, configHome, nil, fc, responses, flags...)
}

// startDaemonEnv is startDaemonIn with env added to the daemon's environment.
func startDaemonEnv(t *testing.T, cwd, configHome string, env []string, fc *acptest.FakeClient, responses []modeltest.Response, flags ...string) *daemon {
	t.Helper()
	return startDaemonCmd(t, cwd, configHome, env, fc, responses, nil, flags...)
}

// startDaemonCmd is startDaemonEnv with prep, when set, called on the
// daemon's command before it starts (extra files, a controlling terminal).
func startDaemonCmd(t *testing.T, cwd, configHome string, env []string, fc *acptest.FakeClient, responses []modeltest.Response, prep func(*exec.Cmd), flags ...string) *daemon {
	t.Helper()
	srv := modeltest.NewServer(t, responses...)
	d := launch(t, cwd, configHome, append([]string{"--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "scripted"}, flags...),
		append([]string{"OPENAI_API_KEY=test-key"}, env...), fc, prep)
	d.model = srv
	return d
}

// launch starts the built daemon with args (after its data directory, log
// level and approval mode, which args may override) and env added to its
// environment, and connects a client to it; prep, when set, is called on
// the command before it starts.
func launch(t testing.TB, cwd, configHome string, args, env []string, fc *acptest.FakeClient, prep func(*exec.Cmd)) *daemon {
	t.Helper()
	dataDir := t.TempDir()
	args = append([]string{"--data-dir", dataDir, "--log-level", "warn", "--approval-mode", "yolo"}, args...)
	cmd := exec.Command(acpdBin, args...)
	// No MCP server of the machine's Claude Code, Gemini CLI or Codex
	// configuration joins the sessions (a test that wants them says so).
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+configHome, "ACPD_MCP_IMPORT=none")
	cmd.Env = append(cmd.Env, env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &testLog{t: t}
	if prep != nil {
		prep(cmd)
	}
	require.NoError(t, cmd.Start())
	if fc == nil {
		// The default client advertises fs and terminal (ClientConn.Initialize),
		// so it needs a terminal backend: commands then really run.
		fc = &acptest.FakeClient{}
	}
	if fc.CreateTerminalFunc == nil {
		terms := acptest.NewTerminals()
		terms.Install(fc)
		t.Cleanup(terms.Close)
	}
	d := &daemon{cwd: cwd, dataDir: dataDir, cmd: cmd, stdin: stdin}
	d.cc = acptest.NewClientConn(t, fc, stdout, stdin)
	t.Cleanup(func() {
		_ = stdin.Close()
		if d.waited {
			// The process is gone: let the client check its last lines
			// while the test can still report them.
			if !d.cc.WaitClosed(5 * time.Second) {
				t.Error("acpd's stdout did not close after it exited")
			}
			return
		}
		acptest.WaitExit(t, cmd, 5*time.Second)
	})
	return d
}

type testLog struct{ t testing.TB }

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// stop closes stdin and reaps the process, as an editor that quits does.
func (d *daemon) stop(t testing.TB) {
	t.Helper()
	require.NoError(t, d.stdin.Close())
	require.NoError(t, d.cmd.Wait())
	d.waited = true
}

// load initializes d and loads session sid in d's cwd, as an editor that
// reopens it does.
func (d *daemon) load(ctx context.Context, t testing.TB, sid string) acp.LoadSessionResponse {
	t.Helper()
	_, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	var lr acp.LoadSessionResponse
	require.NoError(t, d.cc.Call(ctx, acp.MethodSessionLoad,
		acp.LoadSessionRequest{SessionID: sid, Cwd: d.cwd, MCPServers: []acp.MCPServer{}}, &lr))
	return lr
}

func (d *daemon) session(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := d.cc.Initialize(ctx)
	require.NoError(t, err)
	sid, err := d.cc.NewSession(ctx, d.cwd)
	require.NoError(t, err)
	// The commands are announced right after the answer; waiting for them
	// keeps every test's update counts about its turns.
	waitCommands(t, d, sid, 1)
	return sid
}

func readCall(path string) modeltest.ToolCall {
	b, _ := json.Marshal(map[string]string{"file_path": path})
	return modeltest.ToolCall{Name: "read_file", Arguments: string(b)}
}

// scriptOf builds a script whose response i calls read_file on the files
// named by paths(i), creating those files in cwd; then a final text.
func scriptOf(cwd string, n int, paths func(i int) []string) []modeltest.Response {
	var rs []modeltest.Response
	for i := range n {
		var calls []modeltest.ToolCall
		for _, p := range paths(i) {
			full := filepath.Join(cwd, p)
			_ = os.WriteFile(full, []byte("content of "+p), 0o644)
			calls = append(calls, readCall(full))
		}
		rs = append(rs, modeltest.Response{ToolCalls: calls})
	}
	return append(rs, modeltest.Response{Text: "done"})
}

func statusCounts(updates []acp.SessionNotification) (completed, failed int) {
	for _, n := range updates {
		if u := n.Update.ToolCallUpdate; u != nil {
			switch u.Status {
			case acp.StatusCompleted:
				completed++
			case acp.StatusFailed:
				failed++
			}
		}
	}
	return
}

// TestE2E_MeasuredTable reproduces every row of the table measured on
// @qwen-code/qwen-code 0.24.4 against the built binary, its real tools and a
// loopback OpenAI-compatible model, with every line schema-checked.
func TestE2E_MeasuredTable(t *testing.T) {
	distinct := func(i int) []string { return []string{fmt.Sprintf("distinct_%d.txt", i)} }
	alternating := func(i int) []string {
		if i%2 == 0 {
			return []string{"same.txt"}
		}
		return []string{fmt.Sprintf("d_%d.txt", i)}
	}
	batchOf := func(k int) func(int) []string {
		return func(i int) []string {
			var ps []string
			for j := range k {
				ps = append(ps, fmt.Sprintf("b%d_%d.txt", i, j))
			}
			return ps
		}
	}
	rows := []struct {
		name      string
		n         int
		paths     func(int) []string
		flags     []string
		loop      loopdetect.LoopType
		completed int
		failed    int
		// facts are the fields the guard adds to the error data and the
		// transcript's loop_stop record (cap rule, counts, repeated
		// call), as JSON object members.
		facts string
	}{
		{"150 distinct, default", 150, distinct, nil, "", 150, 0, ""},
		{"120 alternating, default", 120, alternating, nil, loopdetect.LoopTurnToolCallCap, 100, 1,
			`"capReason":"stuck","toolCalls":101,"maxKeyRepeat":51,"maxToolCallsPerTurn":100,"explicit":false,"repeatedTool":"read_file","repeatCount":51`},
		{"12 repeat-6, default", 12, alternating, nil, "", 12, 0, ""},
		{"60 distinct, cap 50", 60, distinct, []string{"--max-tool-calls-per-turn", "50"}, loopdetect.LoopTurnToolCallCap, 50, 1,
			`"capReason":"explicit","toolCalls":51,"maxKeyRepeat":1,"maxToolCallsPerTurn":50,"explicit":true`},
		{"15x4 distinct, cap 50", 15, batchOf(4), []string{"--max-tool-calls-per-turn", "50"}, loopdetect.LoopTurnToolCallCap, 48, 4,
			`"capReason":"explicit","toolCalls":52,"maxKeyRepeat":1,"maxToolCallsPerTurn":50,"explicit":true`},
		{"12 repeat-6, skipLoopDetection=false", 12, alternating, []string{"--skip-loop-detection=false"}, loopdetect.LoopGlobalToolCallDuplicate, 10, 1,
			`"toolCalls":11,"maxKeyRepeat":6,"maxToolCallsPerTurn":100,"explicit":false,"repeatedTool":"read_file","repeatCount":6`},
		{"150 distinct, cap 0", 150, distinct, []string{"--max-tool-calls-per-turn", "0"}, "", 150, 0, ""},
		{"120 alternating, cap -1", 120, alternating, []string{"--max-tool-calls-per-turn=-1"}, "", 120, 0, ""},
		{"105x10 distinct, default", 105, batchOf(10), nil, loopdetect.LoopTurnToolCallCap, 1000, 10,
			`"capReason":"backstop","toolCalls":1010,"maxKeyRepeat":1,"maxToolCallsPerTurn":100,"explicit":false`},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			cwd := t.TempDir()
			d := startDaemon(t, nil, nil, row.flags...)
			d.cwd = cwd
			d.model.Add(scriptOf(cwd, row.n, row.paths)...)
			sid := d.session(t)
			// A hang guard, not a speed claim: the 1,010-call row under
			// -race on a loaded 2-core machine took over a minute.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			resp, err := d.cc.Prompt(ctx, sid, "go")
			if row.loop == "" {
				require.NoError(t, err)
				assert.Equal(t, acp.StopEndTurn, resp.StopReason)
			} else {
				var e *acp.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, acp.CodeInternalError, e.Code)
				assert.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, e.Message)
				data, _ := json.Marshal(e.Data)
				assert.JSONEq(t, fmt.Sprintf(`{"code":"LOOP_DETECTED","errorKind":"loop_detected","loopType":%q,%s}`, row.loop, row.facts), string(data))
				// The transcript's loop record holds the same facts.
				stop := loopStopRecord(t, d.dataDir, sid)
				assert.JSONEq(t, fmt.Sprintf(`{"loopType":%q,"message":%q,%s}`, row.loop, loopdetect.LoopDetectedContextMessage,
					strings.ReplaceAll(row.facts, `"explicit":false`, `"explicit":null`)), withNullExplicit(stop))
			}
			completed, failed := statusCounts(d.cc.Updates())
			assert.Equal(t, row.completed, completed, "completed")
			assert.Equal(t, row.failed, failed, "failed")
		})
	}
}

// loopStopRecord returns the loop member of the last loop_stop record in a
// session's transcript, read straight from the file.
func loopStopRecord(t *testing.T, dataDir, sid string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "sessions", sid+".jsonl"))
	require.NoError(t, err)
	var loop json.RawMessage
	for _, line := range strings.Split(string(raw), "\n") {
		var r struct {
			Kind string          `json:"kind"`
			Loop json.RawMessage `json:"loop"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Kind == "loop_stop" {
			loop = r.Loop
		}
	}
	require.NotNil(t, loop, "no loop_stop record")
	return string(loop)
}

// withNullExplicit adds "explicit":null when the record omits a false
// explicit (omitempty), so it compares with the error data's members.
func withNullExplicit(obj string) string {
	if strings.Contains(obj, `"explicit"`) {
		return obj
	}
	return strings.TrimSuffix(obj, "}") + `,"explicit":null}`
}

// After a loop stop, the next prompt's first user message starts with the
// exact context message and the skipped call's result is the skip message.
func TestE2E_PromptAfterLoopStop(t *testing.T) {
	cwd := t.TempDir()
	d := startDaemon(t, nil, nil, "--max-tool-calls-per-turn", "1")
	d.cwd = cwd
	d.model.Add(scriptOf(cwd, 2, func(i int) []string { return []string{fmt.Sprint("f", i)} })[:2]...)
	d.model.Add(modeltest.Response{Text: "ok"})
	sid := d.session(t)
	_, err := d.cc.Prompt(t.Context(), sid, "first")
	require.Error(t, err)
	resp, err := d.cc.Prompt(t.Context(), sid, "second")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	reqs := d.model.Requests()
	last := reqs[len(reqs)-1]
	var users []string
	var lastTool string
	for _, m := range last.Messages {
		switch m.Role {
		case "user":
			users = append(users, m.Text())
		case "tool":
			lastTool = m.Text()
		}
	}
	require.Len(t, users, 2)
	assert.True(t, strings.HasPrefix(users[1], loopdetect.LoopDetectedContextMessage), users[1])
	assert.Contains(t, users[1], "second")
	assert.Equal(t, loopdetect.LoopDetectedSkipMessage, lastTool)
}

// A permission request goes to the editor; a cancel mid-turn answers
// `cancelled`; a loop-stopped prompt answers the error; the session keeps
// working afterwards.
func TestE2E_PermissionCancelAndLoopStop(t *testing.T) {
	perm := make(chan struct{}, 1)
	release := make(chan struct{})
	fc := &acptest.FakeClient{
		RequestPermissionFunc: func(ctx context.Context, r *acp.RequestPermissionRequest) (*acp.RequestPermissionResponse, error) {
			select {
			case perm <- struct{}{}:
			default:
			}
			if r.ToolCall.Title != nil && strings.Contains(*r.ToolCall.Title, "wait-here") {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}, nil
			}
			return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: "proceed_once"}}, nil
		},
	}
	d := startDaemon(t, fc, nil, "--approval-mode", "default", "--max-tool-calls-per-turn", "1")
	shell := func(cmd string) modeltest.ToolCall {
		b, _ := json.Marshal(map[string]string{"command": cmd})
		return modeltest.ToolCall{Name: "run_shell_command", Arguments: string(b)}
	}
	d.model.Add(
		modeltest.Response{ToolCalls: []modeltest.ToolCall{shell("echo hello")}},
		modeltest.Response{Text: "said hello"},
		modeltest.Response{ToolCalls: []modeltest.ToolCall{shell("echo wait-here")}},
		modeltest.Response{ToolCalls: []modeltest.ToolCall{shell("echo one")}},
		modeltest.Response{ToolCalls: []modeltest.ToolCall{shell("echo two")}},
		modeltest.Response{Text: "unreached"},
		modeltest.Response{Text: "after"},
	)
	sid := d.session(t)
	resp, err := d.cc.Prompt(t.Context(), sid, "say hello")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
	<-perm

	// Cancel while the permission request is pending.
	got := make(chan *acp.PromptResponse, 1)
	go func() {
		r, _ := d.cc.Prompt(t.Context(), sid, "wait")
		got <- r
	}()
	select {
	case <-perm:
	case <-time.After(10 * time.Second):
		t.Fatal("no permission request")
	}
	require.NoError(t, d.cc.Cancel(sid))
	close(release)
	select {
	case r := <-got:
		require.NotNil(t, r)
		assert.Equal(t, acp.StopCancelled, r.StopReason)
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled prompt never answered")
	}

	_, err = d.cc.Prompt(t.Context(), sid, "loop")
	var e *acp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, loopdetect.LoopDetectedTurnErrorMessage, e.Message)

	resp, err = d.cc.Prompt(t.Context(), sid, "after")
	require.NoError(t, err)
	assert.Equal(t, acp.StopEndTurn, resp.StopReason)
}
