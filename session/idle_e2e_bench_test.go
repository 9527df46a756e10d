package session_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/session/idletest"
)

// BenchmarkDaemon_IdleSessions measures what 1,000 idle sessions cost the
// built binary as the operating system sees it: the growth of the daemon's
// anonymous resident memory (RssAnon in /proc/PID/status: heap, stacks and
// whatever the Go runtime keeps of freed heap) over 1,000 session/new in one
// git workspace (instruction files with an import, three command files),
// each waited for until its commands are announced, and then over 1,000
// session/load of those sessions in a fresh daemon. The baseline is read
// after one warm-up session, so the process-wide parts (the workspace
// watcher, the shared command set and instructions) are not charged to the
// thousand. RSS is read one second after the last session is ready
// (anon-KB/session: the runtime's scavenger has had that long to return the
// burst's garbage) and again once the daemon has been idle for
// idletest.Settled (idle-anon-KB/session: what it holds from then on).
// Target: ≤ 32 KB a session.
func BenchmarkDaemon_IdleSessions(b *testing.B) {
	const n = 1000
	ws := idletest.Workspace(b)
	b.Run("new", func(b *testing.B) {
		var r idleRSS
		for b.Loop() {
			b.StopTimer()
			d := startIdleDaemon(b, b.TempDir())
			d.newSession(ws) // warm-up
			r.start(d)
			b.StartTimer()
			for range n {
				d.newSession(ws)
			}
			b.StopTimer()
			r.settle(d, n)
			d.close()
			b.StartTimer()
		}
		r.report(b)
	})
	b.Run("load", func(b *testing.B) {
		data := b.TempDir()
		d := startIdleDaemon(b, data)
		ids := make([]string, n+1)
		for i := range ids {
			ids[i] = d.newSession(ws)
		}
		d.close()
		var r idleRSS
		for b.Loop() {
			b.StopTimer()
			d := startIdleDaemon(b, data)
			d.loadSession(ws, ids[n]) // warm-up
			r.start(d)
			b.StartTimer()
			for _, id := range ids[:n] {
				d.loadSession(ws, id)
			}
			b.StopTimer()
			r.settle(d, n)
			d.close()
			b.StartTimer()
		}
		r.report(b)
	})
}

// idleRSS reads a daemon's anonymous RSS before a burst of n sessions, one
// second after it, and once the daemon has been idle for
// idletest.Settled; each growth divided by n.
type idleRSS struct {
	g           *idletest.Growth
	burst, idle float64
}

func (r *idleRSS) start(d *idleDaemon) { r.g = idletest.Start(d.b, d.cmd.Process.Pid) }

func (r *idleRSS) settle(d *idleDaemon, n int) {
	r.g.Burst()
	r.burst = r.g.After(d.b, time.Second, n)
	r.idle = r.g.After(d.b, idletest.Settled, n)
}

func (r *idleRSS) report(b *testing.B) {
	b.ReportMetric(r.burst, "anon-KB/session")
	b.ReportMetric(r.idle, "idle-anon-KB/session")
}

// idleDaemon is the built binary driven by a plain line client: requests go
// out one at a time, and a session counts as ready when its
// available_commands_update has arrived (it follows the session/new or
// session/load answer).
type idleDaemon struct {
	b     *testing.B
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	id    int
}

func startIdleDaemon(b *testing.B, data string) *idleDaemon {
	// No turn runs: the model is never asked.
	cmd := exec.Command(acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", "http://127.0.0.1:9/v1",
		"--model", "m", "--data-dir", data, "--log-level", "error")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+b.TempDir(), "ACPD_MEMPROFILE="+os.Getenv("BENCH_DAEMON_MEMPROFILE"))
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	d := &idleDaemon{b: b, cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<16)}
	d.call("initialize", map[string]any{"protocolVersion": 1}, "")
	return d
}

// call sends a request and reads up to its answer and, when sid is set,
// the commands update of the session it names.
func (d *idleDaemon) call(method string, params any, sid string) json.RawMessage {
	d.id++
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": d.id, "method": method, "params": params})
	require.NoError(d.b, err)
	_, err = d.stdin.Write(append(line, '\n'))
	require.NoError(d.b, err)
	var result json.RawMessage
	idPrefix := fmt.Appendf(nil, `{"id":%d,`, d.id) // acp writes the id first
	answered, announced := false, sid == ""
	for !answered || !announced {
		line, err := d.out.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long notification (a loaded transcript's)
		}
		require.NoError(d.b, err)
		switch {
		case bytes.HasPrefix(line, idPrefix):
			var m struct {
				Result json.RawMessage
				Error  json.RawMessage
			}
			require.NoError(d.b, json.Unmarshal(line, &m), "%s", line)
			require.Nil(d.b, m.Error, "%s", line)
			result, answered = m.Result, true
			if sid == "" && method == "session/new" {
				var r struct{ SessionID string }
				require.NoError(d.b, json.Unmarshal(m.Result, &r))
				sid, announced = r.SessionID, false
			}
		case sid != "" && bytes.Contains(line, []byte(`"available_commands_update"`)) &&
			bytes.Contains(line, []byte(`"sessionId":"`+sid+`"`)):
			announced = true
		}
	}
	return result
}

func (d *idleDaemon) newSession(cwd string) string {
	var r struct{ SessionID string }
	require.NoError(d.b, json.Unmarshal(d.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, ""), &r))
	return r.SessionID
}

func (d *idleDaemon) loadSession(cwd, id string) {
	d.call("session/load", map[string]any{"sessionId": id, "cwd": cwd, "mcpServers": []any{}}, id)
}

func (d *idleDaemon) close() {
	_ = d.stdin.Close()
	require.NoError(d.b, d.cmd.Wait())
}
