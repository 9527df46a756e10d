package main

import (
	"bufio"
	"bytes"
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

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// runOnTerminal runs acpd with stderr on a pseudo-terminal, as a person
// at a terminal runs it, and returns what it wrote there (the terminal's
// \r\n turned back into \n).
func (e *runEnv) runOnTerminal(t *testing.T, args ...string) runOut {
	return e.runTerminal(t, false, args...)
}

// runTerminal is runOnTerminal, with stdout on the terminal too when
// stdoutToo (the result's stderr then holds both).
func (e *runEnv) runTerminal(t *testing.T, stdoutToo bool, args ...string) runOut {
	t.Helper()
	bin := acpdBinary(t)
	ptm, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptm.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = e.env, e.dir
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &out, tty
	if stdoutToo {
		cmd.Stdout = tty
	}
	require.NoError(t, cmd.Start())
	tty.Close()
	var term bytes.Buffer
	read := make(chan struct{})
	go func() {
		_, _ = io.Copy(&term, ptm) // ends with EIO once acpd exits
		close(read)
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	<-read
	return runOut{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: strings.ReplaceAll(term.String(), "\r\n", "\n")}
}

// stallingModel is a model server whose first request gets its headers and
// then nothing, and whose second answers; the config file gives requests
// 9 s of silence and one retry — 4 s past the first "waiting" line (5 s),
// since an update the run sees late in a loaded machine's setup (the
// commands' announcement) starts the silence again.
func stallingModel(t *testing.T, e *runEnv) (srv *modeltest.Server, args []string) {
	t.Helper()
	srv = modeltest.NewServer(t, modeltest.Response{Hang: true}, modeltest.Response{Text: "hello after the wait"})
	cfg := filepath.Join(e.dir, "slow.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[model]\nrequestTimeout = \"9s\"\nmaxRetries = 1\n"), 0o644))
	e.env = append(e.env, "OPENAI_API_KEY=test-key")
	return srv, []string{"run", "--config", cfg, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "m1", "--cwd", e.ws}
}

