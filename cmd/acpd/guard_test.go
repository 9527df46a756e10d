package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/acp/client"
	"github.com/acpd/acpd/session/model/modeltest"
)

// The end-to-end tests of `acpd guard` run the built binary as an editor
// would, in front of real agents driven by the scripted model server: acpd
// itself (with its own cap off) and qwen-code from npm (guard_agents_test.go).

// guardAgent is an agent command line and its environment.
type guardAgent struct {
	name string
	cmd  []string
	env  []string
	ws   string // the workspace: the agent's working directory
}

// readTarget is the file the scripted calls read: one line per offset,
// so every (offset) reads something and distinct calls have distinct keys.
const readTargetLines = 2000

func newWorkspace(t testing.TB) string {
	t.Helper()
	ws := t.TempDir()
	var b strings.Builder
	for i := range readTargetLines {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(ws, "target.txt"), []byte(b.String()), 0o644))
	return ws
}

// innerAcpd is acpd itself as the guarded agent, with its own cap off.
func innerAcpd(t testing.TB, srv *modeltest.Server) guardAgent {
	t.Helper()
	ws := newWorkspace(t)
	home := t.TempDir()
	return guardAgent{name: "acpd", ws: ws,
		cmd: []string{acpdBinary(t), "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(),
			"--model", "scripted", "--max-tool-calls-per-turn", "0", "--data-dir", filepath.Join(home, "inner-data"),
			"--approval-mode", "yolo", "--log-level", "warn",
			// No compaction in a 1,000-call turn: the scripted model would
			// take the summary request for a new turn.
			"--context-window", "10000000"},
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
			"XDG_STATE_HOME=" + filepath.Join(home, "state"), "OPENAI_API_KEY=test-key"}}
}

// scenario is a model script written as a function: call i of the turn (0
// based) and how many calls each response carries; the turn's last
// response is text. Requests without tools (an agent's side requests) get
// text.
type scenario struct {
	calls int
	batch int
	args  func(i int) string // the read_file arguments of call i
}

// install makes srv play sc for every turn. A request whose last message is
// the user's starts a turn; the others carry the results of the calls
// served so far, so the next batch follows (counted here, not from the
// request's history, which an agent may compact mid-turn).
func (sc scenario) install(srv *modeltest.Server, ws string) {
	var mu sync.Mutex
	seq, served := 0, 0
	srv.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		if len(r.Tools) == 0 || len(r.Messages) == 0 {
			return modeltest.Response{Text: "ok"}, true // a side request: a summary, a title
		}
		mu.Lock()
		defer mu.Unlock()
		if r.Messages[len(r.Messages)-1].Role == "user" {
			served = 0
		}
		if served >= sc.calls {
			return modeltest.Response{Text: "done"}, true
		}
		var cs []modeltest.ToolCall
		for i := served; i < min(served+sc.batch, sc.calls); i++ {
			seq++
			cs = append(cs, modeltest.ToolCall{ID: fmt.Sprintf("call_%d", seq), Name: "read_file",
				Arguments: fmt.Sprintf(`{"file_path":%q,%s}`, filepath.Join(ws, "target.txt"), sc.args(i))})
		}
		served += len(cs)
		return modeltest.Response{ToolCalls: cs, WholeArguments: true}, true
	})
}

// distinctArgs reads a different line each call.
func distinctArgs(i int) string { return fmt.Sprintf(`"offset":%d,"limit":1`, i+1) }

// stuckArgs repeats one read every other call among distinct ones.
func stuckArgs(i int) string {
	if i%2 == 0 {
		return `"offset":0,"limit":1`
	}
	return distinctArgs(i)
}

// guarded is the built acpd guard in front of an agent, driven over its
// stdin and stdout through package acp/client.
type guarded struct {
	t      testing.TB
	cmd    *exec.Cmd
	conn   *client.Conn
	stdin  io.WriteCloser
	stderr *acptest.SyncBuffer
	agent  string        // the agent's agentInfo name
	done   chan struct{} // closed when the guard has exited
	ids    int

	mu      sync.Mutex
	updates []json.RawMessage
	// onPermission answers the permission requests (nil: proceed_once).
	onPermission func(json.RawMessage) *acp.RequestPermissionResponse
}

func (g *guarded) Update(params json.RawMessage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.updates = append(g.updates, append(json.RawMessage(nil), params...))
}

