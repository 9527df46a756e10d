package tck

import (
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
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
)

// Timeouts as the kit's defaults have them: a response within 30 s, and
// "nothing more is coming" concluded after a quiet period of 2 s.
const (
	responseTimeout = 30 * time.Second
	quietPeriod     = 2 * time.Second
)

// script is the scripted model every acpd of the suite runs: prompts
// naming a scenario get its responses (model.ScriptResponse's match), any
// other prompt a plain answer.
const script = `{"match":"TCK-SLEEP","toolCalls":[{"name":"run_shell_command","arguments":{"command":"sleep 30"}}]}
{"match":"TCK-SLEEP","text":"not reached"}
{"match":"TCK-TOOLS","text":"Looking.","toolCalls":[{"name":"read_file","arguments":{"file_path":"%CWD%/notes.txt"}},{"name":"run_shell_command","arguments":{"command":"echo hi"}},{"name":"ask_user_question","arguments":{"questions":[{"question":"Which one?","header":"Pick","options":[{"label":"a"},{"label":"b"}]}]}}]}
{"match":"TCK-TOOLS","text":"Done."}
`

// env is one check's machine: its own home, data folder and workspace.
type env struct {
	dir, cwd, data string
	vars           []string
	args           []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, cwd: filepath.Join(dir, "ws"), data: filepath.Join(dir, "data")}
	require.NoError(t, os.MkdirAll(e.cwd, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.cwd, "notes.txt"), []byte("hello\n"), 0o644))
	body := strings.ReplaceAll(script, "%CWD%", e.cwd) + strings.Repeat(`{"text":"Hello from the scripted model."}`+"\n", 40)
	sp := filepath.Join(dir, "script.jsonl")
	require.NoError(t, os.WriteFile(sp, []byte(body), 0o644))
	cfg := filepath.Join(dir, "acpd.toml")
	// Two models, so session/set_model has one to switch to.
	require.NoError(t, os.WriteFile(cfg, []byte("[model]\nmodels = [\"demo\", \"demo-large\"]\n"), 0o644))
	e.vars = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"), "TMPDIR=" + os.TempDir(),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}
	e.args = []string{"--config", cfg, "--provider", "script", "--model-script", sp, "--model", "demo", "--data-dir", e.data}
	return e
}

// agent is one acpd process as the kit's harness sees it: every line it
// writes is recorded, checked as JSON-RPC and against the schema.
type agent struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	rc     *acptest.RawClient
	stderr *acptest.SyncBuffer
	v      *acptest.Validator
	rep    *report

	mu      sync.Mutex
	nextID  int
	sent    map[string]string // raw request id -> method
	lines   []line            // everything the agent wrote, in order
	pending []line            // read but not yet consumed
	early   map[string]line   // responses read while waiting for another
	exited  bool
}

// line is one line the agent wrote, decoded.
type line struct {
	raw []byte
	msg acptest.Message
	at  int // index in the agent's transcript
}

func (l line) isResponse() bool   { return l.msg.Method == "" }
func (l line) isUpdate() bool     { return l.msg.Method == "session/update" && len(l.msg.ID) == 0 }
func (l line) isRequest() bool    { return l.msg.Method != "" && len(l.msg.ID) > 0 }
func (l line) updateKind() string { return jsonString(l.msg.Params, "update", "sessionUpdate") }
func (l line) sessionID() string  { return jsonString(l.msg.Params, "sessionId") }

func start(t *testing.T, e *env, rep *report) *agent {
	t.Helper()
	bin := acptest.Acpd(t)
	cmd := exec.Command(bin, e.args...)
	cmd.Env, cmd.Dir = e.vars, e.cwd
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	a := &agent{t: t, cmd: cmd, stdin: stdin, stderr: &acptest.SyncBuffer{}, rep: rep, sent: map[string]string{}, early: map[string]line{}}
	cmd.Stderr = a.stderr
	a.v, err = acptest.DefaultValidator()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	a.rc = acptest.NewRawClient(stdin, stdout)
	t.Cleanup(a.close)
	return a
}

