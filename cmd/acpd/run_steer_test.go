package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/headless"
	"github.com/acpd/acpd/session/model/modeltest"
)

// waitForFile is a shell command that runs until the test creates the file
// go in the workspace: a tool call that lasts exactly as long as a test
// needs it to.
const waitForFile = `{"command":"while [ ! -f go ]; do sleep 0.05; done"}`

// waitingTurn is a loopback model whose turn runs a shell call that waits
// for the file go, then answers final; and the arguments of an acpd run
// against it with stream-json input.
func waitingTurn(t *testing.T, final string) (*modeltest.Server, *runEnv, []string) {
	t.Helper()
	srv := modeltest.NewServer(t,
		modeltest.Response{ToolCalls: []modeltest.ToolCall{{ID: "w1", Name: "run_shell_command", Arguments: waitForFile}}},
		modeltest.Response{Text: final},
	)
	e := newRunEnv(t)
	e.env = append(e.env, "OPENAI_API_KEY=test-key")
	return srv, e, []string{"run", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "m1", "--cwd", e.ws,
		"--yolo", "--input-format", "stream-json"}
}

// steerRun is a running acpd run whose stdin, stdout and stderr the test
// holds.
type steerRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, a line at a time
	errs   chan string // stderr, a line at a time
	stderr *acptest.SyncBuffer
	got    []string // stdout lines read so far
}

// startSteerRun starts acpd with args; stdin is the pipe the test writes
// (or the file given).
func startSteerRun(t *testing.T, e *runEnv, stdin *os.File, args ...string) *steerRun {
	t.Helper()
	bin := acpdBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	r := &steerRun{cmd: exec.CommandContext(ctx, bin, args...), lines: make(chan string, 256), errs: make(chan string, 256),
		stderr: &acptest.SyncBuffer{}}
	r.cmd.Env, r.cmd.Dir = e.env, e.dir
	var err error
	if stdin != nil {
		r.cmd.Stdin = stdin
	} else {
		r.stdin, err = r.cmd.StdinPipe()
		require.NoError(t, err)
	}
	stdout, err := r.cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := r.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, r.cmd.Start())
	scan := func(rd io.Reader, ch chan string, also io.Writer) {
		defer close(ch)
		sc := bufio.NewScanner(rd)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if also != nil {
				_, _ = also.Write([]byte(sc.Text() + "\n"))
			}
			ch <- sc.Text()
		}
	}
	go scan(stdout, r.lines, nil)
	go scan(stderr, r.errs, r.stderr)
	return r
}

func (r *steerRun) write(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(r.stdin, line+"\n")
	require.NoError(t, err)
}

// waitOut reads stdout until a line contains want.
func (r *steerRun) waitOut(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			require.True(t, ok, "stdout ended without %q; stdout: %q\nstderr:\n%s", want, r.got, r.stderr.String())
			r.got = append(r.got, l)
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			t.Fatalf("no stdout line with %q; stdout: %q\nstderr:\n%s", want, r.got, r.stderr.String())
		}
	}
}

// waitErr reads stderr until a line contains want.
func (r *steerRun) waitErr(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-r.errs:
			require.True(t, ok, "stderr ended without %q; stderr:\n%s", want, r.stderr.String())
			if strings.Contains(l, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no stderr line with %q; stderr:\n%s", want, r.stderr.String())
		}
	}
}

// wait reads the rest of stdout and the exit status.
func (r *steerRun) wait(t *testing.T) int {
	t.Helper()
	for l := range r.lines {
		r.got = append(r.got, l)
	}
	for range r.errs {
	}
	err := r.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	return r.cmd.ProcessState.ExitCode()
}

// steerResult is the result object's steering part.
type steerResult struct {
	StopReason  string                      `json:"stopReason"`
	Text        string                      `json:"text"`
	Steers      []headless.SteerSummary     `json:"steers"`
	Undelivered []headless.UndeliveredSteer `json:"undelivered"`
}

func decodeSteerResult(t *testing.T, line string) steerResult {
	t.Helper()
	var r steerResult
	require.NoError(t, json.Unmarshal([]byte(line), &r), line)
	return r
}

