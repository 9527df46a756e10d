package servere2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acpd/acpd/acp"
	"github.com/acpd/acpd/acp/acptest"
	"github.com/acpd/acpd/session/model/modeltest"
)

// lineConn is a plain JSON-RPC line client: requests out, responses
// matched by id, notifications counted and dropped — no schema check, so
// the client's own cost stays out of a benchmark's figures.
type lineConn struct {
	w     io.Writer
	wmu   sync.Mutex
	seq   atomic.Int64
	mu    sync.Mutex
	wait  map[string]chan acptest.Message
	notes atomic.Int64
	done  chan struct{}
	err   error
}

func newLineConn(r io.Reader, w io.Writer) *lineConn {
	c := &lineConn{w: w, wait: map[string]chan acptest.Message{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				if bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","method":`)) {
					c.notes.Add(1)
				} else {
					var m acptest.Message
					if json.Unmarshal(line, &m) == nil && m.Method == "" {
						c.mu.Lock()
						ch := c.wait[string(m.ID)]
						delete(c.wait, string(m.ID))
						c.mu.Unlock()
						if ch != nil {
							ch <- m
						}
					}
				}
			}
			if err != nil {
				c.err = err
				return
			}
		}
	}()
	return c
}

// call sends one request and waits for its response (any error answer
// included); it fails when the connection ends first or after a minute.
func (c *lineConn) call(method string, params any) (acptest.Message, error) {
	id := c.seq.Add(1)
	ch := make(chan acptest.Message, 1)
	c.mu.Lock()
	c.wait[fmt.Sprint(id)] = ch
	c.mu.Unlock()
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return acptest.Message{}, err
	}
	c.wmu.Lock()
	_, err = c.w.Write(append(line, '\n'))
	c.wmu.Unlock()
	if err != nil {
		return acptest.Message{}, err
	}
	select {
	case m := <-ch:
		return m, nil
	case <-c.done:
		return acptest.Message{}, fmt.Errorf("%s: connection ended: %v", method, c.err)
	case <-time.After(2 * time.Minute):
		return acptest.Message{}, fmt.Errorf("%s: no answer within 2 minutes", method)
	}
}

func (c *lineConn) mustCall(tb testing.TB, method string, params any) json.RawMessage {
	tb.Helper()
	m, err := c.call(method, params)
	require.NoError(tb, err)
	require.Nil(tb, m.Error, "%s answered an error", method)
	return m.Result
}

func (c *lineConn) newSession(tb testing.TB, cwd string) string {
	tb.Helper()
	c.mustCall(tb, "initialize", map[string]any{"protocolVersion": 1})
	var ns acp.NewSessionResponse
	require.NoError(tb, json.Unmarshal(c.mustCall(tb, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}), &ns))
	return ns.SessionID
}

// benchConfig is a configuration file serving enough connections for the
// benchmarks (the default bound is 32).
func benchConfig(tb testing.TB) string {
	p := filepath.Join(tb.TempDir(), "config.toml")
	require.NoError(tb, os.WriteFile(p, []byte("[server]\nmaxConnections = 64\nmaxTcpConnections = 512\n"), 0o600))
	return p
}

// readRounds scripts a model for many conversations at once: each asks
// for rounds responses of perRound read_file calls (files it creates in
// cwd; a different file each call, so the loop guard stays quiet), then
// answers "done". A conversation's round is the number of assistant
// messages it holds. The count it returns goes up by one for each
// conversation whose last request carried every call's result with the
// file's text: a turn whose calls failed ends end_turn all the same.
func readRounds(tb testing.TB, srv *modeltest.Server, cwd string, rounds, perRound int) *atomic.Int64 {
	tb.Helper()
	paths := make([][]string, rounds)
	for i := range rounds {
		for j := range perRound {
			p := filepath.Join(cwd, fmt.Sprintf("f%03d_%d.txt", i, j))
			require.NoError(tb, os.WriteFile(p, []byte(strings.Repeat("line of text\n", 20)), 0o644))
			paths[i] = append(paths[i], p)
		}
	}
	complete := &atomic.Int64{}
	srv.SetResponder(func(r modeltest.Request) (modeltest.Response, bool) {
		round := 0
		for _, m := range r.Messages {
			if m.Role == "assistant" {
				round++
			}
		}
		if round >= rounds {
			read := 0
			for _, m := range r.Messages {
				if m.Role == "tool" && strings.Contains(m.Text(), "line of text") {
					read++
				}
			}
			if read == rounds*perRound {
				complete.Add(1)
			}
			return modeltest.Response{Text: "done"}, true
		}
		var calls []modeltest.ToolCall
		for _, p := range paths[round] {
			calls = append(calls, call("read_file", map[string]any{"file_path": p}))
		}
		return modeltest.Response{ToolCalls: calls, WholeArguments: true}, true
	})
	return complete
}