// warningsShown counts how often the editor was shown the loop warning
// (the text the guard adds when it lets a repeat through once).
func (g *guarded) warningsShown() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, u := range g.updates {
		n += strings.Count(string(u), "Repeating it again will stop this turn")
	}
	return n
}

func (g *guarded) Permission(params json.RawMessage) *acp.RequestPermissionResponse {
	g.mu.Lock()
	answer := g.onPermission
	g.mu.Unlock()
	if answer != nil {
		return answer(params)
	}
	return &acp.RequestPermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: "proceed_once"}}
}

type rwc struct {
	io.Reader
	io.WriteCloser
}

// startGuard runs `acpd guard FLAGS -- AGENT` with dataDir as acpd's data
// folder, and initializes the connection.
func startGuard(t testing.TB, a guardAgent, dataDir string, flags ...string) *guarded {
	t.Helper()
	args := append([]string{acpdBinary(t), "guard", "--config", os.DevNull, "--data-dir", dataDir, "--log-level", "warn"}, flags...)
	return startEditor(t, a, append(append(args, "--"), a.cmd...))
}

// startEditor runs argv (the guard, or the agent alone) in the agent's
// workspace and environment, and initializes the connection as an editor.
func startEditor(t testing.TB, a guardAgent, argv []string) *guarded {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = a.env, a.ws
	g := &guarded{t: t, cmd: cmd, stderr: &acptest.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = g.stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	g.stdin = stdin
	g.conn = client.NewConn(context.Background(), rwc{stdout, stdin}, g, nil)
	go func() {
		_ = cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() {
		_ = g.stdin.Close()
		select {
		case <-g.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("%s did not exit after stdin closed; stderr:\n%s", argv[0], g.stderr.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	init, err := g.conn.Initialize(ctx, &acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersion})
	require.NoError(t, err, "initialize; stderr:\n%s", g.stderr.String())
	require.NotNil(t, init.AgentInfo, "the agent's own initialize answer")
	g.agent = init.AgentInfo.Name
	return g
}

func (g *guarded) newSession(cwd string) string {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := g.conn.NewSession(ctx, &acp.NewSessionRequest{Cwd: cwd, MCPServers: []acp.MCPServer{}})
	require.NoError(g.t, err, "session/new; stderr:\n%s", g.stderr.String())
	return s.SessionID
}

// prompt runs one prompt; it returns the stop reason or the agent's (or
// the guard's) error.
func (g *guarded) prompt(sessionID, text string) (acp.StopReason, *jsonrpc2.Error) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g.ids++
	p, err := g.conn.StartPrompt(ctx, &acp.PromptRequest{SessionID: sessionID, Prompt: []acp.ContentBlock{acp.TextBlock(text)}},
		jsonrpc2.ID{Str: "p" + strconv.Itoa(g.ids), IsString: true})
	require.NoError(g.t, err)
	resp, err := p.Wait(ctx)
	var re *jsonrpc2.Error
	if errors.As(err, &re) {
		return "", re
	}
	require.NoError(g.t, err, "session/prompt; stderr:\n%s", g.stderr.String())
	return resp.StopReason, nil
}

// loopData decodes a loop error's data.
func loopData(t *testing.T, e *jsonrpc2.Error) map[string]any {
	t.Helper()
	require.NotNil(t, e, "want LOOP_DETECTED")
	require.NotNil(t, e.Data, e.Message)
	var d map[string]any
	require.NoError(t, json.Unmarshal(*e.Data, &d))
	require.Equal(t, "LOOP_DETECTED", d["code"], e.Message)
	assert.EqualValues(t, -32603, e.Code)
	return d
}

// closeAndCheck closes the editor's pipe and checks that the guard, the
// agent and everything the agent started are gone.
func (g *guarded) closeAndCheck() {
	g.t.Helper()
	pgid := g.agentPID()
	require.NoError(g.t, g.stdin.Close())
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		g.t.Fatalf("acpd guard did not exit after its stdin closed; stderr:\n%s", g.stderr.String())
	}
	if pgid > 0 {
		assert.ErrorIs(g.t, syscall.Kill(-pgid, 0), syscall.ESRCH, "a process of the agent's group is still running")
	}
}

// agentPID is the guard's child: the agent, leader of its process group.
func (g *guarded) agentPID() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", g.cmd.Process.Pid, g.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// guardScenarios are the turns the issue names, for any agent.
func runGuardScenarios(t *testing.T, agent func(t testing.TB, srv *modeltest.Server) guardAgent) {
	tests := []struct {
		name  string
		flags []string
		sc    scenario
		check func(t *testing.T, stop acp.StopReason, e *jsonrpc2.Error)
	}{
		{"stuck turn stops after about 100 calls", nil, scenario{calls: 300, batch: 10, args: stuckArgs},
			func(t *testing.T, _ acp.StopReason, e *jsonrpc2.Error) {
				d := loopData(t, e)
				assert.Equal(t, "turn_tool_call_cap", d["loopType"])
				assert.Equal(t, "stuck", d["capReason"])
				assert.EqualValues(t, 101, d["toolCalls"])
				assert.Equal(t, "read_file", d["repeatedTool"])
			}},
		{"productive 150-call turn ends untouched", nil, scenario{calls: 150, batch: 10, args: distinctArgs},
			func(t *testing.T, stop acp.StopReason, e *jsonrpc2.Error) {
				require.Nil(t, e)
				assert.Equal(t, acp.StopEndTurn, stop)
			}},
		{"explicit cap 50", []string{"--max-tool-calls-per-turn", "50"}, scenario{calls: 200, batch: 10, args: distinctArgs},
			func(t *testing.T, _ acp.StopReason, e *jsonrpc2.Error) {
				d := loopData(t, e)
				assert.Equal(t, "explicit", d["capReason"])
				assert.EqualValues(t, 51, d["toolCalls"])
			}},
		// 50 calls a response keeps the model round trips (the slow part
		// for a real agent) to 21.
		{"1050-call runaway stops at the backstop", nil, scenario{calls: 1050, batch: 50, args: distinctArgs},
			func(t *testing.T, _ acp.StopReason, e *jsonrpc2.Error) {
				d := loopData(t, e)
				assert.Equal(t, "backstop", d["capReason"])
				assert.EqualValues(t, 1001, d["toolCalls"])
			}},
		{"skipLoopDetection=false stops the sixth repeat", []string{"--loop-detection"}, scenario{calls: 40, batch: 2, args: stuckArgs},
			func(t *testing.T, _ acp.StopReason, e *jsonrpc2.Error) {
				d := loopData(t, e)
				assert.Equal(t, "global_tool_call_duplicate", d["loopType"])
				assert.EqualValues(t, 6, d["repeatCount"])
				// Call 11 is the sixth repeat; an agent that announces a
				// response's calls before it runs them has shown call 12
				// by the time call 11's input is final.
				assert.Contains(t, []any{11.0, 12.0}, d["toolCalls"])
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(t)
			a := agent(t, srv)
			tt.sc.install(srv, a.ws)
			data := t.TempDir()
			g := startGuard(t, a, data, tt.flags...)
			sid := g.newSession(a.ws)
			start := time.Now()
			stop, e := g.prompt(sid, "work")
			t.Logf("%s: %v", tt.name, time.Since(start).Round(time.Millisecond))
			tt.check(t, stop, e)
			stopped := e
			if e != nil {
				// The next prompt of the session goes to the agent as usual.
				scenario{calls: 1, batch: 1, args: distinctArgs}.install(srv, a.ws)
				stop, e = g.prompt(sid, "and now something small")
				require.Nil(t, e, "the prompt after a stop; stderr:\n%s", g.stderr.String())
				assert.Equal(t, acp.StopEndTurn, stop)
			}
			g.closeAndCheck()
			checkStats(t, a, data, g.agent, stopped)
		})
	}
}

// checkStats runs `acpd stats` on the guard's data folder: the guarded
// turn is listed with the agent's name and the outcome the editor saw.
func checkStats(t *testing.T, a guardAgent, data, agent string, e *jsonrpc2.Error) {
	t.Helper()
	require.NotEmpty(t, agent)
	cmd := exec.Command(acpdBinary(t), "stats", "--config", os.DevNull, "--data-dir", data, "--output-format", "json", "--agent", agent)
	cmd.Env = a.env
	out, err := cmd.Output()
	require.NoError(t, err, "acpd stats")
	var rep struct {
		Turns []struct {
			Agent     string `json:"agent"`
			ToolCalls int    `json:"toolCalls"`
			Outcome   string `json:"outcome"`
			LoopType  string `json:"loopType"`
			CapReason string `json:"capReason"`
		} `json:"turns"`
	}
	require.NoError(t, json.Unmarshal(out, &rep), string(out))
	require.NotEmpty(t, rep.Turns, string(out))
	first := rep.Turns[0]
	assert.Equal(t, agent, first.Agent)
	if e == nil {
		assert.Equal(t, "end_turn", first.Outcome)
		return
	}
	d := loopData(t, e)
	assert.Equal(t, "loop", first.Outcome)
	assert.Equal(t, d["loopType"], first.LoopType)
	assert.EqualValues(t, d["toolCalls"], first.ToolCalls)
	if d["capReason"] != nil {
		assert.Equal(t, d["capReason"], first.CapReason)
	}
}

func TestGuard_InnerAcpd(t *testing.T) {
	t.Parallel()
	runGuardScenarios(t, innerAcpd)
}

// TestGuard_Usage: --help documents the command; a missing or unstartable
// agent command is a usage error.
func TestGuard_Usage(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	o := e.run(t, "", "guard", "--help")
	assert.Equal(t, 0, o.code)
	for _, want := range []string{"Usage:\n  acpd guard [flags] -- COMMAND [ARG...]", "--max-tool-calls-per-turn",
		"--loop-detection", "--stuck-window", "--data-dir", "--telemetry", "--log-file", "--guard-cancel-grace"} {
		assert.Contains(t, o.stdout, want)
	}
	// Flags that configure acpd's own model or tools mean nothing here.
	for _, unwanted := range []string{"--max-tokens-per-turn", "--approval-mode", "--base-url", "--sandbox"} {
		assert.NotContains(t, o.stdout, unwanted)
	}
	o = e.run(t, "", "guard")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "acpd guard: give the agent's command after --")
	o = e.run(t, "", "guard", "--", filepath.Join(e.dir, "no-such-agent"))
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "acpd guard: cannot start")
	assert.Empty(t, o.stdout)
}