// close ends the process as the kit does: stdin closed, then SIGKILL if it
// lingers; and hands the transcript's facts to the report.
func (a *agent) close() {
	a.mu.Lock()
	done := a.exited
	a.exited = true
	a.mu.Unlock()
	if done {
		return
	}
	_ = a.stdin.Close()
	exited := make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = a.cmd.Process.Kill()
		<-exited
	}
	a.rc.Stop()
	a.rep.stderrBytes(len(a.stderr.String()))
}

// request sends a request with the next integer id (or id, when given) and
// returns the id as raw JSON.
func (a *agent) request(method string, params any, id ...any) string {
	a.t.Helper()
	a.mu.Lock()
	var raw string
	if len(id) > 0 {
		b, _ := json.Marshal(id[0])
		raw = string(b)
	} else {
		a.nextID++
		raw = strconv.Itoa(a.nextID)
	}
	a.sent[raw] = method
	a.mu.Unlock()
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, raw, method, mustJSON(params)))
	return raw
}

func (a *agent) notify(method string, params any) {
	a.t.Helper()
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":%s}`, method, mustJSON(params)))
}

func (a *agent) send(s string) {
	a.t.Helper()
	require.NoError(a.t, a.rc.Send(s))
}

// next reads the agent's next line (a pending one first), recording and
// checking it; ok is false when none came within timeout.
func (a *agent) next(timeout time.Duration) (line, bool) {
	a.t.Helper()
	a.mu.Lock()
	if len(a.pending) > 0 {
		l := a.pending[0]
		a.pending = a.pending[1:]
		a.mu.Unlock()
		return l, true
	}
	a.mu.Unlock()
	b, err := a.rc.Next(timeout)
	if errors.Is(err, acptest.ErrTimeout) {
		return line{}, false
	}
	if err != nil {
		a.t.Fatalf("agent's stdout ended: %v; stderr:\n%s", err, a.stderr.String())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	l := line{raw: b, at: len(a.lines)}
	a.lines = append(a.lines, l)
	a.rep.agentLine(b, a.sent, a.v)
	if err := json.Unmarshal(b, &l.msg); err != nil {
		a.t.Fatalf("agent wrote a line that is not JSON: %q", b)
	}
	l.msg.Raw = b
	return l, true
}

// exchange is what came while waiting for a response.
type exchange struct {
	resp    line
	updates []line // session/update notifications, in wire order
	calls   []line // agent -> client requests
}

// wait reads until the response to id, acting as the kit's mock client:
// permission requests get the first option (or cancelled once cancelled
// says so), any other agent request -32601 — the client advertised no
// capability. onUpdate, when set, runs at each update (a cancel sent
// mid-turn).
func (a *agent) wait(id string, onUpdate func(line)) exchange {
	a.t.Helper()
	var x exchange
	if l, ok := a.early[id]; ok {
		delete(a.early, id)
		x.resp = l
		return x
	}
	deadline := time.Now().Add(responseTimeout)
	for {
		l, ok := a.next(time.Until(deadline))
		if !ok {
			a.t.Fatalf("no response to request %s within %v; stderr:\n%s", id, responseTimeout, a.stderr.String())
		}
		switch {
		case l.isResponse() && string(l.msg.ID) == id:
			x.resp = l
			return x
		case l.isResponse():
			a.early[string(l.msg.ID)] = l
		case l.isRequest():
			x.calls = append(x.calls, l)
			a.answer(l)
		case l.isUpdate():
			x.updates = append(x.updates, l)
			if onUpdate != nil {
				onUpdate(l)
			}
		}
	}
}

// answer replies to an agent request as the kit's mock client does.
func (a *agent) answer(l line) {
	a.t.Helper()
	if l.msg.Method == "session/request_permission" {
		var p struct {
			Options []struct {
				OptionID string `json:"optionId"`
			} `json:"options"`
		}
		_ = json.Unmarshal(l.msg.Params, &p)
		outcome := `{"outcome":"cancelled"}`
		if len(p.Options) > 0 {
			outcome = fmt.Sprintf(`{"outcome":"selected","optionId":%q}`, p.Options[0].OptionID)
		}
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":%s}}`, l.msg.ID, outcome))
		return
	}
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found: the client advertised no such capability"}}`, l.msg.ID))
}

// quiet returns what the agent wrote within d (nothing expected).
func (a *agent) quiet(d time.Duration) []line {
	a.t.Helper()
	var out []line
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return out
		}
		l, ok := a.next(left)
		if !ok {
			return out
		}
		out = append(out, l)
		if l.isRequest() {
			a.answer(l)
		}
	}
}