// BenchmarkServe_50Connections runs, per op, 50 connections to one served
// daemon at once, over Streamable HTTP or WebSocket, each a session with a
// turn of 100 read_file calls (10 model responses × 10 calls, approval
// yolo). Every turn must end with end_turn having read all 100 files, or
// the benchmark fails. It reports the daemon's CPU time (user + system)
// during the turns, its RSS once the 50 sessions are open and before any
// turn (idle-RSS-MB) and its peak RSS (VmHWM, read before it exits); a
// fresh daemon per op, so each op's peak is its own. The figures are the
// largest over the ops for RSS and the mean for CPU.
func BenchmarkServe_50Connections(b *testing.B) {
	b.Run("http", func(b *testing.B) { bench50(b, "http") })
	b.Run("websocket", func(b *testing.B) { bench50(b, "websocket") })
}

func bench50(b *testing.B, transport string) {
	const conns = 50
	cwd := b.TempDir()
	srv := modeltest.NewServer(b)
	complete := readRounds(b, srv, cwd, 10, 10)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * conns, MaxConnsPerHost: 0}}
	var cpu time.Duration
	var peakKB, idleKB int64
	n := 0
	for b.Loop() {
		b.StopTimer()
		d := serve(b, srv, nil, "--config", benchConfig(b), "--approval-mode", "yolo", "--log-level", "warn")
		clients := make([]*lineConn, conns)
		sids := make([]string, conns)
		streams := make([]remoteConn, conns)
		for i := range conns {
			streams[i] = dial(b, d, transport, hc)
			clients[i] = newLineConn(streams[i].Reader(), streams[i])
			sids[i] = clients[i].newSession(b, cwd)
		}
		idleKB = max(idleKB, procStatusKB(b, d.cmd.Process.Pid, "VmRSS"))
		complete0 := complete.Load()
		cpu0 := procCPU(b, d.cmd.Process.Pid)
		b.StartTimer()
		var wg sync.WaitGroup
		results := make([]acptest.Message, conns)
		errs := make([]error, conns)
		for i := range conns {
			wg.Go(func() {
				results[i], errs[i] = clients[i].call("session/prompt", map[string]any{"sessionId": sids[i],
					"prompt": []any{map[string]any{"type": "text", "text": fmt.Sprintf("conn %d: read everything", i)}}})
			})
		}
		wg.Wait()
		b.StopTimer()
		for i := range conns {
			require.NoError(b, errs[i], "connection %d", i)
			require.Nil(b, results[i].Error, "connection %d's turn failed", i)
			var pr acp.PromptResponse
			require.NoError(b, json.Unmarshal(results[i].Result, &pr))
			require.Equal(b, acp.StopEndTurn, pr.StopReason, "connection %d", i)
		}
		require.EqualValues(b, conns, complete.Load()-complete0, "turns whose model saw all 100 files read")
		cpu += procCPU(b, d.cmd.Process.Pid) - cpu0
		peakKB = max(peakKB, procStatusKB(b, d.cmd.Process.Pid, "VmHWM"))
		for i := range conns {
			_ = streams[i].Close()
		}
		d.stop()
		n++
		b.StartTimer()
	}
	b.ReportMetric(float64(peakKB)/1024, "peak-RSS-MB")
	b.ReportMetric(float64(idleKB)/1024, "idle-RSS-MB")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(n), "daemon-cpu-ms/op")
}