// TestRunCmd_StreamJSONSteer steers a headless turn from stdin: the prompt
// is the first line (Claude Code's shape), a later line reaches the running
// turn as a steering message while a tool runs, the next model request
// ends with it after the tool's result and repeats the one before, the
// output shows it, and the prompt answers once, end_turn — though stdin
// ended while the tool still ran.
func TestRunCmd_StreamJSONSteer(t *testing.T) {
	t.Parallel()
	srv, e, args := waitingTurn(t, "steered answer")
	r := startSteerRun(t, e, nil, append(args, "--output-format", "stream-json")...)

	r.write(t, `{"type":"user","message":{"role":"user","content":"wait for go"},"session_id":"default","parent_tool_use_id":null}`)
	r.waitOut(t, `"sessionUpdate":"tool_call"`)
	r.write(t, `{"type":"user","content":[{"type":"text","text":"STEER: use the v2 API"}]}`)
	ev := r.waitOut(t, `"event":"steering"`)
	require.NoError(t, r.stdin.Close(), "the end of stdin must not end the turn")
	var steer struct {
		Line      int    `json:"line"`
		Outcome   string `json:"outcome"`
		MessageID string `json:"messageId"`
	}
	require.NoError(t, json.Unmarshal([]byte(ev), &steer))
	assert.Equal(t, 2, steer.Line)
	assert.Equal(t, "injected", steer.Outcome)
	require.NotEmpty(t, steer.MessageID)
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "go"), nil, 0o644))

	echo := r.waitOut(t, `"sessionUpdate":"user_message_chunk"`)
	assert.Contains(t, echo, `"text":"STEER: use the v2 API"`)
	assert.Contains(t, echo, `"messageId":"`+steer.MessageID+`"`)
	require.Equal(t, 0, r.wait(t), "stderr:\n%s", r.stderr.String())

	results := 0
	for _, l := range r.got {
		if strings.Contains(l, `"stopReason"`) {
			results++
		}
	}
	assert.Equal(t, 1, results, "one answer to the one prompt: %q", r.got)
	res := decodeSteerResult(t, r.got[len(r.got)-1])
	assert.Equal(t, "end_turn", res.StopReason)
	assert.Equal(t, "steered answer", res.Text)
	assert.Equal(t, []headless.SteerSummary{{Line: 2, Outcome: "injected", MessageID: steer.MessageID, Delivered: true}}, res.Steers)
	assert.Empty(t, res.Undelivered)

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	first, next := reqs[0].Messages, reqs[1].Messages
	require.Len(t, next, len(first)+3, "the tool call, its result, the steer")
	for i := range first {
		a, _ := json.Marshal(first[i])
		b, _ := json.Marshal(next[i])
		assert.JSONEq(t, string(a), string(b), "message %d of the cached prefix changed", i)
	}
	assert.Equal(t, "user", first[len(first)-1].Role)
	assert.Equal(t, "wait for go", first[len(first)-1].Text())
	assert.Equal(t, "tool", next[len(next)-2].Role, "the steer follows the tool's result")
	last := next[len(next)-1]
	assert.Equal(t, "user", last.Role)
	assert.Equal(t, "STEER: use the v2 API", last.Text())
}

// TestRunCmd_StreamJSONMalformedLines: a malformed steering line is an error
// on stderr naming its line and field, and the turn goes on and takes the
// good line after it; text output reports the steer's outcome on stderr. A
// malformed first line (the prompt) is a usage error.
func TestRunCmd_StreamJSONMalformedLines(t *testing.T) {
	t.Parallel()
	srv, e, args := waitingTurn(t, "all done")
	r := startSteerRun(t, e, nil, append(args, "wait for go")...)
	r.write(t, `{"type":"user","content":"one"`)
	r.write(t, `{"type":"assistant","content":"x"}`)
	r.write(t, `{"type":"user","content":""}`)
	r.write(t, ``)
	r.write(t, `{"type":"user","message":{"role":"user","content":[{"type":"image"}]}}`)
	r.write(t, `{"type":"user","content":"the good one"}`)
	r.waitErr(t, "input line 6: steering message taken by the running turn")
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "go"), nil, 0o644))
	r.waitErr(t, "input line 6: steering message delivered to the model")
	require.Equal(t, 0, r.wait(t), "stderr:\n%s", r.stderr.String())
	assert.Equal(t, "all done", strings.TrimSpace(strings.Join(r.got, "\n")))
	stderr := r.stderr.String()
	assert.Contains(t, stderr, "acpd run: input line 1: not valid JSON")
	assert.Contains(t, stderr, `acpd run: input line 2: type: "assistant" is not accepted`)
	assert.Contains(t, stderr, "acpd run: input line 3: content: empty")
	assert.Contains(t, stderr, "acpd run: input line 5: message.content[0].data: missing")
	assert.NotContains(t, stderr, "input line 4", "a blank line is skipped")

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	assert.Equal(t, "the good one", last.Text())

	o := e.run(t, `{"type":"user","content":5}`+"\n", args...)
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "input line 1: content: must be a string or an array of content blocks")
	o = e.run(t, "", args...)
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "stdin ended before its first line")
}

// TestRunCmd_StreamJSONUndelivered: a steering line that finds no turn to
// take it — the prompt was a command that ran no model turn — starts none
// and is listed undelivered with its content.
func TestRunCmd_StreamJSONUndelivered(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"text":"never asked"}`)
	o := e.run(t, `{"type":"user","content":"/tools"}`+"\n"+`{"type":"user","content":"too late"}`+"\n",
		e.scripted(script, "--input-format", "stream-json", "--output-format", "json")...)
	require.Equal(t, 0, o.code, o.stderr)
	res := decodeSteerResult(t, strings.TrimSpace(o.stdout))
	require.Len(t, res.Undelivered, 1, o.stdout)
	u := res.Undelivered[0]
	assert.Equal(t, 2, u.Line)
	assert.Contains(t, []string{headless.UndeliveredNotSent, headless.UndeliveredNoRunningTurn}, u.Reason)
	require.Len(t, u.Prompt, 1)
	assert.Equal(t, "too late", u.Prompt[0].Text)
	require.Len(t, res.Steers, 1)
	assert.False(t, res.Steers[0].Delivered)
	assert.NotEqual(t, "startedNewTurn", res.Steers[0].Outcome)

	o = e.run(t, `{"type":"user","content":"/tools"}`+"\n"+`{"type":"user","content":"too late"}`+"\n",
		e.scripted(script, "--input-format", "stream-json")...)
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stderr, "acpd run: input line 2: steering message not delivered: the turn")
}