// call is request and wait.
func (a *agent) call(method string, params any) exchange {
	a.t.Helper()
	return a.wait(a.request(method, params), nil)
}

// initialize performs the handshake with no client capabilities, as the
// kit's mock client advertises none.
func (a *agent) initialize() map[string]any {
	a.t.Helper()
	x := a.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	var r map[string]any
	require.NoError(a.t, json.Unmarshal(x.resp.msg.Result, &r), "initialize: %s", x.resp.raw)
	return r
}

// newSession opens a session in the workspace.
func (a *agent) newSession(cwd string) (string, exchange) {
	a.t.Helper()
	x := a.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	id := jsonString(x.resp.msg.Result, "sessionId")
	require.NotEmpty(a.t, id, "session/new: %s", x.resp.raw)
	return id, x
}

func (a *agent) prompt(session, text string, onUpdate func(line)) exchange {
	a.t.Helper()
	id := a.request("session/prompt", map[string]any{"sessionId": session, "prompt": []any{map[string]any{"type": "text", "text": text}}})
	return a.wait(id, onUpdate)
}

func mustJSON(v any) string {
	if v == nil {
		return "{}"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// jsonString reads the string at path in raw, "" when absent.
func jsonString(raw json.RawMessage, path ...string) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// stopReasons are v1's StopReason values.
var stopReasons = map[string]bool{"end_turn": true, "max_tokens": true, "max_turn_requests": true, "refusal": true, "cancelled": true}

// lineProblems are the transport and envelope rules every line is held to
// (ACP-TRANSPORT-001/002, ACP-JSONRPC-002, ACP-ERROR-001), with the rule
// each breaks.
func lineProblems(b []byte) map[string]string {
	out := map[string]string{}
	if !utf8.Valid(b) {
		out["ACP-TRANSPORT-002"] = fmt.Sprintf("not UTF-8: %q", b)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		out["ACP-TRANSPORT-001"] = fmt.Sprintf("not one JSON object: %q", b)
		return out
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		out["ACP-TRANSPORT-001"] = fmt.Sprintf(`no "jsonrpc":"2.0": %q`, b)
	}
	if _, isCall := m["method"]; isCall {
		return out
	}
	_, hasResult := m["result"]
	e, hasError := m["error"]
	if hasResult == hasError {
		out["ACP-JSONRPC-002"] = fmt.Sprintf("a response with both or neither of result and error: %q", b)
		return out
	}
	if hasError {
		var eo struct {
			Code    *json.Number `json:"code"`
			Message *string      `json:"message"`
		}
		if json.Unmarshal(e, &eo) != nil || eo.Code == nil || eo.Message == nil || strings.Contains(eo.Code.String(), ".") {
			out["ACP-JSONRPC-002"] = fmt.Sprintf("an error without an integer code and a string message: %q", b)
		} else if *eo.Message == "" || strings.Contains(*eo.Message, "\n") {
			out["ACP-ERROR-001"] = fmt.Sprintf("an error message empty or of several lines: %q", b)
		}
	}
	return out
}