// TestRunCmd_WaitsAndRetriesVisible: against a model that stalls, acpd run
// on a terminal says it is waiting for the model, then that the request
// failed and when the next try is, then prints the answer; stream-json
// carries the same as lines: acpd run's waiting event and the agent's
// notice update.
func TestRunCmd_WaitsAndRetriesVisible(t *testing.T) {
	t.Parallel()
	t.Run("terminal", func(t *testing.T) {
		t.Parallel()
		e := newRunEnv(t)
		_, args := stallingModel(t, e)
		o := e.runOnTerminal(t, append(args, "say hello")...)
		require.Equal(t, 0, o.code, o.stderr)
		assert.Equal(t, "hello after the wait", strings.TrimSpace(o.stdout))
		assert.Contains(t, o.stderr, "acpd run: waiting for the model: nothing for 5 s\n")
		assert.Regexp(t, `acpd run: Model request failed; retrying: Attempt 1 of 2 failed: .*; the next try is in [0-9.]+m?s\.\n`, o.stderr)
		assert.Less(t, strings.Index(o.stderr, "waiting for the model"), strings.Index(o.stderr, "Attempt 1 of 2 failed"))
	})
	t.Run("stream-json", func(t *testing.T) {
		t.Parallel()
		e := newRunEnv(t)
		_, args := stallingModel(t, e)
		o := e.run(t, "", append(args, "-o", "stream-json", "say hello")...)
		require.Equal(t, 0, o.code, o.stderr)
		var waited, retried bool
		sc := bufio.NewScanner(strings.NewReader(o.stdout))
		for sc.Scan() {
			var line struct {
				Event      string `json:"event"`
				WaitingFor string `json:"waitingFor"`
				Seconds    int    `json:"seconds"`
				Update     struct {
					Kind        string `json:"sessionUpdate"`
					Title       string `json:"title"`
					Description string `json:"description"`
				} `json:"update"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
			if line.Event == "waiting" && line.WaitingFor == "model" && line.Seconds == 5 {
				waited = true
			}
			if line.Update.Kind == "notice" && line.Update.Title == "Model request failed; retrying" {
				retried = strings.Contains(line.Update.Description, "Attempt 1 of 2 failed")
			}
		}
		assert.True(t, waited, "a waiting event:\n%s", o.stdout)
		assert.True(t, retried, "a retry notice:\n%s", o.stdout)
		assert.NotContains(t, o.stderr, "waiting", "stderr is no terminal")
	})
}

// TestRunCmd_TextEndsWithSessionAndContinue: text output ends with the
// session's id and the command that continues it, which works as shown.
func TestRunCmd_TextEndsWithSessionAndContinue(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"text":"first"}`+"\n"+`{"text":"second"}`+"\n")
	o := e.run(t, "", e.scripted(script, "one")...)
	require.Equal(t, 0, o.code, o.stderr)
	lines := strings.Split(strings.TrimSpace(o.stderr), "\n")
	last := lines[len(lines)-1]
	require.Regexp(t, `^acpd run: session [A-Z0-9]+; continue it with: acpd run --session [A-Z0-9]+ --cwd \S+ PROMPT$`, last)
	cont := strings.Fields(strings.SplitN(last, "continue it with: ", 2)[1])
	require.Equal(t, []string{"acpd", "run", "--session"}, cont[:3])
	args := append([]string{"run", "--provider", "script", "--model-script", script, "--model", "demo"}, cont[2:len(cont)-1]...)
	o = e.run(t, "", append(args, "two")...)
	require.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, "first", strings.TrimSpace(o.stdout), "the script restarts: this run continued the session with its own first line")
	assert.Contains(t, o.stderr, "acpd run: session "+cont[3]+";")
}

// TestRunCmd_ErrorPrintedOnce: with stderr not a terminal (JSON logs), a
// failing model request is said once, as acpd run's line, not again as a
// log record.
func TestRunCmd_ErrorPrintedOnce(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(t, modeltest.Response{Status: 400, ErrorMessage: "no such model: m9"})
	e := newRunEnv(t)
	e.env = append(e.env, "OPENAI_API_KEY=test-key")
	o := e.run(t, "", "run", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "m9", "--cwd", e.ws, "hi")
	assert.Equal(t, 1, o.code)
	assert.Equal(t, 1, strings.Count(o.stderr, "no such model: m9"), o.stderr)
	assert.NotContains(t, o.stderr, `"level"`, "no log record")
	assert.Contains(t, o.stderr, "acpd run: error: ")
}

// TestRunCmd_RefusedEditExitsSeven: a turn whose edit was refused (nobody
// to ask in approval mode default) ends normally but exits 7, saying so.
func TestRunCmd_RefusedEditExitsSeven(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	script := e.script(t, `{"toolCalls":[{"name":"write_file","arguments":{"file_path":"%s/x.txt","content":"HELLO\n"}}]}`+"\n"+`{"text":"could not"}`+"\n")
	o := e.run(t, "", e.scripted(script, "change it")...)
	assert.Equal(t, 7, o.code, o.stderr)
	assert.Contains(t, o.stderr, "acpd run: the turn ended with 1 tool call(s) refused (see above): exit status 7\n")
	b, err := os.ReadFile(filepath.Join(e.ws, "x.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(b))
}

// TestRunCmd_RewindExitCodes: a rewind needs no model (the scripted
// provider without a script, or none configured at all); a failed one
// exits 1 saying which turns there are and the command that lists them,
// not pointing to /rewind; a rewind restores a symlink the turn replaced
// with a folder holding files.
func TestRunCmd_RewindExitCodes(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	require.NoError(t, os.Mkdir(filepath.Join(e.ws, "target"), 0o755))
	require.NoError(t, os.Symlink("target", filepath.Join(e.ws, "link")))
	script := e.script(t, `{"toolCalls":[{"name":"run_shell_command","arguments":{"command":"rm link && mkdir -p link/deep && echo a > link/a.txt && echo b > link/deep/b.txt"}}]}`+"\n"+`{"text":"done"}`+"\n")
	o := e.run(t, "", e.scripted(script, "--yolo", "-o", "json", "make a folder")...)
	require.Equal(t, 0, o.code, o.stderr)
	sid := decodeResult(t, strings.TrimSpace(o.stdout)).SessionID
	fi, err := os.Lstat(filepath.Join(e.ws, "link"))
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "the turn made a folder where the symlink was")

	o = e.run(t, "", "run", "--provider", "script", "--cwd", e.ws, "--session", sid, "--rewind", "5")
	assert.Equal(t, 1, o.code, o.stderr)
	assert.Contains(t, o.stderr, "acpd run: --rewind 5: rewind failed: turn 5 is not in the conversation, whose turns are 1; acpd checkpoints --session "+sid+" lists the turns")
	assert.NotContains(t, o.stderr, "/rewind")
	assert.NotContains(t, o.stderr, "model.script")

	o = e.run(t, "", "run", "--provider", "script", "--cwd", e.ws, "--session", sid, "--rewind", "1")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "Restored the workspace to before turn 1")
	target, err := os.Readlink(filepath.Join(e.ws, "link"))
	require.NoError(t, err, "the symlink is back")
	assert.Equal(t, "target", target)
	entries, err := os.ReadDir(filepath.Join(e.ws, "target"))
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing was written through the symlink")
}

// TestServe_TerminalHint: acpd started on a terminal says what it is and
// what to run instead, and still answers ACP typed (or pasted) there.
func TestServe_TerminalHint(t *testing.T) {
	t.Parallel()
	bin := acpdBinary(t)
	e := newRunEnv(t)
	ptm, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptm.Close()
	go func() { _, _ = io.Copy(io.Discard, ptm) }() // the terminal's echo
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = e.env
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr acptest.SyncBuffer
	cmd.Stdin, cmd.Stderr = tty, &stderr
	require.NoError(t, cmd.Start())
	tty.Close()
	_, err = io.WriteString(ptm, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, `"id":1,"result":{"protocolVersion":1`)
	// os/exec copies the child's stderr into the buffer on a goroutine of
	// its own: the hint may trail the answer read from stdout.
	hinted := func() bool {
		s := stderr.String()
		return strings.Contains(s, "acpd is an Agent Client Protocol agent: an editor starts it") &&
			strings.Contains(s, `acpd run "your prompt"`) && strings.Contains(s, "acpd --help")
	}
	assert.Eventually(t, hinted, 10*time.Second, 10*time.Millisecond, "the terminal hint: %q", stderr.String())
	_, _ = ptm.Write([]byte{4}) // Ctrl-D: end of input
	require.NoError(t, cmd.Wait())

	// An editor's pipe gets no hint.
	o := e.run(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	require.Equal(t, 0, o.code, o.stderr)
	assert.NotContains(t, o.stderr, "Agent Client Protocol agent")
}