// BenchmarkServe_MessageLatency is the time of one request and its answer
// between a client and a daemon on this machine, over the daemon's
// standard input and output and over Streamable HTTP (a POST, the answer
// on the session's event stream); the added latency per message of a
// transport is half its difference from stdio. The request is
// session/set_mode with an unknown mode: session-scoped like a prompt or a
// permission answer, and answered (an invalid-params error) before
// anything touches the disk, so the figure is the transport's. Each
// sub-benchmark reports the same two units: ns/op, the round trip, and
// daemon-cpu-µs/op, the daemon's CPU time (user + system) per round trip,
// which shows how much of a difference is work rather than waiting. The
// client's work is on the same cores, inside ns/op. http-request is no ACP
// message: an authenticated GET /healthz on a kept-alive connection, the
// floor under http's round trip, which is a POST and its 202 before the
// answer on the event stream.
func BenchmarkServe_MessageLatency(b *testing.B) {
	probe := func(b *testing.B, pid int, c *lineConn, sid string) {
		params := map[string]any{"sessionId": sid, "modeId": "no-such-mode"}
		cpu0 := procCPU(b, pid)
		for b.Loop() {
			m, err := c.call("session/set_mode", params)
			if err != nil {
				b.Fatal(err)
			}
			if m.Error == nil || m.Error.Code != acp.CodeInvalidParams {
				b.Fatalf("set_mode answered %+v, want invalid params", m)
			}
		}
		b.ReportMetric(float64((procCPU(b, pid)-cpu0).Microseconds())/float64(b.N), "daemon-cpu-µs/op")
	}
	srv := modeltest.NewServer(b)
	b.Run("stdio", func(b *testing.B) {
		cmd := exec.Command(acpdBin, "--config", os.DevNull, "--provider", "openai", "--base-url", srv.BaseURL(),
			"--model", "m", "--data-dir", b.TempDir(), "--log-level", "warn")
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+b.TempDir(), "OPENAI_API_KEY=test-key")
		stdin, err := cmd.StdinPipe()
		require.NoError(b, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(b, err)
		require.NoError(b, cmd.Start())
		b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
		c := newLineConn(stdout, stdin)
		probe(b, cmd.Process.Pid, c, c.newSession(b, b.TempDir()))
	})
	b.Run("http", func(b *testing.B) {
		d := serve(b, srv, nil, "--log-level", "warn")
		hs := acptest.DialHTTP(d.URL, d.Header(), nil)
		b.Cleanup(func() { _ = hs.Close() })
		c := newLineConn(hs.Reader(), hs)
		probe(b, d.cmd.Process.Pid, c, c.newSession(b, b.TempDir()))
	})
	b.Run("http-request", func(b *testing.B) {
		d := serve(b, srv, nil, "--log-level", "warn")
		u := strings.TrimSuffix(d.URL, "/acp") + "/healthz"
		hc := &http.Client{}
		cpu0 := procCPU(b, d.cmd.Process.Pid)
		for b.Loop() {
			req, err := http.NewRequest(http.MethodGet, u, nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header = d.Header().Clone()
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("GET /healthz: %s", resp.Status)
			}
		}
		b.ReportMetric(float64((procCPU(b, d.cmd.Process.Pid)-cpu0).Microseconds())/float64(b.N), "daemon-cpu-µs/op")
	})
	b.Run("websocket", func(b *testing.B) {
		d := serve(b, srv, nil, "--log-level", "warn")
		ws, _, err := acptest.DialWS(b.Context(), d.URL, d.Header())
		require.NoError(b, err)
		b.Cleanup(func() { _ = ws.Close() })
		c := newLineConn(ws.Reader(), ws)
		probe(b, d.cmd.Process.Pid, c, c.newSession(b, b.TempDir()))
	})
}

// remoteConn is one client connection of a benchmark, over either wire.
type remoteConn interface {
	io.Writer
	Reader() io.Reader
	Close() error
}

// dial opens a connection to d over transport "http" or "websocket".
func dial(tb testing.TB, d *served, transport string, hc *http.Client) remoteConn {
	tb.Helper()
	if transport == "websocket" {
		ws, _, err := acptest.DialWSClient(tb.Context(), d.URL, d.Header(), hc)
		require.NoError(tb, err)
		return ws
	}
	return acptest.DialHTTP(d.URL, d.Header(), hc)
}

// procCPU is a live process's user + system CPU time so far.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(tb, err)
	// Fields after the command name in parentheses; utime and stime are
	// the 14th and 15th fields of the whole line, in clock ticks (100/s).
	rest := data[bytes.LastIndexByte(data, ')')+2:]
	f := strings.Fields(string(rest))
	var ut, st int64
	_, err = fmt.Sscan(f[11], &ut)
	require.NoError(tb, err)
	_, err = fmt.Sscan(f[12], &st)
	require.NoError(tb, err)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procStatusKB is a size field of a live process's /proc status in KiB:
// VmRSS (resident now) or VmHWM (its peak).
func procStatusKB(tb testing.TB, pid int, field string) int64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(tb, err)
	for l := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			var kb int64
			_, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			require.NoError(tb, err)
			return kb
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
