package agentguard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// process is Run in front of the fake agent as a real process (this test
// binary in fake-agent mode), with the test as the editor.
type process struct {
	t      *testing.T
	in     io.WriteCloser
	out    *bufio.Reader
	code   chan int
	stderr *strings.Builder
}

func startProcess(t *testing.T, mode, arg string, grace time.Duration) *process {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &process{t: t, in: inW, out: bufio.NewReader(outR), code: make(chan int, 1), stderr: &strings.Builder{}}
	o := RunOptions{
		Options:       Options{Logger: slog.New(slog.DiscardHandler), CancelGrace: time.Second},
		Command:       []string{os.Args[0], "fake-agent", mode, arg},
		ShutdownGrace: grace,
		Stderr:        p.stderr,
	}
	go func() {
		p.code <- Run(context.Background(), o, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close() })
	return p
}

func (p *process) send(line string) {
	_, err := io.WriteString(p.in, line+"\n")
	require.NoError(p.t, err)
}

// next reads the next line the editor gets.
func (p *process) next() string {
	p.t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := p.out.ReadString('\n')
		ch <- l
	}()
	select {
	case l := <-ch:
		return strings.TrimSpace(l)
	case <-time.After(10 * time.Second):
		p.t.Fatal("no line from the guard")
	}
	return ""
}

// exit waits for Run's status.
func (p *process) exit() int {
	p.t.Helper()
	select {
	case c := <-p.code:
		return c
	case <-time.After(15 * time.Second):
		p.t.Fatal("the guard did not exit")
	}
	return 0
}

// session brings the agent to a session; it returns the agent's pid.
func (p *process) session() {
	p.t.Helper()
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	assert.Contains(p.t, p.next(), `"agentInfo":{"name":"fake-agent"`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	assert.Contains(p.t, p.next(), `"sessionId":"sess-1"`)
}

// TestLifecycle_EditorCloses: when the editor closes stdin, an agent that
// exits on EOF exits, one that ignores EOF (as the Claude adapter does) is
// sent SIGTERM, one that ignores SIGTERM too is killed, and what the agent
// started goes with it.
func TestLifecycle_EditorCloses(t *testing.T) {
	t.Parallel()
	// An agent that exits on EOF gets a grace period longer than the race
	// detector's one second at exit (this test binary is the agent).
	tests := []struct {
		mode  string
		grace time.Duration
		code  int
	}{
		{"exits", 3 * time.Second, 0},
		{"ignore-eof", 300 * time.Millisecond, 128 + int(syscall.SIGTERM)},
		{"ignore-term", 300 * time.Millisecond, 128 + int(syscall.SIGKILL)},
		{"child", 3 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			p := startProcess(t, tt.mode, pidFile, tt.grace)
			p.session()
			start := time.Now()
			require.NoError(t, p.in.Close())
			assert.Equal(t, tt.code, p.exit())
			assert.Less(t, time.Since(start), 2*tt.grace+time.Second)
			if tt.mode == "child" {
				b, err := os.ReadFile(pidFile)
				require.NoError(t, err)
				pid, err := strconv.Atoi(string(b))
				require.NoError(t, err)
				assert.Eventually(t, func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH },
					5*time.Second, 20*time.Millisecond, "the agent's child %d is still running", pid)
			}
		})
	}
}

// TestLifecycle_AgentCrashes: the editor's pending prompt gets a clear
// error naming the exit, and the guard exits with the agent's status.
func TestLifecycle_AgentCrashes(t *testing.T) {
	t.Parallel()
	p := startProcess(t, "crash-on-prompt", "", 3*time.Second)
	p.session()
	p.send(`{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"go"}]}}`)
	assert.Contains(t, p.next(), `"sessionUpdate":"tool_call"`, "what the agent wrote before it died is relayed first")
	var r struct {
		ID    string `json:"id"`
		Error struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	line := p.next()
	require.NoError(t, json.Unmarshal([]byte(line), &r), line)
	assert.Equal(t, "p1", r.ID)
	assert.Equal(t, -32603, r.Error.Code)
	assert.Equal(t, "The agent exited (exit status 3) before answering.", r.Error.Message)
	assert.Equal(t, "agent_exited", r.Error.Data["errorKind"])
	assert.EqualValues(t, 3, r.Error.Data["exitCode"])
	assert.Equal(t, 3, p.exit())
	assert.Contains(t, p.stderr.String(), "acpd guard: the agent exited (exit status 3)")
}

// TestLifecycle_NoSuchAgent: a command that cannot start is a usage error.
func TestLifecycle_NoSuchAgent(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	code := Run(context.Background(), RunOptions{Command: []string{filepath.Join(t.TempDir(), "no-such-agent")}, Stderr: &stderr},
		strings.NewReader(""), io.Discard)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, stderr.String(), "acpd guard: cannot start")
}

// TestLineLogger: with a log file, the agent's stderr becomes one record a
// line; a partial line waits for its end.
func TestLineLogger(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	l := &LineLogger{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	_, _ = l.Write([]byte("first line\nsecond "))
	_, _ = l.Write([]byte("half\r\n"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], `"msg":"agent stderr","line":"first line"`)
	assert.Contains(t, lines[1], `"line":"second half"`)
}