// TestGuard_ConfigFile: the guard reads acpd's configuration — a cap set in
// a file is explicit, as for acpd — and its own [guard] table.
func TestGuard_ConfigFile(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t)
	a := innerAcpd(t, srv)
	scenario{calls: 10, batch: 1, args: distinctArgs}.install(srv, a.ws)
	cfg := filepath.Join(t.TempDir(), "guard.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[model]\nmaxToolCallsPerTurn = 100\n[guard]\ncancelGrace = \"300ms\"\n"), 0o644))
	g := startGuard(t, a, t.TempDir(), "--config", cfg, "--max-tool-calls-per-turn", "3")
	_, e := g.prompt(g.newSession(a.ws), "work")
	d := loopData(t, e)
	assert.Equal(t, "explicit", d["capReason"], "a flag over a file, explicit either way")
	assert.EqualValues(t, 3, d["maxToolCallsPerTurn"])
	assert.EqualValues(t, 4, d["toolCalls"])

	g = startGuard(t, a, t.TempDir(), "--config", cfg)
	scenario{calls: 150, batch: 10, args: distinctArgs}.install(srv, a.ws)
	_, e = g.prompt(g.newSession(a.ws), "work")
	d = loopData(t, e)
	assert.Equal(t, "explicit", d["capReason"], "100 set in a file is a hard cap, not the adaptive default")
	assert.EqualValues(t, 101, d["toolCalls"])
}

// statsKeys runs `acpd stats` on the guard's data folder and returns the
// first turn's count of distinct (tool, args) keys and its highest repeat:
// how the guard keyed the agent's calls in what it recorded.
func statsKeys(t *testing.T, a guardAgent, data string) (distinct, maxRepeat int) {
	t.Helper()
	cmd := exec.Command(acpdBinary(t), "stats", "--config", os.DevNull, "--data-dir", data, "--output-format", "json")
	cmd.Env = a.env
	out, err := cmd.Output()
	require.NoError(t, err, "acpd stats")
	var rep struct {
		Turns []struct {
			DistinctKeys int `json:"distinctKeys"`
			MaxRepeat    int `json:"maxRepeat"`
		} `json:"turns"`
	}
	require.NoError(t, json.Unmarshal(out, &rep), string(out))
	require.Len(t, rep.Turns, 1, string(out))
	return rep.Turns[0].DistinctKeys, rep.Turns[0].MaxRepeat
}
